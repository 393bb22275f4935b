#!/usr/bin/env python3
"""bench_torch_cuda.py: fplab.torch_cuda's device kernels on a GPU, each against the peer in the
same run (docs/benchmarks.md): the casts (round_cuda, quantize_cuda) as a fraction of a device
copy's bandwidth, counting the bytes each must move (float32 in, float32 out; quantize writes
values and elements, plus its scales); the emulated-accumulator and engine GEMMs (matmul_cuda)
as a fraction of torch.matmul on bf16 (cuBLAS). CUDA events, mean of --reps after a warm-up.
Exits 0 with a note when torch, a GPU or the fplab CUDA library is missing.
Usage: PYTHONPATH=python FPLAB_LIB=build/libfplab.so python3 tools/bench_torch_cuda.py
       [--cast-mib 1024] [--mm-n 1024] [--reps 10]"""
import argparse
import sys


def timed(torch, fn, reps):
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cast-mib", type=int, default=1024, help="float32 input of the casts, MiB")
    ap.add_argument("--mm-n", type=int, default=1024, help="square size of the device GEMMs")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    try:
        import torch
        import fplab
        import fplab.torch_cuda as tc
    except ImportError as e:
        print(f"bench_torch_cuda: skipped: {e}")
        return 0
    if not torch.cuda.is_available() or not tc.available():
        print("bench_torch_cuda: skipped: no CUDA device or no CUDA in libfplab")
        return 0
    print(f"bench_torch_cuda: torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"mean of {args.reps} after a warm-up")
    n = args.cast_mib << 18
    x = torch.randn(n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0)) * 10
    y = torch.empty_like(x)
    copy_ms = timed(torch, lambda: y.copy_(x), args.reps)
    copy_gbs = 8 * n / (copy_ms * 1e-3) * 1e-9
    print(f"{'cast':<34} {'MiB':>6} {'ms':>8} {'GB/s':>8} {'of copy':>8}")
    print(f"{'device copy (torch copy_)':<34} {args.cast_mib:>6} {copy_ms:>8.3f} {copy_gbs:>8.0f} {1:>8.2f}")
    rows = x.view(-1, 4096)
    casts = [("round e4m3 rne", 8, lambda: tc.round_cuda(x, "e4m3")),
             ("round bf16 rne", 8, lambda: tc.round_cuda(x, "bf16")),
             ("round e4m3 sr", 8, lambda: tc.round_cuda(x, "e4m3", mode="sr", seed=1)),
             ("quantize e4m3 tensor", 12, lambda: tc.quantize_cuda(rows, "e4m3", "tensor")),
             ("quantize e4m3 mx", 12 + 4 / 32, lambda: tc.quantize_cuda(rows, "e4m3", "mx")),
             ("quantize e2m1 nvfp4", 12 + 4 / 16, lambda: tc.quantize_cuda(rows, "e2m1", "nvfp4"))]
    for name, bytes_per, fn in casts:
        ms = timed(torch, fn, args.reps)
        gbs = bytes_per * n / (ms * 1e-3) * 1e-9
        print(f"{name:<34} {args.cast_mib:>6} {ms:>8.3f} {gbs:>8.0f} {gbs / copy_gbs:>8.2f}")
    del x, y, rows

    m = args.mm_n
    g = torch.Generator().manual_seed(1)
    a32, b32 = torch.randn(m, m, generator=g), torch.randn(m, m, generator=g)
    a16, b16 = a32.cuda().bfloat16(), b32.cuda().bfloat16()
    ref_ms = timed(torch, lambda: a16 @ b16, args.reps)
    print(f"\n{'device GEMM (matmul_cuda)':<34} {'n':>6} {'ms':>8} {'TFLOP/s':>8} {'of bf16':>8}")
    print(f"{'torch.matmul bf16 (cuBLAS)':<34} {m:>6} {ref_ms:>8.3f} {2 * m**3 / (ref_ms * 1e-3) * 1e-12:>8.1f} "
          f"{1:>8.3f}")
    for fmt, acc in [("e4m3", "m13:rtz:promote=128"), ("e4m3", "bf16"), ("e4m3", "hopper:wgmma"),
                     ("bf16", "ampere:mma"), ("fp16", "cdna3:mfma"), ("e2m1", "blackwell:tcgen05")]:
        a = torch.from_numpy(fplab.round(a32.numpy(), fmt)).cuda()
        b = torch.from_numpy(fplab.round(b32.numpy(), fmt)).cuda()
        ms = timed(torch, lambda: tc.matmul_cuda(a, b, fmt, acc=acc), max(1, args.reps // 5))
        print(f"{fmt + ' ' + acc:<34} {m:>6} {ms:>8.3f} {2 * m**3 / (ms * 1e-3) * 1e-12:>8.3f} {ref_ms / ms:>8.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
