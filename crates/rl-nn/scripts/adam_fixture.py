"""Records torch.optim.Adam / AdamW trajectories for rl-nn's optimiser test.

Run from the repository root with the provisioned venv:

    ~/.cache/frugal-rl/venv/bin/python crates/rl-nn/scripts/adam_fixture.py

It writes crates/rl-nn/tests/fixtures/adam_torch.json: for each configuration, the initial
parameters (two float32 tensors), the gradient fed at every step (set directly as `.grad`),
and the parameters after every step. The Rust test (tests/adam_torch.rs) replays the same
gradients through rl_nn::optim::Adam and compares.
"""
import json
import os

import torch

STEPS = 6
CONFIGS = [
    {"name": "adam", "lr": 1e-2},
    {"name": "adam_l2", "lr": 1e-2, "weight_decay": 0.1},
    {"name": "adamw", "lr": 1e-2, "weight_decay": 0.1, "decoupled_weight_decay": True},
    {"name": "amsgrad", "lr": 5e-2, "amsgrad": True, "beta1": 0.8, "beta2": 0.9},
    {"name": "adam_clip", "lr": 1e-2, "max_grad_norm": 0.5, "eps": 1e-6},
]


def run(cfg):
    g = torch.Generator().manual_seed(1234)
    params = [
        torch.randn(3, 4, generator=g, dtype=torch.float32).requires_grad_(True),
        torch.randn(5, generator=g, dtype=torch.float32).requires_grad_(True),
    ]
    init = [p.detach().clone() for p in params]
    kwargs = dict(
        lr=cfg["lr"],
        betas=(cfg.get("beta1", 0.9), cfg.get("beta2", 0.999)),
        eps=cfg.get("eps", 1e-8),
        weight_decay=cfg.get("weight_decay", 0.0),
        amsgrad=cfg.get("amsgrad", False),
        foreach=False,
    )
    opt = (torch.optim.AdamW if cfg.get("decoupled_weight_decay") else torch.optim.Adam)(params, **kwargs)
    grads, after = [], []
    for step in range(STEPS):
        # gradients of varying scale (some steps get clipped, some do not)
        scale = 0.3 if step % 2 == 0 else 2.0
        gs = [torch.randn(p.shape, generator=g, dtype=torch.float32) * scale for p in params]
        for p, gr in zip(params, gs):
            p.grad = gr.clone()
        if cfg.get("max_grad_norm") is not None:
            torch.nn.utils.clip_grad_norm_(params, cfg["max_grad_norm"])
        opt.step()
        grads.append([gr.flatten().tolist() for gr in gs])
        after.append([p.detach().flatten().tolist() for p in params])
    return {
        "config": cfg,
        "shapes": [list(p.shape) for p in params],
        "init": [p.flatten().tolist() for p in init],
        "grads": grads,
        "after": after,
    }


def main():
    out = {"torch_version": torch.__version__, "steps": STEPS, "cases": [run(c) for c in CONFIGS]}
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "adam_torch.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
