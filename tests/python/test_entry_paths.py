"""Issue 37: the path a product takes is observable from Python (ScaledMatmul.kernel and
.model_outputs, filled from mm_cpu's mm_path, kernels/scaled_mm.h): the NVIDIA fused engine kinds
take the fast vector kernel ("engine-fast") from every Python entry point, and every output of
normal operands is done in its vectors; the result equals the MPFR-backed reference bit for bit."""
import numpy as np
import pytest

import fplab
from conftest import same_bits

FAST = [("hopper:wgmma", "e4m3"), ("ampere:mma", "bf16")]


@pytest.mark.parametrize("acc,fmt", FAST)
def test_scaled_matmul_takes_the_fast_engine_kernel(acc, fmt, rng):
    A = rng.standard_normal((24, 96)).astype(np.float32)
    B = rng.standard_normal((96, 40)).astype(np.float32)
    r = fplab.scaled_matmul(A, B, fmt, acc=acc, error=True)
    assert (r.kernel, r.model_outputs) == ("engine-fast", 0)
    assert r.mismatches == 0
    same_bits(r.c, r.ref)


def test_scaled_matmul_counts_the_outputs_left_to_the_model(rng):
    A = rng.standard_normal((8, 64)).astype(np.float32)
    B = rng.standard_normal((64, 5)).astype(np.float32)
    A[3, 7] = np.nan  # row 3's outputs: the scalar model's
    r = fplab.scaled_matmul(A, B, "bf16", acc="ampere:mma")
    assert (r.kernel, r.model_outputs) == ("engine-fast", 5)


def test_scaled_matmul_names_the_other_kernels(rng):
    A = rng.standard_normal((8, 64)).astype(np.float32)
    B = rng.standard_normal((64, 5)).astype(np.float32)
    assert fplab.scaled_matmul(A, B, "fp32", acc="hopper:wgmma").kernel == "engine-model"  # tf32: no fast kernel
    assert fplab.scaled_matmul(A, B, "e4m3", acc="m13:rtz").kernel == "emu-f32"
    assert fplab.scaled_matmul(A, B, "bf16").kernel in ("blas", "fixed")
    r = fplab.scaled_matmul(A, B, "bf16", acc="ampere:mma", backend="ref")
    assert r.kernel is None and r.model_outputs == 0


@pytest.mark.parametrize("policy,acc", [("fp8-current", "hopper:wgmma"), ("bf16-amp", "ampere:mma")])
def test_torch_policy_products_take_the_fast_engine_kernel(policy, acc):
    """fplab.torch: a Linear under a policy whose accumulator is an engine runs its forward and
    backward products on the fast kernel (Policy.mm_paths: the library's count per kernel)."""
    torch = pytest.importorskip("torch")
    ft = pytest.importorskip("fplab.torch")
    torch.manual_seed(0)
    mod = torch.nn.Sequential()
    mod.add_module("fc1", torch.nn.Linear(64, 32, bias=False))
    x = torch.randn(16, 64, requires_grad=True)
    with ft.apply_policy(mod, policy, accumulator=acc) as pol:
        mod(x).square().sum().backward()
        paths = pol.mm_paths()
    assert [p["kernel"] for p in paths] == ["engine-fast"], paths
    assert paths[0]["products"] == 3 and paths[0]["model_outputs"] == 0  # fprop, dgrad, wgrad


@pytest.mark.parametrize("given,want", [({}, "1000"), ({"GOMP_SPINCOUNT": "5"}, "5"), ({"OMP_WAIT_POLICY": "active"}, None)])
def test_the_package_shortens_libgomp_spinning_unless_told(given, want):
    """Issue 37: libgomp's default spinning made products through Python 3x slower than from the
    command on a loaded machine; the package starts libgomp with GOMP_SPINCOUNT=1000, as the
    command does, unless the user chose a spin count or a wait policy."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env.update(given)
    out = subprocess.run([sys.executable, "-c", "import os, fplab; print(os.environ.get('GOMP_SPINCOUNT'))"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(want)
