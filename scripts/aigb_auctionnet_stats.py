#!/usr/bin/env python3
"""Reference statistics of the public AuctionNet simulator, for `aigb`'s fidelity tests.

Runs alimama-tech/AuctionNet (Apache-2.0) from a LOCAL copy that is never committed: its traffic
generator (`NeurIPSPvGen`), its auction (`BiddingEnv`) and its PID bidder, driven by the tick loop
of `run/run_test.py` (bids of exhausted advertisers zeroed, negative bids clipped, the overspend
drop loop re-running the auction until nobody overspends). Only this driver is ours; every
mechanism comes from the imported reference modules. The market is PID-only: all 48 advertisers
run AuctionNet's `PidBiddingStrategy` with the Controller's budgets and CPA constraints (read from
`Controller.py` with `ast`, not copied), budgets multiplied by `--budget-scale`.

Writes one small JSON file of summary statistics (per-tick traffic, pValue quantiles per category,
win rates, cost shares, slot prices/exposure/conversion calibration) with the across-episode
spread of every statistic, so that the Rust tests can state tolerances. Also times one period.

Usage (the committed fixtures were made with exactly these commands):
    python scripts/aigb_auctionnet_stats.py --auctionnet /tmp/auctionnet --episodes 4 \
        --pv-num 500000 --out crates/aigb-sim/tests/fixtures/auctionnet_pid_500k.json
    python scripts/aigb_auctionnet_stats.py --auctionnet /tmp/auctionnet --episodes 8 \
        --pv-num 20000 --budget-scale 0.04 --out crates/aigb-sim/tests/fixtures/auctionnet_pid_20k.json
Requires numpy, scipy, gin-config, pandas, psutil in the venv (AuctionNet imports them).
"""
import argparse
import ast
import collections
import collections.abc
import json
import math
import os
import sys
import time

import numpy as np

QUANTILES = [0.05, 0.25, 0.5, 0.75, 0.95]


def controller_lists(root):
    """The Controller's budget and CPA lists, parsed from its source (no heavy imports)."""
    src = open(os.path.join(root, "simul_bidding_env/Controller/Controller.py")).read()
    tree = ast.parse(src)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in ("calculate_budget", "get_cpa_constraints"):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") == "array":
                    out[node.name] = [float(x) for x in ast.literal_eval(sub.args[0])]
                    break
    return out["calculate_budget"], out["get_cpa_constraints"]


def summarize(rows):
    """{name: value} per episode -> {name: {mean, sd, n}} across episodes."""
    keys = rows[0].keys()
    res = {}
    for k in keys:
        vals = np.array([r[k] for r in rows], dtype=np.float64)
        res[k] = {"mean": vals.mean(axis=0).tolist(), "sd": vals.std(axis=0, ddof=1).tolist() if len(rows) > 1 else 0.0,
                  "n": len(rows)}
    return res


def pvgen_stats(pvgen, num_category, per_cat):
    traffic = np.array([len(x) for x in pvgen.pv_values], dtype=np.float64)
    st = {"traffic_share": (traffic / traffic.sum()).tolist(), "traffic_total": float(traffic.sum())}
    for c in range(num_category):
        cols = slice(c * per_cat, (c + 1) * per_cat)
        pv = np.concatenate([x[:, cols].ravel() for x in pvgen.pv_values])
        sg = np.concatenate([x[:, cols].ravel() for x in pvgen.pValueSigmas])
        st[f"cat{c}/pvalue_mean"] = float(pv.mean())
        st[f"cat{c}/pvalue_q"] = np.quantile(pv, QUANTILES).tolist()
        st[f"cat{c}/pvalue_zero_frac"] = float((pv == 0).mean())
        ratio = sg[pv > 0] / pv[pv > 0]
        st[f"cat{c}/sigma_ratio_q"] = np.quantile(ratio, QUANTILES).tolist()
    # per-tick mean pValue over all agents (the shape the category curves give)
    st["tick_pvalue_mean"] = [float(x.mean()) for x in pvgen.pv_values]
    return st


def run_market(root, episode, pv_num, budgets, cpas, num_tick, get_winner, adjust_over_cost):
    from simul_bidding_env.PvGenerator.NeurIPSPvGen import NeurIPSPvGen
    from simul_bidding_env.Environment.BiddingEnv import BiddingEnv
    from simul_bidding_env.strategy.pid_bidding_strategy import PidBiddingStrategy

    num_agent = len(budgets)
    env = BiddingEnv(reserve_pv_price=0.0001, min_remaining_budget=0.1)
    agents = []
    for i in range(num_agent):
        a = PidBiddingStrategy(exp_tempral_ratio=np.ones(48))
        a.budget, a.cpa, a.category = budgets[i], cpas[i], i // 8
        a.reset()
        agents.append(a)
    t0 = time.time()
    env.reset(episode=episode)
    gen = NeurIPSPvGen(episode=episode, num_tick=num_tick, num_agent=num_agent, pv_num=pv_num)
    t_gen = time.time() - t0

    n_pv = np.zeros(num_agent)
    xi_sum = np.zeros(num_agent)
    exp_sum = np.zeros(num_agent)
    conv_sum = np.zeros(num_agent)
    cost_sum = np.zeros(num_agent)
    slot_sold = np.zeros(3)
    slot_price = np.zeros(3)
    slot_exposed = np.zeros(3)
    slot_conv = np.zeros(3)
    slot_pv_exposed = np.zeros(3)
    tick_cost = np.zeros(num_tick)
    drop_rounds = 0
    total_pv = 0
    lwc_sum = 0.0
    lwc_pos = 0
    last_tick = np.full(num_agent, -1)
    for t in range(num_tick):
        pv, sg = gen.pv_values[t], gen.pValueSigmas[t]
        bids = np.array([a.bidding(t, pv[:, i], sg[:, i], [], [], [], [], [])
                         if a.remaining_budget >= env.min_remaining_budget else np.zeros(pv.shape[0])
                         for i, a in enumerate(agents)]).T
        bids[bids < 0] = 0
        remaining = np.array([a.remaining_budget for a in agents])
        ratio_max, cost, winner = None, None, None
        while ratio_max is None or ratio_max > 0:
            if ratio_max and ratio_max > 0:
                over = np.maximum((cost - remaining) / (cost + 1e-4), 0)
                adjust_over_cost(bids, over, env.slot_coefficients, winner)
                drop_rounds += 1
            xi, slot, c, exp, conv, lwc, _ = env.simulate_ad_bidding(pv, sg, bids)
            cost = (c * exp).sum(axis=1)
            winner = get_winner(slot)
            over = np.maximum((cost - remaining) / (cost + 1e-4), 0)
            ratio_max = over.max()
        for i, a in enumerate(agents):
            a.remaining_budget -= cost[i]
        n = pv.shape[0]
        total_pv += n
        n_pv += n
        xi_sum += xi.sum(axis=1)
        exp_sum += exp.sum(axis=1)
        conv_sum += conv.sum(axis=1)
        cost_sum += cost
        tick_cost[t] = cost.sum()
        lwc_sum += lwc.sum()
        lwc_pos += (lwc > 0.0001).sum()
        last_tick[xi.sum(axis=1) > 0] = t
        for k in range(3):
            m = slot == k + 1  # [agent, pv]
            slot_sold[k] += m.sum()
            slot_price[k] += c[m].sum()
            slot_exposed[k] += exp[m].sum()
            slot_conv[k] += conv[m].sum()
            slot_pv_exposed[k] += (pv.T[m] * exp[m]).sum()
    elapsed = time.time() - t0
    total_cost = cost_sum.sum()
    cpa_real = cost_sum / np.maximum(conv_sum, 1e-10)
    score = np.where(cpa_real > cpas, (np.array(cpas) / (cpa_real + 1e-10)) ** 2, 1.0) * conv_sum
    st = {
        "win_rate": (xi_sum / n_pv).tolist(),
        "exposure_rate": (exp_sum / n_pv).tolist(),
        "cost_share": (cost_sum / total_cost).tolist(),
        "budget_spent": (cost_sum / np.array(budgets)).tolist(),
        "conversions_per_1k_pv": (conv_sum / total_pv * 1000).tolist(),
        "score_per_1k_pv": (score / total_pv * 1000).tolist(),
        "last_win_tick": last_tick.astype(float).tolist(),
        "tick_cost_share": (tick_cost / total_cost).tolist(),
        "total_cost_per_pv": float(total_cost / total_pv),
        "slot_sold_frac": (slot_sold / total_pv).tolist(),
        "slot_mean_price": (slot_price / np.maximum(slot_sold, 1)).tolist(),
        "slot_exposure_rate": (slot_exposed / np.maximum(slot_sold, 1)).tolist(),
        "slot_conversion_calibration": (slot_conv / np.maximum(slot_pv_exposed, 1e-12)).tolist(),
        "mean_least_winning_cost": float(lwc_sum / total_pv),
        "lwc_above_reserve_frac": float(lwc_pos / total_pv),
        "drop_rounds": float(drop_rounds),
    }
    return st, elapsed, t_gen


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--auctionnet", required=True, help="local copy of alimama-tech/AuctionNet (not committed)")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--first-episode", type=int, default=0)
    ap.add_argument("--pv-num", type=int, default=500000)
    ap.add_argument("--budget-scale", type=float, default=1.0)
    ap.add_argument("--out", default=None, help="JSON file to write (stdout summary otherwise)")
    ap.add_argument("--time-only", action="store_true", help="time one period and print JSON timing")
    args = ap.parse_args()

    root = os.path.abspath(args.auctionnet)
    out_path = os.path.abspath(args.out) if args.out else None
    # run/run_test.py still imports `collections.Iterable` (removed in Python 3.10).
    collections.Iterable = collections.abc.Iterable
    sys.path.insert(0, root)
    os.chdir(root)
    from run.run_test import get_winner, adjust_over_cost
    from simul_bidding_env.PvGenerator.NeurIPSPvGen import NeurIPSPvGen
    import logging
    logging.disable(logging.INFO)

    budgets, cpas = controller_lists(root)
    budgets = [b * args.budget_scale for b in budgets]
    num_tick, num_category, per_cat = 48, 6, 8

    if args.time_only:
        _, elapsed, t_gen = run_market(root, args.first_episode, args.pv_num, budgets, cpas, num_tick,
                                       get_winner, adjust_over_cost)
        print(json.dumps({"python_period_s": elapsed, "python_pvgen_s": t_gen, "pv_num": args.pv_num}))
        return

    gen_rows, market_rows, times = [], [], []
    for e in range(args.first_episode, args.first_episode + args.episodes):
        gen = NeurIPSPvGen(episode=e, num_tick=num_tick, num_agent=48, pv_num=args.pv_num)
        gen_rows.append(pvgen_stats(gen, num_category, per_cat))
        del gen
        st, elapsed, _ = run_market(root, e, args.pv_num, budgets, cpas, num_tick, get_winner, adjust_over_cost)
        market_rows.append(st)
        times.append(elapsed)
        print(f"episode {e}: {elapsed:.1f} s", file=sys.stderr)
    out = {
        "source": "alimama-tech/AuctionNet (local copy), NeurIPSPvGen + BiddingEnv + PidBiddingStrategy, "
                  "run_test.py tick loop; produced by scripts/aigb_auctionnet_stats.py",
        "pv_num": args.pv_num,
        "budget_scale": args.budget_scale,
        "episodes": list(range(args.first_episode, args.first_episode + args.episodes)),
        "budgets": [b / args.budget_scale for b in budgets],
        "cpas": cpas,
        "quantiles": QUANTILES,
        "traffic": summarize(gen_rows),
        "market": summarize(market_rows),
        "python_period_s": {"mean": float(np.mean(times)), "all": times},
    }
    text = json.dumps(out, indent=None, separators=(",", ":"))
    if out_path:
        with open(out_path, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
