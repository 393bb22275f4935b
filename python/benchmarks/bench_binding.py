"""bench_binding.py: what the Python binding costs over the C library, and fplab beside ml_dtypes'
astype, in one run (make bench-python; docs/benchmarks.md). A benchmark, not a test: it prints
tables and never fails on a timing.

  per-call overhead: fplab.round on 1 .. 4096 float32 elements (best of many calls), beside
    the same call in C (bench_round cannot time tiny calls, so the C side is extrapolated from
    its ns/element: an upper bound of what the library itself spends) and ml_dtypes astype
  2^24 elements: ns/element of the C library (build/bench/bench_round, same process kind,
    in place, best of reps), fplab.round in place (out=x) and allocating, fplab.encode,
    fplab.quantize mx, the `fplab quantize` command end to end (.npy in and out, process start
    included), ml_dtypes astype to the format and back to float32, and torch's .to() where
    torch is installed

usage: python bench_binding.py BUILD_DIR [--reps R]
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import fplab

try:
    import ml_dtypes
except ImportError:  # the table says so
    ml_dtypes = None
try:
    import torch
except ImportError:  # rows left out
    torch = None


def best(fn, reps, setup=None):
    t = float("inf")
    for _ in range(reps):
        if setup:
            setup()
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def per_call(reps):
    print("\n## Per-call cost, float32 -> e4m3 (rne), best of %d calls\n" % reps)
    print("| n | fplab.round(x) | fplab.round(x, out=x) | ml_dtypes astype + back |")
    print("| --- | --- | --- | --- |")
    for n in (1, 16, 256, 4096):
        x = np.linspace(-3, 3, n, dtype=np.float32)
        a = best(lambda: fplab.round(x, "e4m3"), reps)
        b = best(lambda: fplab.round(x, "e4m3", out=x), reps)
        if ml_dtypes:
            dt = ml_dtypes.float8_e4m3fn
            c = "%.2f us" % (1e6 * best(lambda: x.astype(dt).astype(np.float32), reps))
        else:
            c = "(no ml_dtypes)"
        print(f"| {n} | {1e6 * a:.2f} us | {1e6 * b:.2f} us | {c} |")


def c_library_ns(build, fmt, mode, reps):
    """bench_round's ns/element for fmt_round_f32 on 2^24 elements, 1 and 2 threads."""
    exe = os.path.join(build, "bench", "bench_round")
    if not os.access(exe, os.X_OK):
        return None
    out = subprocess.run([exe, "--format", fmt, "--mode", mode, "--reps", str(reps), "--csv"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    for line in out:
        f = line.split(",")
        if f[0] == fmt and f[1] == mode and f[2] == "0":
            return float(f[3]), float(f[4])
    return None


def big(build, reps):
    n = 1 << 24
    rng = np.random.default_rng(0)
    x0 = (rng.standard_normal(n) * 2.0 ** rng.integers(-8, 8, n)).astype(np.float32)
    x = x0.copy()
    ns = lambda t: 1e9 * t / n  # noqa: E731
    print("\n## 2^24 float32 elements, ns/element (best of %d)\n" % reps)
    print("| what | e4m3 rne | bf16 rne |")
    print("| --- | --- | --- |")
    rows = {}
    for fmt in ("e4m3", "bf16"):
        c = c_library_ns(build, fmt, "rne", reps)
        rows.setdefault("C library: fmt_round_f32 in place (bench_round, 1 thread / 2 threads)", []).append(
            "%.2f / %.2f" % c if c else "(no bench_round)")
        rows.setdefault("fplab.round(x, out=x), in place", []).append(
            "%.2f" % ns(best(lambda: fplab.round(x, fmt, out=x), reps, lambda: np.copyto(x, x0))))
        rows.setdefault("fplab.round(x), new array", []).append("%.2f" % ns(best(lambda: fplab.round(x0, fmt), reps)))
        rows.setdefault("fplab.encode(x) (codes)", []).append("%.2f" % ns(best(lambda: fplab.encode(x0, fmt), reps)))
        if ml_dtypes:
            dt = {"e4m3": ml_dtypes.float8_e4m3fn, "bf16": ml_dtypes.bfloat16}[fmt]
            rows.setdefault("ml_dtypes: x.astype(fmt) (codes)", []).append(
                "%.2f" % ns(best(lambda: x0.astype(dt), reps)))
            rows.setdefault("ml_dtypes: x.astype(fmt).astype(float32) (values)", []).append(
                "%.2f" % ns(best(lambda: x0.astype(dt).astype(np.float32), reps)))
        if torch:
            tdt = {"e4m3": torch.float8_e4m3fn, "bf16": torch.bfloat16}[fmt]
            t0 = torch.from_numpy(x0)
            rows.setdefault(f"torch {torch.__version__} (CPU, {torch.get_num_threads()} threads): t.to(fmt) (codes)",
                            []).append("%.2f" % ns(best(lambda: t0.to(tdt), reps)))
            rows.setdefault("torch: t.to(fmt).float() (values)", []).append(
                "%.2f" % ns(best(lambda: t0.to(tdt).float(), reps)))
    for k, v in rows.items():
        print(f"| {k} | {' | '.join(v)} |")

    print("\n## 2^24 elements as a (4096, 4096) matrix, quantize, ns/element (best of %d)\n" % reps)
    print("| what | e4m3, mx | e2m1, nvfp4 |")
    print("| --- | --- | --- |")
    m = x0.reshape(4096, 4096)
    cli = os.path.join(build, "fplab")
    r1, r3 = [], []
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "x.npy"), os.path.join(d, "y.npy")
        np.save(src, m)
        for fmt, recipe in (("e4m3", "mx"), ("e2m1", "nvfp4")):
            r1.append("%.2f" % ns(best(lambda: fplab.quantize(m, fmt, scale=recipe), reps)))
            t = best(lambda: subprocess.run([cli, "quantize", src, dst, "--to", fmt, "--scale", recipe],
                                            check=True, capture_output=True), reps)
            r3.append("%.2f" % ns(t))
    print(f"| fplab.quantize (values, elements, codes, scales) | {' | '.join(r1)} |")
    print(f"| `fplab quantize IN.npy OUT.npy` (process, file in and out) | {' | '.join(r3)} |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "?")
    print(f"# bench_binding: fplab {fplab.__version__}, numpy {np.__version__}, ml_dtypes "
          f"{getattr(ml_dtypes, '__version__', 'absent')}, torch {getattr(torch, '__version__', 'absent')}, "
          f"{cpu}, {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    per_call(2000)
    big(build, reps)


if __name__ == "__main__":
    main()
