#!/usr/bin/env python3
"""bench_torch_mm.py: PyTorch's matmuls on the GPU at the sizes of bench_mm_cuda, as the peer
reference for docs/benchmarks.md: torch.matmul on bf16 (cuBLAS) and torch._scaled_mm on e4m3
with per-tensor scales (fp32 output), timed with CUDA events (mean of --reps after a warm-up).
Prints one line per case; exits 0 with a note when torch or a GPU is missing.
Usage: python3 tools/bench_torch_mm.py [--sizes 4096,8192] [--reps 10]"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_torch_mm: skipped: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("bench_torch_mm: skipped: no CUDA device")
        return 0
    print(f"bench_torch_mm: torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"mean of {args.reps} after a warm-up")
    print(f"{'case':<28} {'n':>6} {'TFLOP/s':>9} {'ms':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(n, n, device="cuda", generator=g)
        b = torch.randn(n, n, device="cuda", generator=g)
        a16, b16 = a.bfloat16(), b.bfloat16()
        one = torch.tensor(1.0, device="cuda")
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
        cases = [("torch.matmul bf16", lambda: a16 @ b16),
                 ("torch._scaled_mm e4m3 tensor", lambda: torch._scaled_mm(a8, b8, one, one,
                                                                          out_dtype=torch.float32))]
        for name, fn in cases:
            fn()
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.reps):
                fn()
            stop.record()
            stop.synchronize()
            ms = start.elapsed_time(stop) / args.reps
            print(f"{name:<28} {n:>6} {2 * n**3 / (ms * 1e-3) * 1e-12:>9.1f} {ms:>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
