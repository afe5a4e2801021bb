"""Tokens per second through a plain Python httpx client (one /v1/completions request per
prompt, the same fields as rlvr-rollout's VllmClient, `concurrency` threads sharing one
httpx.Client), for comparison with `client_throughput.rs` on the same server in the same
sitting. Run with the vLLM venv's python (it has httpx):

    $FRUGAL_CACHE/vllm-venv/bin/python crates/rlvr-rollout/examples/client_throughput.py \
        --url http://127.0.0.1:18431 --model /path/to/model --vocab 512 \
        --prompts 32 --n 8 --max-tokens 64 --concurrency 8 --seed 1

Prints one line: `python tokens=<sampled tokens> seconds=<wall> tokens_per_s=<rate>`."""
import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

p = argparse.ArgumentParser()
p.add_argument("--url", default="http://127.0.0.1:8000")
p.add_argument("--model", required=True)
p.add_argument("--vocab", type=int, default=512)
p.add_argument("--prompts", type=int, default=32)
p.add_argument("--n", type=int, default=8)
p.add_argument("--max-tokens", type=int, default=64)
p.add_argument("--concurrency", type=int, default=8)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--prompt-len", type=int, default=16)
a = p.parse_args()

prompts = [[3 + (i * 7919 + j * 104729) % (a.vocab - 3) for j in range(a.prompt_len)] for i in range(a.prompts)]
client = httpx.Client(timeout=600.0, limits=httpx.Limits(max_connections=a.concurrency))


def one(i):
    body = {"model": a.model, "prompt": [prompts[i]], "n": a.n, "max_tokens": a.max_tokens,
            "temperature": 1.0, "top_p": 1.0, "seed": (a.seed * 1000003 + i) % (1 << 63), "logprobs": 0,
            "return_token_ids": True, "return_tokens_as_token_ids": True, "stream": False}
    r = client.post(a.url + "/v1/completions", json=body)
    r.raise_for_status()
    choices = r.json()["choices"]
    assert len(choices) == a.n
    return sum(len(c["token_ids"]) for c in choices)


t0 = time.perf_counter()
with ThreadPoolExecutor(a.concurrency) as ex:
    tokens = sum(ex.map(one, range(a.prompts)))
secs = time.perf_counter() - t0
print(f"python tokens={tokens} seconds={secs:.3f} tokens_per_s={tokens / secs:.1f}")
