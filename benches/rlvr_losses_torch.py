"""PyTorch side of `benches/rlvr_losses.rs`: forward + backward of the same losses, written the
way verl/TRL write them (autograd through the per-token loss, masked aggregation, the same
metrics: clip fractions, ppo_kl, ratio mean), at [64, 512] and [512, 4096], fp32, CPU.

    ~/.cache/frugal-rl/venv/bin/python benches/rlvr_losses_torch.py [--threads N]

Prints the median time per call (ms) per loss and size, and the bandwidth of a 256 MiB copy.
The thread count defaults to the number of cores, which is what tch uses.
"""
import argparse
import os
import time

import torch


def masked_mean(x, m):
    return (x * m).sum() / m.sum()


def token_mean(l, m):
    return (l * m).sum() / m.sum()


def seq_mean_token_mean(l, m):
    return ((l * m).sum(-1) / m.sum(-1).clamp(min=1)).mean()


def seq_mean_token_sum(l, m):
    return (l * m).sum() / (m.sum(-1) > 0).sum()


def ppo(logp, old, adv, m, groups, el=0.2, eh=0.2, c=3.0):
    a = adv.unsqueeze(1)
    nkl = torch.clamp(logp - old, -20.0, 20.0)
    r = torch.exp(nkl)
    l1 = -a * r
    l2 = -a * torch.clamp(r, 1 - el, 1 + eh)
    lc = torch.maximum(l1, l2)
    l3 = -a * c
    ld = torch.minimum(l3, lc)
    pg = torch.where(a < 0, ld, lc)
    with torch.no_grad():
        metrics = [
            masked_mean((l2 > l1).float(), m),
            masked_mean(((lc > l3) & (a < 0)).float(), m),
            masked_mean(((r > 1 + eh) & (a > 0)).float(), m),
            masked_mean(((r < 1 - el) & (a < 0)).float(), m),
            masked_mean(-nkl, m),
            masked_mean(r, m),
        ]
    return token_mean(pg, m), metrics


def gspo(logp, old, adv, m, groups, el=3e-4, eh=4e-4):
    a = adv.unsqueeze(1)
    d = logp - old
    seq = (d * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)
    ls = torch.clamp(logp - logp.detach() + seq.detach(), max=10.0)
    s = torch.exp(ls)
    l1 = -a * s
    l2 = -a * torch.clamp(s, 1 - el, 1 + eh)
    with torch.no_grad():
        metrics = [masked_mean((l2 > l1).float(), m), masked_mean(-d, m), masked_mean(s, m)]
    return seq_mean_token_mean(torch.maximum(l1, l2), m), metrics


def cispo(logp, old, adv, m, groups, el=0.2, eh=0.2):
    a = adv.unsqueeze(1)
    nkl = torch.clamp(logp - old, -20.0, 20.0)
    r = torch.exp(nkl)
    w = torch.clamp(r, 1 - el, 1 + eh).detach()
    with torch.no_grad():
        metrics = [masked_mean((r != w).float(), m), masked_mean(-nkl, m), masked_mean(r, m)]
    return token_mean(-w * a * logp, m), metrics


def sapo(logp, old, adv, m, groups, tp=1.0, tn=1.05):
    a = adv.unsqueeze(1)
    nkl = torch.clamp(logp - old, -20.0, 20.0)
    r = torch.exp(nkl)
    tau = torch.where(a > 0, tp, tn)
    gate = torch.sigmoid(tau * (r - 1)) * 4 / tau
    with torch.no_grad():
        metrics = [masked_mean(-nkl, m), masked_mean(r, m)]
    return seq_mean_token_mean(-gate * a, m), metrics


def reinforce(logp, old, adv, m, groups):
    a = adv.unsqueeze(1)
    with torch.no_grad():
        nkl = logp - old
        metrics = [masked_mean(-nkl, m), masked_mean(torch.exp(nkl.clamp(-20, 20)), m)]
    return token_mean(-a * logp, m), metrics


def gmpo(logp, old, adv, m, groups, el=0.4, eh=0.4):
    a = adv.unsqueeze(1)
    d = logp - old
    sgn = torch.sign(a)
    dc = torch.clamp(d, -el, eh)
    dmin = sgn * torch.minimum(sgn * d, sgn * dc)
    n = m.sum(-1).clamp(min=1)
    ratio = torch.exp(torch.clamp((dmin * m).sum(-1) / n, -20, 20))
    with torch.no_grad():
        metrics = [masked_mean((d != dmin).float(), m), masked_mean(-d, m), ratio.mean()]
    return (-adv * ratio).mean(), metrics


def lpo(logp, old, adv, m, groups, reverse, eps=0.2):
    g, k = groups
    d = logp - old
    dc = torch.clamp(d, torch.log(torch.tensor(1 - eps)).item(), torch.log(torch.tensor(1 + eps)).item())
    with torch.no_grad():
        s = (d.double() * m).sum(-1).view(g, k)
        phi = adv.double().view(g, k)
        logp_l = torch.log_softmax(s, -1)
        logw = torch.log_softmax(phi, -1)
        p = logp_l.exp()
        if reverse:
            dd = logp_l - logw
            c = p * (dd - (p * dd).sum(-1, keepdim=True))
        else:
            c = p - logw.exp()
        kc = (c * k).view(-1, 1).float()
        metrics = [masked_mean((d != dc).float(), m), masked_mean(-d, m), c.abs().sum(-1).mean()]
    return seq_mean_token_sum(kc * dc, m), metrics


LOSSES = [
    ("ppo", ppo),
    ("gspo", gspo),
    ("cispo", cispo),
    ("sapo", sapo),
    ("reinforce", reinforce),
    ("gmpo", gmpo),
    ("lpo_fwd", lambda *x: lpo(*x, reverse=False)),
    ("lpo_rev", lambda *x: lpo(*x, reverse=True)),
]


def bench(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    for b, t in [(64, 512), (512, 4096)]:
        torch.manual_seed(0)
        old = torch.randn(b, t) * 0.5 - 2.0
        logp = (old + torch.randn(b, t) * 0.1).requires_grad_(True)
        adv = torch.randn(b)
        lens = torch.randint(t // 4, t + 1, (b, 1))
        m = (torch.arange(t).unsqueeze(0) < lens).float()
        groups = (b // 8, 8)
        reps = 200 if b == 64 else 20
        for name, f in LOSSES:

            def step():
                loss, metrics = f(logp, old, adv, m, groups)
                [x.item() for x in metrics]  # metrics are read back, as verl's .item()
                (g,) = torch.autograd.grad(loss, logp)
                return g

            ms = bench(step, reps) * 1e3
            print(f"{b}x{t} {name:<10} {ms:9.3f} ms")
    n = 64 * 1024 * 1024
    src = torch.ones(n)
    dst = torch.zeros(n)
    s = bench(lambda: dst.copy_(src), 10)
    print(f"copy 256 MiB: {s * 1e3:.2f} ms -> {2 * 4 * n / s / 1e9:.2f} GB/s (read + write)")


if __name__ == "__main__":
    main()
