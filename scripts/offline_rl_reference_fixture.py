#!/usr/bin/env python3
"""Updates of the official TD3+BC, DMG and SCAS code, for offline-rl's step tests.

Writes crates/offline-rl/tests/fixtures/reference_steps.json, read by
crates/offline-rl/tests/reference_steps.rs.

Run (torch only; CPU; a few seconds):

    # reference code, never committed: extract each repository somewhere, e.g.
    #   git --git-dir=<mirror of sfujim/TD3_BC> archive HEAD | tar -x -C /tmp/orl-ref/td3bc
    #   (likewise thu-rllab/DMG -> /tmp/orl-ref/dmg, thu-rllab/SCAS -> /tmp/orl-ref/scas)
    nice ~/.cache/frugal-rl/venv/bin/python scripts/offline_rl_reference_fixture.py \
        --td3bc /tmp/orl-ref/td3bc --dmg /tmp/orl-ref/dmg --scas /tmp/orl-ref/scas \
        --out crates/offline-rl/tests/fixtures/reference_steps.json

What this script does around the official code (their files are imported unchanged):
- shrinks the hard-coded 256-wide layers to HIDDEN by replacing `nn.Linear` while their
  networks are built (the sizes of our tiny tests);
- feeds one fixed batch through a stand-in replay buffer whose `sample` returns it;
- injects the noise: `torch.randn_like` (target smoothing) and `torch.randn` (SCAS's state
  perturbation) return stored standard normal tensors during the update;
- records every loss passed to `Tensor.backward` during the update, in order;
- sets `policy_freq = 1` so the one call is a critic, an actor and a target update;
- `*_delayed` cases: several calls with the default `policy_freq = 2` (critic every call; actor,
  targets and, for DMG and SCAS, the cosine step of the actor rate every second call), a new
  batch and new noise each call; the cosine schedule is `CosineAnnealingLR(T_MAX_SHORT)` instead
  of the code's `1e6 / policy_freq`, so a few updates move the rate (our `cosine_steps`);
- exports the weights before and after in our checkpoint names: `actor.{i}.weight` `[out, in]`,
  `critic.{i}.weight` `[members, in, out]` and `critic.{i}.bias` `[members, 1, out]` (our
  fused ensemble), `value.*`, `dynamics.*` like the actor.
TD3+BC's smoothing noise and clip are passed times max_action, as its main.py does.
"""
import argparse
import json
import sys

import torch
from torch.optim.lr_scheduler import CosineAnnealingLR

HIDDEN = 8
OBS, ACT, B = 3, 2, 8
MAX_ACTION = 2.0
SEED = 0
#: calls of the delayed cases and the cosine period they use (actor updates)
CALLS = 8
T_MAX_SHORT = 3


def shrink_linear(module):
    """Make module's `nn.Linear(i, o)` use HIDDEN for every 256-wide side."""
    orig = torch.nn.Linear

    def linear(i, o, *a, **k):
        return orig(HIDDEN if i == 256 else i, HIDDEN if o == 256 else o, *a, **k)

    module.nn.Linear = linear
    return orig


def flat(t):
    return {"shape": list(t.shape), "data": [float(x) for x in t.detach().reshape(-1).tolist()]}


def mlp(prefix, layers):
    out = {}
    for i, l in enumerate(layers):
        out[f"{prefix}.{i}.weight"] = flat(l.weight)
        out[f"{prefix}.{i}.bias"] = flat(l.bias)
    return out


def ensemble(prefix, members):
    """members: list of layer lists, one per critic."""
    out = {}
    for i in range(len(members[0])):
        w = torch.stack([m[i].weight.detach().t() for m in members])
        b = torch.stack([m[i].bias.detach().unsqueeze(0) for m in members])
        out[f"{prefix}.{i}.weight"] = flat(w)
        out[f"{prefix}.{i}.bias"] = flat(b)
    return out


def critic_members(c, n):
    ls = [getattr(c, f"l{j}") for j in range(1, 3 * n + 1)]
    return [ls[3 * e: 3 * e + 3] for e in range(n)]


def actor_layers(a):
    return [a.l1, a.l2, a.l3]


class Buffer:
    """Returns `batch` at every call, or the batches of a list in turn."""

    def __init__(self, batch):
        self.batches = batch if isinstance(batch, list) else None
        self.batch = batch

    def sample(self, batch_size):
        assert batch_size == B
        if self.batches is None:
            return self.batch
        return self.batches.pop(0)


def make_batch(g):
    state = torch.randn(B, OBS, generator=g)
    action = (torch.rand(B, ACT, generator=g) * 2 - 1) * MAX_ACTION * 0.95
    next_state = torch.randn(B, OBS, generator=g)
    reward = torch.randn(B, 1, generator=g)
    not_done = torch.ones(B, 1)
    not_done[1, 0] = 0.0
    not_done[5, 0] = 0.0
    return state, action, next_state, reward, not_done


def run_step(call, eps, state_noise):
    """Runs call() with the noise injected; returns the losses backpropagated, in order.

    `eps` / `state_noise` are one tensor returned at every draw, or a list consumed in order."""
    losses = []
    eps_list = list(eps) if isinstance(eps, list) else None
    noise_list = list(state_noise) if isinstance(state_noise, list) else None
    orig_backward = torch.Tensor.backward
    orig_randn_like, orig_randn = torch.randn_like, torch.randn

    def backward(self, *a, **k):
        losses.append(float(self.item()))
        return orig_backward(self, *a, **k)

    def randn_like(t, *a, **k):
        e = eps_list.pop(0) if eps_list is not None else eps
        assert tuple(t.shape) == tuple(e.shape), (t.shape, e.shape)
        return e.clone()

    def randn(*size, **k):
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
        n = noise_list.pop(0) if noise_list is not None else state_noise
        assert n is not None and shape == tuple(n.shape), (shape,)
        return n.clone()

    torch.Tensor.backward, torch.randn_like, torch.randn = backward, randn_like, randn
    try:
        call()
    finally:
        torch.Tensor.backward, torch.randn_like, torch.randn = orig_backward, orig_randn_like, orig_randn
    assert not eps_list and not noise_list, "injected noise left over"
    return losses


def batch_json(batch):
    state, action, next_state, reward, not_done = batch
    return {
        "obs": flat(state), "action": flat(action), "next_obs": flat(next_state),
        "reward": flat(reward.reshape(-1)), "terminal": flat(1.0 - not_done.reshape(-1)),
    }


def td3bc(path, g):
    sys.path.insert(0, path)
    import TD3_BC as mod
    sys.path.pop(0)
    orig = shrink_linear(mod)
    torch.manual_seed(SEED)
    algo = mod.TD3_BC(OBS, ACT, MAX_ACTION, policy_noise=0.2 * MAX_ACTION, noise_clip=0.5 * MAX_ACTION,
                      policy_freq=1)
    mod.nn.Linear = orig
    nets = lambda: {**mlp("actor", actor_layers(algo.actor)), **mlp("actor_target", actor_layers(algo.actor_target)),
                    **ensemble("critic", critic_members(algo.critic, 2)),
                    **ensemble("critic_target", critic_members(algo.critic_target, 2))}
    batch = make_batch(g)
    eps = torch.randn(B, ACT, generator=g)
    before = nets()
    losses = run_step(lambda: algo.train(Buffer(batch), batch_size=B), eps, None)
    assert len(losses) == 2
    return {"source": "sfujim/TD3_BC TD3_BC.py", "batch": batch_json(batch), "eps": flat(eps),
            "before": before, "after": nets(), "losses": {"loss/critic": losses[0], "loss/actor": losses[1]}}


def dmg(path, g):
    sys.path.insert(0, path)
    import DMG as mod
    sys.path.pop(0)
    orig = shrink_linear(mod)
    batch = make_batch(g)
    torch.manual_seed(SEED + 1)
    # train_offline.py's defaults off AntMaze: expectile 0.7, temperature 3, lam 0.25, nu 0.5
    algo = mod.DMG(OBS, ACT, MAX_ACTION, Buffer(batch), policy_freq=1, antmaze=False, expectile=0.7,
                   temp=3.0, lam=0.25, nu=0.5)
    mod.nn.Linear = orig
    v = algo.value_critic
    nets = lambda: {**mlp("actor", actor_layers(algo.actor)), **mlp("actor_target", actor_layers(algo.actor_target)),
                    **ensemble("critic", critic_members(algo.critic, 2)),
                    **ensemble("critic_target", critic_members(algo.critic_target, 2)),
                    **mlp("value", [v.l1, v.l2, v.l3])}
    eps = torch.randn(B, ACT, generator=g)
    before = nets()
    losses = run_step(lambda: algo.train_offline(batch_size=B, writer=None), eps, None)
    assert len(losses) == 3
    return {"source": "thu-rllab/DMG DMG.py train_offline", "batch": batch_json(batch), "eps": flat(eps),
            "before": before, "after": nets(),
            "losses": {"loss/value": losses[0], "loss/critic": losses[1], "loss/actor": losses[2]}}


def scas(path, g):
    sys.path.insert(0, path)
    import SCAS as mod
    import model as model_mod
    sys.path.pop(0)
    orig = shrink_linear(mod)
    shrink_linear(model_mod)
    batch = make_batch(g)
    torch.manual_seed(SEED + 2)
    dynamics = model_mod.Dynamics(OBS, ACT)
    algo = mod.SCAS(OBS, ACT, MAX_ACTION, Buffer(batch), dynamics, antmaze=False, policy_freq=1)
    mod.nn.Linear = orig
    d = dynamics
    nets = lambda: {**mlp("actor", actor_layers(algo.actor)), **mlp("actor_target", actor_layers(algo.actor_target)),
                    **ensemble("critic", critic_members(algo.critic, 4)),
                    **ensemble("critic_target", critic_members(algo.critic_target, 4)),
                    **mlp("dynamics", [d.l1, d.l2, d.l3, d.l4, d.l5])}
    eps = torch.randn(B, ACT, generator=g)
    state_noise = torch.randn(B, OBS, generator=g)
    before = nets()
    losses = run_step(lambda: algo.train(batch_size=B, writer=None), eps, state_noise)
    assert len(losses) == 2
    return {"source": "thu-rllab/SCAS SCAS.py train", "batch": batch_json(batch), "eps": flat(eps),
            "state_noise": flat(state_noise), "before": before, "after": nets(),
            "losses": {"loss/critic": losses[0], "loss/actor": losses[1]}}


def scas_dynamics(path, g):
    """One step of pretrain.py's loop: Adam(lr 1e-3) on F.mse_loss(dynamics(s, a), s')."""
    sys.path.insert(0, path)
    import SCAS as mod
    import model as model_mod
    sys.path.pop(0)
    orig = shrink_linear(model_mod)
    batch = make_batch(g)
    torch.manual_seed(SEED + 3)
    # the actor and critics only fill the names our weights carry; pretraining leaves them
    algo = mod.SCAS(OBS, ACT, MAX_ACTION, Buffer(batch), model_mod.Dynamics(OBS, ACT), antmaze=False)
    model_mod.nn.Linear = orig
    d = algo.dynamics
    nets = lambda: {**mlp("actor", actor_layers(algo.actor)), **mlp("actor_target", actor_layers(algo.actor_target)),
                    **ensemble("critic", critic_members(algo.critic, 4)),
                    **ensemble("critic_target", critic_members(algo.critic_target, 4)),
                    **mlp("dynamics", [d.l1, d.l2, d.l3, d.l4, d.l5])}
    before = nets()
    optimizer = torch.optim.Adam(d.parameters(), lr=1e-3)
    state, action, next_state = batch[0], batch[1], batch[2]
    loss = torch.nn.functional.mse_loss(d(state, action), next_state)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return {"source": "thu-rllab/SCAS pretrain.py (one step of its loop)", "batch": batch_json(batch),
            "before": before, "after": nets(), "loss": float(loss.item())}


def delayed(name, path, g):
    """CALLS calls with policy_freq = 2 (and, for DMG and SCAS, CosineAnnealingLR(T_MAX_SHORT)):
    batches, smoothing noise and state noise are new at every call."""
    sys.path.insert(0, path)
    if name == "td3bc":
        import TD3_BC as mod
    elif name == "dmg":
        import DMG as mod
    else:
        import SCAS as mod
        import model as model_mod
    sys.path.pop(0)
    orig = shrink_linear(mod)
    if name == "scas":
        shrink_linear(model_mod)
    batches = [make_batch(g) for _ in range(CALLS)]
    torch.manual_seed(SEED + 10)
    buf = Buffer(list(batches))
    if name == "td3bc":
        algo = mod.TD3_BC(OBS, ACT, MAX_ACTION, policy_noise=0.2 * MAX_ACTION, noise_clip=0.5 * MAX_ACTION)
        members, call = 2, lambda: algo.train(buf, batch_size=B)
    elif name == "dmg":
        algo = mod.DMG(OBS, ACT, MAX_ACTION, buf, antmaze=False, expectile=0.7, temp=3.0, lam=0.25, nu=0.5)
        members, call = 2, lambda: algo.train_offline(batch_size=B, writer=None)
    else:
        algo = mod.SCAS(OBS, ACT, MAX_ACTION, buf, model_mod.Dynamics(OBS, ACT), antmaze=False)
        members, call = 4, lambda: algo.train(batch_size=B, writer=None)
    mod.nn.Linear = orig
    if name == "scas":
        model_mod.nn.Linear = orig
    assert algo.policy_freq == 2
    if name != "td3bc":
        algo.actor_lr_schedule = CosineAnnealingLR(algo.actor_optimizer, T_MAX_SHORT)

    def nets():
        out = {**mlp("actor", actor_layers(algo.actor)), **mlp("actor_target", actor_layers(algo.actor_target)),
               **ensemble("critic", critic_members(algo.critic, members)),
               **ensemble("critic_target", critic_members(algo.critic_target, members))}
        if name == "dmg":
            v = algo.value_critic
            out.update(mlp("value", [v.l1, v.l2, v.l3]))
        if name == "scas":
            d = algo.dynamics
            out.update(mlp("dynamics", [d.l1, d.l2, d.l3, d.l4, d.l5]))
        return out

    eps = [torch.randn(B, ACT, generator=g) for _ in range(CALLS)]
    state_noise = [torch.randn(B, OBS, generator=g) for _ in range(CALLS // 2)] if name == "scas" else None
    before = nets()
    losses, lrs = [], []
    for i in range(CALLS):
        sn = [state_noise[i // 2]] if (name == "scas" and i % 2 == 1) else None
        losses.append(run_step(call, [eps[i]], sn))
        lrs.append(algo.actor_optimizer.param_groups[0]["lr"])
    out = {"source": f"{name} official update, policy_freq 2, {CALLS} calls", "calls": CALLS,
           "cosine_steps": T_MAX_SHORT if name != "td3bc" else 0,
           "batches": [batch_json(b) for b in batches], "eps": [flat(e) for e in eps],
           "before": before, "after": nets(), "losses": losses, "actor_lr_after": lrs}
    if state_noise is not None:
        out["state_noise"] = [flat(n) for n in state_noise]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--td3bc", required=True, help="extracted sfujim/TD3_BC")
    ap.add_argument("--dmg", required=True, help="extracted thu-rllab/DMG")
    ap.add_argument("--scas", required=True, help="extracted thu-rllab/SCAS")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1234)
    out = {"torch": torch.__version__, "obs_dim": OBS, "act_dim": ACT, "hidden": HIDDEN, "batch": B,
           "max_action": MAX_ACTION,
           "td3bc": td3bc(args.td3bc, g), "dmg": dmg(args.dmg, g), "scas": scas(args.scas, g),
           "scas_dynamics": scas_dynamics(args.scas, g),
           # drawn after every single-step case, so those stay as they were
           "td3bc_delayed": delayed("td3bc", args.td3bc, g), "dmg_delayed": delayed("dmg", args.dmg, g),
           "scas_delayed": delayed("scas", args.scas, g)}
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
