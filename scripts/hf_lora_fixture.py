#!/usr/bin/env python3
"""LoRA adapters in PEFT's layout, with reference outputs, for `crates/rl-hf/tests/lora.rs`.

Run from the repository root with the provisioned venv after `scripts/hf_fixtures.py` has
written the base models (transformers 5.23.0, peft 0.21.2, torch 2.11.0):

    ~/.cache/frugal-rl/venv/bin/pip install peft==0.21.2
    OMP_NUM_THREADS=1 ~/.cache/frugal-rl/venv/bin/python scripts/hf_lora_fixture.py

For each case, writes `crates/rl-hf/tests/fixtures/<case>/`:

- `adapter_config.json` and `adapter_model.safetensors` as PEFT's `save_pretrained` writes them,
- `reference.safetensors`: `logits` [B, T, V] f32 of the adapted model on `hf_fixtures.batch()`,
  `merged_logits` (after `merge_and_unload`), and for the loss of `hf_fixtures.gradients`
  (tokens from position 4; `coef` and `start` saved too) the gradient of every LoRA matrix (`grad.<PEFT name>`; the base
  weights are frozen, as PEFT freezes them).

Cases: `lora_qwen2` (on `qwen2_untied`: r 4, alpha 8, every projection of attention and MLP),
`lora_qwen3_rslora` (on `qwen3`: r 2, alpha 3, `use_rslora`, q_proj and v_proj only).

`--check-saved DIR` instead loads each adapter rl-hf's `save_adapter` wrote under DIR (one
folder per base fixture; `RL_HF_KEEP_SAVED_LORA=DIR cargo test -p rl-hf --test lora`) with
PEFT's `PeftModel.from_pretrained` onto its base and prints the max abs difference of its
logits to the ones rl-hf computed (real positions only).

The adapters start from `init_lora_weights=False` and are then set to seeded random values, so
B is not zero and the adapters change the logits. No hub access.
"""

import json
import os
import shutil
import sys

import peft
import torch
import transformers
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_fixtures import OUT, batch  # noqa: E402

CASES = [
    dict(name="lora_qwen2", base="qwen2_untied", r=4, alpha=8, rslora=False,
         targets=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], seed=7),
    dict(name="lora_qwen3_rslora", base="qwen3", r=2, alpha=3, rslora=True, targets=["q_proj", "v_proj"], seed=8),
]


def loss_of(model, start=4):
    """The loss of `hf_fixtures.gradients` (same coefficients, same masking)."""
    ids, mask, pos = batch()
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float()
    logp_all = torch.log_softmax(logits[:, start - 1 : -1], dim=-1)
    lp = logp_all.gather(-1, ids[:, start:, None]).squeeze(-1)
    ent = -(logp_all.exp() * logp_all).sum(-1)
    m = (mask[:, start:] * mask[:, start - 1 : -1]).float()
    coef = torch.randn(lp.shape, generator=torch.Generator().manual_seed(99))
    return (coef * lp * m).sum() + 0.1 * (ent * m).sum(), logits, coef


def make(case):
    base_dir = os.path.join(OUT, case["base"])
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    cfg = LoraConfig(
        r=case["r"],
        lora_alpha=case["alpha"],
        lora_dropout=0.0,
        target_modules=case["targets"],
        use_rslora=case["rslora"],
        init_lora_weights=False,
        bias="none",
        task_type="CAUSAL_LM",
    )
    pm = get_peft_model(model, cfg)
    g = torch.Generator().manual_seed(case["seed"])
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    pm.eval()
    out = os.path.join(OUT, case["name"])
    shutil.rmtree(out, ignore_errors=True)
    pm.save_pretrained(out)
    # The adapter records where its base lives; point it at the fixture, relative to the adapter.
    cfg_path = os.path.join(out, "adapter_config.json")
    with open(cfg_path) as f:
        acfg = json.load(f)
    acfg["base_model_name_or_path"] = "../" + case["base"]
    with open(cfg_path, "w") as f:
        json.dump(acfg, f, indent=2, sort_keys=True)
    readme = os.path.join(out, "README.md")
    if os.path.exists(readme):
        os.remove(readme)

    pm.zero_grad()
    loss, logits, coef = loss_of(pm)
    loss.backward()
    ref = {"logits": logits.detach().contiguous(), "coef": coef.contiguous(), "start": torch.tensor([4])}
    for name, p in pm.named_parameters():
        if p.requires_grad:
            # PEFT's in-memory name carries the adapter name (".default"); the file does not.
            ref["grad." + name.replace(".default", "")] = p.grad.detach().contiguous()
    merged = pm.merge_and_unload()
    ids, mask, pos = batch()
    with torch.no_grad():
        ref["merged_logits"] = merged(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float().contiguous()
    save_file(ref, os.path.join(out, "reference.safetensors"))
    diff = float((ref["merged_logits"] - ref["logits"]).abs().max())
    return {"lora_vs_merged_max_abs": diff, "loss": float(loss)}


def check_saved(root):
    from peft import PeftModel
    from safetensors.torch import load_file

    result = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        base = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(OUT, name), dtype=torch.float32)
        model = PeftModel.from_pretrained(base, path).eval()
        ref = load_file(os.path.join(path, "rl_hf_logits.safetensors"))
        pos = ref["attention_mask"].cumsum(-1) - 1
        pos = pos.masked_fill(ref["attention_mask"] == 0, 1)
        with torch.no_grad():
            logits = model(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"], position_ids=pos).logits
        real = ref["attention_mask"].bool()
        result[name] = float((logits - ref["logits"]).abs()[real].max())
    print(json.dumps({"peft": peft.__version__, "max_abs_vs_rl_hf": result}, indent=2))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check-saved":
        return check_saved(sys.argv[2])
    torch.manual_seed(0)
    report = {"transformers": transformers.__version__, "peft": peft.__version__, "torch": torch.__version__}
    for case in CASES:
        report[case["name"]] = make(case)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
