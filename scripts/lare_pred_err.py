#!/usr/bin/env python3
"""Per-method relabelling error of a `lare_compare` output folder.

`reward/pred_err` is the MSE of the per-step rewards a method hands the agent against the
hidden dense rewards, on the agent's sampled batches (LaRe's `reward_pred_err`), logged every
`log_every` steps by `lare::train::train_off_policy`. For each method this prints the mean over
seeds of the mean of the last `--last` records, with the per-seed values.

    python3 scripts/lare_pred_err.py target/lare-results/pendulum [--last 3]
"""
import argparse
import json
import pathlib
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--last", type=int, default=3)
    a = ap.parse_args()
    print("| method | reward/pred_err (mean over seeds) | per seed |\n|---|---|---|")
    for method in sorted(p for p in a.out.iterdir() if p.is_dir()):
        per_seed = []
        for seed in sorted(method.glob("seed*")):
            vals = []
            with open(seed / "metrics.jsonl") as f:
                for line in f:
                    rec = json.loads(line)
                    if "reward/pred_err" in rec:
                        vals.append(rec["reward/pred_err"])
            if vals:
                per_seed.append(statistics.fmean(vals[-a.last:]))
        if per_seed:
            seeds = ", ".join(f"{v:.3g}" for v in per_seed)
            print(f"| {method.name} | {statistics.fmean(per_seed):.3g} | {seeds} |")


if __name__ == "__main__":
    main()
