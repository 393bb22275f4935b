#!/usr/bin/env python3
"""check_peers.py: write the ml_dtypes fixtures that tests/test_peers.c compares fplab against.

For each format ml_dtypes (and NumPy, for float16) implements, a few thousand boundary-rich
float32 inputs are cast with numpy's astype, and each line of tests/fixtures/ml_dtypes_<format>.txt
holds `<input float32 bits, hex> <ml_dtypes code, hex>`. The inputs are built in bit space: every
value of the format (a sample of them for the 16-bit formats), every midpoint between neighbours,
one float32 ulp either side of both, the overflow threshold, zeros, infinities, NaNs, tiny and
huge values, sign-flipped copies and seeded random bits. ml_dtypes' finfo goes to
tests/fixtures/ml_dtypes_finfo.txt as `<format> <field> <value as a hex float>`.

Usage: python3 tools/check_peers.py [FPLAB_BINARY]   (the binary is accepted and not used yet:
the comparison itself is tests/test_peers.c, run by `make test`). Needs numpy and ml_dtypes.
Deterministic: a fixed seed, so regenerating with the same ml_dtypes gives the same files.
"""
import os
import sys

import numpy as np

try:
    import ml_dtypes
except ImportError:
    sys.exit("check_peers: ml_dtypes is not installed; run: pip install ml_dtypes numpy")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures")
SEED = 20240601

# (ml_dtypes name, dtype, bits, fraction bits). The names are aliases fplab's table accepts.
FORMATS = [
    ("float8_e4m3fn", ml_dtypes.float8_e4m3fn, 8, 3),
    ("float8_e5m2", ml_dtypes.float8_e5m2, 8, 2),
    ("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 8, 3),
    ("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 8, 2),
    ("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, 8, 0),
    ("float6_e3m2fn", ml_dtypes.float6_e3m2fn, 6, 2),
    ("float6_e2m3fn", ml_dtypes.float6_e2m3fn, 6, 3),
    ("float4_e2m1fn", ml_dtypes.float4_e2m1fn, 4, 1),
    ("bfloat16", ml_dtypes.bfloat16, 16, 7),
    ("float16", np.float16, 16, 10),
]


def f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def bits32(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def all_values(dt, bits):
    """Every code of the format and its value as float32 (ml_dtypes decodes)."""
    codes = np.arange(1 << bits, dtype=np.uint8 if bits <= 8 else np.uint16)
    return codes, codes.view(dt).astype(np.float32)


def anchors(vals, bits, rng):
    """Sorted positive finite values (0 included) to build inputs around; all of them for 8 bits
    and fewer, for 16 bits the first and last 64 (subnormals, max), the binades around 1 and a
    random sample."""
    v = np.unique(vals[np.isfinite(vals) & (vals >= 0)].astype(np.float64))
    if bits <= 8:
        return v, np.arange(len(v))
    idx = set(range(64)) | set(range(len(v) - 64, len(v)))
    one = int(np.searchsorted(v, 1.0))
    idx |= set(range(max(one - 64, 0), min(one + 64, len(v))))
    idx |= set(rng.choice(len(v), 256, replace=False).tolist())
    return v, np.array(sorted(idx))


def inputs_for(dt, bits, m, rng):
    codes, vals = all_values(dt, bits)
    v, idx = anchors(vals, bits, rng)
    pts = []
    vmax = v[-1]
    # The value after max if the exponent range went on: max + ulp, or 2 * max without fraction bits.
    nxt = 2 * vmax if m == 0 else vmax + (v[-1] - v[-2])
    for i in idx:
        a = v[i]
        b = v[i + 1] if i + 1 < len(v) else nxt
        mid = (a + b) / 2
        pts += [a, mid]
        if i + 1 == len(v):
            pts += [b, 2 * b, 4 * b]
    smallest = v[v > 0][0]
    pts += [smallest / 2, smallest / 4, smallest / 2 * 3, 2.0 ** -149, 2.0 ** -126, 2.0 ** 100,
            float(np.finfo(np.float32).max)]
    pts += [float(np.float32(t)) for t in (1e-30, 1e-10, 0.1, 0.3, 1e10, 1e30)]
    x = np.array(pts, dtype=np.float64)
    with np.errstate(over="ignore"):
        x = x[np.isfinite(x.astype(np.float32))]
    x32 = x.astype(np.float32)
    exact = x32.astype(np.float64) == x
    assert exact.all(), "check_peers: a boundary point is not exact in float32"
    # One float32 ulp either side of every point.
    b = bits32(x32)
    nb = np.concatenate([b, b + 1, np.where(b > 0, b - 1, 0)]).astype(np.uint32)
    nb = nb[(nb & 0x7F800000) != 0x7F800000]  # stepping past FLT_MAX lands on inf: added below
    specials = np.array([0x00000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000,
                         0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7FA00000], dtype=np.uint32)
    # Seeded random bits: any float32, and float32 values near the format's range.
    r_any = rng.integers(0, 1 << 32, 512, dtype=np.uint64).astype(np.uint32)
    lo = int(np.floor(np.log2(smallest))) - 3
    hi = int(np.floor(np.log2(vmax))) + 3
    e = rng.integers(max(lo, -149), min(hi, 127) + 1, 1024)
    frac = rng.random(1024) + 1.0
    r_near = bits32((frac * 2.0 ** e).astype(np.float32))
    allb = np.concatenate([nb, specials, r_any, r_near]).astype(np.uint32)
    allb = np.concatenate([allb & 0x7FFFFFFF, allb | 0x80000000]).astype(np.uint32)  # both signs
    return np.unique(allb)


def cast_codes(dt, bits, ibits):
    x = f32(ibits)
    with np.errstate(all="ignore"):
        y = x.astype(dt)
    c = y.view(np.uint8 if bits <= 8 else np.uint16).astype(np.uint32)
    return c & ((1 << bits) - 1)


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main():
    if len(sys.argv) > 1 and sys.argv[1] not in ("-h", "--help"):
        print(f"check_peers: {sys.argv[1]} not used: tests/test_peers.c compares fplab with the fixtures")
    elif len(sys.argv) > 1:
        print(__doc__)
        return 0
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(SEED)
    ver = f"ml_dtypes {ml_dtypes.__version__} numpy {np.__version__}"
    finfo_lines = [f"# {ver}: finfo of each format as ml_dtypes (numpy for float16) reports it",
                   "# <format> <field> <value as a C99 hex float>"]
    total = 0
    for name, dt, bits, m in FORMATS:
        ib = inputs_for(dt, bits, m, rng)
        codes = cast_codes(dt, bits, ib)
        w = (bits + 3) // 4
        lines = [f"# {ver}: float32 -> {name} with astype; seed {SEED}",
                 "# <input float32 bits> <code>"]
        lines += [f"{i:08x} {c:0{w}x}" for i, c in zip(ib.tolist(), codes.tolist())]
        path = os.path.join(OUT, f"ml_dtypes_{name}.txt")
        text = "\n".join(lines) + "\n"
        write_atomic(path, text)
        total += len(text)
        print(f"check_peers: {path}: {len(ib)} inputs")
        fi = np.finfo(dt) if dt is np.float16 else ml_dtypes.finfo(dt)
        for field in ("max", "min", "tiny", "smallest_subnormal", "eps", "resolution"):
            val = float(getattr(fi, field))
            finfo_lines.append(f"{name} {field} {val.hex()}")
    path = os.path.join(OUT, "ml_dtypes_finfo.txt")
    write_atomic(path, "\n".join(finfo_lines) + "\n")
    print(f"check_peers: {path}; {total} bytes of code fixtures ({ver})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
