"""Side by side with `benches/aigb_planner.rs`: the AIGB track baseline's DFUSER planner
(alimama-tech/NeurIPS_Auto_Bidding_AIGB_Track_Baseline, bidding_train_env/baseline/dd/DFUSER.py,
Apache-2.0), run from a local copy that is never committed, on CPU with one thread: one plan
(`DFUSER.forward` at tick 0: K = 10 guided steps, 20 U-Net calls, the inverse model) and one
period of online re-planning (48 calls, ticks 0..47), at U-Net dim 128 (the reference) and 32.

    git -C <mirror> show HEAD:bidding_train_env/baseline/dd/DFUSER.py > /tmp/dfuser/DFUSER.py
    ~/.cache/frugal-rl/venv/bin/python benches/aigb_planner_torch.py --dfuser /tmp/dfuser

Needs torch and einops. Prints the medians of `--repeats` wall and CPU timings.
"""
import argparse
import statistics
import sys
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--dfuser", required=True, help="folder holding DFUSER.py")
ap.add_argument("--repeats", type=int, default=10)
args = ap.parse_args()
sys.path.insert(0, args.dfuser)
import DFUSER as ref  # noqa: E402

torch.set_num_threads(1)


def planner(dim):
    m = ref.DFUSER()
    if dim != 128:
        unet = ref.TemporalUnet(horizon=48, transition_dim=16, cond_dim=1, returns_condition=True, dim=dim,
                                condition_dropout=0.25, calc_energy=False)
        m.diffuser.model = unet
    m.use_cuda = False
    m.diffuser.cpu().eval()
    return m


def timed(f):
    wall, cpu = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


torch.manual_seed(0)
states = torch.randn(48, 16).abs()
for dim in (128, 32):
    m = planner(dim)

    def at(t):
        x = torch.cat([states, torch.full((48, 1), float(t))], 1).reshape(-1)
        with torch.no_grad():
            return m(x)

    at(0)
    (one, one_cpu) = timed(lambda: at(0))
    (period, period_cpu) = timed(lambda: [at(t) for t in range(48)])
    print(f"dim {dim}: one plan {one * 1e3:.2f} ms wall / {one_cpu * 1e3:.2f} ms CPU, "
          f"one period (48 plans) {period * 1e3:.1f} ms wall / {period_cpu * 1e3:.1f} ms CPU")
