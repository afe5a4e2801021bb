#!/usr/bin/env python3
"""Where transformers' greedy `generate` spends its time on the 48 M-parameter bench model, and
what a pre-transposed weight layout would buy (docs/benchmarks.md, "rl-hf"; issue 23's 1.5x
generation goal).

    OMP_NUM_THREADS=1 ~/.cache/frugal-rl/venv/bin/python scripts/hf_generate_profile.py

Builds the `50m` configuration of `benches/hf.rs` (random Qwen2, hidden 512, 8 layers, 8 / 2 KV
heads, MLP 1408, vocab 50 000, tied head; transformers' own random init, seeded) and runs the
bench's workload: batch 8, prompts of 16 tokens, 64 new greedy tokens, f32, one thread. Prints

- the median time of 4 `generate` calls after a warm-up,
- the torch profiler's top operators of one call (self CPU time),
- the same workload with every `nn.Linear` replaced by `x @ W_t` on a contiguous transposed copy
  of its weight (the layout change a decoder could make for generation), and whether the
  generated tokens are unchanged.
"""

import statistics
import time

import torch
import torch.nn as nn
from transformers import Qwen2Config, Qwen2ForCausalLM


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=50000,
        hidden_size=512,
        intermediate_size=1408,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        max_position_embeddings=2048,
    )
    model = Qwen2ForCausalLM(cfg).eval()
    ids = torch.tensor([[3 + (7 * i + 3 * j) % 250 for j in range(16)] for i in range(8)])
    kw = dict(
        attention_mask=torch.ones_like(ids),
        max_new_tokens=64,
        min_new_tokens=64,
        do_sample=False,
        use_cache=True,
        eos_token_id=None,
        pad_token_id=0,
    )

    def run(n=4):
        times = []
        with torch.inference_mode():
            for _ in range(n + 1):
                t0 = time.perf_counter()
                out = model.generate(ids, **kw)
                times.append(time.perf_counter() - t0)
        return statistics.median(times[1:]), out

    t_native, out_native = run()
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")
    print(f"nn.Linear (F.linear): median {t_native:.3f} s per generate ({8 * 64 / t_native:.0f} tokens/s)")
    with torch.autograd.profiler.profile() as prof:
        with torch.inference_mode():
            model.generate(ids, **kw)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))
    for mod in model.modules():
        if isinstance(mod, nn.Linear):
            wt = mod.weight.detach().t().contiguous()
            bias = mod.bias

            def forward(x, wt=wt, bias=bias):
                y = x @ wt
                return y if bias is None else y + bias

            mod.forward = forward
    t_t, out_t = run()
    print(
        f"x @ W_t (pre-transposed): median {t_t:.3f} s per generate ({8 * 64 / t_t:.0f} tokens/s), "
        f"{t_native / t_t:.2f}x; same tokens: {torch.equal(out_native, out_t)}"
    )


if __name__ == "__main__":
    main()
