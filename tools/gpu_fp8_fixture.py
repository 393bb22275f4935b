#!/usr/bin/env python3
"""gpu_fp8_fixture.py: on a machine with an NVIDIA GPU, the outputs of PyTorch's fp8 GEMM
(torch._scaled_mm, which calls cuBLASLt) for tests/fixtures/hw/: operand codes and float32
results, with and without cuBLASLt's fast accumulation, e4m3 x e4m3 and e5m2 x e4m3, tensor
scales 1. Operands are normal draws times 2^U(-6, 6), so that products of one dot span many
binades. fplab matmul-check's external mode then names the engine model that reproduces each
(tests/hw_fixtures_test.sh). Usage: python3 tools/gpu_fp8_fixture.py OUTDIR [M K N]"""
import sys

import numpy as np
import torch


def main():
    out = sys.argv[1]
    M, K, N = (int(v) for v in sys.argv[2:5]) if len(sys.argv) >= 5 else (96, 512, 80)
    g = torch.Generator().manual_seed(20261130)

    def draw(r, c, dtype):
        x = torch.randn(r, c, generator=g) * torch.exp2(torch.randint(-6, 7, (r, c), generator=g).float())
        lim = torch.finfo(dtype).max
        return x.clamp(-lim, lim).to(dtype)

    a4, a5, b4 = draw(M, K, torch.float8_e4m3fn), draw(M, K, torch.float8_e5m2), draw(K, N, torch.float8_e4m3fn)
    np.save(f"{out}/a_e4m3.npy", a4.view(torch.uint8).numpy())
    np.save(f"{out}/a_e5m2.npy", a5.view(torch.uint8).numpy())
    np.save(f"{out}/b_e4m3.npy", b4.view(torch.uint8).numpy())
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    one = torch.tensor(1.0, device=dev)
    bd = b4.to(dev).t().contiguous().t()  # column-major, as _scaled_mm wants
    for name, a in (("e4m3", a4), ("e5m2", a5)):
        for fast in (False, True):
            c = torch._scaled_mm(a.to(dev), bd, one, one, out_dtype=torch.float32, use_fast_accum=fast)
            np.save(f"{out}/c_{name}_e4m3_{'fast' if fast else 'promoted'}.npy", np.ascontiguousarray(c.cpu().numpy()))
    print(f"gpu_fp8_fixture: {M}x{K}x{N} on {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}, "
          f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
