"""Gradient steps per second of the offline algorithms in PyTorch, side by side with
`cargo bench --features offline-rl --bench offline_algos` (same libtorch 2.11, same shapes).

    ~/.cache/frugal-rl/venv/bin/python benches/offline_algos.py \
        [--dmg-dir /tmp/ref-DMG] [--scas-dir /tmp/ref-SCAS] [--threads 1] [--seconds 10] [--clock cpu]

- DMG and SCAS: the official classes (`thu-rllab/DMG:DMG.py`, `thu-rllab/SCAS:SCAS.py`,
  `model.py`) imported from local copies given by `--dmg-dir` / `--scas-dir` (fetched outside
  the repository, never committed), `train_offline` / `train` called as the official scripts
  call them, with a replay buffer that returns fixed tensors of the right shapes (so the
  figure is the update, not the sampling). Without the directories, the equivalents written
  here (same operations) are timed.
- TD3+BC: the update of `sfujimoto/TD3_BC:TD3_BC.py` (written here, same operations).
- IQL: the update of `corl-team/CORL:algorithms/offline/iql.py` (Gaussian policy; written
  here, same operations).
The matrix-multiply floor (only the products of an update) is measured by the Rust bench,
on the same libtorch.

Shapes: batch 256, obs 17 / action 6 (Walker2d, HalfCheetah), 256-256 networks (SCAS dynamics
4x256), as in the papers. One process, `torch.set_num_threads(--threads)`.
"""
import argparse
import copy
import importlib.util
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

B, S, A = 256, 17, 6


def batch():
    g = torch.Generator().manual_seed(0)
    s = torch.randn(B, S, generator=g)
    a = torch.rand(B, A, generator=g) * 2 - 1
    s2 = torch.randn(B, S, generator=g)
    r = torch.randn(B, 1, generator=g)
    nd = torch.ones(B, 1)
    return s, a, s2, r, nd


class FixedBuffer:
    def __init__(self):
        self.b = batch()

    def sample(self, _n):
        return self.b


def mlp(i, o, hidden=(256, 256)):
    layers, d = [], i
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    layers.append(nn.Linear(d, o))
    return nn.Sequential(*layers)


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(S, A)

    def forward(self, s):
        return torch.tanh(self.net(s))


class Critic(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.qs = nn.ModuleList([mlp(S + A, 1) for _ in range(n)])

    def forward(self, s, a):
        sa = torch.cat([s, a], 1)
        return [q(sa) for q in self.qs]


class TD3BC:
    """sfujimoto/TD3_BC TD3_BC.train, step for step."""

    def __init__(self):
        self.actor = Actor()
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.critic = Critic()
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-4)
        self.total_it = 0
        self.buf = FixedBuffer()

    def train(self):
        self.total_it += 1
        state, action, next_state, reward, not_done = self.buf.sample(B)
        with torch.no_grad():
            noise = (torch.randn_like(action) * 0.2).clamp(-0.5, 0.5)
            next_action = (self.actor_target(next_state) + noise).clamp(-1, 1)
            t1, t2 = self.critic_target(next_state, next_action)
            target_q = reward + not_done * 0.99 * torch.min(t1, t2)
        q1, q2 = self.critic(state, action)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        if self.total_it % 2 == 0:
            pi = self.actor(state)
            q = self.critic.qs[0](torch.cat([state, pi], 1))
            lmbda = 2.5 / q.abs().mean().detach()
            actor_loss = -lmbda * q.mean() + F.mse_loss(pi, action)
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            for p, tp in zip(self.critic.parameters(), self.critic_target.parameters()):
                tp.data.copy_(0.005 * p.data + 0.995 * tp.data)
            for p, tp in zip(self.actor.parameters(), self.actor_target.parameters()):
                tp.data.copy_(0.005 * p.data + 0.995 * tp.data)


class IQL:
    """corl-team/CORL iql.py ImplicitQLearning.train (Gaussian policy), step for step."""

    def __init__(self):
        self.actor = Actor()
        self.log_std = nn.Parameter(torch.zeros(A))
        self.actor_optimizer = torch.optim.Adam(list(self.actor.parameters()) + [self.log_std], lr=3e-4)
        self.actor_lr_schedule = torch.optim.lr_scheduler.CosineAnnealingLR(self.actor_optimizer, 1_000_000)
        self.qf = Critic()
        self.q_target = copy.deepcopy(self.qf).requires_grad_(False)
        self.q_optimizer = torch.optim.Adam(self.qf.parameters(), lr=3e-4)
        self.vf = mlp(S, 1)
        self.v_optimizer = torch.optim.Adam(self.vf.parameters(), lr=3e-4)
        self.buf = FixedBuffer()

    def train(self):
        observations, actions, next_observations, rewards, not_done = self.buf.sample(B)
        rewards, not_done = rewards.squeeze(-1), not_done.squeeze(-1)
        with torch.no_grad():
            next_v = self.vf(next_observations).squeeze(-1)
            target_q = torch.min(*self.q_target(observations, actions)).squeeze(-1)
        v = self.vf(observations).squeeze(-1)
        adv = target_q - v
        weight = torch.abs(0.7 - (adv < 0).float())
        v_loss = torch.mean(weight * adv**2)
        self.v_optimizer.zero_grad()
        v_loss.backward()
        self.v_optimizer.step()
        targets = rewards + not_done * 0.99 * next_v.detach()
        qs = self.qf(observations, actions)
        q_loss = sum(F.mse_loss(q.squeeze(-1), targets) for q in qs) / len(qs)
        self.q_optimizer.zero_grad()
        q_loss.backward()
        self.q_optimizer.step()
        for p, tp in zip(self.qf.parameters(), self.q_target.parameters()):
            tp.data.copy_((1 - 0.005) * tp.data + 0.005 * p.data)
        exp_adv = torch.exp(3.0 * adv.detach()).clamp(max=100.0)
        mean = self.actor(observations)
        dist = torch.distributions.Normal(mean, torch.exp(self.log_std.clamp(-20.0, 2.0)))
        bc_losses = -dist.log_prob(actions).sum(-1)
        policy_loss = torch.mean(exp_adv * bc_losses)
        self.actor_optimizer.zero_grad()
        policy_loss.backward()
        self.actor_optimizer.step()
        self.actor_lr_schedule.step()


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class NullWriter:
    def add_scalar(self, *a, **k):
        pass


def official_dmg(d):
    m = load_module(os.path.join(d, "DMG.py"), "DMG")
    m.device = torch.device("cpu")
    algo = m.DMG(S, A, 1.0, FixedBuffer(), antmaze=False, expectile=0.7, temp=3.0, lam=0.25, nu=0.1)
    w = NullWriter()
    return lambda: algo.train_offline(B, w)


def official_scas(d):
    sys.path.insert(0, d)
    model = load_module(os.path.join(d, "model.py"), "model")
    model.device = torch.device("cpu")
    m = load_module(os.path.join(d, "SCAS.py"), "SCAS")
    m.device = torch.device("cpu")
    dyn = model.Dynamics(S, A)
    dyn.eval()
    algo = m.SCAS(S, A, 1.0, FixedBuffer(), dyn, antmaze=False)
    w = NullWriter()
    return lambda: algo.train(B, w)


class DMGHere:
    """The DMG update written here (same operations as thu-rllab/DMG train_offline)."""

    def __init__(self):
        self.t = TD3BC()
        self.vf = mlp(S, 1)
        self.v_opt = torch.optim.Adam(self.vf.parameters(), lr=3e-4)

    def train(self):
        t = self.t
        t.total_it += 1
        s, a, s2, r, nd = t.buf.sample(B)
        with torch.no_grad():
            q_in = torch.min(*t.critic_target(s, a))
        v = self.vf(s)
        d = q_in - v
        v_loss = (torch.where(d > 0, 0.7, 0.3) * d**2).mean()
        self.v_opt.zero_grad(); v_loss.backward(); self.v_opt.step()
        with torch.no_grad():
            na = (t.actor_target(s2) + (torch.randn_like(a) * 0.2).clamp(-0.5, 0.5)).clamp(-1, 1)
            y = r + nd * 0.99 * (0.25 * torch.min(*t.critic_target(s2, na)) + 0.75 * self.vf(s2))
        q1, q2 = t.critic(s, a)
        closs = F.mse_loss(q1, y) + F.mse_loss(q2, y)
        t.critic_optimizer.zero_grad(); closs.backward(); t.critic_optimizer.step()
        if t.total_it % 2 == 0:
            pi = t.actor(s)
            with torch.no_grad():
                w = torch.exp((torch.min(*t.critic_target(s, a)) - self.vf(s)) * 3.0).clamp(max=3.0)
            vmin = torch.min(*t.critic(s, pi))
            loss = -vmin.mean() / vmin.abs().mean().detach() + 0.1 * (w * (pi - a) ** 2).mean()
            t.actor_optimizer.zero_grad(); loss.backward(); t.actor_optimizer.step()
            for p, tp in zip(t.critic.parameters(), t.critic_target.parameters()):
                tp.data.copy_(0.005 * p.data + 0.995 * tp.data)
            for p, tp in zip(t.actor.parameters(), t.actor_target.parameters()):
                tp.data.copy_(0.005 * p.data + 0.995 * tp.data)


CLOCK = time.perf_counter


def timeit(fn, seconds):
    for _ in range(50):
        fn()
    n, t0 = 0, CLOCK()
    while CLOCK() - t0 < seconds:
        for _ in range(20):
            fn()
        n += 20
    return n / (CLOCK() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dmg-dir")
    ap.add_argument("--scas-dir")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall time, or the calling thread's CPU time (time.thread_time; for a loaded machine)",
    )
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if args.clock == "wall" else time.thread_time
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = {}
    results["td3bc"] = timeit(TD3BC().train, args.seconds)
    results["iql"] = timeit(IQL().train, args.seconds)
    if args.dmg_dir:
        results["dmg (official)"] = timeit(official_dmg(args.dmg_dir), args.seconds)
    results["dmg"] = timeit(DMGHere().train, args.seconds)
    if args.scas_dir:
        results["scas (official)"] = timeit(official_scas(args.scas_dir), args.seconds)
    load = os.getloadavg()
    print(json.dumps({"updates_per_second": results, "threads": args.threads, "clock": args.clock,
                      "torch": torch.__version__, "loadavg": load}, indent=1))


if __name__ == "__main__":
    main()
