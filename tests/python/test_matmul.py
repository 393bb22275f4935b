"""fplab.scaled_matmul on the cpu and ref (MPFR) backends: the same operands as `fplab
matmul-check` (fplab.random draws A from stream 1 and B from stream 2) give the same errors in
ulps; emulated accumulators equal mm_ref bit for bit; fp32 accumulation stays inside the
classical bound gamma_{K+2} sum|a b s| + half an ulp of the output; errors are ValueErrors.
"""
import json

import numpy as np
import pytest

import fplab
from conftest import same_bits

CASES = [
    # (a, b, out, scale, acc)
    ("e4m3", "e4m3", "bf16", "mx", "m13:promote=32"),
    ("e2m1", "e2m1", "fp32", "nvfp4", "fp32"),
    ("e5m2", "e4m3", "fp16", "tensor", "bf16"),
    ("bf16", "bf16", "fp32", "none", "fp32"),
    ("e2m3", "e3m2", "e4m3", "block:16:e8m0", "fp16:rtz:promote=16"),
]


@pytest.mark.parametrize("a,b,out,scale,acc", CASES)
def test_matches_matmul_check(cli, a, b, out, scale, acc):
    M, N, K, seed = 12, 10, 96, 5
    r = json.loads(cli("matmul-check", "--m", M, "--n", N, "--k", K, "--a", a, "--b", b, "--out", out, "--scale",
                       scale, "--acc", acc, "--seed", seed, "--format", "json").stdout)
    A = fplab.random((M, K), "normal", seed, 1)
    B = fplab.random((K, N), "normal", seed, 2)
    res = fplab.scaled_matmul(A, B, a, b, out=out, scale=scale, acc=acc, error=True)
    cpu = r["results"][1]
    assert res.max_err_ulp == cpu["max_err_ulp"] and res.median_err_ulp == cpu["median_err_ulp"]
    assert not res.emulated or res.mismatches == cpu["mismatches_vs_ref"]
    assert res.emulated == r["config"]["emulated"]
    ref = fplab.scaled_matmul(A, B, a, b, out=out, scale=scale, acc=acc, backend="ref")
    same_bits(ref.c, res.ref)


@pytest.mark.parametrize("acc", ["bf16", "m13:promote=128", "fp16:rtz", "m10:rup:promote=8"])
def test_emulated_cpu_equals_ref(acc, rng):
    A = rng.standard_normal((9, 300)).astype(np.float32)
    B = rng.standard_normal((300, 7)).astype(np.float32)
    r = fplab.scaled_matmul(A, B, "e4m3", out="fp32", scale="mx", acc=acc, error=True)
    assert r.emulated and r.mismatches == 0
    same_bits(r.c, r.ref)


def test_fp32_bound(rng):
    K = 256
    A = (rng.standard_normal((16, K)) * 10).astype(np.float32)
    B = rng.standard_normal((K, 16)).astype(np.float32)
    r = fplab.scaled_matmul(A, B, "e4m3", out="bf16", scale="mx", error=True)
    u = 2.0**-24
    gamma = (K + 2) * u / (1 - (K + 2) * u)
    half_ulp = 0.5 * fplab._ulp_out(np.maximum(np.abs(r.exact), np.abs(r.c)), "bf16")
    assert (np.abs(r.c - r.exact) <= gamma * r.absdot + half_ulp).all()
    assert r.max_err_ulp <= 0.5 + 1e-3  # bf16 output dominates: about half an ulp
    assert "ScaledMatmul" in repr(r)


def test_alpha_beta_and_strided(rng):
    A = rng.standard_normal((8, 64)).astype(np.float32)
    Bt = rng.standard_normal((5, 64)).astype(np.float32)
    C = rng.standard_normal((8, 5)).astype(np.float32)
    r1 = fplab.scaled_matmul(A, Bt.T, "bf16", alpha=0.5, beta=2.0, c=C, backend="ref")
    r2 = fplab.scaled_matmul(A, np.ascontiguousarray(Bt.T), "bf16", alpha=0.5, beta=2.0, c=C, backend="ref")
    same_bits(r1.c, r2.c)
    qa = fplab.round(A, "bf16")
    qb = fplab.round(Bt.T, "bf16")
    np.testing.assert_allclose(r1.c, 0.5 * qa.astype(np.float64) @ qb + 2 * C, rtol=1e-6, atol=1e-6)


def test_errors(rng):
    A = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match=r"shapes \(4, 8\) @ \(4, 8\)"):
        fplab.scaled_matmul(A, A, "e4m3")
    with pytest.raises(ValueError, match="acc:"):
        fplab.scaled_matmul(A, A.T, "e4m3", acc="m99")
    with pytest.raises(ValueError, match="backend 'cuda': expected 'cpu' or 'ref'"):
        fplab.scaled_matmul(A, A.T, "e4m3", backend="cuda")
    with pytest.raises(ValueError, match="beta != 0 needs c"):
        fplab.scaled_matmul(A, A.T, "e4m3", beta=1.0)
    with pytest.raises(TypeError, match="expected float32"):
        fplab.scaled_matmul(A.astype(np.float64), A.T, "e4m3")
    with pytest.raises(ValueError, match="scaling"):
        fplab.scaled_matmul(A, A.T, "e4m3", scale="block:0:e8m0")
    with pytest.raises(ValueError, match="operands and C are float32"):
        fplab.scaled_matmul(A, A.T, "fp64")


def test_random_matches_library_draws():
    x = fplab.random((3, 5), "uniform", 1, 2)
    assert x.dtype == np.float32 and ((x >= -1) & (x < 1)).all()
    same_bits(x.ravel()[5:], fplab.random(15, "uniform", 1, 2)[5:])
    with pytest.raises(ValueError, match="dist 'cauchy'"):
        fplab.random(3, "cauchy")
