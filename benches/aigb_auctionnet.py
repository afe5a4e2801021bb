#!/usr/bin/env python3
"""Side by side: one 500k-impression, 48-advertiser period of the AuctionNet Python simulator
(PID-only market, its own NeurIPSPvGen + BiddingEnv + PidBiddingStrategy and run_test tick loop,
driven by scripts/aigb_auctionnet_stats.py) and of aigb (examples/aigb_simulate.rs, one thread),
in one run. AuctionNet is read from a local copy that is never committed.

    python benches/aigb_auctionnet.py --auctionnet /tmp/auctionnet [--pv-num 500000] [--repeats 3]

Prints the wall and CPU time of each, the speed-ups, and each side's peak memory (RSS). On a
loaded machine the CPU-time ratio is the meaningful one (both sides are single-threaded).
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--auctionnet", required=True)
    ap.add_argument("--pv-num", type=int, default=500000)
    ap.add_argument("--repeats", type=int, default=3, help="aigb periods (the Python side runs one)")
    args = ap.parse_args()

    # aigb first (built in release), one thread
    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "aigb_simulate", "--no-default-features",
                    "--features", "aigb"],
                   cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "aigb_simulate")
    rust = []
    rss = None
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for r in range(args.repeats):
        out = subprocess.run([exe, "--pv-num", str(args.pv_num), "--periods", "1", "--first-period", str(r),
                              "--quiet", "--out", os.path.join(ROOT, "target", "aigb-bench")],
                             check=True, capture_output=True, text=True).stdout
        m = re.search(r"([0-9.]+) s/period, peak RSS ([0-9.]+) MiB", out)
        rust.append(float(m.group(1)))
        rss = float(m.group(2))
    rust_s = min(rust)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rust_cpu = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / args.repeats

    # AuctionNet, in this process
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import collections
    import collections.abc
    collections.Iterable = collections.abc.Iterable
    root = os.path.abspath(args.auctionnet)
    sys.path.insert(0, root)
    os.chdir(root)
    import logging
    logging.disable(logging.INFO)
    from run.run_test import get_winner, adjust_over_cost
    import aigb_auctionnet_stats as st
    budgets, cpas = st.controller_lists(root)
    scale = args.pv_num / 500000
    budgets = [b * scale for b in budgets]
    t = time.time()
    c0 = resource.getrusage(resource.RUSAGE_SELF)
    st.run_market(root, 0, args.pv_num, budgets, cpas, 48, get_winner, adjust_over_cost)
    py_s = time.time() - t
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    py_cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    py_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    load = os.getloadavg()
    print(json.dumps({
        "pv_num": args.pv_num,
        "auctionnet_python_s": round(py_s, 3),
        "aigb_rust_s_best_of": round(rust_s, 3),
        "aigb_rust_s_all": rust,
        "speedup_wall": round(py_s / rust_s, 1),
        "auctionnet_python_cpu_s": round(py_cpu, 3),
        "aigb_rust_cpu_s_mean": round(rust_cpu, 3),
        "speedup_cpu": round(py_cpu / rust_cpu, 1),
        "auctionnet_peak_rss_mib": round(py_rss),
        "aigb_peak_rss_mib": rss,
        "load_avg_1m": load[0],
    }))


if __name__ == "__main__":
    main()
