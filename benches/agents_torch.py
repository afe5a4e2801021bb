"""Side by side: gradient updates per second of rl-agents' SAC/TD3 (Rust, through the
`agents_speed` example) and of CORL's single-file PyTorch SAC-N (2 critics) and TD3+BC, run
from a local, uncommitted copy of corl-team/CORL, plus a minimal PyTorch SAC that performs
exactly the operations of the Rust update (same order, fused critics, one policy forward on
s), all at batch 256 with Hopper widths (11 observations, 3 actions), in interleaved rounds so
that machine load hits every implementation alike.

    cargo build --release --features rl-agents --example agents_speed
    git clone https://github.com/corl-team/CORL /tmp/CORL      # any local copy, never committed
    ~/.cache/frugal-rl/venv/bin/python benches/agents_torch.py --corl /tmp/CORL \
        --rust target/release/examples/agents_speed --threads 1 --rounds 3 --seconds 5

CORL's files import d4rl, gym, wandb, pyrallis and tqdm at module level but the classes timed
here (Actor, VectorizedCritic, SACN; Actor, Critic, TD3_BC) use none of them; when a module is
not installed, an empty stand-in is registered before the file is executed (the file itself is
not modified). CORL's SAC-N networks have three hidden layers of 256 (its `Actor`/
`VectorizedCritic`); its TD3+BC networks two. The Rust side is measured at both shapes.
"""

import argparse
import importlib.machinery
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time
import types

import torch
import torch._dynamo  # noqa: F401  (imported before the stand-ins below exist)
import torch.nn as nn

OBS, ACT, BATCH = 11, 3, 256


def stub_missing():
    def ensure(name, **attrs):
        try:
            importlib.import_module(name)
        except ImportError:
            m = types.ModuleType(name)
            m.__spec__ = importlib.machinery.ModuleSpec(name, None)
            for k, v in attrs.items():
                setattr(m, k, v)
            sys.modules[name] = m

    ensure("d4rl")
    ensure("wandb")
    ensure("pyrallis", wrap=lambda *a, **k: (lambda f: f))
    ensure("gym", Env=object, wrappers=types.SimpleNamespace())
    ensure("tqdm", trange=range, tqdm=lambda x, *a, **k: x)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def batch():
    g = torch.Generator().manual_seed(0)
    s = torch.rand(BATCH, OBS, generator=g)
    a = torch.rand(BATCH, ACT, generator=g) * 2 - 1
    r = torch.ones(BATCH, 1)
    ns = torch.rand(BATCH, OBS, generator=g)
    d = torch.zeros(BATCH, 1)
    return [s, a, r, ns, d]


def timed(fn, seconds):
    """(calls per wall-clock second, calls per CPU second of this thread). With one torch thread
    every operation runs on the calling thread, so the CPU rate counts only the update's own work
    however loaded the machine is (the Rust binary reads the same clock)."""
    for _ in range(20):
        fn()
    n, t0, c0 = 0, time.perf_counter(), time.thread_time()
    while time.perf_counter() - t0 < seconds or n < 10:
        fn()
        n += 1
    return n / (time.perf_counter() - t0), n / (time.thread_time() - c0)


def corl_sac(corl):
    sac_n = load(os.path.join(corl, "algorithms/offline/sac_n.py"), "corl_sac_n")
    actor = sac_n.Actor(OBS, ACT, 256, 1.0)
    critic = sac_n.VectorizedCritic(OBS, ACT, 256, 2)
    trainer = sac_n.SACN(
        actor=actor,
        actor_optimizer=torch.optim.Adam(actor.parameters(), lr=3e-4),
        critic=critic,
        critic_optimizer=torch.optim.Adam(critic.parameters(), lr=3e-4),
        gamma=0.99,
        tau=5e-3,
        alpha_learning_rate=3e-4,
        device="cpu",
    )
    b = batch()
    return lambda: trainer.update(b)


def corl_td3(corl):
    td3 = load(os.path.join(corl, "algorithms/offline/td3_bc.py"), "corl_td3_bc")
    actor = td3.Actor(OBS, ACT, 1.0)
    c1, c2 = td3.Critic(OBS, ACT), td3.Critic(OBS, ACT)
    trainer = td3.TD3_BC(
        max_action=1.0,
        actor=actor,
        actor_optimizer=torch.optim.Adam(actor.parameters(), lr=3e-4),
        critic_1=c1,
        critic_1_optimizer=torch.optim.Adam(c1.parameters(), lr=3e-4),
        critic_2=c2,
        critic_2_optimizer=torch.optim.Adam(c2.parameters(), lr=3e-4),
        device="cpu",
    )
    b = batch()
    return lambda: trainer.train(b)


class Ens(nn.Module):
    """E MLPs as batched matmuls (the layout of rl_nn::EnsembleMlp)."""

    def __init__(self, e, widths):
        super().__init__()
        self.w = nn.ParameterList()
        self.b = nn.ParameterList()
        for i, o in zip(widths[:-1], widths[1:]):
            bound = 1 / math.sqrt(i)
            self.w.append(nn.Parameter(torch.empty(e, i, o).uniform_(-bound, bound)))
            self.b.append(nn.Parameter(torch.empty(e, 1, o).uniform_(-bound, bound)))
        self.e = e

    def forward(self, x, frozen=False):
        h = x.unsqueeze(0).expand(self.e, -1, -1)
        n = len(self.w)
        for k, (w, b) in enumerate(zip(self.w, self.b)):
            if frozen:
                w, b = w.detach(), b.detach()
            h = torch.baddbmm(b, h, w)
            if k < n - 1:
                h = torch.relu(h)
        return h.squeeze(-1)


def mlp(widths):
    layers = []
    for k, (i, o) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(nn.Linear(i, o))
        if k < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def same_ops_sac(hidden):
    """The Rust SAC update, operation for operation, in PyTorch (no logging reads)."""
    actor = mlp([OBS, *hidden, 2 * ACT])
    critic = Ens(2, [OBS + ACT, *hidden, 1])
    target = Ens(2, [OBS + ACT, *hidden, 1])
    target.load_state_dict(critic.state_dict())
    for p in target.parameters():
        p.requires_grad_(False)
    log_alpha = torch.zeros((), requires_grad=True)
    opt_a = torch.optim.Adam(actor.parameters(), lr=3e-4)
    opt_c = torch.optim.Adam(critic.parameters(), lr=3e-4)
    opt_al = torch.optim.Adam([log_alpha], lr=3e-4)
    s, a, r, ns, d = [x.squeeze(-1) if x.shape[-1] == 1 else x for x in batch()]

    def sample(obs):
        out = actor(obs)
        mu, ls = out[:, :ACT], out[:, ACT:].clamp(-5, 2)
        eps = torch.randn_like(mu)
        u = mu + ls.exp() * eps
        gauss = -0.5 * eps.pow(2) - ls - 0.9189385332046727
        log_det = 2 * (math.log(2) - u - nn.functional.softplus(-2 * u))
        return torch.tanh(u), (gauss - log_det).sum(-1)

    def update():
        pi, logp = sample(s)
        al = -(log_alpha * (logp.detach() - ACT)).mean()
        opt_al.zero_grad()
        al.backward()
        opt_al.step()
        alpha = log_alpha.detach().exp()
        with torch.no_grad():
            na, nlogp = sample(ns)
            q_next = target(torch.cat([ns, na], 1)).amin(0) - alpha * nlogp
            y = r + 0.99 * (1 - d) * q_next
        q = critic(torch.cat([s, a], 1))
        cl = (q - y.unsqueeze(0)).pow(2).mean(1).sum()
        opt_c.zero_grad()
        cl.backward()
        opt_c.step()
        qpi = critic(torch.cat([s, pi], 1), frozen=True).amin(0)
        aloss = (alpha * logp - qpi).mean()
        opt_a.zero_grad()
        aloss.backward()
        opt_a.step()
        with torch.no_grad():
            for tp, sp in zip(target.parameters(), critic.parameters()):
                tp.lerp_(sp, 5e-3)

    return update


def same_ops_td3(hidden):
    """The Rust TD3 update, operation for operation, in PyTorch (fused critics, Q_1 of the frozen
    critic for the actor, policy delay 2, no logging reads)."""
    actor = mlp([OBS, *hidden, ACT])
    actor_t = mlp([OBS, *hidden, ACT])
    actor_t.load_state_dict(actor.state_dict())
    critic = Ens(2, [OBS + ACT, *hidden, 1])
    target = Ens(2, [OBS + ACT, *hidden, 1])
    target.load_state_dict(critic.state_dict())
    for p in [*target.parameters(), *actor_t.parameters()]:
        p.requires_grad_(False)
    opt_a = torch.optim.Adam(actor.parameters(), lr=3e-4)
    opt_c = torch.optim.Adam(critic.parameters(), lr=3e-4)
    s, a, r, ns, d = [x.squeeze(-1) if x.shape[-1] == 1 else x for x in batch()]
    k = [0]

    def q1_frozen(x):
        h = x
        n = len(critic.w)
        for i, (w, b) in enumerate(zip(critic.w, critic.b)):
            h = torch.addmm(b[0].detach(), h, w[0].detach())
            if i < n - 1:
                h = torch.relu(h)
        return h.squeeze(-1)

    def update():
        noise = torch.randn(BATCH, ACT) * 0.2
        with torch.no_grad():
            na = (torch.tanh(actor_t(ns)) + noise.clamp(-0.5, 0.5)).clamp(-1, 1)
            y = r + 0.99 * (1 - d) * target(torch.cat([ns, na], 1)).amin(0)
        q = critic(torch.cat([s, a], 1))
        cl = (q - y.unsqueeze(0)).pow(2).mean(1).sum()
        opt_c.zero_grad()
        cl.backward()
        opt_c.step()
        k[0] += 1
        if k[0] % 2 == 0:
            aloss = -q1_frozen(torch.cat([s, torch.tanh(actor(s))], 1)).mean()
            opt_a.zero_grad()
            aloss.backward()
            opt_a.step()
            with torch.no_grad():
                for tp, sp in [*zip(target.parameters(), critic.parameters()),
                               *zip(actor_t.parameters(), actor.parameters())]:
                    tp.lerp_(sp, 5e-3)

    return update


def rust(binary, algo, hidden, seconds, threads):
    out = subprocess.run(
        [binary, "--algo", algo, "--hidden", ",".join(map(str, hidden)), "--seconds", str(seconds),
         "--threads", str(threads)],
        check=True, capture_output=True, text=True,
    ).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    return {r["what"]: (r["per_second"], r["per_cpu_second"]) for r in rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corl", required=True, help="local copy of corl-team/CORL")
    ap.add_argument("--rust", required=True, help="target/release/examples/agents_speed")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write every round's figures here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    stub_missing()
    impls = {
        ("SAC", "256,256,256"): {
            "CORL SAC-N (N=2)": corl_sac(args.corl),
            "PyTorch, same ops as Rust": same_ops_sac([256, 256, 256]),
        },
        ("SAC", "256,256"): {"PyTorch, same ops as Rust": same_ops_sac([256, 256])},
        ("TD3", "256,256"): {
            "CORL TD3+BC": corl_td3(args.corl),
            "PyTorch, same ops as Rust": same_ops_td3([256, 256]),
        },
    }
    results = {}
    for rnd in range(args.rounds):
        for (algo, hidden), pys in impls.items():
            h = [int(x) for x in hidden.split(",")]
            rs = rust(args.rust, algo.lower(), h, args.seconds, args.threads)
            results.setdefault((algo, hidden, "rl-agents (Rust)"), []).append(rs["update"])
            results.setdefault((algo, hidden, "matmul floor (libtorch GEMMs only)"), []).append(rs["matmul_floor"])
            for name, fn in pys.items():
                results.setdefault((algo, hidden, name), []).append(timed(fn, args.seconds))
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    load1 = os.getloadavg()
    print(f"torch {torch.__version__}, threads {args.threads}, batch {BATCH}, obs {OBS}, act {ACT}; "
          f"load average {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; median of {args.rounds} rounds x {args.seconds} s\n")
    print("| algorithm | hidden | implementation | updates/s (wall) | updates per CPU-s | vs CORL (CPU-s) |")
    print("|---|---|---|---|---|---|")
    for (algo, hidden, name), v in results.items():
        wall = statistics.median(x[0] for x in v)
        cpu = statistics.median(x[1] for x in v)
        corl_key = (algo, hidden, "CORL SAC-N (N=2)" if algo == "SAC" else "CORL TD3+BC")
        ref = statistics.median(x[1] for x in results[corl_key]) if corl_key in results else None
        ratio = f"{cpu / ref:.2f}x" if ref else "–"
        print(f"| {algo} | {hidden} | {name} | {wall:.1f} | {cpu:.1f} | {ratio} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"algo": a, "hidden": h, "impl": n, "per_second": [x[0] for x in v],
                        "per_cpu_second": [x[1] for x in v]} for (a, h, n), v in results.items()], f)


if __name__ == "__main__":
    main()
