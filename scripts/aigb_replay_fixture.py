#!/usr/bin/env python3
"""Reserve-boundary fixture for `aigb`'s auction, from the public AuctionNet auction.

Runs alimama-tech/AuctionNet's `BiddingEnv.simulate_ad_bidding` (Apache-2.0) from a LOCAL copy
that is never committed (only `simul_bidding_env/Environment/BiddingEnv.py` is needed), on
impressions whose deciding bid sits exactly at, one float32 ulp above and one float32 ulp below
the reserve price, for several reserves. Bids are float32 (the type of `aigb`'s bids); a second
run with the same values as float64 is recorded too, to show the reference's rule depends on the
dtype. Writes, per case, the reference's slot (0 = unsold), cost and xi of every bidding
advertiser. Also records one tick (`"tick"`): random float32 bids of 48 advertisers on 60
impressions, the reference's own exposure and conversion draws (captured around its methods) and
its outputs (slot, cost, exposure, conversion, least winning cost), to replay with
`aigb::RecordedDraws`.

Usage (the committed fixture was made with exactly this command):
    python scripts/aigb_replay_fixture.py --auctionnet /tmp/auctionnet \
        --out crates/aigb-sim/tests/fixtures/auctionnet_reserve_boundary.json
Requires numpy, scipy, gin-config (BiddingEnv imports them).
"""
import argparse
import json
import os
import sys

import numpy as np

RESERVES = [0.05, 0.0001, 0.01, 0.3]
N_ADV = 48


def cases(reserve):
    r32 = np.float32(reserve)
    up = np.nextafter(r32, np.float32(np.inf))
    down = np.nextafter(r32, np.float32(-np.inf))
    rows = []
    for name, x in (("equal", r32), ("ulp_above", up), ("ulp_below", down)):
        # x decides slot 3 (4th bid), slot 2 (3rd bid) and slot 1 (2nd bid)
        rows.append((f"{name}/slot3", [1.0, 0.9, 0.8, float(x)]))
        rows.append((f"{name}/slot2", [1.0, 0.9, float(x), 0.0]))
        rows.append((f"{name}/slot1", [1.0, float(x), float(x), float(x)]))
    return rows


def recorded_tick(BiddingEnv, n=60, seed=7):
    """One `simulate_ad_bidding` call on random float32 bids, with the reference's own random
    outcomes captured: the exposure draws before `_enforce_slot_continuity` (per impression and
    slot, from the pre-unsold slot matrix) and the conversion draws of every cell (what
    `_calculate_conversion_action` draws before multiplying by the exposure)."""
    rng = np.random.default_rng(seed)
    pv = (rng.random((n, N_ADV)) * 0.3).astype(np.float32)
    pv[rng.random((n, N_ADV)) < 0.1] = 0
    sg = (pv * 0.1).astype(np.float32)
    bids = (rng.random((n, N_ADV)) * 2.0).astype(np.float32)
    bids[rng.random((n, N_ADV)) < 0.3] = 0
    bids[: n // 4] = np.where(rng.random((n // 4, N_ADV)) < 0.93, 0, bids[: n // 4])  # sparse rows
    env = BiddingEnv(reserve_pv_price=0.0001, min_remaining_budget=0.1)
    env.reset(episode=0)
    captured = {}
    orig_cont, orig_conv = env._enforce_slot_continuity, env._calculate_conversion_action

    def cont(is_exposed, slot):
        captured["draw"], captured["slot"] = is_exposed.copy(), slot.copy()
        return orig_cont(is_exposed, slot)

    def conv(values, is_exposed):
        captured["conv"] = orig_conv(values, np.ones_like(is_exposed))
        return orig_conv(values, is_exposed)

    env._enforce_slot_continuity, env._calculate_conversion_action = cont, conv
    xi, slot, cost, exp, convs, lwc, _ = env.simulate_ad_bidding(pv, sg, bids)
    draw = np.zeros((n, 3), dtype=int)
    for i in range(n):
        for a in range(N_ADV):
            k = captured["slot"][i, a]
            if k > 0:
                draw[i, k - 1] = captured["draw"][i, a]
    return {"num_pv": n, "reserve": 0.0001, "slot_coefficients": env.slot_coefficients.tolist(),
            "pvalues": pv.T.ravel().astype(float).tolist(), "sigmas": sg.T.ravel().astype(float).tolist(),
            "bids": bids.T.ravel().astype(float).tolist(),
            "exposure_draw": draw.ravel().tolist(), "conversion_draw": captured["conv"].astype(int).ravel().tolist(),
            # outputs, advertiser-major [a * n + i] like aigb's arrays
            "slot": slot.ravel().astype(int).tolist(), "cost": cost.ravel().astype(float).tolist(),
            "exposed": exp.ravel().astype(int).tolist(), "conversion": convs.ravel().astype(int).tolist(),
            "least_winning_cost": lwc.astype(float).tolist()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--auctionnet", required=True, help="local copy of alimama-tech/AuctionNet (not committed)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.auctionnet))
    import logging
    from simul_bidding_env.Environment.BiddingEnv import BiddingEnv
    logging.disable(logging.INFO)

    out = {"source": "alimama-tech/AuctionNet BiddingEnv.simulate_ad_bidding (local copy); "
                     "produced by scripts/aigb_replay_fixture.py",
           "numpy": np.__version__, "num_advertisers": N_ADV, "cases": []}
    for reserve in RESERVES:
        for dtype in ("float32", "float64"):
            env = BiddingEnv(reserve_pv_price=reserve, min_remaining_budget=0.1)
            env.reset(episode=0)
            rows = cases(reserve)
            n = len(rows)
            bids = np.zeros((n, N_ADV), dtype=dtype)
            for i, (_, b) in enumerate(rows):
                bids[i, :len(b)] = np.array(b, dtype=np.float32).astype(dtype)
            pv = np.full((n, N_ADV), 0.5, dtype=dtype)
            sg = np.zeros((n, N_ADV), dtype=dtype)
            xi, slot, cost, exp, conv, lwc, _ = env.simulate_ad_bidding(pv, sg, bids)
            for i, (name, b) in enumerate(rows):
                out["cases"].append({
                    "reserve": reserve, "dtype": dtype, "case": name,
                    "bids": [float(np.float32(v)) for v in b],
                    "slot": [int(slot[a, i]) for a in range(len(b))],
                    "cost": [float(cost[a, i]) for a in range(len(b))],
                    "xi": [int(xi[a, i]) for a in range(len(b))],
                    "least_winning_cost": float(lwc[i]),
                })
    out["tick"] = recorded_tick(BiddingEnv)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
