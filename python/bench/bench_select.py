"""DPS / MoPPS select + observe from Python, per step, at N tracked prompts (docs/benchmarks.md,
section "Python wheel (issue 25)"). Same work as crates/frugal-rl-py/examples/bench_select.rs:
observe the last step's B = 256 outcomes (K = 8), then select B among a random window of 8*B.

    python bench_select.py --impl frugal --kind dps --n 100000 --steps 200
    python bench_select.py --impl released --kind dps --n 100000 --steps 3 --released /tmp/dps/task_sampler.py

`--impl released` drives the authors' samplers (maoyixiu/DPS recipe/dps/task_sampler.py
BayesianHMMSampler, thu-rllab/MoPPS recipe/ours/mopps.py PosteriorSampler; fetched to a scratch
folder, never committed) the way their verl trainers call them: `sample_batch({"index": window})`
then `train(batch, success_rates)`. Their state is pre-filled for all N prompts (the steady state
of a long run, as in the Rust selectors, which track the whole pool from the start).
"""

import argparse
import importlib.util
import os
import time
from types import SimpleNamespace

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

B, K, RATIO = 256, 8, 8


def inputs(n, steps, seed=0):
    rng = np.random.default_rng(seed)
    windows = [rng.choice(n, size=RATIO * B, replace=False).astype(np.uint64) for _ in range(steps)]
    succ = [rng.integers(0, K + 1, size=B).astype(np.uint64) for _ in range(steps)]
    return windows, succ


def bench_frugal(kind, n, steps):
    import frugal_rl as fr

    windows, succ = inputs(n, steps)
    sel = fr.Selector(kind, n_items=n, seed=0)
    prev = np.zeros(0, dtype=np.uint64)
    t0 = time.perf_counter()
    for t in range(steps):
        sel.observe_successes(prev, succ[t][: len(prev)], K)
        prev = sel.select(B, candidates=windows[t])
    return (time.perf_counter() - t0) / steps


def bench_released(kind, n, steps, path):
    spec = importlib.util.spec_from_file_location("released_sampler", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ts = SimpleNamespace(hmm_prior_alpha=1.0, hmm_prior_pi="uniform", hmm_sample_strategy="topk",
                         hmm_no_update=False, hmm_transition_decay_ratio=0.7, hmm_entropy_weight=0.0,
                         bandit_decay_ratio=0.5, bandit_target_mean=0.5, bandit_lower_bound=0.3,
                         bandit_upper_bound=0.7, bandit_sample_strategy="topk", bandit_no_update=False)
    args = SimpleNamespace(data=SimpleNamespace(train_batch_size=B), tasksampler=ts,
                           actor_rollout_ref=SimpleNamespace(rollout=SimpleNamespace(n=K)))
    if kind == "dps":
        s = mod.BayesianHMMSampler(args)
        for i in range(n):
            s.get_alpha_pi(str(i))
    else:
        s = mod.PosteriorSampler(args, n)
        for i in range(n):
            s.alpha[str(i)] = 1.0
            s.beta[str(i)] = 1.0
    windows, succ = inputs(n, steps)
    t0 = time.perf_counter()
    for t in range(steps):
        batch, _ = s.sample_batch({"index": windows[t].astype(np.int64)})
        s.train(batch, succ[t].astype(np.float64) / K)
    return (time.perf_counter() - t0) / steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["frugal", "released"], default="frugal")
    p.add_argument("--kind", choices=["dps", "mopps"], default="dps")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--released", help="path of the released sampler's .py file")
    a = p.parse_args()
    if a.impl == "frugal":
        per = bench_frugal(a.kind, a.n, a.steps)
    else:
        per = bench_released(a.kind, a.n, a.steps, a.released)
    print(f"python {a.impl} {a.kind} N={a.n} B={B} window={RATIO * B} steps={a.steps}: {per * 1e3:.3f} ms/step")


if __name__ == "__main__":
    main()
