#!/usr/bin/env python3
"""Summarise cargo-mutants runs: caught share of viable mutants per crate and per file.

Usage: scripts/mutants_summary.py target/mutants [--markdown]

Reads every `*/mutants.out/outcomes.json` under the given folder (one per `make mutants`
shard) and prints, per source file and per crate, the mutants caught by the tests (a test
failed or timed out) out of the viable ones (those that built), and lists the survivors
(missed mutants) with their location, so they can be turned into tests.
"""
import collections
import glob
import json
import os
import sys


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "target/mutants"
    markdown = "--markdown" in sys.argv
    per_file = collections.defaultdict(collections.Counter)
    missed = []
    for path in sorted(glob.glob(os.path.join(root, "**", "outcomes.json"), recursive=True)):
        if "mutants.out.old" in path:
            continue  # the previous run of a shard, kept by cargo-mutants
        with open(path) as f:
            data = json.load(f)
        for o in data.get("outcomes", []):
            scenario = o.get("scenario")
            if not isinstance(scenario, dict) or "Mutant" not in scenario:
                continue  # the baseline run
            m = scenario["Mutant"]
            file = m.get("file", "?")
            summary = o.get("summary", "?")
            per_file[file][summary] += 1
            if summary == "MissedMutant":
                line = m.get("span", {}).get("start", {}).get("line", "?")
                name = m.get("name") or f"{file}:{line}: {m.get('replacement', '')}"
                missed.append(name)
    if not per_file:
        print(f"no outcomes.json under {root}")
        return 1
    per_crate = collections.defaultdict(collections.Counter)
    for file, c in per_file.items():
        parts = file.split("/")
        crate = parts[1] if parts[0] == "crates" and len(parts) > 1 else parts[0]
        per_crate[crate].update(c)

    def row(name, c):
        caught = c["CaughtMutant"] + c["Timeout"]
        viable = caught + c["MissedMutant"]
        share = f"{100.0 * caught / viable:.1f}%" if viable else "-"
        return name, caught, viable, share, c["MissedMutant"], c["Timeout"], c["Unviable"]

    header = ("scope", "caught", "viable", "share", "missed", "timeouts", "unviable")
    rows = [row(k, v) for k, v in sorted(per_crate.items())] + [row(k, v) for k, v in sorted(per_file.items())]
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        print("{:<48} {:>7} {:>7} {:>7} {:>7} {:>8} {:>9}".format(*header))
        for r in rows:
            print("{:<48} {:>7} {:>7} {:>7} {:>7} {:>8} {:>9}".format(*r))
    if missed:
        print("\nsurvivors:")
        for m in missed:
            print("  " + m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
