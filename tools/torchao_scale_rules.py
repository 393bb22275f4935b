#!/usr/bin/env python3
"""Writes tests/fixtures/torchao_scale_rules.txt: MX blocks quantized by torchao's own to_mx
(torchao.prototype.mx_formats.mx_tensor.to_mx, eager, CPU) under each of its four
ScaleCalculationMode rules, for tests/test_scale_rules.c, which quantizes the same blocks with
fplab's matching rules (FLOOR = :ocp, RCEIL = :rceil, CEIL = :ceil, EVEN = :even) and compares
scales and element values bit for bit. Run by `make check-torchao` with a Python that has torch
and torchao, e.g.

    make check-torchao TORCHAO_PYTHON=/path/to/venv/bin/python

The blocks (32 float32 values each) are built per element format to sit on each rule's edges:
amax exactly max_elem * 2^k and 2^k, one float32 ulp either side; amax whose significand rounds
up to the next power of two at the element's precision (the midpoint 2 - 2^-(mbits+1), and one
ulp either side); all-zero blocks; tiny amax near e8m0's bottom (scale codes 0 and 1: float32
subnormals and amax = max_elem * 2^-127 +- ulp, where the float32 quotient amax / max_elem is
subnormal) and huge ones near FLT_MAX; then random blocks (log-uniform amax, seeded). The other
31 values of a block are random multiples of amax, with some on midpoints of the element grid.

Lines (hex fields are the bits, lower case):
    # comments
    B ELEM X0...X31 floor=SS:CC.. rceil=SS:CC.. ceil=SS:CC.. even=SS:CC..
ELEM is fplab's element name (e4m3, e5m2, e3m2, e2m3, e2m1); X0..X31 are the float32 inputs as
8 hex digits each, concatenated; SS is the e8m0 scale code to_mx returned; CC.. are the 32
element codes (2 hex digits each) in the OCP encoding (sign in the top bit of the element's
width), which this script checks against torchao's own decoders before writing them.
"""
import math
import random
import struct
import sys

import torch
from torchao.prototype.mx_formats import constants as C
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.kernels import (
    f4_unpacked_to_f32,
    f6_e2m3_unpacked_to_f32,
    f6_e3m2_unpacked_to_f32,
    unpack_uint4,
)
from torchao.prototype.mx_formats.mx_tensor import to_mx

BLOCK = 32
MODES = [("floor", ScaleCalculationMode.FLOOR), ("rceil", ScaleCalculationMode.RCEIL),
         ("ceil", ScaleCalculationMode.CEIL), ("even", ScaleCalculationMode.EVEN)]
# fplab name: (torchao dtype, bits, exponent bits, mantissa bits, max, emax)
ELEMS = {
    "e4m3": (torch.float8_e4m3fn, 8, 4, 3, 448.0, 8),
    "e5m2": (torch.float8_e5m2, 8, 5, 2, 57344.0, 15),
    "e3m2": (C.DTYPE_FP6_E3M2, 6, 3, 2, 28.0, 4),
    "e2m3": (C.DTYPE_FP6_E2M3, 6, 2, 3, 7.5, 2),
    "e2m1": (torch.float4_e2m1fn_x2, 4, 2, 1, 6.0, 2),
}
FLT_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def step(x, n):
    """x moved by n float32 ulps (x > 0 finite)."""
    return from_bits(bits(f32(x)) + n)


def decode_std(code, nbits, ebits, mbits):
    """The OCP encoding: sign in bit nbits-1, then exponent, then mantissa; no inf or NaN below
    8 bits; e4m3fn's 0x7f/0xff and e5m2's top exponent are NaN/inf (the blocks never hit them)."""
    sign = -1.0 if code >> (nbits - 1) & 1 else 1.0
    e = code >> mbits & ((1 << ebits) - 1)
    m = code & ((1 << mbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    if e == 0:
        return sign * math.ldexp(m, 1 - bias - mbits)
    return sign * math.ldexp((1 << mbits) + m, e - bias - mbits)


def element_codes(name, data_lp):
    """to_mx's element tensor as a list of codes, and torchao's decoding of them."""
    dtype = ELEMS[name][0]
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return data_lp.view(torch.uint8).flatten().tolist(), data_lp.float().flatten().tolist()
    if dtype == torch.float4_e2m1fn_x2:
        codes = unpack_uint4(data_lp.view(torch.uint8).contiguous())
        return codes.flatten().tolist(), f4_unpacked_to_f32(codes).flatten().tolist()
    dec = f6_e3m2_unpacked_to_f32 if dtype == C.DTYPE_FP6_E3M2 else f6_e2m3_unpacked_to_f32
    return data_lp.flatten().tolist(), dec(data_lp).flatten().tolist()


def grid(name):
    """The element format's non-negative finite values, ascending."""
    _, nbits, ebits, mbits, mx, _ = ELEMS[name]
    vals = {decode_std(c, nbits, ebits, mbits) for c in range(1 << (nbits - 1))}
    return sorted(v for v in vals if not math.isnan(v) and v <= mx)


def block_around(rng, amax, name, ties):
    """32 values with largest magnitude amax (at a random position): the rest random multiples
    of it, some (ties) on midpoints of the element grid relative to amax."""
    g = grid(name)
    mx = ELEMS[name][4]
    xs = []
    for i in range(BLOCK - 1):
        if ties and i % 3 == 0:
            j = rng.randrange(len(g) - 1)
            v = amax * ((g[j] + g[j + 1]) / 2) / mx
        else:
            v = amax * rng.random()
        xs.append(f32(v if rng.random() < 0.5 else -v))
    xs.insert(rng.randrange(BLOCK), f32(amax if rng.random() < 0.5 else -amax))
    return xs


def edge_amaxes(name):
    """amax values on the rules' edges for element format name."""
    _, _, _, mbits, mx, emax = ELEMS[name]
    out = []
    for k in (-100, -20, 0, 1, 20, 100):
        for base in (mx * 2.0 ** k, 2.0 ** (k + emax)):
            b = f32(base)
            out += [b, step(b, 1), step(b, -1)]
        # significand at the element's rounding midpoint just below 2: EVEN rounds it up a binade
        mid = f32((2.0 - 2.0 ** -(mbits + 1)) * 2.0 ** (k + emax))
        out += [mid, step(mid, -1), step(mid, 1)]
    # e8m0's bottom: subnormal amax, and amax / max_elem at and around 2^-127 (a float32
    # subnormal quotient, which rounds onto 2^-127 from one ulp above)
    b = f32(mx * 2.0 ** -127)
    out += [b, step(b, 1), step(b, 2), step(b, -1), f32(mx * 2.0 ** -126), step(f32(mx * 2.0 ** -126), 1)]
    out += [from_bits(1), from_bits(0x7FFFFF), f32(2.0 ** -126), f32(2.0 ** -130), f32(2.0 ** -119)]
    # the top: FLT_MAX (EVEN rounds it to 2^128), and around 2^127
    out += [FLT_MAX, step(FLT_MAX, -1), f32(2.0 ** 127), step(f32(2.0 ** 127), 1), f32(1.5 * 2.0 ** 127)]
    return out


def blocks_for(name, rng, nrandom):
    bl = [[0.0] * BLOCK, [(-0.0 if i % 3 == 0 else 0.0) for i in range(BLOCK)]]
    for a in edge_amaxes(name):
        bl.append(block_around(rng, a, name, ties=True))
    for _ in range(nrandom):
        a = f32(math.ldexp(1.0 + rng.random(), rng.randrange(-30, 31)))
        bl.append(block_around(rng, a, name, ties=rng.random() < 0.5))
    return bl


def main(out_path):
    from importlib.metadata import version
    rng = random.Random(20260122)
    lines = [f"# MX blocks from torchao {version('torchao')} (torch {torch.__version__}), to_mx eager on "
             f"the CPU, by tools/torchao_scale_rules.py",
             "# B ELEM X0..X31 floor=SCALE:CODES rceil=... ceil=... even=... (see the script)"]
    counts = {}
    for name, (dtype, nbits, ebits, mbits, _, _) in ELEMS.items():
        blocks = blocks_for(name, rng, 24)
        x = torch.tensor(blocks, dtype=torch.float32)  # one row per block: to_mx blocks the last dim
        fields = [["B", name, "".join(f"{bits(v):08x}" for v in b)] for b in blocks]
        for mode_name, mode in MODES:
            scale, data = to_mx(x, dtype, BLOCK, mode)
            scale = scale.view(torch.uint8).flatten().tolist()
            codes, decoded = element_codes(name, data)
            assert len(scale) == len(blocks) and len(codes) == BLOCK * len(blocks)
            for c, d in zip(codes, decoded):  # the codes are the OCP encoding torchao decodes
                std = decode_std(c, nbits, ebits, mbits)
                assert std == d and math.copysign(1, std) == math.copysign(1, d), (name, c, std, d)
            for i, f in enumerate(fields):
                f.append(f"{mode_name}={scale[i]:02x}:" + "".join(f"{c:02x}" for c in codes[i * BLOCK:(i + 1) * BLOCK]))
        lines += [" ".join(f) for f in fields]
        counts[name] = len(blocks)
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    import os
    os.replace(tmp, out_path)
    print(f"{out_path}: " + ", ".join(f"{n} {k} blocks" for n, k in counts.items()))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/torchao_scale_rules.txt")
