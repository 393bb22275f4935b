#!/usr/bin/env python3
"""bench_peers.py: fplab's rounding and encoding against CPFloat, ml_dtypes and PyTorch, in one
process on the same arrays (a benchmark: prints a table, never fails on a timing).

What is timed, in ns per element, best of --reps, on 1 and 2 threads where the library has
threads (fplab and CPFloat: OpenMP; torch: its intra-op pool; ml_dtypes/NumPy casts: one thread):
  values  float32 -> float32 values of the format. fplab: fmt_round_f32 in place (its auto path);
          CPFloat: cpfloatf in place; ml_dtypes and torch have no such call (their values are a
          codes row plus a decode row);
  codes   float32 -> codes in a preallocated array. fplab: fmt_encode_f32; ml_dtypes: np.copyto
          into an array of the format; torch: Tensor.copy_ into a tensor of the format;
  decode  codes -> float32 into a preallocated array (fmt_decode_f32, np.copyto, Tensor.copy_);
  memcpy  np.copyto of the float32 array: the memory-bound reference of the same run.
In-place calls restore their input first, untimed. The inputs: 2^N float32 with random signs and
mantissas and exponents uniform over 2^-16 .. 2^16, and 1/64 zeros, infinities, NaNs, float32
subnormals and huge values (the distribution of bench/bench_round.c, from NumPy's generator).
The peers' semantics differ at the edges (CPFloat has no fn/fnuz NaN encodings, so its e4m3 is
IEEE-like with max 240; ml_dtypes saturates nothing): the speeds compare, the values need not.

Needs: libfplab.so (make lib), numpy; optional: ml_dtypes, torch (pip, in a venv outside the
repository), CPFloat from source (--cpfloat DIR: a checkout with deps/pcg-c; a small shim is
compiled with cc into a temporary directory and loaded with ctypes).

  python3 -m venv /tmp/peervenv && /tmp/peervenv/bin/pip install numpy ml_dtypes torch
  /tmp/peervenv/bin/python tools/bench_peers.py --lib build/libfplab.so --cpfloat /tmp/peers/cpfloat
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

# (fplab name, ml_dtypes name, torch dtype name, CPFloat precision, emin, emax, infinity)
FORMATS = [
    ("bf16", "bfloat16", "bfloat16", 8, -126, 127, 1),
    ("fp16", "float16", "float16", 11, -14, 15, 1),
    ("e4m3", "float8_e4m3fn", "float8_e4m3fn", 4, -6, 8, 0),
    ("e5m2", "float8_e5m2", "float8_e5m2", 3, -14, 15, 1),
    ("e2m1", "float4_e2m1fn", "float4_e2m1fn_x2", 2, 0, 2, 0),
]
MODES = [("rne", 0, 1), ("rtz", 2, 4), ("sr", 6, 5)]  # (name, fplab mode, CPFloat round)

SHIM = r"""
#include <string.h>
#include "cpfloat_binary32.h"
static optstruct *o;
int shim_round(float *x, const float *a, size_t n, int prec, int emin, int emax, int inf, int rnd) {
    if (!o) o = init_optstruct();
    strcpy(o->format, "custom");
    o->precision = prec, o->emin = emin, o->emax = emax, o->infinity = inf;
    o->subnormal = CPFLOAT_SUBN_USE, o->explim = CPFLOAT_EXPRANGE_TARG, o->round = rnd;
    o->saturation = CPFLOAT_SAT_NO, o->flip = CPFLOAT_SOFTERR_NO, o->p = 0;
    return cpfloatf(x, a, n, o);
}
"""


def make_input(n, seed=20240601):
    rng = np.random.default_rng(seed)
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    man = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    exp = rng.integers(127 - 16, 127 + 17, n, dtype=np.uint32)
    special = rng.integers(0, 64, n) == 0
    kind = rng.integers(0, 5, n)
    exp = np.where(special & (kind == 0), 0, exp)                       # zero or subnormal
    man = np.where(special & (kind == 0) & (rng.integers(0, 2, n) == 0), 0, man)
    exp = np.where(special & (kind == 1), 255, exp)                     # inf
    man = np.where(special & (kind == 1), 0, man)
    exp = np.where(special & (kind == 2), 255, exp)                     # NaN
    man = np.where(special & (kind == 2), man | 0x400000, man)
    exp = np.where(special & (kind == 3), rng.integers(230, 255, n, dtype=np.uint32), exp)  # huge
    exp = np.where(special & (kind == 4), rng.integers(87, 168, n, dtype=np.uint32), exp)   # wide
    return (sign | exp.astype(np.uint32) << 23 | man).view(np.float32)


def best(fn, reps, prep=None):
    t = float("inf")
    for _ in range(reps):
        if prep:
            prep()
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


class Fplab:
    def __init__(self, path):
        self.lib = ctypes.CDLL(os.path.abspath(path))
        self.gomp = ctypes.CDLL("libgomp.so.1")
        for name in ("fmt_round_f32", "fmt_encode_f32", "fmt_decode_f32", "fmt_from_name", "fmt_path_chosen"):
            getattr(self.lib, name).restype = ctypes.c_int
        self.fmts = {}

    def fmt(self, name):
        if name not in self.fmts:
            buf = ctypes.create_string_buffer(512)
            if self.lib.fmt_from_name(buf, name.encode()) != 0:
                raise SystemExit(f"bench_peers: fplab does not know {name}")
            self.fmts[name] = buf
        return self.fmts[name]

    @staticmethod
    def opts(mode):
        o = ctypes.create_string_buffer(256)  # zero: rne, IEEE overflow, auto path
        ctypes.c_int.from_buffer(o, 0).value = mode
        ctypes.c_uint64.from_buffer(o, 16).value = 1  # seed (after mode, overflow, flush, sr_bits)
        return o

    def threads(self, t):
        self.gomp.omp_set_num_threads(t)

    def path(self, name, mode):
        names = ["auto", "generic", "avx2", "avx512", "hw", "lean"]
        p = self.lib.fmt_path_chosen(self.fmt(name), self.opts(mode), ctypes.c_bool(False))
        return names[p] if 0 <= p < len(names) else "?"


def load_cpfloat(src):
    tmp = tempfile.mkdtemp(prefix="cpfloat-shim-")
    c, so = os.path.join(tmp, "shim.c"), os.path.join(tmp, "shim.so")
    with open(c, "w") as f:
        f.write(SHIM)
    cmd = ["cc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu99",
           "-include", os.path.join(src, "deps/pcg-c/include/pcg_variants.h"),
           "-I", os.path.join(src, "src"), "-I", os.path.join(src, "deps/pcg-c/include"),
           c] + [os.path.join(src, "deps/pcg-c/src", f) for f in
                 ("pcg-advance-32.c", "pcg-advance-64.c", "pcg-rngs-32.c", "pcg-rngs-64.c",
                  "pcg-output-32.c", "pcg-output-64.c")] + ["-o", so, "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print(f"bench_peers: CPFloat shim did not build ({' '.join(cmd)}):\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    lib = ctypes.CDLL(so)
    lib.shim_round.restype = ctypes.c_int
    return lib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default="build/libfplab.so")
    ap.add_argument("--cpfloat", help="a CPFloat checkout (with deps/pcg-c)")
    ap.add_argument("--n", type=int, default=24, help="log2 of the element count (default 24)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--formats", default=",".join(f[0] for f in FORMATS))
    args = ap.parse_args()

    fp = Fplab(args.lib)
    cpf = load_cpfloat(args.cpfloat) if args.cpfloat else None
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    try:
        import torch
    except ImportError:
        torch = None
    n = 1 << args.n
    src = make_input(n)
    x = src.copy()
    y = np.empty_like(src)
    codes = np.zeros(n * 4, dtype=np.uint8)
    P = lambda a: a.ctypes.data_as(ctypes.c_void_p)
    versions = [f"numpy {np.__version__}"]
    if ml_dtypes:
        versions.append(f"ml_dtypes {ml_dtypes.__version__}")
    if torch:
        versions.append(f"torch {torch.__version__}")
    if cpf:
        versions.append("CPFloat (shim over cpfloatf)")
    print(f"bench_peers: n = 2^{args.n} float32, best of {args.reps}; {', '.join(versions)}")
    print(f"{'format':<7} {'mode':<5} {'what':<7} {'peer':<22} {'ns/el 1T':>9} {'ns/el 2T':>9}")

    def row(fmt, mode, what, peer, fn, prep=None, threads=(1, 2)):
        out = []
        for t in (1, 2):
            if t not in threads:
                out.append(float("nan"))
                continue
            fp.threads(t)
            if torch:
                torch.set_num_threads(t)
            out.append(best(fn, args.reps, prep) * 1e9 / n)
        print(f"{fmt:<7} {mode:<5} {what:<7} {peer:<22} {out[0]:9.3f} {out[1]:9.3f}", flush=True)

    np.seterr(all="ignore")  # NumPy's float16 cast warns on overflow; inf is the right answer
    restore = lambda: np.copyto(x, src)
    row("-", "-", "memcpy", "numpy copyto", lambda: np.copyto(y, src), threads=(1,))
    wanted = args.formats.split(",")
    for name, mlname, tname, prec, emin, emax, inf in FORMATS:
        if name not in wanted:
            continue
        f = fp.fmt(name)
        for mname, mode, crnd in MODES:
            o = fp.opts(mode)
            row(name, mname, "values", f"fplab ({fp.path(name, mode)})",
                lambda: fp.lib.fmt_round_f32(f, P(x), ctypes.c_size_t(n), o, None), restore)
            if cpf:
                row(name, mname, "values", "CPFloat in place",
                    lambda: cpf.shim_round(P(x), P(x), ctypes.c_size_t(n), prec, emin, emax, inf, crnd), restore)
            if mname == "rne":
                row(name, mname, "codes", "fplab encode",
                    lambda: fp.lib.fmt_encode_f32(f, P(codes), P(src), ctypes.c_size_t(n), o, None))
                fp.lib.fmt_encode_f32(f, P(codes), P(src), ctypes.c_size_t(n), o, None)
                row(name, mname, "decode", "fplab decode",
                    lambda: fp.lib.fmt_decode_f32(f, P(y), P(codes), ctypes.c_size_t(n)))
                if ml_dtypes and hasattr(ml_dtypes, mlname) or (ml_dtypes and mlname == "float16"):
                    dt = np.float16 if mlname == "float16" else getattr(ml_dtypes, mlname)
                    c = np.empty(n, dtype=dt)
                    row(name, mname, "codes", "ml_dtypes copyto", lambda: np.copyto(c, src, casting="unsafe"),
                        threads=(1,))
                    row(name, mname, "decode", "ml_dtypes copyto", lambda: np.copyto(y, c, casting="unsafe"),
                        threads=(1,))
                if torch and hasattr(torch, tname) and not tname.endswith("_x2"):
                    ts, ty = torch.from_numpy(src), torch.from_numpy(y)
                    tc = torch.empty(n, dtype=getattr(torch, tname))
                    row(name, mname, "codes", "torch copy_", lambda: tc.copy_(ts))
                    row(name, mname, "decode", "torch copy_", lambda: ty.copy_(tc))
    fp.threads(2)


if __name__ == "__main__":
    main()
