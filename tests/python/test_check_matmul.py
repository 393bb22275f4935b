"""fplab.check_matmul (kernels/mm_verify.h, the verifier of `fplab matmul-check`): a NumPy
"kernel" that computes a scaled product correctly passes under the bound; one with a transposed
scale or a dropped K-block fails with its violations counted and no accumulator reproducing it;
a C from fplab's own Hopper wgmma model is reproduced 100% by hopper:wgmma and not by the
exact-rounded product; all-overflow fails; bad input is a ValueError.
"""
import numpy as np
import pytest

import fplab


def mx_operands(rng, M, N, K):
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    qa = fplab.quantize(A, "e4m3", "mx")
    qb = fplab.quantize(B, "e4m3", "mx", axis=0)  # tiles along K; scale_values (N, K/32)
    return qa.elements, qa.scale_values, qb.elements, qb.scale_values.T.copy()


def numpy_kernel(a, sa, b, sb, drop_block=None):
    """The scaled product in float64, one block of 32 at a time, rounded once to float32."""
    M, K = a.shape
    acc = np.zeros((M, b.shape[1]))
    for g in range(K // 32):
        if g == drop_block:
            continue
        blk = a[:, g * 32:(g + 1) * 32].astype(np.float64) @ b[g * 32:(g + 1) * 32].astype(np.float64)
        acc += blk * sa[:, g:g + 1] * sb[g:g + 1, :]
    return acc.astype(np.float32)


def test_correct_kernel_passes(rng):
    a, sa, b, sb = mx_operands(rng, 16, 8, 128)
    c = numpy_kernel(a, sa, b, sb)
    r = fplab.check_matmul(a, b, c, "e4m3", "e4m3", scale="mx", a_scales=sa, b_scales=sb)
    assert r.passed and r.rule == "bound" and r.rule_acc is None
    assert (r.judged, r.excluded, r.outside) == (128, 0, 0)
    assert r.err_ulp.shape == (16, 8) and r.in_bound.all() and r.judged_mask.all()
    assert (r.err_ulp <= r.bound_ulp).all() and r.max_bound_ulp >= r.max_err_ulp
    assert np.array_equal(r.err, c - r.exact)
    assert r.share("exact-rounded") > 0.9
    assert "hopper:wgmma" in r.candidates and "volta:mma" not in r.candidates
    assert "MatmulCheck" in repr(r)


@pytest.mark.parametrize("bug", ["transposed_scale", "dropped_block"])
def test_buggy_kernel_fails(rng, bug):
    a, sa, b, sb = mx_operands(rng, 16, 16, 128)
    if bug == "transposed_scale":  # B's scales (N, K/32) read as if they were (K/32, N)
        c = numpy_kernel(a, sa, b, sb.T.copy().reshape(sb.shape))
    else:
        c = numpy_kernel(a, sa, b, sb, drop_block=3)
    r = fplab.check_matmul(a, b, c, "e4m3", "e4m3", scale="mx", a_scales=sa, b_scales=sb)
    assert not r.passed and r.rule == "none"
    assert r.outside > r.n // 2
    assert max(r.candidates.values()) < r.n
    assert r.max_err_ulp > r.max_bound_ulp


def test_identifies_hopper_wgmma(rng):
    A = rng.standard_normal((8, 512)).astype(np.float32)
    B = rng.standard_normal((512, 8)).astype(np.float32)
    c = fplab.scaled_matmul(A, B, "e4m3", acc="hopper:wgmma").c
    a = fplab.round(A, "e4m3", overflow="saturate")
    b = fplab.round(B, "e4m3", overflow="saturate")
    r = fplab.check_matmul(a, b, c, "e4m3", also=["m13:rtz"])
    assert r.candidates["hopper:wgmma"] == 64
    assert r.candidates["exact-rounded"] < 64
    assert r.extra == ["m13:rtz"]
    assert r.passed
    e = fplab.check_matmul(a, b, c, "e4m3", expect="hopper:wgmma", candidates=False)
    assert e.passed and e.rule == "bit-exact" and e.rule_acc == "hopper:wgmma"
    assert not fplab.check_matmul(a, b, c, "e4m3", expect="fp32", candidates=False).passed


def test_all_overflow_fails():
    a = np.full((2, 64), 448, np.float32)
    b = np.full((64, 2), 448, np.float32)
    c = np.full((2, 2), np.inf, np.float32)
    r = fplab.check_matmul(a, b, c, "e4m3", out="fp16")
    assert not r.passed and r.judged == 0 and r.excluded == 4 and r.rule == "none"
    assert np.isnan(r.err_ulp).all() and not r.judged_mask.any()


def test_beta_and_c_in():
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.eye(2, dtype=np.float32)
    c0 = np.ones((2, 2), np.float32)
    r = fplab.check_matmul(a, b, a + 2 * c0, "bf16", beta=2.0, c_in=c0)
    assert r.passed and r.candidates["exact-rounded"] == 4
    with pytest.raises(ValueError, match="c_in"):
        fplab.check_matmul(a, b, a, "bf16", beta=1.0)


def test_bad_input():
    a = np.array([[1.1, 2]], np.float32)
    b = np.ones((2, 1), np.float32)
    with pytest.raises(ValueError, match="not a value of e4m3"):
        fplab.check_matmul(a, b, np.zeros((1, 1), np.float32), "e4m3")
    with pytest.raises(ValueError, match="shape"):
        fplab.check_matmul(np.ones((1, 2), np.float32), b, np.zeros((2, 2), np.float32), "e4m3")
    with pytest.raises(ValueError, match="a_scales"):
        fplab.check_matmul(np.ones((1, 32), np.float32), np.ones((32, 1), np.float32), np.zeros((1, 1), np.float32),
                           "e4m3", scale="mx")
    with pytest.raises(ValueError, match="makes"):
        fplab.check_matmul(np.ones((1, 64), np.float32), np.ones((64, 3), np.float32), np.zeros((1, 3), np.float32),
                           "e4m3", scale="mx", a_scales=np.ones((1, 2), np.float32),
                           b_scales=np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="m99"):
        fplab.check_matmul(np.ones((1, 2), np.float32), b, np.full((1, 1), 2, np.float32), "e4m3", also=["m99"])


# --- issue 34, 1.6: nonsense scales and u are refused; a result that claims an engine is held to
# that engine's own bound, where the buggy kernels fail

def test_refuses_nonsense_scales_and_u(rng):
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.eye(2, dtype=np.float32)
    for ts in (-1.0, 0.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="a_tensor_scale.*expected a finite scale > 0"):
            fplab.check_matmul(a, b, a, "bf16", a_tensor_scale=ts)
    with pytest.raises(ValueError, match="b_scales.*the one scale of the recipe 'tensor' is -2"):
        fplab.check_matmul(a, b, a, "bf16", scale="tensor", a_scales=np.ones((1, 1), np.float32),
                           b_scales=np.full((1, 1), -2, np.float32))
    for u in (0.0, float("nan"), -1.0):
        with pytest.raises(ValueError, match="expected a unit roundoff > 0"):
            fplab.check_matmul(a, b, a, "bf16", u=u)
    for u in (2.0, float("inf"), 1 / 4):  # K = 2: u must stay below 1/8
        with pytest.raises(ValueError, match="unit roundoff u"):
            fplab.check_matmul(a, b, np.full((2, 2), 12345, np.float32), "bf16", u=u)
    assert not fplab.check_matmul(a, b, np.full((2, 2), 12345, np.float32), "bf16", u=0.12).passed


@pytest.mark.parametrize("engine", ["blackwell:tcgen05", "hopper:wgmma"])
def test_engine_bound_fails_the_buggy_kernels(rng, engine):
    a, sa, b, sb = mx_operands(rng, 32, 16, 256)
    good = fplab.check_matmul(a, b, numpy_kernel(a, sa, b, sb), "e4m3", scale="mx", a_scales=sa, b_scales=sb,
                              engine=engine)
    assert good.passed and good.rule == "bound" and good.bound_engine == engine and np.isnan(good.u)
    for c in (numpy_kernel(a, sa, b, sb.T.copy().reshape(sb.shape)), numpy_kernel(a, sa, b, sb, drop_block=7)):
        r = fplab.check_matmul(a, b, c, "e4m3", scale="mx", a_scales=sa, b_scales=sb, engine=engine)
        assert not r.passed and r.rule == "none" and r.outside > r.n // 2
    with pytest.raises(ValueError, match="engine 'fp32'"):
        fplab.check_matmul(a, b, numpy_kernel(a, sa, b, sb), "e4m3", scale="mx", a_scales=sa, b_scales=sb,
                           engine="fp32")
