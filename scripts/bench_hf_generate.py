#!/usr/bin/env python3
"""transformers' greedy `generate` on the models `benches/hf.rs` writes, the way that bench runs
rl-hf: batch 8, prompts of 16 tokens (row i, position j -> 3 + (7 i + 3 j) mod 250), 64 new
tokens with no stop id, f32, KV cache on, one torch thread unless told otherwise.

    cargo bench --bench hf --features rl-hf -- hf_generate     # writes target/rl-hf-bench/{tiny,50m}
    OMP_NUM_THREADS=1 ~/.cache/frugal-rl/venv/bin/python scripts/bench_hf_generate.py [--threads N] [--dir D]

Needs transformers (5.23.0 was used: `pip install transformers==5.23.0` in the provisioned
venv). Prints, per model, the median and the spread of 10 timed runs after 2 warm-up runs, in
generated tokens per second (8 x 64 per run). Figures: docs/benchmarks.md ("rl-hf").
"""

import argparse
import os
import statistics
import time

import torch
import transformers
from transformers import Qwen2ForCausalLM

BATCH, PROMPT, NEW = 8, 16, 64


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.environ.get("RL_HF_BENCH_DIR", "target/rl-hf-bench"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ids = torch.tensor([[3 + (7 * i + 3 * j) % 250 for j in range(PROMPT)] for i in range(BATCH)])
    mask = torch.ones_like(ids)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    for name in ("tiny", "50m"):
        path = os.path.join(a.dir, name)
        model = Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        n_params = sum(p.numel() for p in model.parameters())
        kw = dict(
            attention_mask=mask,
            max_new_tokens=NEW,
            min_new_tokens=NEW,
            do_sample=False,
            use_cache=True,
            eos_token_id=None,
            pad_token_id=0,
        )
        times = []
        with torch.inference_mode():
            for run in range(2 + a.runs):
                t0 = time.perf_counter()
                out = model.generate(ids, **kw)
                dt = time.perf_counter() - t0
                assert out.shape == (BATCH, PROMPT + NEW), out.shape
                if run >= 2:
                    times.append(dt)
        tps = [BATCH * NEW / t for t in times]
        print(
            f"{name} ({n_params / 1e6:.2f} M parameters): median {statistics.median(times) * 1e3:.1f} ms per run, "
            f"{statistics.median(tps):.0f} tokens/s (min {min(tps):.0f}, max {max(tps):.0f})"
        )


if __name__ == "__main__":
    main()
