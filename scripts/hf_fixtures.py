#!/usr/bin/env python3
"""Tiny random Hugging Face decoder checkpoints and reference outputs for `crates/rl-hf` tests.

Run from the repository root with the provisioned venv (transformers 5.23.0, torch 2.11.0):

    OMP_NUM_THREADS=1 ~/.cache/frugal-rl/venv/bin/python scripts/hf_fixtures.py

Writes `crates/rl-hf/tests/fixtures/<name>/` for each variant: the model directory as
`save_pretrained` writes it (config.json, model.safetensors or shards + index) and
`reference.safetensors` with

- `input_ids` [B, T] i64, left-padded with pad id 0, `attention_mask` [B, T] i64,
- `position_ids` [B, T] i64: `cumsum(mask) - 1`, pads set to 1 (what `generate` passes),
- `logits` [B, T, V] f32 of `model(input_ids, attention_mask, position_ids)`,
- `generated` [B, 24] i64: `generate(do_sample=False, max_new_tokens=24)` with no stop token,
- `gen_margin` [1] f32: the smallest top-1 minus top-2 logit gap over the greedy steps (how far
  the greedy choice is from a tie; the Rust test needs it well above float noise).

`--rlvr` writes only `qwen2_rlvr/` (see `rlvr_fixture`), the model of the end-to-end RLVR run.

`--check-saved DIR` instead loads the directories rl-hf's `save_pretrained` wrote under DIR
(see `crates/rl-hf/tests/save.rs`, `RL_HF_KEEP_SAVED`) in transformers and prints their max
abs logit difference to the reference.

`tokenizer/`: a locally trained byte-level BPE with a chat template and reference encodings
(see `tokenizer_fixture`). For `qwen2_tied`, `qwen3` and `llama3` also `grad.safetensors` (see `gradients`).

No hub access: every model is built from a config and random weights (seeded).
"""

import copy
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "rl-hf", "tests", "fixtures")
VOCAB = 96
NEW_TOKENS = 24

COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    rms_norm_eps=1e-6,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=0,
)


def randomise(model, seed):
    """Weights far from the tiny init so logits are spread (greedy choices are not near ties)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))
    return model


def batch():
    g = torch.Generator().manual_seed(1234)
    lengths = [7, 4, 2]
    t = max(lengths)
    ids = torch.zeros(len(lengths), t, dtype=torch.long)
    mask = torch.zeros(len(lengths), t, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, t - n :] = torch.randint(1, VOCAB, (n,), generator=g)
        mask[i, t - n :] = 1
    pos = mask.cumsum(-1) - 1
    pos = pos.masked_fill(mask == 0, 1)
    return ids, mask, pos


def reference(model, path):
    model.eval()
    ids, mask, pos = batch()
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float()
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
            output_scores=True,
            return_dict_in_generate=True,
        )
    gen = out.sequences[:, ids.shape[1] :].contiguous()
    margin = min(float((s.topk(2, dim=-1).values[:, 0] - s.topk(2, dim=-1).values[:, 1]).min()) for s in out.scores)
    save_file(
        {
            "input_ids": ids.contiguous(),
            "attention_mask": mask.contiguous(),
            "position_ids": pos.contiguous(),
            "logits": logits.contiguous(),
            "generated": gen,
            "gen_margin": torch.tensor([margin], dtype=torch.float32),
        },
        os.path.join(path, "reference.safetensors"),
    )
    return margin


def gradients(model, path, start=4):
    """`grad.safetensors`: log-probs and entropies of tokens `start..T` and the gradient of
    `sum(coef * logp * m) + 0.1 * sum(entropy * m)` (m = 1 where the token and the one before it
    are real, coef fixed random weights) with respect to every parameter (`grad.<name>`, tied ones once)."""
    model.zero_grad()
    ids, mask, pos = batch()
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float()
    logp_all = torch.log_softmax(logits[:, start - 1 : -1], dim=-1)
    lp = logp_all.gather(-1, ids[:, start:, None]).squeeze(-1)
    ent = -(logp_all.exp() * logp_all).sum(-1)
    # A token's log-prob is defined only when the position before it is a real token too
    # (the first token after left padding is conditioned on a padding query).
    m = (mask[:, start:] * mask[:, start - 1 : -1]).float()
    coef = torch.randn(lp.shape, generator=torch.Generator().manual_seed(99))
    loss = (coef * lp * m).sum() + 0.1 * (ent * m).sum()
    loss.backward()
    out = {
        "start": torch.tensor([start], dtype=torch.long),
        "coef": coef.contiguous(),
        "logprobs": lp.detach().contiguous(),
        "entropy": ent.detach().contiguous(),
    }
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().contiguous()
    save_file(out, os.path.join(path, "grad.safetensors"))
    model.zero_grad()


CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def tokenizer_fixture():
    """`tokenizer/`: a byte-level BPE (vocab 320) trained here on a synthetic corpus, saved by
    `PreTrainedTokenizerFast.save_pretrained` (tokenizer.json, tokenizer_config.json with a
    ChatML-style chat template), and `reference.json` with encodings/decodings of fixture
    strings and one rendered chat."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    path = os.path.join(OUT, "tokenizer")
    shutil.rmtree(path, ignore_errors=True)
    g = torch.Generator().manual_seed(7)
    words = "the a of to and is in that it for on with as by this we be are step think answer so then".split()
    corpus = []
    for i in range(400):
        a, b = (int(x) for x in torch.randint(0, 100, (2,), generator=g))
        picks = [words[int(j)] for j in torch.randint(0, len(words), (6,), generator=g)]
        corpus.append(f"{a}+{b}={a + b}. " + " ".join(picks) + ("!" if i % 3 == 0 else "."))
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    texts = [
        "12+30=42. think step by step!",
        "The answer is 7.",
        "  leading spaces\nnew line\ttab",
        "ünïcödé ✓ 数学 🙂",
        "<|im_start|>user\nwhat is 2+2?<|im_end|>",
        "",
    ]
    cases = []
    for t in texts:
        ids = fast.encode(t, add_special_tokens=False)
        cases.append(
            {
                "text": t,
                "ids": ids,
                "decoded": fast.decode(ids, skip_special_tokens=False),
                "decoded_skip_special": fast.decode(ids, skip_special_tokens=True),
            }
        )
    messages = [
        {"role": "system", "content": "You are a careful solver."},
        {"role": "user", "content": "What is 12+30?"},
    ]
    rendered = fast.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ref = {
        "vocab_size": len(fast),
        "special_tokens": {t: fast.convert_tokens_to_ids(t) for t in specials},
        "cases": cases,
        "chat": {"messages": messages, "add_generation_prompt": True, "rendered": rendered},
    }
    with open(os.path.join(path, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1, ensure_ascii=False)
    return {"vocab_size": len(fast)}


def save(model, name, **kw):
    path = os.path.join(OUT, name)
    shutil.rmtree(path, ignore_errors=True)
    model.generation_config.eos_token_id = None
    model.save_pretrained(path, **kw)
    # generation_config.json is not read by rl-hf; keep the fixtures small and explicit.
    gc = os.path.join(path, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    return path


def to_v4_config(path, rope_scaling):
    """Rewrites config.json in the transformers v4 layout (top-level rope_theta/rope_scaling)."""
    cfg_path = os.path.join(path, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    rp = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rp["rope_theta"]
    cfg["rope_scaling"] = rope_scaling
    cfg["torch_dtype"] = cfg.pop("dtype", "float32")
    cfg["transformers_version"] = "4.46.0"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    report = {}

    def done(name, model, path):
        m = reference(model, path)
        # The directory must load back in transformers and give the same logits.
        back = type(model).from_pretrained(path, dtype=torch.float32)
        ids, mask, pos = batch()
        with torch.no_grad():
            a = model.float()(input_ids=ids, attention_mask=mask, position_ids=pos).logits
            b = back(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        real = mask.bool()
        diff = float((a - b).abs()[real].max())
        report[name] = {"gen_margin": round(m, 4), "reload_max_abs": diff}
        if name in ("qwen2_tied", "qwen3", "llama3"):
            gradients(model, path)

    q2 = dict(COMMON, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    m = randomise(Qwen2ForCausalLM(Qwen2Config(**q2, tie_word_embeddings=True)), 1)
    done("qwen2_tied", m, save(m, "qwen2_tied"))

    m = randomise(Qwen2ForCausalLM(Qwen2Config(**q2, tie_word_embeddings=False)), 2)
    done("qwen2_untied", m, save(m, "qwen2_untied"))

    # Sharded: the same family, shards above 40 kB, with model.safetensors.index.json.
    m = randomise(Qwen2ForCausalLM(Qwen2Config(**q2, tie_word_embeddings=False)), 3)
    done("qwen2_sharded", m, save(m, "qwen2_sharded", max_shard_size="40KB"))

    # v4 layout: top-level rope_theta, rope_scaling null, torch_dtype.
    m = randomise(Qwen2ForCausalLM(Qwen2Config(**q2, tie_word_embeddings=True)), 4)
    p = save(m, "qwen2_v4")
    to_v4_config(p, None)
    done("qwen2_v4", m, p)

    # Qwen3: explicit head_dim (16 != 32 / 4), per-head q/k RMSNorm, no biases.
    q3 = dict(COMMON, head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    m = randomise(Qwen3ForCausalLM(Qwen3Config(**q3, tie_word_embeddings=False)), 5)
    done("qwen3", m, save(m, "qwen3"))

    # Qwen3 stored in bf16: the reference is the f32 model with bf16-rounded weights.
    # (Only the parameters are rounded: `model.to(bfloat16)` would also round the rotary
    # inv_freq buffer, which transformers recomputes in f32 on load.)
    m = randomise(Qwen3ForCausalLM(Qwen3Config(**q3, tie_word_embeddings=True)), 6)
    with torch.no_grad():
        for w in m.parameters():
            w.copy_(w.to(torch.bfloat16).float())
    p = save(copy.deepcopy(m).to(torch.bfloat16), "qwen3_bf16")
    done("qwen3_bf16", m, p)

    # Llama 3.x rope scaling: head_dim 16, theta 5e5 -> wavelengths 6.3, 32.4, 167, ...;
    # original_max_position_embeddings 64, low 1, high 8 -> thresholds 8 and 64, so the three
    # branches (unchanged, smoothed, divided by factor) are all used.
    l3_rope = {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 8.0,
        "original_max_position_embeddings": 64,
    }
    l3 = dict(COMMON, hidden_size=64, rope_parameters=l3_rope)
    m = randomise(LlamaForCausalLM(LlamaConfig(**l3, tie_word_embeddings=True)), 7)
    done("llama3", m, save(m, "llama3"))

    # Llama 3 in the v4 layout (rope_scaling with rope_type llama3, as Llama-3.1 configs ship).
    m = randomise(LlamaForCausalLM(LlamaConfig(**l3, tie_word_embeddings=False)), 8)
    p = save(m, "llama3_v4")
    v4_scaling = {k: v for k, v in l3_rope.items() if k != "rope_theta"}
    to_v4_config(p, v4_scaling)
    with open(os.path.join(p, "config.json")) as f:
        cfg = json.load(f)
    cfg["rope_theta"] = l3_rope["rope_theta"]
    with open(os.path.join(p, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    done("llama3_v4", m, p)

    report["tokenizer"] = tokenizer_fixture()
    report["qwen2_rlvr"] = rlvr_fixture()

    json.dump(
        {"torch": torch.__version__, "transformers": transformers.__version__, "fixtures": report},
        sys.stdout,
        indent=2,
    )
    print()


def check_saved(root):
    """Loads every directory rl-hf's save_pretrained wrote under `root` (named after a fixture,
    optionally with a `_sharded` suffix) in transformers and compares its logits with the
    fixture's reference."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    result = {}
    for name in sorted(os.listdir(root)):
        fixture = name.removesuffix("_sharded")
        ref = load_file(os.path.join(OUT, fixture, "reference.safetensors"))
        model = AutoModelForCausalLM.from_pretrained(os.path.join(root, name), dtype=torch.float32)
        with torch.no_grad():
            logits = model(
                input_ids=ref["input_ids"], attention_mask=ref["attention_mask"], position_ids=ref["position_ids"]
            ).logits
        real = ref["attention_mask"].bool()
        result[name] = float((logits - ref["logits"]).abs()[real].max())
    json.dump({"transformers": transformers.__version__, "max_abs_vs_reference": result}, sys.stdout, indent=2)
    print()


def rlvr_fixture():
    """`qwen2_rlvr/`: a tiny random Qwen2 (tied head, vocab = the `tokenizer/` fixture's 320 ids,
    transformers' own initialisation) with that tokenizer's files, for the end-to-end RLVR run
    `rlvr_demo --model hf:crates/rl-hf/tests/fixtures/qwen2_rlvr` in `make test`."""
    torch.manual_seed(11)
    cfg = Qwen2Config(
        vocab_size=320,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        bos_token_id=None,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    m = Qwen2ForCausalLM(cfg)
    path = save(m, "qwen2_rlvr")
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(OUT, "tokenizer", f), os.path.join(path, f))
    back = Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32)
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        diff = float((m(input_ids=ids).logits - back(input_ids=ids).logits).abs().max())
    return {"parameters": sum(p.numel() for p in m.parameters()), "reload_max_abs": diff}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check-saved":
        check_saved(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "--rlvr":
        print(json.dumps(rlvr_fixture()))
    else:
        main()
