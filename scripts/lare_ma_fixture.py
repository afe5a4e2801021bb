#!/usr/bin/env python3
"""Multi-agent reward-decoder steps of the official LaRe MPE code, for lare's reference tests.

Writes crates/lare/tests/fixtures/ma_reference.json, read by crates/lare/tests/ma_reference.rs.

Run (torch and numpy only; CPU; about a second):

    # reference code, never committed: extract the repository somewhere, e.g.
    #   git --git-dir=<mirror of thu-rllab/LaRe> archive HEAD | tar -x -C /tmp/lare-ref
    nice ~/.cache/frugal-rl/venv/bin/python scripts/lare_ma_fixture.py \
        --lare /tmp/lare-ref --out crates/lare/tests/fixtures/ma_reference.json

Three cases, each one call of the reference's own train step (`mpe/utils/util.py`:
`make_rrd_train_step`, `make_train_step`) with the optimiser its runner builds
(`mpe/runners/MPE_runner.py`: Adam, lr_reward 5e-4, weight_decay 1e-5):

- `rrd`: `RRDRewardDecomposer` (`mpe/models/reward_model/rrd/rrd.py`) on padded next
  observations, biased (`rrd_unbiased = False`) and unbiased, with the same initial weights and
  the same K-step draw (the call to `np.random.choice` inside its forward returns the recorded
  steps);
- `shared`: `FactorRewardDecomposer.forward` (one decoder for every agent), sum regression;
- `typed`: `FactorRewardDecomposer.hetero_forward` (`hetero_tag`: the first `n_advs` agents
  use `reward_model`, the rest `hetero_reward_model`), sum regression without and with the
  variance regulariser (`--reg --alpha 0.5`). Recorded twice: `after_reference` is the step of
  the reference runner, whose Adam holds only `reward_model.parameters()` (the prey decoder is
  never stepped); `after_one_optimizer` is one Adam over both decoders' parameters.

What this script does around the official code (their files are imported unchanged):
- stubs the modules the reference imports for logging and the LLM client (`wandb`, `openai`,
  `requests`, `gym`), which these code paths never call;
- builds every network on the CPU (the reference hard-codes `'cuda'`: `Module.to` ignores the
  device while they are built) with 8-wide hidden layers and `n_layers = 3` (the tiny sizes of
  our tests; the reference default is 5 layers of 64);
- builds `FactorRewardDecomposer` without its `__init__` (which calls the LLM and builds the
  MPE environment for the prompt) and sets the attributes `__init__` would set: two
  `Factor_Reward_Model`s, `prompt.n_advs`/`n_preys`, and the factor functions, which are
  fixed numpy functions of ours (the `Functions` an LLM would have written);
- records each decoder's input as the reference computed it (a forward pre-hook), so the Rust
  side gets the same factors.
Layers are exported as `[{"weight": [out, in], "bias": [out]}]`, our `Mlp` layout.
"""
import argparse
import copy
import json
import os
import sys
import types

import numpy as np
import torch

HIDDEN, LAYERS = 8, 3
LR, WD = 5e-4, 1e-5
B, N, H, D_RAW = 3, 3, 6, 4
LENGTHS = [6, 4, 5]
K = 3
STEPS = [4, 0, 2]  # the K-step draw handed to the reference (a draw of np.random.choice(6, 3))
N_ADVS = 2

FUNC_PREDATOR = """
import numpy as np
def evaluation_func(obs):
    return [np.linalg.norm(obs[:, 0:2], axis=-1, keepdims=True), obs[:, 2:3] * obs[:, 3:4]]
"""
FUNC_PREY = """
import numpy as np
def evaluation_func(obs):
    return [obs[:, 0:1] ** 2, np.abs(obs[:, 1:2]), np.tanh(obs[:, 2:4])]
"""


def stub_modules():
    for name in ["wandb", "openai", "requests"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["openai"].OpenAI = None
    gym = types.ModuleType("gym")
    gym.spaces = types.ModuleType("gym.spaces")
    sys.modules.setdefault("gym", gym)
    sys.modules.setdefault("gym.spaces", gym.spaces)


class CpuOnly:
    """`Module.to` keeps modules where they are (on the CPU) while the reference builds them."""

    def __enter__(self):
        self.orig = torch.nn.Module.to
        torch.nn.Module.to = lambda self, *a, **k: self

    def __exit__(self, *exc):
        torch.nn.Module.to = self.orig


def flat(t):
    return {"shape": list(t.shape), "data": [float(x) for x in t.detach().reshape(-1).tolist()]}


def linears(module):
    return [m for m in module.modules() if isinstance(m, torch.nn.Linear)]


def layers(module):
    return [{"weight": flat(l.weight), "bias": flat(l.bias)} for l in linears(module)]


def grads(module):
    return [{"weight": flat(l.weight.grad), "bias": flat(l.bias.grad)} for l in linears(module)]


def padded(rng, d):
    """[B, N, H, d] observations, zero past each episode's length (as ReplayMemory_episode pads)."""
    x = rng.uniform(-1.0, 1.0, size=(B, N, H, d)).astype(np.float32)
    for b, l in enumerate(LENGTHS):
        x[b, :, l:] = 0.0
    return torch.from_numpy(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lare", required=True, help="extracted thu-rllab/LaRe")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    mpe = os.path.join(a.lare, "mpe")
    sys.path.insert(0, mpe)
    sys.path.insert(0, os.path.join(mpe, "models", "reward_model", "LLMrd"))
    stub_modules()
    torch.set_num_threads(1)
    from utils.util import make_train_step, make_rrd_train_step
    from models.reward_model.rrd import rrd as rrd_mod
    from models.reward_model.LLMrd.factor_reward_decompose import FactorRewardDecomposer
    from models.reward_model.LLMrd.factor_reward_model import Factor_Reward_Model

    rng = np.random.RandomState(0)
    torch.manual_seed(0)
    lengths = torch.tensor(LENGTHS).long()
    out = {"meta": {"source": "thu-rllab/LaRe mpe/", "hidden": [HIDDEN] * (LAYERS - 1), "lr": LR,
                    "weight_decay": WD, "n_agents": N, "horizon": H, "lengths": LENGTHS}}

    # ---- multi-agent RRD -------------------------------------------------------------------
    obs_dim = D_RAW + 1
    next_obs = padded(rng, obs_dim)
    states = next_obs.clone()  # not read (use_next_state)
    ret = torch.from_numpy(rng.uniform(-2.0, 2.0, size=B).astype(np.float32))
    args = types.SimpleNamespace(n_agents=N, rrd_k=K, obs_dim=obs_dim, factor_reward_model_layers=LAYERS,
                                 use_next_state=True, rrd_unbiased=False)
    defaults = rrd_mod.Reward_Model.__init__.__defaults__
    rrd_mod.Reward_Model.__init__.__defaults__ = (1, LAYERS, HIDDEN, "cpu")
    with CpuOnly():
        model = rrd_mod.RRDRewardDecomposer(args)
    rrd_mod.Reward_Model.__init__.__defaults__ = defaults
    init = copy.deepcopy(model.state_dict())
    rrd = {"k": K, "obs_dim": obs_dim, "next_obs": flat(next_obs), "episode_return": flat(ret),
           "init": layers(model.reward_model), "steps": STEPS, "cases": {}}
    orig_choice = np.random.choice
    for name, unbiased in [("biased", False), ("unbiased", True)]:
        model.load_state_dict(init)
        args.rrd_unbiased = unbiased
        opt = torch.optim.Adam(lr=LR, params=model.parameters(), weight_decay=WD)
        step = make_rrd_train_step(args, model, torch.nn.MSELoss(reduction="mean"), opt, N, "cpu")
        calls = []

        def choice(t, k, replace=True):
            calls.append((t, k, replace))
            return np.array(STEPS)

        np.random.choice = choice
        try:
            loss = step(states, None, ret, lengths, next_states=next_obs)
        finally:
            np.random.choice = orig_choice
        assert calls == [(H, K, False)], calls
        rrd["cases"][name] = {"loss": loss, "grads": grads(model.reward_model),
                              "after": layers(model.reward_model)}
    out["rrd"] = rrd

    # ---- factor decoders: shared and per type (hetero_tag) -----------------------------------
    obs = padded(rng, D_RAW + N)
    ids = torch.eye(N).reshape(1, N, 1, N).expand(B, N, H, N)
    obs[..., D_RAW:] = ids  # the agent one-hot LaRe appends for hetero_tag (obs_agent_id)
    nxt = padded(rng, D_RAW + N)
    nxt[..., D_RAW:] = ids
    ret = torch.from_numpy(rng.uniform(-2.0, 2.0, size=B).astype(np.float32))

    def decomposer(scenario, dims):
        fr = FactorRewardDecomposer.__new__(FactorRewardDecomposer)
        torch.nn.Module.__init__(fr)
        fr.args = types.SimpleNamespace(scenario=scenario, only_s=False, use_next_state=True, n_agents=N,
                                        obs_agent_id=True, factor_reward_model_layers=LAYERS)
        fr.n_agents = N
        fr.id = 0
        fr.prompt = types.SimpleNamespace(n_advs=N_ADVS, n_preys=N - N_ADVS)
        with CpuOnly():
            fr.reward_model = Factor_Reward_Model(dims[0], n_layers=LAYERS, hidden_dim=HIDDEN, device="cpu")
            if len(dims) > 1:
                fr.hetero_reward_model = Factor_Reward_Model(dims[1], n_layers=LAYERS, hidden_dim=HIDDEN,
                                                             device="cpu")
        return fr

    def capture(net, store):
        net.register_forward_pre_hook(lambda m, inp: store.append(inp[0].detach().clone()))

    # shared: FactorRewardDecomposer.forward reads the factors of the next observation
    fr = decomposer("simple_spread_n6_noshare", [2])
    fr.rd_functions = [FUNC_PREDATOR]
    fed = []
    capture(fr.reward_model, fed)
    init_shared = layers(fr.reward_model)
    opt = torch.optim.Adam(lr=LR, params=fr.reward_model.parameters(), weight_decay=WD)
    loss = make_train_step(fr, torch.nn.MSELoss(reduction="mean"), opt, N, "cpu")(
        obs, None, ret, lengths, next_states=nxt)
    out["shared"] = {"features": flat(fed[0].reshape(B, N, H, -1)), "episode_return": flat(ret),
                     "init": init_shared, "loss": loss, "grads": grads(fr.reward_model),
                     "after": layers(fr.reward_model)}

    # per type: hetero_forward, predators (agents 0..N_ADVS) and prey (the rest)
    dims = [2 + N, 4 + N]
    torch.manual_seed(1)
    base = decomposer("hetero_tag_n6_noshare", dims)
    init_typed = copy.deepcopy(base.state_dict())
    typed = {"n_advs": N_ADVS, "feature_dims": dims, "episode_return": flat(ret),
             "init": {"predator": layers(base.reward_model), "prey": layers(base.hetero_reward_model)},
             "cases": {}}
    for name, alpha in [("sum", None), ("reg", 0.5)]:
        case = {"alpha": alpha or 0.0}
        for variant in ["reference", "one_optimizer"]:
            fr = decomposer("hetero_tag_n6_noshare", dims)
            fr.load_state_dict(init_typed)
            fr.rd_functions = [[FUNC_PREDATOR], [FUNC_PREY]]
            fed0, fed1 = [], []
            capture(fr.reward_model, fed0)
            capture(fr.hetero_reward_model, fed1)
            if variant == "reference":  # Runner_Factor_LLMrd_MPE's optimiser
                params = fr.reward_model.parameters()
            else:
                params = list(fr.reward_model.parameters()) + list(fr.hetero_reward_model.parameters())
            opt = torch.optim.Adam(lr=LR, params=params, weight_decay=WD)
            train = make_train_step(fr, torch.nn.MSELoss(reduction="mean"), opt, N, "cpu", reg=alpha is not None,
                                    alpha=alpha)
            loss = train(obs, None, ret, lengths, next_states=nxt)
            if variant == "reference":
                case["loss"] = loss
                case["grads"] = {"predator": grads(fr.reward_model), "prey": grads(fr.hetero_reward_model)}
                typed["features"] = {"predator": flat(fed0[0]), "prey": flat(fed1[0])}
            else:
                assert loss == case["loss"]
            case[f"after_{variant}"] = {"predator": layers(fr.reward_model), "prey": layers(fr.hetero_reward_model)}
        typed["cases"][name] = case
    out["typed"] = typed

    with open(a.out, "w") as f:
        json.dump(out, f)
    print(f"wrote {a.out}: rrd losses {[c['loss'] for c in rrd['cases'].values()]}, "
          f"shared {out['shared']['loss']}, typed {[c['loss'] for c in typed['cases'].values()]}")


if __name__ == "__main__":
    main()
