"""PyTorch side of `benches/rlvr_losses.rs`: forward + backward of verl's own policy-loss
functions (`verl/trainer/ppo/core_algos.py`: vanilla, gspo, cispo, sapo, gpg, geo_mean,
clip_cov, kl_cov) on the same inputs as the Rust bench, at [64, 512] and [512, 4096], fp32, CPU,
one thread by default. LPO has no verl implementation; its row is a PyTorch transcription
written the way verl writes its losses.

verl is imported from a local checkout that is never committed (its heavy dependencies are
stubbed: only `core_algos.py` and `torch_functional.py` are loaded, unchanged):

    git clone --depth 1 https://github.com/volcengine/verl /tmp/verl
    ~/.cache/frugal-rl/venv/bin/python benches/rlvr_losses_torch.py --verl /tmp/verl [--threads N] [--clock cpu]

`--clock cpu` times the calling thread's CPU time instead of wall time (with one thread every op
and the backward pass run on the calling thread): on a loaded machine wall time mostly measures
the wait for a core. The Rust side's equivalent is `RLVR_BENCH_CLOCK=cpu`.

Each call is timed as verl's trainer runs it: the loss function (which reads its metrics back
with `.item()`), then `torch.autograd.grad(loss, log_prob)`. verl receives the advantages as
`[B, T]` (`scores.unsqueeze(-1) * response_mask`, what its advantage estimators return); the
Rust side takes them as `[B]`. Prints the median time per call (ms) and the bandwidth of a
256 MiB copy, from which the memory floor of a loss at [512, 4096] follows: read `logp`,
`old_logp` and the mask, write the gradient, 4 x B x T x 4 bytes.
"""
import argparse
import importlib.util
import math
import os
import sys
import time
import types

import torch


def load_verl(root):
    """verl's `core_algos` module from a checkout at `root`, with its imports stubbed."""

    def stub(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        m.__path__ = []  # a package, so submodules can be registered under it
        sys.modules[name] = m
        return m

    class DictConfig(dict):
        pass

    class ActorConfig:
        pass

    class AlgoConfig:
        pass

    stub("omegaconf", DictConfig=DictConfig)
    stub("tensordict", TensorDict=object)
    stub("transformers", PreTrainedTokenizer=object)
    for pkg in ["verl", "verl.utils", "verl.trainer", "verl.trainer.ppo", "verl.workers"]:
        stub(pkg)
    stub("verl.utils.device", get_device_name=lambda: "cpu", get_torch_device=lambda: torch.cpu)
    stub("verl.utils.import_utils", deprecated=lambda *a, **k: (lambda f: f))
    stub("verl.trainer.config", AlgoConfig=AlgoConfig)
    stub("verl.workers.config", ActorConfig=ActorConfig)
    sys.modules["verl.utils"].as_torch_index = None
    sys.modules["verl.utils"].group_mean_std = None

    def load(rel, name):
        spec = importlib.util.spec_from_file_location(name, os.path.join(root, rel))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    tf = load("verl/utils/torch_functional.py", "verl.utils.torch_functional")
    sys.modules["verl.utils"].torch_functional = tf
    ca = load("verl/trainer/ppo/core_algos.py", "verl.trainer.ppo.core_algos")
    return ca, ActorConfig


def actor_config(ActorConfig, clip_low=0.2, clip_high=0.2):
    c = ActorConfig()
    c.clip_ratio = clip_low
    c.clip_ratio_low = clip_low
    c.clip_ratio_high = clip_high
    c.clip_ratio_c = 3.0
    c.tau_pos = 1.0
    c.tau_neg = 1.05
    c.global_batch_info = {}
    c.policy_loss = types.SimpleNamespace(
        clip_cov_ratio=0.0002, clip_cov_lb=1.0, clip_cov_ub=5.0, kl_cov_ratio=0.0002, ppo_kl_coef=0.1
    )
    c.get = lambda key, default=None: getattr(c, key, default)
    return c


def lpo(logp, old, adv_row, m, groups, reverse, eps=0.2):
    """LPO (no verl implementation), written the way verl writes its losses."""
    g, k = groups
    d = logp - old
    dc = torch.clamp(d, math.log(1 - eps), math.log(1 + eps))
    with torch.no_grad():
        s = (d.double() * m).sum(-1).view(g, k)
        phi = adv_row.double().view(g, k)
        logp_l = torch.log_softmax(s, -1)
        logw = torch.log_softmax(phi, -1)
        p = logp_l.exp()
        if reverse:
            dd = logp_l - logw
            c = p * (dd - (p * dd).sum(-1, keepdim=True))
        else:
            c = p - logw.exp()
        kc = (c * k).view(-1, 1).float()
        clipfrac = (((d != dc).float() * m).sum() / m.sum()).item()
    loss = (kc * dc * m).sum() / (m.sum(-1) > 0).sum()
    return loss, {"clipfrac": clipfrac}


CLOCK = time.perf_counter


def bench(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = CLOCK()
        fn()
        times.append(CLOCK() - t0)
    times.sort()
    return times[len(times) // 2]


def inputs(b, t):
    """The Rust bench's distribution (its own seeded stream; same shapes and statistics)."""
    gen = torch.Generator().manual_seed(0)
    old = torch.randn(b, t, generator=gen) * 0.5 - 2.0
    logp = (old + torch.randn(b, t, generator=gen) * 0.1).requires_grad_(True)
    adv = torch.randn(b, generator=gen)
    lens = torch.randint(t // 4, t + 1, (b, 1), generator=gen)
    m = (torch.arange(t).unsqueeze(0) < lens).float()
    return logp, old, adv, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--verl", default=os.environ.get("VERL_SRC", "/tmp/verl"), help="a checkout of volcengine/verl")
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
    ca, ActorConfig = load_verl(args.verl)
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, clock {args.clock}, "
        f"verl core_algos from {args.verl}"
    )
    default = actor_config(ActorConfig)
    verl_losses = [
        ("ppo", "vanilla", "token-mean", default),
        ("gspo", "gspo", "seq-mean-token-mean", actor_config(ActorConfig, 3e-4, 4e-4)),
        ("cispo", "cispo", "token-mean", default),
        ("sapo", "sapo", "seq-mean-token-mean", default),
        ("gpg", "gpg", "token-mean", default),
        ("gmpo", "geo_mean", "seq-mean-token-mean", actor_config(ActorConfig, 0.4, 0.4)),
        ("clip_cov", "clip_cov", "token-mean", default),
        ("kl_cov", "kl_cov", "token-mean", default),
    ]
    for b, t in [(64, 512), (512, 4096)]:
        logp, old, adv, m = inputs(b, t)
        adv_bt = adv.unsqueeze(-1) * m  # what verl's advantage estimators return
        reps = 100 if b == 64 else 15
        for name, mode, agg, cfg in verl_losses:
            fn = ca.get_policy_loss_fn(mode)

            def step():
                loss, _metrics = fn(old, logp, adv_bt, m, agg, cfg, None)
                (g,) = torch.autograd.grad(loss, logp)
                return g

            print(f"{b}x{t} {name:<10} {bench(step, reps) * 1e3:9.3f} ms   (verl {mode})")
        for name, rev in [("lpo_fwd", False), ("lpo_rev", True)]:

            def step():
                loss, _metrics = lpo(logp, old, adv, m, (b // 8, 8), rev)
                (g,) = torch.autograd.grad(loss, logp)
                return g

            print(f"{b}x{t} {name:<10} {bench(step, reps) * 1e3:9.3f} ms   (PyTorch transcription)")
    n = 64 * 1024 * 1024
    src = torch.ones(n)
    dst = torch.zeros(n)
    s = bench(lambda: dst.copy_(src), 10)
    bw = 2 * 4 * n / s
    floor = 4 * 512 * 4096 * 4 / bw
    print(f"copy 256 MiB: {s * 1e3:.2f} ms -> {bw / 1e9:.2f} GB/s (read + write); floor at 512x4096: {floor * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
