#!/usr/bin/env python3
"""bench_torch_policy.py: what fplab.torch.apply_policy costs on CPU: ms per training step (and
tokens/s) of a small Hugging Face Llama under each preset, in the loop of docs/torch.md
(apply_policy, GradScaler, PolicyOptimizer over AdamW, end_step), against plain PyTorch float32
(AdamW) on the same model and batch, and, where torchao is installed, against torchao's MX fake
quantization (MXTensor.to_mx(...).dequantize on the same six operands of each Linear as fplab's
mxfp8/mxfp4: x and W along K in forward, dy and W in dgrad, dy and x in wgrad) in a custom
autograd Function. Run it with the environment fplab.blas_env_wanted() names (GOMP_SPINCOUNT=1000:
libgomp's threads otherwise spin after each of fplab's parallel regions, taking the cores from
PyTorch's own pool). A benchmark, never a test: it prints a table, rounds interleaved (every
configuration once per round) so that a shared machine disturbs them alike; the ratios are the
result.

Usage: python3 tools/bench_torch_policy.py [--rounds 3] [--steps 3] [--presets fp32,bf16-amp,...] [--products]
(default: the eight presets of tools/check_torch_policy.py)
Needs torch, transformers, the fplab package; torchao optional.
"""
import argparse
import os
import time

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

import fplab
import fplab.torch as ft

try:
    from torchao.prototype.mx_formats.mx_tensor import MXTensor
except ImportError:
    MXTensor = None


def model_of(seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256)
    cfg._attn_implementation = "eager"
    return LlamaForCausalLM(cfg).float().train()


class _AoMX(torch.autograd.Function):
    """torchao's MX fake quantization of a Linear's operands along each product's K."""

    @staticmethod
    def forward(ctx, x, w, dt):
        def q(t, dim):  # blocks of 32 along dim
            t = t.transpose(-1, dim).contiguous() if dim != -1 else t.contiguous()
            v = MXTensor.to_mx(t, dt, 32).dequantize(torch.float32)
            return v.transpose(-1, dim) if dim != -1 else v
        x2 = x.reshape(-1, x.shape[-1])
        ctx.save_for_backward(x2, w)
        ctx.dt, ctx.q, ctx.shape = dt, q, x.shape
        return (q(x2, -1) @ q(w, -1).t()).reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, g):
        x2, w = ctx.saved_tensors
        q = ctx.q
        g2 = g.reshape(-1, g.shape[-1])
        dx = q(g2, -1) @ q(w, 0)
        dw = q(g2, 0).t() @ q(x2, 0)
        return dx.reshape(ctx.shape), dw, None


def torchao_patch(model, dt):
    for _, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            m.forward = (lambda mod: (lambda x: _AoMX.apply(x, mod.weight, dt)))(m)


def run(setup, steps, B=4, T=128):
    """Seconds per step: one warm-up step, then `steps` timed ones."""
    model = model_of()
    pol = setup(model)  # a fplab.torch Policy, or None (plain torch, or torchao's patch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if pol is not None:
        opt, scaler = ft.PolicyOptimizer(opt, pol), ft.GradScaler(pol)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 512, (B, T + 1), generator=g)

    def step():
        loss = F.cross_entropy(model(input_ids=ids[:, :-1]).logits.reshape(-1, 512), ids[:, 1:].reshape(-1))
        if pol is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        opt.zero_grad()
        if pol is not None:
            pol.end_step(loss)

    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = time.perf_counter() - t0
    if pol is not None:
        pol.remove()
    return dt / steps


def products(n=512, shapes=((256, 768), (256, 1408), (704, 256), (256, 512))):
    """The float32 products alone at this model's shapes (K, outputs): a Linear's three (forward,
    dgrad, wgrad) through the library, as apply_policy runs them on CPU (Policy._mm: the C
    trainer's op_matmul_*), against torch.mm's; best of 5 times 5 calls."""
    m = torch.nn.Sequential()
    m.add_module("down_proj", torch.nn.Linear(8, 8, bias=False))
    pol = ft.apply_policy(m, "fp32")
    g = torch.Generator().manual_seed(0)
    for ic, oc in shapes:
        a, w, dy = (torch.randn(r, c, generator=g) for r, c in ((n, ic), (oc, ic), (n, oc)))
        fns = {"library": lambda: [pol._mm(p, x, y, n, ic, oc) for p, x, y in ((0, a, w), (1, dy, w), (2, dy, a))],
               "torch.mm": lambda: (a @ w.t(), dy @ w, dy.t() @ a)}
        gf = {}
        for name, f in fns.items():
            f()
            best = min(_timed(f, 5) for _ in range(5))
            gf[name] = 3 * 2 * n * ic * oc / best / 1e9
        print(f"N {n}, K {ic}, outputs {oc}: library {gf['library']:.0f} GFLOP/s, torch.mm {gf['torch.mm']:.0f}")
    pol.remove()


def _timed(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        f()
    return (time.perf_counter() - t0) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--presets", default="fp32,bf16-amp,fp16-amp,pure-bf16-sr,fp8-delayed,mxfp8,mxfp4,nvfp4")
    ap.add_argument("--products", action="store_true", help="only the float32 products: library against torch.mm")
    a = ap.parse_args()
    if a.products:
        products()
        return
    configs = {"torch fp32": lambda m: None}
    for p in a.presets.split(","):
        configs[f"fplab {p}"] = (lambda name: (lambda m: ft.apply_policy(m, name)))(p)
    if MXTensor is not None:
        configs["torchao mxfp8"] = lambda m: torchao_patch(m, torch.float8_e4m3fn)
        configs["torchao mxfp4"] = lambda m: torchao_patch(m, torch.float4_e2m1fn_x2)
    sec = {k: [] for k in configs}
    for _ in range(a.rounds):
        for k, setup in configs.items():
            sec[k].append(run(setup, a.steps))
    med = {k: sorted(v)[len(v) // 2] for k, v in sec.items()}
    base = med["torch fp32"]
    env = {k: os.environ.get(k, "unset") for k in ("GOMP_SPINCOUNT", "OPENBLAS_CORETYPE")}
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, model 4 x 256 (hidden 704, vocab 512), "
          f"batch 4 x 128 tokens, {a.rounds} interleaved rounds of {a.steps} steps; medians; "
          f"{' '.join(f'{k}={v}' for k, v in env.items())}; still wanted: {fplab.blas_env_wanted() or 'nothing'}")
    print(f"| {'configuration':20s} | {'ms/step':>8s} | {'tokens/s':>8s} | {'x torch fp32':>12s} |")
    print(f"|{'-' * 22}|{'-' * 9}:|{'-' * 9}:|{'-' * 13}:|")
    for k, t in med.items():
        print(f"| {k:20s} | {1e3 * t:8.0f} | {512 / t:8.0f} | {t / base:12.2f} |")


if __name__ == "__main__":
    main()
