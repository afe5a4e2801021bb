"""Vectorised numpy implementation of the same DPS and MoPPS per-step updates as
`benches/select.rs`, for the side-by-side in docs/benchmarks.md.

    ~/.cache/frugal-rl/venv/bin/python benches/select_numpy.py [--sizes 1000000 10000000] [--dtype float32]

DPS: every tracked prompt is propagated every step (alpha decay + belief prediction), the B
observed prompts get the soft-count update, then top-B of P(partial) over a candidate window of
8*B. The reference code (maoyixiu/DPS) loops over a Python dict; this is the fully vectorised
form over dense arrays (alpha N x 3 x 3, beliefs N x 3), i.e. the fastest straightforward numpy.
MoPPS: discounted Beta update of the B observed prompts, one Beta draw per candidate, top-B by
(draw - 0.5)^2. Single-threaded numpy (set OMP/MKL threads to 1).
"""
import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
import numpy as np  # noqa: E402

B, K, RATIO = 256, 8, 8


def dps_step(alpha, prior, before, a0, lam, obs_idx, obs_state, cands):
    # (a) observed prompts: xi(i, j) = 1[i=o] before(j) P(i, j) / sum; alpha update with pre-update P
    a_obs = alpha[obs_idx]                                   # [B, 3, 3] (next, current)
    p_obs = a_obs / a_obs.sum(axis=1, keepdims=True)
    rows = p_obs[np.arange(len(obs_idx)), obs_state, :]      # [B, 3] = P(o, j)
    num = rows * before[obs_idx]
    xi = np.zeros_like(a_obs)
    xi[np.arange(len(obs_idx)), obs_state, :] = num / num.sum(axis=1, keepdims=True)
    # (b) everyone: posterior = prior (observed: one-hot), alpha decays (+ xi for observed)
    post = prior                                             # in place: prior becomes the posterior
    onehot = np.zeros((len(obs_idx), 3), dtype=alpha.dtype)
    onehot[np.arange(len(obs_idx)), obs_state] = 1.0
    post[obs_idx] = onehot
    alpha *= lam
    alpha += (1.0 - lam) * a0
    alpha[obs_idx] += xi
    before[...] = post
    # (c) prediction for everyone: prior = normalise(P(alpha) post)
    colsum = alpha.sum(axis=1)                               # [N, 3]
    w = post / colsum
    new_prior = np.einsum("nij,nj->ni", alpha, w)
    new_prior /= new_prior.sum(axis=1, keepdims=True)
    prior[...] = new_prior
    # select: top-B of P(partial) over the candidate window
    score = prior[cands, 1]
    top = np.argpartition(-score, B - 1)[:B]
    return cands[top[np.argsort(-score[top])]]


def mopps_step(alpha, beta, lam, a0, b0, obs_idx, s, cands, rng):
    alpha[obs_idx] = lam * alpha[obs_idx] + (1 - lam) * a0 + s
    beta[obs_idx] = lam * beta[obs_idx] + (1 - lam) * b0 + (K - s)
    draws = rng.beta(alpha[cands], beta[cands])
    score = (draws - 0.5) ** 2
    top = np.argpartition(score, B - 1)[:B]
    return cands[top[np.argsort(score[top])]]


def timeit(fn, reps):
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    dt = np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}, dtype {dt}, B={B}, k={K}, window {RATIO * B}")
    print("| method | N | ms / step (median) |")
    print("|---|---|---|")
    for n in args.sizes:
        a0 = np.ones((3, 3), dtype=dt)
        alpha = np.ones((n, 3, 3), dtype=dt)
        prior = np.full((n, 3), 1 / 3, dtype=dt)
        before = np.full((n, 3), 1 / 3, dtype=dt)

        def one_dps():
            cands = rng.choice(n, RATIO * B, replace=False)
            obs = cands[:B]
            st = rng.integers(0, 3, size=B)
            dps_step(alpha, prior, before, a0, dt.type(0.7), obs, st, cands)

        print(f"| dps observe+select (numpy) | {n:.0e} | {1e3 * timeit(one_dps, args.reps):.1f} |", flush=True)
        del alpha, prior, before
        al = np.ones(n, dtype=dt)
        be = np.ones(n, dtype=dt)

        def one_mopps():
            cands = rng.choice(n, RATIO * B, replace=False)
            obs = cands[:B]
            s = rng.integers(0, K + 1, size=B).astype(dt)
            mopps_step(al, be, dt.type(0.5), 1.0, 1.0, obs, s, cands, rng)

        print(f"| mopps observe+select (numpy) | {n:.0e} | {1e3 * timeit(one_mopps, args.reps):.2f} |", flush=True)


if __name__ == "__main__":
    main()
