#!/usr/bin/env python3
"""mmasim_fixtures.py: write the tensor-core / matrix-core fixtures that fplab's engines are checked against.

The reference is MMA-Sim (Xie et al., "MMA-Sim: Bit-Accurate Reference Model of Tensor Cores and
Matrix Cores", arXiv 2511.10909; github.com/microsoft/MMA-Sim, MIT). This script does not model
any arithmetic itself: it imports MMA-Sim, draws operands, calls MMA-Sim's instruction models and
records what they return.

For every architecture and instruction MMA-Sim covers (NVIDIA mma for Volta .. RTX Blackwell with
mma_block_scale, Hopper wgmma, Blackwell tcgen05mma and tcgen05mma_block_scale, AMD mfma for CDNA1,
CDNA2, CDNA3) and every qualifier it lists (wgmma/tcgen05: n=8, m=64, block scale m=128), cases
are drawn from these distributions:
  normal, positive, wide, cancel, subnormal, special  (random operands of the input types)
  align     one large term (C or a product) and small products whose lowest bits sit just above,
            at or below the model's truncation point (its n fractional accumulator bits)
  carry     all-ones significands whose aligned sum carries (or borrows) at the normalization
  tie       exact halfway sums for the RNE outputs (f16 D on NVIDIA; every AMD output)
  signzero  zero products / exact cancellations with +-0 in A, B and C
  overflow  terms and C near the largest finite value of the output, with and without overflow
Each case is one output element: the model is called on a tile narrowed to one row and one column
(m = n = 1; every MMA-Sim model computes each D[i][j] from row i of A, column j of B and C[i][j]
alone, and --check re-runs lines through MMA-Sim's own full-tile dotadd to confirm it). Per
qualifier, 8 more cases chain the instruction 4 times along K (D of one call is C of the next).

Output: tests/fixtures/engines/<engine>.txt, one case per line:
  <qualifier> <dist> K=<K> A=<h,..> B=<h,..> C=<h> [SA=<h,..> SB=<h,..>] D=<h>
A and B: the K operand values of the row of A and column of B as float32 bit patterns (float64
for f64 instructions; e2m1 as its float32 value; tf32/xf32 as the float32 given to the model,
which truncates it itself; NaN written as 7fc00000 with its sign). C and D: the D type's native
bits (f16 4 hex digits, f32 8, f64 16); m8n8k4.f32.f16.f16.f16, the one qualifier whose C type
(f16) is not its D type, gets its C widened to f32, exactly as MMA-Sim's mma does first. SA/SB: the scales of that row /
column as float32 bits. Chained lines have K = 4 k.

Usage: nice python3 tools/mmasim_fixtures.py --mmasim DIR [--mmasim-git GITDIR] [--seed N]
           [--cases-per-dist N] [--max-bytes N] [--only ENGINE] [--out DIR] [--check N]
Needs torch (CPU) and numpy, and an MMA-Sim source tree (DIR holds the mmasim package).
Deterministic for a given seed, MMA-Sim and torch: each (engine, qualifier, distribution) has its
own random stream, so --only regenerates exactly the lines of the full run.
"""
import argparse
import datetime
import math
import os
import random
import subprocess
import sys
import time
import traceback
import zlib

import numpy as np

ENGINES = [
    "volta_mma", "turing_mma", "ampere_mma", "ada_mma", "hopper_mma", "hopper_wgmma",
    "blackwell_mma", "blackwell_tcgen05", "rtx-blackwell_mma", "cdna1_mfma", "cdna2_mfma",
    "cdna3_mfma",
]
BASE_DISTS = ["normal", "positive", "wide", "cancel", "subnormal", "special"]
TARGET_DISTS = ["align", "carry", "tie", "signzero", "overflow"]
CHAIN_DISTS = ["normal", "wide", "cancel", "positive", "subnormal", "special", "carry", "align"]
N_CHAIN = 8
CHAIN_CALLS = 4


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Run MMA-Sim on drawn operands and write fplab's engine fixtures "
                    "(tests/fixtures/engines/<engine>.txt).")
    p.add_argument("--mmasim", default=os.environ.get("MMASIM_SRC", ""),
                   help="MMA-Sim source tree (the directory holding the mmasim package); "
                        "default $MMASIM_SRC")
    p.add_argument("--mmasim-git", default="",
                   help="git directory of that MMA-Sim checkout, for the commit in the header "
                        "(default: --mmasim itself if it is a git work tree)")
    p.add_argument("--seed", type=int, default=20251114, help="random seed (default %(default)s)")
    p.add_argument("--cases-per-dist", type=int, default=24,
                   help="most lines per (qualifier, distribution) (default %(default)s); "
                        "fewer are kept where --max-bytes asks for it")
    p.add_argument("--max-bytes", type=int, default=5_600_000,
                   help="size the whole set (all engines) aims at (default %(default)s)")
    p.add_argument("--only", choices=ENGINES, action="append",
                   help="write only this engine's file (repeatable)")
    p.add_argument("--out", default=None,
                   help="output directory (default tests/fixtures/engines of this repository)")
    p.add_argument("--no-pairwise-shim", action="store_true",
                   help="run CDNA1/CDNA2 f16/bf16 mfma without the shim (MMA-Sim's pairwise_dot "
                        "asserts float32 inputs, so those cases fail and are skipped)")
    p.add_argument("--check", type=int, default=0, metavar="N",
                   help="instead of generating, re-run N random lines of the existing files "
                        "through MMA-Sim's full-tile dotadd and compare D")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# formats of the operands (what the cases are drawn from)

class Fmt:
    def __init__(self, name, emin, emax, mbits, maxv, inf, nan, negzero):
        self.name, self.emin, self.emax, self.mbits = name, emin, emax, mbits
        self.maxv, self.inf, self.nan, self.negzero = maxv, inf, nan, negzero


def make_formats(torch):
    return {
        torch.float64: Fmt("f64", -1022, 1023, 52, float(torch.finfo(torch.float64).max), True, True, True),
        torch.float32: Fmt("f32", -126, 127, 23, float(torch.finfo(torch.float32).max), True, True, True),
        torch.float16: Fmt("f16", -14, 15, 10, 65504.0, True, True, True),
        torch.bfloat16: Fmt("bf16", -126, 127, 7, float(torch.finfo(torch.bfloat16).max), True, True, True),
        torch.float8_e4m3fn: Fmt("e4m3", -6, 8, 3, 448.0, False, True, True),
        torch.float8_e5m2: Fmt("e5m2", -14, 15, 2, 57344.0, True, True, True),
        torch.float8_e4m3fnuz: Fmt("fp8", -7, 7, 3, 240.0, False, True, False),
        torch.float8_e5m2fnuz: Fmt("bf8", -15, 15, 2, 57344.0, False, True, False),
        torch.uint8: Fmt("e2m1", 0, 2, 1, 6.0, False, False, True),
    }


E2M1_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


class Ctx:
    """What the generators need to know about one qualifier (all read off the MMA-Sim model)."""

    def __init__(self, torch, fmts, model, qualifier, arch):
        self.torch = torch
        self.model = model
        self.qualifier = qualifier
        self.k = model.k
        self.fa = fmts[model.a_type]
        self.fb = fmts[model.b_type]
        self.fc = fmts[model.c_type]
        self.fd = fmts[model.d_type]
        self.block = hasattr(model, "block_size")
        self.nblk = model.k // model.block_size if self.block else 0
        self.packing = getattr(model, "packing", 1)
        self.s_type = getattr(model, "s_type", None)
        self.s_e8m0 = self.block and self.s_type == torch.float8_e8m0fnu
        self.amd = arch.startswith("CDNA")
        truncated = "tf32" in qualifier or "xf32" in qualifier
        self.ma = 10 if truncated else self.fa.mbits
        self.mb = 10 if truncated else self.fb.mbits
        self.nfrac = getattr(model, "n_accum_fractional_bits", 24)
        self.f16_out = model.d_type == torch.float16
        # RNE-rounded outputs: NVIDIA's f16 D, every AMD D (CDNA3 fused sums round to
        # nearest, CDNA1/2 use fp32 fma/adds)
        self.rne_out = self.f16_out or self.amd
        self.chainable = model.c_type == model.d_type
        # largest product exponent whose k-term sums stay a few binades below D's overflow
        self.top = self.fd.emax - 3 - int(math.ceil(math.log2(self.k + 1)))

    # -- values of a format ----------------------------------------------------------------
    def quant(self, f, x):
        """Representable values of format f near x (float64 in, float64 out), saturating."""
        torch = self.torch
        x = np.asarray(x, dtype=np.float64)
        fin = np.isfinite(x)
        xc = np.where(fin, np.clip(x, -f.maxv, f.maxv), x)
        if f.name == "e2m1":
            mag = np.abs(np.nan_to_num(xc))
            tab = np.array(E2M1_VALUES)
            idx = np.abs(mag[..., None] - tab).argmin(axis=-1)
            return np.copysign(tab[idx], xc)
        if f.name == "f64":
            return xc
        dt = [d for d, ff in FMTS.items() if ff is f][0]
        return torch.tensor(xc, dtype=torch.float64).to(dt).double().numpy()

    def with_exp(self, rng, f, e, n=None, sign=None, frac=None):
        """Values (1+frac) 2^e (e clamped to f's range, subnormals included), rounded to f."""
        lo = f.emin - f.mbits
        e = np.clip(np.asarray(e), lo, f.emax)
        shape = np.shape(e) if n is None else (n,)
        if frac is None:
            frac = rng.random(shape)
        if sign is None:
            sign = rng.choice([-1.0, 1.0], size=shape)
        return self.quant(f, sign * (1.0 + frac) * np.exp2(e.astype(np.float64)))

    def all_ones(self, f, e, sign=1.0):
        return self.quant(f, sign * (2.0 - 2.0 ** -f.mbits) * 2.0 ** max(min(e, f.emax), f.emin))

    def scale_normal(self, rng):
        if not self.block:
            return [], []
        if self.s_e8m0:
            sa = np.exp2(rng.integers(-3, 4, self.nblk).astype(float))
            sb = np.exp2(rng.integers(-3, 4, self.nblk).astype(float))
        else:
            sa = self.quant(FMTS[self.torch.float8_e4m3fn], np.exp2(rng.uniform(-2, 2, self.nblk)))
            sb = self.quant(FMTS[self.torch.float8_e4m3fn], np.exp2(rng.uniform(-2, 2, self.nblk)))
        return list(sa), list(sb)

    def scale_wide(self, rng):
        if not self.block:
            return [], []
        if self.s_e8m0:
            return ([2.0 ** int(v) for v in rng.integers(-127, 128, self.nblk)],
                    [2.0 ** int(v) for v in rng.integers(-127, 128, self.nblk)])
        f = FMTS[self.torch.float8_e4m3fn]
        e = rng.integers(-9, 9, (2, self.nblk))
        return (list(np.abs(self.with_exp(rng, f, e[0]))), list(np.abs(self.with_exp(rng, f, e[1]))))

    def ones_scales(self):
        return [1.0] * self.nblk, [1.0] * self.nblk

    def exp_split(self, rng, t):
        """(ea, eb) normal exponents of A's and B's formats with ea + eb = t where they allow."""
        fa, fb = self.fa, self.fb
        lo = max(fa.emin, t - fb.emax)
        hi = min(fa.emax, t - fb.emin)
        if lo > hi:
            ea = fa.emin if t < fa.emin + fb.emin else fa.emax
        else:
            ea = int(rng.integers(lo, hi + 1))
        return ea, int(np.clip(t - ea, fb.emin, fb.emax))

    def prod_pair(self, rng, t):
        """(a, b) normal values of A's and B's formats with ea + eb = t where the ranges allow."""
        ea, eb = self.exp_split(rng, t)
        return float(self.with_exp(rng, self.fa, ea, 1)[0]), float(self.with_exp(rng, self.fb, eb, 1)[0])

    def prange(self):
        """Range of product exponents ea + eb over normal operands."""
        return self.fa.emin + self.fb.emin, self.fa.emax + self.fb.emax


# ---------------------------------------------------------------------------------------------
# distributions: each returns (a, b, c, sa, sb) for one instruction call on one element

def g_normal(x, rng):
    k = x.k
    a = x.quant(x.fa, rng.standard_normal(k))
    b = x.quant(x.fb, rng.standard_normal(k))
    c = float(x.quant(x.fc, rng.standard_normal(1))[0])
    return a, b, c, *x.scale_normal(rng)


def g_positive(x, rng):
    k = x.k
    a = x.quant(x.fa, np.abs(rng.standard_normal(k)))
    b = x.quant(x.fb, np.abs(rng.standard_normal(k)))
    c = float(x.quant(x.fc, np.abs(rng.standard_normal(1)))[0])
    return a, b, c, *x.scale_normal(rng)


def g_wide(x, rng):
    k = x.k
    fa, fb, fc = x.fa, x.fb, x.fc
    a = x.with_exp(rng, fa, rng.integers(fa.emin - fa.mbits, fa.emax + 1, k))
    b = x.with_exp(rng, fb, rng.integers(fb.emin - fb.mbits, fb.emax + 1, k))
    c = float(x.with_exp(rng, fc, rng.integers(fc.emin - fc.mbits, fc.emax + 1, 1))[0])
    return a, b, c, *x.scale_wide(rng)


def dot_value(a, b, sa, sb, k, nblk):
    p = np.asarray(a) * np.asarray(b)
    if nblk:
        bs = k // nblk
        p = p * np.repeat(np.asarray(sa) * np.asarray(sb), bs)
    return float(p.sum())


def g_cancel(x, rng):
    k = x.k
    a = x.quant(x.fa, rng.standard_normal(k))
    b = x.quant(x.fb, rng.standard_normal(k))
    sa, sb = x.scale_normal(rng)
    c = float(x.quant(x.fc, rng.standard_normal(1))[0])
    v = rng.integers(0, 4)
    if v == 0 and k >= 2:
        # pairs of products that cancel exactly or to an operand ulp
        for t in range(0, k - 1, 2):
            a[t + 1] = -a[t]
            b[t + 1] = b[t]
            if rng.random() < 0.5:
                b[t + 1] = x.quant(x.fb, b[t] * (1 + rng.choice([-1, 1]) * 2.0 ** -x.mb))
        c = float(x.quant(x.fc, rng.standard_normal(1) * 2.0 ** -int(rng.integers(0, 12)))[0])
    elif v == 1:
        # C cancels the sum of the products (to C's rounding)
        c = float(x.quant(x.fc, [-dot_value(a, b, sa, sb, k, x.nblk)])[0])
    elif v == 2:
        # large C against small products
        s = int(rng.integers(4, x.nfrac + 6))
        c = float(x.with_exp(rng, x.fc, s, 1)[0])
    else:
        # large products that cancel against a small C, or each other
        t_hi = min(x.prange()[1], x.top)
        for t in range(k):
            a[t], b[t] = x.prod_pair(rng, t_hi - int(rng.integers(0, 3)))
        if k >= 2:
            a[1] = -a[0]
            b[1] = b[0]
        c = float(x.with_exp(rng, x.fc, int(rng.integers(-6, 6)), 1)[0])
    return a, b, c, sa, sb


def g_subnormal(x, rng):
    k = x.k
    fa, fb, fc = x.fa, x.fb, x.fc
    a = x.with_exp(rng, fa, rng.integers(fa.emin - fa.mbits, fa.emin + 2, k))
    b = x.with_exp(rng, fb, rng.integers(fb.emin - fb.mbits, fb.emin + 2, k))
    if rng.random() < 0.5:
        # products that land near C's smallest normal where the formats allow it
        for t in range(k):
            if rng.random() < 0.7:
                tgt = fc.emin + int(rng.integers(-fc.mbits - 2, 3))
                eb = int(np.clip(tgt - fa.emin, fb.emin - fb.mbits, fb.emax))
                b[t] = x.with_exp(rng, fb, eb, 1)[0]
    z = rng.random(k) < 0.1
    a[z] = 0.0
    c = float(x.with_exp(rng, fc, int(rng.integers(fc.emin - fc.mbits, fc.emin + 2)), 1)[0])
    if x.block:
        sa, sb = x.scale_normal(rng)
        if x.s_e8m0 and rng.random() < 0.5:
            sa = [2.0 ** int(v) for v in rng.integers(-127, -120, x.nblk)]
    else:
        sa, sb = [], []
    return a, b, c, sa, sb


def specials_of(f):
    out = [0.0]
    if f.negzero:
        out.append(-0.0)
    if f.inf:
        out += [math.inf, -math.inf]
    if f.nan:
        out.append(math.nan)
    return out


def g_special(x, rng):
    a, b, c, sa, sb = g_normal(x, rng)
    a = np.array(a)
    b = np.array(b)
    n_inject = int(rng.integers(1, 3))
    for _ in range(n_inject):
        where = rng.choice(["A", "B", "C", "AB", "S"] if x.block else ["A", "B", "C", "AB"])
        t = int(rng.integers(0, x.k))
        if where == "A":
            a[t] = rng.choice(specials_of(x.fa))
        elif where == "B":
            b[t] = rng.choice(specials_of(x.fb))
        elif where == "C":
            c = float(rng.choice(specials_of(x.fc)))
        elif where == "AB":
            # inf (or the largest value) times zero, in either order
            big_a = math.inf if x.fa.inf else x.fa.maxv
            big_b = math.inf if x.fb.inf else x.fb.maxv
            if rng.random() < 0.5:
                a[t], b[t] = big_a * rng.choice([-1, 1]), 0.0
            else:
                a[t], b[t] = 0.0, big_b * rng.choice([-1, 1])
        else:
            i = int(rng.integers(0, x.nblk))
            v = rng.random()
            if v < 0.6:
                val = math.nan
            elif x.s_e8m0:
                val = 2.0 ** int(rng.choice([-127, 127]))
            else:
                val = float(rng.choice([0.0, 448.0]))
            if rng.random() < 0.5:
                sa[i] = val
            else:
                sb[i] = val
    return a, b, c, sa, sb


def g_align(x, rng):
    """One big term, small products around the truncation point n = model's fractional bits."""
    k, n = x.k, x.nfrac
    fbits = x.ma + x.mb
    sa, sb = x.ones_scales()
    a = np.zeros(k)
    b = np.zeros(k)
    lo, hi = x.prange()

    def shift():
        if rng.random() < 0.5:
            return n - fbits + int(rng.integers(-2, 3))   # lowest product bit around bit n
        return n + int(rng.integers(-1, 2))                # whole product around bit n
    # keep the sums finite: the big term stays a few binades below the output's overflow
    top = x.top
    s = max(shift(), 1)
    tb_hi = min(hi, top)
    if rng.random() < 0.5 or tb_hi < lo + s:
        t_hi = max(lo, min(hi, x.fc.emax - s - 2, top - s))
        t = int(rng.integers(lo, t_hi + 1))
        for i in range(k):
            if rng.random() < 0.8:
                a[i], b[i] = x.prod_pair(rng, t - int(rng.integers(0, 2)))
        c = float(x.with_exp(rng, x.fc, t + s, 1)[0])
    else:
        tb = int(rng.integers(lo + s, tb_hi + 1))
        a[0], b[0] = x.prod_pair(rng, tb)
        for i in range(1, k):
            if rng.random() < 0.8:
                a[i], b[i] = x.prod_pair(rng, tb - s - int(rng.integers(0, 2)))
        c = 0.0 if rng.random() < 0.3 else float(x.with_exp(rng, x.fc, tb - s - 1, 1)[0])
    if x.block and x.nblk > 1 and rng.random() < 0.5:
        # the big term in one block, the others scaled down around the truncation point
        s = max(shift(), 1)
        if x.s_e8m0:
            sa = [1.0] + [2.0 ** -min(s, 120)] * (x.nblk - 1)
        else:
            sa = [1.0] + [2.0 ** -min(s, 9)] * (x.nblk - 1)
            sb = [1.0] + [2.0 ** -max(0, min(s - 9, 9))] * (x.nblk - 1)
    perm = rng.permutation(k) if not x.block else np.arange(k)
    return a[perm], b[perm], c, sa, sb


def g_carry(x, rng):
    """All-ones significands whose aligned sum crosses a power of two (or falls below one)."""
    k, n = x.k, x.nfrac
    sa, sb = x.ones_scales()
    fa, fb, fc = x.fa, x.fb, x.fc
    lo, hi = x.prange()
    a = np.zeros(k)
    b = np.zeros(k)
    sgn = float(rng.choice([-1.0, 1.0]))
    hi = max(lo, min(hi, x.top - 2))
    v = rng.integers(0, 3)
    if v == 0:
        # C all ones, small same-sign products push it over 2^(ec+1)
        s = int(rng.integers(1, n + 3))
        t = int(rng.integers(lo, max(lo, min(hi, fc.emax - s)) + 1))
        c = float(x.all_ones(fc, t + s, sgn))
        for i in range(int(rng.integers(1, k + 1))):
            ea, eb = x.exp_split(rng, t - int(rng.integers(0, 2)))
            a[i] = x.all_ones(fa, ea, sgn)
            b[i] = x.all_ones(fb, eb)
    elif v == 1:
        # k same-sign products with all-ones significands, equal exponents: multi-bit carries
        ea, eb = x.exp_split(rng, int(rng.integers(lo, hi + 1)))
        for i in range(k):
            a[i] = x.all_ones(fa, ea, sgn)
            b[i] = x.all_ones(fb, eb)
        c = 0.0 if rng.random() < 0.5 else float(x.all_ones(fc, ea + eb + 2, sgn))
    else:
        # C a power of two, products of the other sign just below: the sum loses its top bit
        t = int(rng.integers(lo, hi + 1))
        s = int(rng.integers(0, n + 2))
        c = float(x.quant(fc, [sgn * 2.0 ** min(max(t + s, fc.emin), fc.emax)])[0])
        for i in range(int(rng.integers(1, k + 1))):
            a[i], b[i] = x.prod_pair(rng, t)
            a[i] = abs(a[i]) * -sgn
            b[i] = abs(b[i])
    perm = rng.permutation(k)
    return a[perm], b[perm], c, sa, sb


def g_tie(x, rng):
    """C plus products summing exactly to half an ulp of the output format."""
    k = x.k
    fo = x.fd
    sa, sb = x.ones_scales()
    a = np.zeros(k)
    b = np.zeros(k)
    lo, hi = x.prange()
    fc = x.fc
    # exponent of the output value: its half ulp 2^(ex - m - 1) must be a product
    for _ in range(50):
        ex = int(rng.integers(max(fo.emin, fc.emin), min(fo.emax, fc.emax) + 1))
        h = ex - fo.mbits - 1
        if lo <= h <= hi or (lo <= h - 1 <= hi):
            break
    xs = float(rng.choice([-1.0, 1.0]))
    frac = rng.integers(0, 2 ** min(fo.mbits, 50)) / 2.0 ** min(fo.mbits, 50)
    c = float(x.quant(fc, [xs * (1 + frac) * 2.0 ** ex])[0])
    hs = xs if rng.random() < 0.5 else -xs

    def pow2_pair(t):
        ea = int(np.clip(t // 2, x.fa.emin, x.fa.emax))
        eb = t - ea
        if eb > x.fb.emax:
            ea, eb = t - x.fb.emax, x.fb.emax
        if eb < x.fb.emin:
            ea, eb = t - x.fb.emin, x.fb.emin
        return 2.0 ** ea, 2.0 ** eb
    if rng.random() < 0.5 or k < 2 or not (lo <= h - 1 <= hi):
        a[0], b[0] = pow2_pair(h)
        a[0] *= hs
    else:
        for i in (0, 1):
            a[i], b[i] = pow2_pair(h - 1)
            a[i] *= hs
    # other products cancel exactly in pairs
    for i in range(2, k - 1, 2):
        if rng.random() < 0.5:
            a[i] = float(x.quant(x.fa, rng.standard_normal(1))[0])
            b[i] = float(x.quant(x.fb, rng.standard_normal(1))[0])
            a[i + 1], b[i + 1] = -a[i], b[i]
    a = x.quant(x.fa, a)
    b = x.quant(x.fb, b)
    perm = np.arange(k) if x.block else rng.permutation(k)
    return a[perm], b[perm], c, sa, sb


def g_signzero(x, rng):
    k = x.k
    sa, sb = x.scale_normal(rng)
    za = [0.0, -0.0] if x.fa.negzero else [0.0]
    zb = [0.0, -0.0] if x.fb.negzero else [0.0]
    zc = [0.0, -0.0]
    a = x.quant(x.fa, rng.standard_normal(k))
    b = x.quant(x.fb, rng.standard_normal(k))
    v = rng.integers(0, 3)
    if v == 0:
        # every product is a signed zero
        for i in range(k):
            if rng.random() < 0.5:
                a[i] = rng.choice(za)
            else:
                b[i] = rng.choice(zb)
        c = float(rng.choice(zc))
    elif v == 1 and k >= 2:
        # products cancel exactly in pairs, C is a signed zero
        for i in range(0, k - 1, 2):
            a[i + 1], b[i + 1] = -a[i], b[i]
        if k % 2:
            a[k - 1] = rng.choice(za)
        c = float(rng.choice(zc))
    else:
        # C cancels one product exactly, the others are zero
        for i in range(1, k):
            a[i] = rng.choice(za)
        sa, sb = x.ones_scales()
        c = float(x.quant(x.fc, [-a[0] * b[0]])[0])
        if c != -a[0] * b[0]:
            a[0], c = 0.0, float(rng.choice(zc))
    return a, b, c, sa, sb


def g_overflow(x, rng):
    k = x.k
    fo, fc = x.fd, x.fc
    sa, sb = x.ones_scales()
    a = np.zeros(k)
    b = np.zeros(k)
    sgn = float(rng.choice([-1.0, 1.0]))
    lo, hi = x.prange()
    v = rng.integers(0, 3)
    if v == 0:
        # products near the largest operands, same sign
        for i in range(k):
            if rng.random() < 0.7:
                a[i] = x.quant(x.fa, [sgn * x.fa.maxv * (1 - 0.25 * rng.random())])[0]
                b[i] = x.quant(x.fb, [x.fb.maxv * (1 - 0.25 * rng.random())])[0]
        c = float(x.quant(fc, [sgn * fc.maxv * rng.random()])[0])
    elif v == 1:
        # C at (or near) the output's largest value, small same-sign products around its ulp
        c = float(x.quant(fc, [sgn * min(fo.maxv, fc.maxv) * (1 - 2.0 ** -int(rng.integers(1, 30)))])[0])
        t = min(fo.emax - fo.mbits - 1 + int(rng.integers(-2, 3)), hi)
        for i in range(int(rng.integers(1, k + 1))):
            a[i], b[i] = x.prod_pair(rng, t)
            a[i] = abs(a[i]) * sgn
            b[i] = abs(b[i])
    else:
        # large products of both signs that partly cancel, C large
        t = min(hi, fo.emax + int(rng.integers(-2, 2)))
        for i in range(k):
            a[i], b[i] = x.prod_pair(rng, t - int(rng.integers(0, 2)))
        c = float(x.quant(fc, [sgn * fc.maxv * (1 - rng.random() * 0.5)])[0])
    if x.block:
        if x.s_e8m0:
            e = int(rng.integers(100, 128))
            sa = [2.0 ** e] * x.nblk
            sb = [2.0 ** int(rng.integers(0, 128 - e + 10))] * x.nblk
        else:
            sa = [448.0] * x.nblk
            sb = [float(rng.choice([1.0, 448.0]))] * x.nblk
    return a, b, c, sa, sb


GENERATORS = {
    "normal": g_normal, "positive": g_positive, "wide": g_wide, "cancel": g_cancel,
    "subnormal": g_subnormal, "special": g_special, "align": g_align, "carry": g_carry,
    "tie": g_tie, "signzero": g_signzero, "overflow": g_overflow,
}


def dists_for(x):
    out = list(BASE_DISTS)
    for d in TARGET_DISTS:
        if d == "tie" and not x.rne_out:
            continue
        out.append(d)
    return out


# ---------------------------------------------------------------------------------------------
# calling MMA-Sim and writing the lines

def bits_hex(torch, t, width):
    """Hex of the native bits of a one-element tensor t (width 16, 32 or 64)."""
    if width == 16:
        v = int(t.view(torch.int16).item()) & 0xFFFF
        return "%04x" % v
    if width == 32:
        v = int(t.view(torch.int32).item()) & 0xFFFFFFFF
        return "%08x" % v
    v = int(t.view(torch.int64).item()) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % v


def f32_hex(v):
    v = float(v)
    if v != v:
        return "ffc00000" if math.copysign(1.0, v) < 0 else "7fc00000"
    return "%08x" % int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def f64_hex(v):
    v = float(v)
    if v != v:
        return "fff8000000000000" if math.copysign(1.0, v) < 0 else "7ff8000000000000"
    return "%016x" % int(np.array([v], dtype=np.float64).view(np.uint64)[0])


def native_width(torch, dt):
    return {torch.float16: 16, torch.float32: 32, torch.float64: 64}[dt]


def e2m1_code(v):
    code = E2M1_VALUES.index(abs(v))
    return code | (8 if math.copysign(1.0, v) < 0 else 0)


class Runner:
    def __init__(self, torch, model, x):
        self.torch = torch
        self.model = model
        self.x = x

    def operand(self, vals, dt, f, rows):
        torch = self.torch
        k = len(vals)
        if f.name == "e2m1":
            codes = [e2m1_code(float(v)) for v in vals]
            if self.x.packing == 2:
                codes = [codes[i] | (codes[i + 1] << 4) for i in range(0, k, 2)]
            t = torch.tensor(codes, dtype=torch.uint8)
            n = len(codes)
        else:
            t = torch.tensor(np.asarray(vals, dtype=np.float64), dtype=torch.float64).to(dt)
            n = k
        return t.reshape(1, n) if rows else t.reshape(n, 1)

    def call(self, a, b, c_t, sa, sb):
        """One instruction call on a 1 x 1 tile; returns D as a 1 x 1 tensor of the D type."""
        torch, m = self.torch, self.model
        A = self.operand(a, m.a_type, self.x.fa, True)
        B = self.operand(b, m.b_type, self.x.fb, False)
        if self.x.block:
            SA = torch.tensor(np.asarray(sa, dtype=np.float64), dtype=torch.float64).to(m.s_type).reshape(1, -1)
            SB = torch.tensor(np.asarray(sb, dtype=np.float64), dtype=torch.float64).to(m.s_type).reshape(-1, 1)
            return m(A, B, c_t.clone(), SA, SB)
        return m(A, B, c_t.clone())

    def c_tensor(self, c):
        torch = self.torch
        dt = self.model.c_type
        if c != c:
            w = native_width(torch, dt)
            sign = math.copysign(1.0, c) < 0
            if w == 16:
                return torch.tensor([[0xFE00 if sign else 0x7E00]], dtype=torch.int32).to(torch.int16).view(torch.float16)
            if w == 32:
                return torch.tensor([[-4194304 if sign else 0x7FC00000]], dtype=torch.int32).view(torch.float32)
            return torch.tensor([[(-(1 << 51)) if sign else 0x7FF8000000000000]], dtype=torch.int64).view(torch.float64)
        return torch.tensor([[c]], dtype=torch.float64).to(dt)

    def op_hex(self, vals, dt, f):
        torch = self.torch
        if f.name == "f64":
            return ",".join(f64_hex(v) for v in vals)
        if f.name == "e2m1":
            return ",".join(f32_hex(v) for v in vals)
        t = torch.tensor(np.asarray(vals, dtype=np.float64), dtype=torch.float64).to(dt).float()
        return ",".join(f32_hex(v) for v in t.tolist())

    def scale_hex(self, vals):
        torch = self.torch
        t = torch.tensor(np.asarray(vals, dtype=np.float64), dtype=torch.float64).to(self.model.s_type).float()
        return ",".join(f32_hex(v) for v in t.tolist())

    def line(self, dist, chunks, c):
        """chunks: list of (a, b, sa, sb) per call; the calls chain D -> C."""
        torch, m, x = self.torch, self.model, self.x
        c0 = self.c_tensor(c)
        ct = c0
        for (a, b, sa, sb) in chunks:
            d = self.call(a, b, ct, sa, sb)
            ct = d.reshape(1, 1)
        a_all = np.concatenate([ch[0] for ch in chunks])
        b_all = np.concatenate([ch[1] for ch in chunks])
        fields = [x.qualifier, dist, "K=%d" % len(a_all),
                  "A=" + self.op_hex(a_all, m.a_type, x.fa),
                  "B=" + self.op_hex(b_all, m.b_type, x.fb),
                  # C in the D type: the one C type that differs (f16 C of an f32 mma) widens
                  # exactly, and MMA-Sim's mma converts C to the D type first
                  "C=" + bits_hex(torch, c0.reshape(()).to(m.d_type), native_width(torch, m.d_type))]
        if x.block:
            fields.append("SA=" + self.scale_hex(sum((list(ch[2]) for ch in chunks), [])))
            fields.append("SB=" + self.scale_hex(sum((list(ch[3]) for ch in chunks), [])))
        fields.append("D=" + bits_hex(torch, ct.reshape(()), native_width(torch, m.d_type)))
        return " ".join(fields)


# ---------------------------------------------------------------------------------------------
# the instruction list (read off MMA-Sim's ISA modules)

def instruction_list(torch):
    from mmasim.isa.nv_ptx import nv_mma
    from mmasim.isa import amd as amd_isa
    from mmasim.simulator import nv_ptx, amd

    def dedup(qs):
        seen, out = set(), []
        for q in qs:
            if q not in seen:
                seen.add(q)
                out.append(q)
        return out

    nv_arch = {"volta_mma": "Volta", "turing_mma": "Turing", "ampere_mma": "Ampere",
               "ada_mma": "Ada Lovelace", "hopper_mma": "Hopper", "blackwell_mma": "Blackwell",
               "rtx-blackwell_mma": "RTX Blackwell"}
    out = {}
    for eng, arch in nv_arch.items():
        items = [("mma", nv_ptx.mma, arch, q) for q in dedup(nv_mma.arch_mma_qualifiers[arch])]
        items += [("mma_block_scale", nv_ptx.mma_block_scale, arch, q)
                  for q in dedup(nv_mma.arch_mma_block_scale_qualifiers.get(arch, []))]
        out[eng] = items
    wg = ["m64n8k8.f32.tf32.tf32", "m64n8k16.f32.f16.f16", "m64n8k16.f16.f16.f16",
          "m64n8k16.f32.bf16.bf16"]
    wg += ["m64n8k32.%s.%s.%s" % (d, a, b) for d in ("f32", "f16") for a in ("e5m2", "e4m3")
           for b in ("e5m2", "e4m3")]
    out["hopper_wgmma"] = [("wgmma", nv_ptx.wgmma, "Hopper", q) for q in wg]
    f8f6f4 = ("e5m2", "e4m3", "e2m1")
    tc = ["m64n8k8.f32.tf32.tf32"]
    tc += ["m64n8k16.f32.%s.%s" % (a, b) for a in ("f16", "bf16") for b in ("f16", "bf16")]
    tc += ["m64n8k16.f16.f16.f16"]
    tc += ["m64n8k32.%s.%s.%s" % (d, a, b) for d in ("f32", "f16") for a in f8f6f4 for b in f8f6f4]
    tcbs = ["m128n8k32.block32.f32.%s.%s.ue8m0" % (a, b) for a in f8f6f4 for b in f8f6f4]
    tcbs += ["m128n8k64.block32.f32.e2m1.e2m1.ue8m0", "m128n8k64.block16.f32.e2m1.e2m1.ue8m0",
             "m128n8k64.block16.f32.e2m1.e2m1.ue4m3"]
    out["blackwell_tcgen05"] = ([("tcgen05mma", nv_ptx.tcgen05mma, "Blackwell", q) for q in tc]
                                + [("tcgen05mma_block_scale", nv_ptx.tcgen05mma_block_scale,
                                    "Blackwell", q) for q in tcbs])
    for eng, arch in (("cdna1_mfma", "CDNA1"), ("cdna2_mfma", "CDNA2"), ("cdna3_mfma", "CDNA3")):
        out[eng] = [("mfma", amd.mfma, arch, q) for q in dedup(amd_isa.arch_mfma_qualifiers[arch])]
    return out


def install_pairwise_shim(torch):
    """MMA-Sim's pairwise_dot (CDNA1/CDNA2 f16/bf16) asserts float32 inputs while mfma passes the
    f16/bf16 operands; cast them to float32 (exact) before calling the original."""
    import mmasim.simulator.amd as amd_sim
    orig = amd_sim.pairwise_dot

    def pairwise_dot(a, b, flush_denormal=False):
        if a.dtype in (torch.float16, torch.bfloat16):
            a = a.float()
        if b.dtype in (torch.float16, torch.bfloat16):
            b = b.float()
        return orig(a, b, flush_denormal)
    amd_sim.pairwise_dot = pairwise_dot


def line_bytes(x, kk):
    w = 17 if x.fa.name == "f64" else 9
    n = len(x.qualifier) + 12 + 2 * kk * w + 12 + 2 * native_width(x.torch, x.model.d_type) // 4
    if x.block:
        n += 2 * (kk // x.model.block_size) * 9 + 8
    return n


def stream(seed, *names):
    h = zlib.crc32("|".join(names).encode())
    return np.random.default_rng([seed, h])


def last_line(exc):
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def setup(torch, insts, seed):
    """Models, contexts and a probe call (one normal case) for every qualifier of every engine."""
    out = {}
    for eng in ENGINES:
        for fam, cls, arch, q in insts[eng]:
            model = cls(arch, q)
            model.m, model.n = 1, 1      # one element per call; see the module comment
            x = Ctx(torch, FMTS, model, q, arch)
            run = Runner(torch, model, x)
            a, b, c, sa, sb = g_normal(x, stream(seed, eng, q, "probe"))
            try:
                run.line("normal", [(a, b, sa, sb)], c)
                probe = None
            except Exception as e:
                probe = last_line(e)
            out[(eng, q)] = (fam, x, run, probe)
    return out


def cases_per_dist(setups, cap, max_bytes):
    """Lines per distribution for each qualifier: the same byte budget for every qualifier MMA-Sim
    runs (what small ones leave at --cases-per-dist goes to the others), at least 3."""
    info = {}
    for key, (fam, x, run, probe) in setups.items():
        if probe is not None:
            continue
        nd = len(dists_for(x))
        chain = N_CHAIN * line_bytes(x, CHAIN_CALLS * x.k) if x.chainable else 0
        info[key] = (nd * line_bytes(x, x.k), chain)

    def n_for(b, per, chain):
        return max(3, min(cap, int((b - chain) // per)))

    def total(b):
        return sum(n_for(b, per, ch) * per + ch for per, ch in info.values())
    lo, hi = 0.0, float(max_bytes)
    for _ in range(60):
        mid = (lo + hi) / 2
        if total(mid) > max_bytes:
            hi = mid
        else:
            lo = mid
    return {key: n_for(lo, per, ch) for key, (per, ch) in info.items()}


def generate(args, torch):
    global FMTS
    FMTS = make_formats(torch)
    insts = instruction_list(torch)
    engines = args.only or ENGINES
    out_dir = args.out
    os.makedirs(out_dir, exist_ok=True)
    commit = mmasim_commit(args)
    t_all = time.time()
    setups = setup(torch, insts, args.seed)
    n_of = cases_per_dist(setups, args.cases_per_dist, args.max_bytes)
    failures = []
    for eng in engines:
        t_eng = time.time()
        body = []
        counts = []
        for fam, cls, arch, q in insts[eng]:
            fam, x, run, probe = setups[(eng, q)]
            dists = dists_for(x)
            # a qualifier whose probe case raises is not run by MMA-Sim (e2m1 operands of
            # k=32 instructions: its arithmetic gets the uint8 codes); cases that would pass its
            # inf/NaN early return are not trusted either: try 3 per distribution, write none
            n_per = 3 if probe is not None else n_of[(eng, q)]
            n_lines = 0
            n_chain = 0
            n_dropped = 0
            fails = {}

            def attempt(dist, chunks, c, label):
                nonlocal n_lines, n_dropped
                try:
                    ln = run.line(dist, chunks, c)
                except Exception as e:  # MMA-Sim raised: skip, count, report
                    key = (label, last_line(e))
                    fails[key] = fails.get(key, 0) + 1
                    return False
                if probe is not None:
                    n_dropped += 1
                    return False
                body.append(ln)
                n_lines += 1
                return True
            for dist in dists:
                rng = stream(args.seed, eng, q, dist)
                for _ in range(n_per):
                    a, b, c, sa, sb = GENERATORS[dist](x, rng)
                    attempt(dist, [(a, b, sa, sb)], c, dist)
            if x.chainable:
                for i, dist in enumerate(CHAIN_DISTS[:N_CHAIN]):
                    rng = stream(args.seed, eng, q, "chain", dist, str(i))
                    chunks = []
                    c0 = None
                    for r in range(CHAIN_CALLS):
                        a, b, c, sa, sb = GENERATORS[dist](x, rng)
                        chunks.append((a, b, sa, sb))
                        if r == 0:
                            c0 = c
                    if attempt(dist, chunks, c0, "chain-" + dist):
                        n_chain += 1
            n_fail = sum(fails.values())
            counts.append((fam, q, n_lines, n_per, n_fail, fails, n_chain, n_dropped))
            for (dist, msg), n in sorted(fails.items()):
                failures.append((eng, q, dist, n, msg))
            print("[%6.0fs] %-18s %-45s %4d lines (%d per dist)%s%s" % (
                time.time() - t_all, eng, q, n_lines, n_per,
                "  %d cases raised in MMA-Sim" % n_fail if n_fail else "",
                "  %d dropped" % n_dropped if n_dropped else ""), file=sys.stderr, flush=True)
        write_engine(args, torch, out_dir, eng, insts[eng], counts, body, commit)
        print("%s: %d lines in %.0fs" % (eng, len(body), time.time() - t_eng), file=sys.stderr, flush=True)
    print("done in %.0fs" % (time.time() - t_all), file=sys.stderr)
    if failures:
        print("MMA-Sim failures (cases skipped):", file=sys.stderr)
        summary = {}
        for eng, q, dist, n, msg in failures:
            summary.setdefault((eng, q, msg), 0)
            summary[(eng, q, msg)] += n
        for (eng, q, msg), n in summary.items():
            print("  %s %s: %d cases: %s" % (eng, q, n, msg), file=sys.stderr)
    return 0


def mmasim_commit(args):
    gitdir = args.mmasim_git or args.mmasim
    try:
        return subprocess.run(["git", "-C", gitdir, "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_engine(args, torch, out_dir, eng, insts, counts, body, commit):
    cmd = "nice python3 tools/mmasim_fixtures.py " + " ".join(
        a for a in sys.argv[1:])
    head = ["# fplab engine fixtures v1",
            "# command: " + cmd,
            "# mmasim: microsoft/MMA-Sim commit " + commit,
            "# torch: " + torch.__version__,
            "# seed: %d" % args.seed,
            "# date: " + datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "# engine: %s (%s)" % (eng, ", ".join(sorted({"%s %s" % (f, a) for f, _, a, _ in insts}))),
            "# format: <qualifier> <dist> K=<K> A=<h,..> B=<h,..> C=<h> [SA=<h,..> SB=<h,..>] D=<h>;"
            " A, B, SA, SB float32 bits (f64 instructions: float64); C and D in the D type;"
            " lines with K = 4k chain 4 calls (D -> C)"]
    if eng in ("cdna1_mfma", "cdna2_mfma") and not args.no_pairwise_shim:
        head.append("# note: f16/bf16 mfma ran with MMA-Sim's pairwise_dot given float32 copies of"
                    " the operands (exact; it asserts float32 and mfma passes f16/bf16)")
    fam_tot = {}
    for fam, q, n, n_per, n_fail, fails, n_chain, n_dropped in counts:
        fam_tot[fam] = fam_tot.get(fam, 0) + n
    for fam, n in fam_tot.items():
        head.append("# family %s: %d lines" % (fam, n))
    for fam, q, n, n_per, n_fail, fails, n_chain, n_dropped in counts:
        s = "# lines %s %s: %d (%d per distribution, %d chained)" % (
            fam, q, n, n_per, n_chain)
        if n_fail:
            by_msg = {}
            for (d, m), cnt in sorted(fails.items()):
                by_msg.setdefault(m, []).append("%s %d" % (d, cnt))
            s += "; %d cases skipped, MMA-Sim raised: %s" % (n_fail, " | ".join(
                "%s (%s)" % (m, ", ".join(ds)) for m, ds in by_msg.items()))
        if n_dropped:
            s += "; %d cases that returned were dropped too (the qualifier fails)" % n_dropped
        head.append(s)
    path = os.path.join(out_dir, eng + ".txt")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(head + body) + "\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# --check: an independent reader that re-runs lines through MMA-Sim's full-tile dotadd

def check(args, torch):
    from mmasim.simulator import nv_ptx, amd  # noqa: F401
    insts = instruction_list(torch)
    by_q = {}
    for eng in ENGINES:
        for fam, cls, arch, q in insts[eng]:
            by_q[(eng, q)] = (cls, arch)
    lines = []
    for eng in args.only or ENGINES:
        path = os.path.join(args.out, eng + ".txt")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for ln in f:
                if not ln.startswith("#") and ln.strip():
                    lines.append((eng, ln.split()))
    rnd = random.Random(args.seed)
    pick = rnd.sample(lines, min(args.check, len(lines)))
    bad = 0
    for eng, fld in pick:
        q, dist = fld[0], fld[1]
        kv = dict(f.split("=", 1) for f in fld[2:])
        cls, arch = by_q[(eng, q)]
        model = cls(arch, q)

        def vals(h):
            out = []
            for s in h.split(","):
                if len(s) == 16:
                    out.append(float(np.array([int(s, 16)], dtype=np.uint64).view(np.float64)[0]))
                else:
                    out.append(float(np.array([int(s, 16)], dtype=np.uint32).view(np.float32)[0]))
            return out

        def from_bits(h, dt):
            w = len(h) * 4
            iv = int(h, 16)
            if w == 16:
                return torch.tensor([iv], dtype=torch.int32).to(torch.int16).view(torch.float16)[0].item()
            if w == 32:
                return float(np.array([iv], dtype=np.uint32).view(np.float32)[0])
            return float(np.array([iv], dtype=np.uint64).view(np.float64)[0])
        K = int(kv["K"])
        a, b = vals(kv["A"]), vals(kv["B"])
        c = from_bits(kv["C"], model.c_type)
        calls = K // model.k
        sa = vals(kv["SA"]) if "SA" in kv else None
        sb = vals(kv["SB"]) if "SB" in kv else None
        nb = model.k // model.block_size if sa is not None else 0
        for r in range(calls):
            ar, br = a[r * model.k:(r + 1) * model.k], b[r * model.k:(r + 1) * model.k]
            if sa is not None:
                c = model.dotadd_with_block_scale(ar, br, c, sa[r * nb:(r + 1) * nb], sb[r * nb:(r + 1) * nb])
            else:
                c = model.dotadd(ar, br, c)
        want = from_bits(kv["D"], model.d_type)
        got_t = torch.tensor([c], dtype=torch.float64).to(model.d_type)
        same = (c != c and want != want) or (
            (c == want) and math.copysign(1, c) == math.copysign(1, want))
        print("%s %-8s %-45s %-9s K=%-3d D=%s full-tile dotadd=%s" % (
            "ok " if same else "BAD", eng, q, dist, K, kv["D"],
            bits_hex(torch, got_t[0], native_width(torch, model.d_type))), flush=True)
        bad += not same
    print("%d of %d lines differ" % (bad, len(pick)))
    return 1 if bad else 0


FMTS = {}


def main(argv):
    args = parse_args(argv)
    if not args.mmasim or not os.path.isdir(os.path.join(args.mmasim, "mmasim")):
        sys.exit("mmasim_fixtures: --mmasim DIR must hold MMA-Sim's mmasim package "
                 "(git clone https://github.com/microsoft/MMA-Sim)")
    if args.out is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        args.out = os.path.join(root, "tests", "fixtures", "engines")
    sys.path.insert(0, os.path.abspath(args.mmasim))
    import torch
    torch.set_num_threads(1)
    if not args.no_pairwise_shim:
        install_pairwise_shim(torch)
    if args.check:
        global FMTS
        FMTS = make_formats(torch)
        return check(args, torch)
    return generate(args, torch)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
