#!/usr/bin/env python3
"""Recorded-period fixture for `aigb`'s period replay, from AuctionNet's own period loop.

Runs alimama-tech/AuctionNet's `run/run_test.py::run_test` (Apache-2.0) -- its tick loop, budget
cut-off, overspend drop loop (`adjust_over_cost`, `get_winner`) and `BiddingEnv` auction -- from a
LOCAL copy that is never committed, on one small period: 5 advertisers with three simple bidding
rules (written here, mirrored in `crates/aigb-sim/tests/replay.rs`), 8 ticks of 30-59 impressions
with pValues/sigmas drawn here, budgets small enough that drop rounds happen and advertisers run
out. Only the period's inputs are replaced (a small stand-in `Controller`, pv generator and
no-op trackers, installed before `run_test` is imported); the loop itself is the reference's.

Recorded, around the reference's own methods: every `simulate_ad_bidding` call (the exposure
draws before `_enforce_slot_continuity`, per impression and slot; the conversion draws of every
cell, which are the same in every call of a tick -- checked -- so stored once per tick), every
drop choice (`rng.choice` inside `adjust_over_cost`, labelled with its advertiser and slot), and
per tick: remaining budgets at the start, the bids before the drop loop and after it, and the
last call's slot, cost, exposure, conversion per cell and least winning cost.

Bids are computed in float32 and handed to the reference as float64 (the dtype its strategies
and its zero bids for advertisers out of budget have), so every bid is exactly an `f32`.

Usage (the committed fixture was made with exactly this command, numpy 2.4.6, scipy 1.17.1,
gin-config, AuctionNet commit c20de631a40e24669d1d6a8e2acefd8f492f172d):
    git --git-dir=<mirror of alimama-tech/AuctionNet> archive HEAD run simul_bidding_env/Environment \
        simul_bidding_env/__init__.py | tar -x -C /tmp/auctionnet-period
    python3 -m venv /tmp/aigb-replay-venv && /tmp/aigb-replay-venv/bin/pip install numpy scipy gin-config
    nice /tmp/aigb-replay-venv/bin/python scripts/aigb_period_fixture.py --auctionnet /tmp/auctionnet-period \
        --out crates/aigb-sim/tests/fixtures/auctionnet_period.json
"""
import argparse
import collections
import collections.abc
import json
import math
import os
import sys
import types

import numpy as np

N_ADV = 5
N_TICK = 8
SEED = 11
RESERVE = 0.01  # BiddingEnv's class default
MIN_REMAINING = 0.3  # BiddingEnv's default is 0.1; 0.3 makes advertisers 0 and 3 stop bidding from tick 5
CPAS = [8.0, 6.0, 10.0, 7.0, 9.0]
BUDGETS = [26.0, 20.0, 400.0, 18.0, 40.0]
# rule per advertiser: ("fixed", m): alpha = m*cpa; ("paced", m): alpha = m*cpa*remaining/budget;
# ("winrate", m): alpha = m*cpa*(1.5 - 0.5*last tick's win rate), m*cpa at tick 0
RULES = [("fixed", 0.25), ("paced", 0.4), ("fixed", 0.12), ("winrate", 0.3), ("paced", 0.3)]


class Strategy:
    """A simple bidding rule: bid = float32(alpha) * float32(pValue), returned as float64."""

    def __init__(self, i):
        self.kind, self.m = RULES[i]
        self.cpa, self.budget, self.category = CPAS[i], BUDGETS[i], i
        self.name = f"{self.kind}{i}"
        self.remaining_budget = self.budget

    def reset(self):
        self.remaining_budget = self.budget

    def bidding(self, tick, pv, sigma, hist_pvalue, hist_bids, hist_auction, hist_impression, hist_lwc):
        if self.kind == "fixed":
            alpha = self.m * self.cpa
        elif self.kind == "paced":
            alpha = self.m * self.cpa * self.remaining_budget / self.budget
        else:
            if hist_auction:
                xi = hist_auction[-1][:, 0]
                rate = float(xi.sum()) / len(xi)
                alpha = self.m * self.cpa * (1.5 - 0.5 * rate)
            else:
                alpha = self.m * self.cpa
        return (np.float32(alpha) * pv.astype(np.float32)).astype(np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--auctionnet", required=True, help="local copy of alimama-tech/AuctionNet (not committed)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.auctionnet))
    import logging
    logging.disable(logging.CRITICAL)
    from simul_bidding_env.Environment.BiddingEnv import BiddingEnv

    # the period's inputs
    rng = np.random.default_rng(SEED)
    counts = rng.integers(30, 60, size=N_TICK)
    pvs, sgs = [], []
    for n in counts:
        pv = (rng.random((n, N_ADV)) * 0.4).astype(np.float32)
        pv[rng.random((n, N_ADV)) < 0.1] = 0
        sg = (pv * np.float32(0.2)).astype(np.float32)
        pvs.append(pv.astype(np.float64))
        sgs.append(sg.astype(np.float64))

    rec = {"ticks": [], "current": None}

    class Pv(list):
        def __getitem__(self, t):  # run_test reads pv_values[tick] first in every tick
            if rec["current"] is None or rec["current"]["tick"] != t:
                rec["current"] = {"tick": t, "remaining": [float(a.remaining_budget) for a in agents],
                                  "calls": [], "drops": []}
                rec["ticks"].append(rec["current"])
            return list.__getitem__(self, t)

    env = BiddingEnv(reserve_pv_price=RESERVE, min_remaining_budget=MIN_REMAINING)
    env.NUM_ADVERTISERS = N_ADV  # the value-noise bounds are drawn per advertiser in reset()
    agents = [Strategy(i) for i in range(N_ADV)]
    gen = types.SimpleNamespace(pv_values=Pv(pvs), pValueSigmas=sgs)

    class Controller:  # stand-in for simul_bidding_env.Controller.Controller (48 learned agents)
        def __init__(self, player_index=0, player_agent=None):
            self.agents, self.biddingEnv, self.pvGenerator = agents, env, gen

        def reset(self, episode):
            self.biddingEnv.reset(episode=episode)
            for a in self.agents:
                a.reset()

    class NoOp:
        def __init__(self, *a, **k):
            pass

        def __getattr__(self, name):
            return lambda *a, **k: None

    # what run_test imports besides the loop: stand-ins (and Python 3.10+'s collections.abc)
    collections.Iterable = collections.abc.Iterable
    stub = lambda name, **attrs: sys.modules.setdefault(name, types.ModuleType(name)).__dict__.update(attrs)
    stub("psutil")
    stub("simul_bidding_env.Controller")
    stub("simul_bidding_env.Controller.Controller", Controller=Controller)
    stub("simul_bidding_env.Tracker")
    stub("simul_bidding_env.Tracker.BiddingTracker", BiddingTracker=NoOp)
    stub("simul_bidding_env.Tracker.PlayerAnalysis", PlayerAnalysis=NoOp)
    stub("bidding_train_env")
    stub("bidding_train_env.strategy", PlayerBiddingStrategy=lambda: agents[0])
    import run.run_test as rt

    # record every auction call with its draws
    orig_sim, orig_cont, orig_conv = env.simulate_ad_bidding, env._enforce_slot_continuity, env._calculate_conversion_action
    cap = {}

    def cont(is_exposed, slot):
        cap["draw"], cap["slot"] = is_exposed.copy(), slot.copy()
        return orig_cont(is_exposed, slot)

    def conv(values, is_exposed):
        cap["conv"] = orig_conv(values, np.ones_like(is_exposed))
        return orig_conv(values, is_exposed)

    def sim(pv, sg, bids):
        out = orig_sim(pv, sg, bids)
        n = pv.shape[0]
        draw = np.zeros((n, 3), dtype=int)
        for i in range(n):
            for a in range(N_ADV):
                k = cap["slot"][i, a]
                if k > 0:
                    draw[i, k - 1] = cap["draw"][i, a]
        rec["current"]["calls"].append({"bids": bids.copy(), "exposure_draw": draw, "conversion_draw": cap["conv"].copy(),
                                        "out": [x.copy() for x in out]})
        return out

    env._enforce_slot_continuity, env._calculate_conversion_action, env.simulate_ad_bidding = cont, conv, sim

    # record every drop choice: rng.choice inside adjust_over_cost, labelled in the loop's order
    choices = []

    class RecRng:
        def __init__(self, r):
            self.r = r

        def choice(self, a, size, replace):
            out = self.r.choice(a, size, replace=replace)
            choices.append((np.asarray(a).copy(), np.asarray(out).copy()))
            return out

    class NpProxy:
        def __getattr__(self, name):
            return getattr(np, name)

    np_proxy = NpProxy()
    np_proxy.random = types.SimpleNamespace(default_rng=lambda *a, **k: RecRng(np.random.default_rng(*a, **k)))
    rt.np = np_proxy
    orig_adjust = rt.adjust_over_cost

    def adjust(bids, over, slots, winner_pit):
        choices.clear()
        orig_adjust(bids, over, slots, winner_pit)
        labels = []
        for a in np.where(over > 0)[0]:
            for s in range(len(slots)):
                cand = np.where(winner_pit[:, s] == a)[0]
                if math.ceil(cand.size * over[a]) > 0:
                    labels.append((int(a), s, cand))
        assert len(labels) == len(choices), (labels, choices)
        rnd = len(rec["current"]["calls"])  # drop round r follows call r-1
        for (a, s, cand), (given, dropped) in zip(labels, choices):
            assert np.array_equal(cand, given)
            rec["current"]["drops"].append({"tick": rec["current"]["tick"], "round": rnd, "advertiser": a, "slot": s,
                                            "won": cand.astype(int).tolist(),
                                            "dropped": dropped.astype(int).tolist()})

    rt.adjust_over_cost = adjust
    rt.run_test(generate_log=False, num_episode=1, num_tick=N_TICK, player_index=0)

    ticks = []
    for t, tk in enumerate(rec["ticks"]):
        calls = tk["calls"]
        for c in calls[1:]:
            assert np.array_equal(c["conversion_draw"], calls[0]["conversion_draw"]), "conversion draws moved"
        xi, slot, cost, exp, convs, lwc, _ = calls[-1]["out"]
        assert calls[-1]["bids"].dtype == np.float64
        assert np.array_equal(calls[-1]["bids"].astype(np.float32).astype(np.float64), calls[-1]["bids"])
        ticks.append({
            "tick": t, "num_pv": int(counts[t]),
            # advertiser-major [a * n + i], like aigb's arrays
            "pvalues": pvs[t].T.ravel().tolist(), "sigmas": sgs[t].T.ravel().tolist(),
            "remaining_budget": tk["remaining"],
            "bids_before_drops": calls[0]["bids"].T.ravel().tolist(),
            "bids": calls[-1]["bids"].T.ravel().tolist(),
            "exposure_draws": [c["exposure_draw"].ravel().tolist() for c in calls],
            "conversion_draw": calls[0]["conversion_draw"].astype(int).ravel().tolist(),
            "drops": tk["drops"],
            "slot": slot.ravel().astype(int).tolist(), "cost": cost.ravel().astype(float).tolist(),
            "exposed": exp.ravel().astype(int).tolist(), "conversion": convs.ravel().astype(int).tolist(),
            "least_winning_cost": lwc.astype(float).tolist(),
            "advertiser_cost": (cost * exp).sum(axis=1).astype(float).tolist(),
            "advertiser_conversions": convs.sum(axis=1).astype(int).tolist(),
            "advertiser_wins": xi.sum(axis=1).astype(int).tolist(),
        })
    out = {"source": "alimama-tech/AuctionNet run/run_test.py::run_test with BiddingEnv (local copy, commit "
                     "c20de631a40e24669d1d6a8e2acefd8f492f172d); produced by scripts/aigb_period_fixture.py",
           "numpy": np.__version__, "num_advertisers": N_ADV, "reserve": RESERVE, "min_remaining_budget": MIN_REMAINING,
           "slot_coefficients": env.slot_coefficients.tolist(), "cpas": CPAS, "budgets": BUDGETS,
           "rules": [list(r) for r in RULES],
           "final_remaining_budget": [float(a.remaining_budget) for a in agents], "ticks": ticks}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")
    n_calls = sum(len(t["exposure_draws"]) for t in ticks)
    n_drops = sum(len(t["drops"]) for t in ticks)
    print(f"{len(ticks)} ticks, {n_calls} auction calls, {n_drops} drop choices, remaining "
          f"{out['final_remaining_budget']}", file=sys.stderr)


if __name__ == "__main__":
    main()
