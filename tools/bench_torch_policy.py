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

Each configuration is built once (model, optimizer, policy; --compile: torch.compile'd twins of
torch fp32 and of --compile-presets), its warm-up step (compilation included) timed apart, and
each round times --steps more steps of every configuration in turn.

Usage: python3 tools/bench_torch_policy.py [--rounds 3] [--steps 3] [--hidden 256] [--batch 4] [--presets fp32,bf16-amp,...] [--products]
       [--fplab-products fp32,mxfp8] [--compile inductor [--compile-presets fp32,mxfp8]] [--no-torchao]
       [--casts-as-copies fp8-current,nvfp4] [--optimizer torch|fused]
(--fplab-products: these presets also with apply_policy(..., products="fplab"), the C trainer's
float32 GEMMs, beside the default products="torch")
(default: the eight presets of tools/check_torch_policy.py)
Needs torch, transformers, the fplab package; torchao optional.
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

import fplab
import fplab.torch as ft

try:
    from torchao.prototype.mx_formats.mx_tensor import MXTensor
except ImportError:
    MXTensor = None


def model_of(hidden, seed=0):
    """The benchmark's Llama of width `hidden` (its MLP 11/4 of it, as 704 is of 256)."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=512, hidden_size=hidden, intermediate_size=hidden * 11 // 4, num_hidden_layers=4,
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


class Config:
    """One configuration of the table, built once: its model, optimizer and step; each round
    times `steps` more steps of it (the first call also runs the warm-up step, which compiles
    under --compile and is timed apart)."""

    def __init__(self, setup, hidden, batch, backend=None, T=128, optimizer="torch"):
        self.model = model_of(hidden)
        self.pol = setup(self.model)  # a fplab.torch Policy, or None (plain torch, or torchao's patch)
        ps = self.model.parameters()
        if optimizer == "torch":  # PyTorch's default AdamW on every side
            self.opt = torch.optim.AdamW(ps, lr=1e-4)
        else:  # each side's one-pass AdamW: PyTorch's fused kernel, fplab.torch.AdamW under a policy
            self.opt = torch.optim.AdamW(ps, lr=1e-4, fused=True) if self.pol is None else ft.AdamW(ps, lr=1e-4)
        if self.pol is not None:
            self.opt, self.scaler = ft.PolicyOptimizer(self.opt, self.pol), ft.GradScaler(self.pol)
        self.fwd = torch.compile(self.model, backend=backend) if backend else self.model
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, 512, (batch, T + 1), generator=g)
        self.warm = None

    def step(self):
        ids, pol = self.ids, self.pol
        loss = F.cross_entropy(self.fwd(input_ids=ids[:, :-1]).logits.reshape(-1, 512), ids[:, 1:].reshape(-1))
        if pol is None:
            loss.backward()
            self.opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        self.opt.zero_grad()
        if pol is not None:
            pol.end_step(loss.item())

    def run(self, steps):
        """Seconds per step over `steps` steps (after the warm-up, on the first call)."""
        if self.warm is None:
            t0 = time.perf_counter()
            self.step()
            self.warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        return (time.perf_counter() - t0) / steps

    def close(self):
        if self.pol is not None:
            self.pol.remove()


class _CopiesForCasts:
    """A policy's autocast context whose casts are copies (--casts-as-copies): fprop_input and cast
    copy their input into the output, dgrad_operands and wgrad_operands hand back the operands
    uncast; everything else (telemetry, steps, the update's rounding) is the context's. The step
    then runs fplab.torch's Python, its autograd.Function, its buffers and the same products
    without the library's casts: what the glue costs, apart from what the casts cost. A
    diagnostic only: the numbers it trains are not a policy's."""

    def __init__(self, ctx):
        self._ctx = ctx

    def __getattr__(self, name):
        if name in ("fprop_input", "cast"):
            return lambda out, x, *a, **k: np.copyto(out, x.reshape(out.shape))
        if name in ("dgrad_operands", "wgrad_operands"):
            return lambda *a, **k: (None, None, None)
        return getattr(self._ctx, name)


def casts_as_copies(name):
    """apply_policy(m, name) with the policy's casts replaced by copies (_CopiesForCasts)."""
    def setup(m):
        pol = ft.apply_policy(m, name)
        pol.ctx = _CopiesForCasts(pol.ctx)
        return pol
    return setup


def products(n=512, shapes=((256, 768), (256, 1408), (704, 256), (256, 512))):
    """The float32 products alone at this model's shapes (K, outputs): a Linear's three (forward,
    dgrad, wgrad) through the library, as apply_policy runs them on CPU under products="fplab" (Policy._mm: the C
    trainer's op_matmul_*), against torch.mm's; best of 5 times 5 calls."""
    m = torch.nn.Sequential()
    m.add_module("down_proj", torch.nn.Linear(8, 8, bias=False))
    pol = ft.apply_policy(m, "fp32", products="fplab")
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
    ap.add_argument("--compile", metavar="BACKEND", help="also torch.compile(model, backend=BACKEND) twins of torch fp32 "
                    "and of --compile-presets (inductor; aot_eager)")
    ap.add_argument("--compile-presets", default="fp32,mxfp8", help="presets timed compiled too [%(default)s]")
    ap.add_argument("--no-torchao", action="store_true", help="leave torchao's MX emulation out")
    ap.add_argument("--hidden", type=int, default=256, help="the model's width, a multiple of 64 (the casts' "
                    "share of a step falls as it grows: they scale with the width, the products with its square) "
                    "[%(default)s]")
    ap.add_argument("--batch", type=int, default=4, help="sequences of 128 tokens a step (the weights' casts "
                    "and updates are made once a step, so their share falls as it grows) [%(default)s]")
    ap.add_argument("--fplab-products", default="", help="presets timed with products=\"fplab\" too (the C "
                    "trainer's float32 GEMMs) [none]")
    ap.add_argument("--casts-as-copies", default="", help="presets timed also with their casts replaced by copies "
                    "(a diagnostic: fplab.torch's glue without the library's casts) [none]")
    ap.add_argument("--optimizer", choices=("torch", "fused"), default="torch", help="torch: torch.optim.AdamW's "
                    "default (for-loop) step everywhere; fused: torch.optim.AdamW(fused=True) for plain PyTorch and "
                    "torchao, fplab.torch.AdamW (one pass with the policy's weight side) under fplab [torch]")
    a = ap.parse_args()
    if a.hidden < 64 or a.hidden % 64:
        ap.error(f"--hidden {a.hidden}: expected a positive multiple of 64")
    if a.batch < 1:
        ap.error(f"--batch {a.batch}: expected a positive count of sequences")
    if a.products:
        products()
        return
    configs = {"torch fp32": lambda m: None}
    for p in a.presets.split(","):
        configs[f"fplab {p}"] = (lambda name: (lambda m: ft.apply_policy(m, name)))(p)
    for p in [q for q in a.fplab_products.split(",") if q]:
        configs[f"fplab {p} products=fplab"] = (lambda name: (lambda m: ft.apply_policy(m, name, products="fplab")))(p)
    for p in [q for q in a.casts_as_copies.split(",") if q]:
        configs[f"fplab {p}, casts as copies"] = casts_as_copies(p)
    if MXTensor is not None and not a.no_torchao:
        configs["torchao mxfp8"] = lambda m: torchao_patch(m, torch.float8_e4m3fn)
        configs["torchao mxfp4"] = lambda m: torchao_patch(m, torch.float4_e2m1fn_x2)
    built = {k: Config(setup, a.hidden, a.batch, optimizer=a.optimizer) for k, setup in configs.items()}
    if a.compile:  # the compiled twins of torch fp32 and of the --compile-presets
        for p in ["torch fp32"] + [f"fplab {q}" for q in a.compile_presets.split(",") if q]:
            built[f"{p} compiled"] = Config(configs[p], a.hidden, a.batch, a.compile, optimizer=a.optimizer)
    sec = {k: [] for k in built}
    for r in range(a.rounds):
        # every other round in reverse, so that no configuration always runs furthest from torch fp32
        for k, c in (list(built.items()) if r % 2 == 0 else list(built.items())[::-1]):
            sec[k].append(c.run(a.steps))
        table(a, sec, built, r + 1)  # after every round, so that a run cut short still says something
    for c in built.values():
        c.close()


def _median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def table(a, sec, built, rounds):
    """The medians of each configuration's rounds, and the median of its per-round ratios to torch
    fp32 (paired: a round's configurations run within seconds of each other, so a machine that
    speeds up or slows down between rounds moves both sides of a ratio alike)."""
    med = {k: _median(v) for k, v in sec.items()}
    base = med["torch fp32"]
    paired = {k: _median([t / b for t, b in zip(v, sec["torch fp32"])]) for k, v in sec.items()}
    env = {k: os.environ.get(k, "unset") for k in ("GOMP_SPINCOUNT", "OPENBLAS_CORETYPE", "OMP_NUM_THREADS")}
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, model 4 x {a.hidden} (hidden {a.hidden * 11 // 4}, vocab 512), "
          f"batch {a.batch} x 128 tokens, optimizer {a.optimizer}, {rounds} of {a.rounds} interleaved rounds of {a.steps} steps after one warm-up step; "
          f"medians (paired: of per-round ratios); {' '.join(f'{k}={v}' for k, v in env.items())}; still wanted: "
          f"{fplab.blas_env_wanted() or 'nothing'}; load average now {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"CPU {cpu_name()}")
    print(f"| {'configuration':30s} | {'ms/step':>8s} | {'tokens/s':>8s} | {'x torch fp32':>12s} | {'paired':>6s} "
          f"| {'warm-up s':>9s} |")
    print(f"|{'-' * 32}|{'-' * 9}:|{'-' * 9}:|{'-' * 13}:|{'-' * 7}:|{'-' * 10}:|")
    for k, t in med.items():
        print(f"| {k:30s} | {1e3 * t:8.0f} | {a.batch * 128 / t:8.0f} | {t / base:12.2f} | {paired[k]:6.2f} "
              f"| {built[k].warm:9.1f} |", flush=True)

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"

if __name__ == "__main__":
    main()
