"""Golden fixture for `aigb::diffusion::TemporalUnet`: runs the AIGB baseline's `TemporalUnet`
(alimama-tech/NeurIPS_Auto_Bidding_AIGB_Track_Baseline, bidding_train_env/baseline/dd/DFUSER.py,
Apache-2.0) from a local copy that is never committed, and records its weights, inputs and
outputs (conditioned and with the condition dropped) as safetensors.

    git -C <mirror> show HEAD:bidding_train_env/baseline/dd/DFUSER.py > /tmp/dfuser/DFUSER.py
    ~/.cache/frugal-rl/venv/bin/python scripts/aigb_unet_fixture.py --dfuser /tmp/dfuser \
        --out crates/aigb/tests/fixtures/dfuser_unet.safetensors

Needs torch, einops and safetensors in the venv.
"""
import argparse
import sys

import torch
from safetensors.torch import save_file

ap = argparse.ArgumentParser()
ap.add_argument("--dfuser", required=True, help="folder holding DFUSER.py")
ap.add_argument("--out", required=True)
args = ap.parse_args()
sys.path.insert(0, args.dfuser)
from DFUSER import TemporalUnet  # noqa: E402

torch.manual_seed(0)
H, C, DIM = 16, 16, 8
net = TemporalUnet(horizon=H, transition_dim=C, cond_dim=1, dim=DIM, dim_mults=(1, 2), returns_condition=True)
net.eval()
x = torch.randn(3, H, C)
t = torch.tensor([0.0, 4.0, 9.0])
returns = torch.tensor([[0.3], [1.0], [-2.0]])
with torch.no_grad():
    cond = net(x, None, t, returns, use_dropout=False)
    uncond = net(x, None, t, returns, use_dropout=False, force_dropout=True)
tensors = {f"unet.{k}": v.contiguous() for k, v in net.state_dict().items()}
tensors.update({"io.x": x, "io.t": t, "io.returns": returns, "io.cond": cond.contiguous(), "io.uncond": uncond.contiguous()})
save_file(tensors, args.out)
print(f"{sum(p.numel() for p in net.parameters())} parameters -> {args.out}")
