"""Matrix engines (kernels/engine.h) from Python: an engine name is an accumulator spec of
fplab.scaled_matmul; D = A B + C with C as the instruction chain's first C (beta = 1), equal to
the MPFR-backed reference path bit for bit, and different from float32 accumulation."""
import numpy as np
import pytest

import fplab
from conftest import same_bits


@pytest.mark.parametrize("acc,fmt", [("hopper:wgmma", "e4m3"), ("hopper:wgmma:promote=128", "e4m3"),
                                     ("ampere:mma", "bf16"), ("cdna3:mfma", "e4m3fnuz"),
                                     ("blackwell:tcgen05", "e4m3")])
def test_engine_accumulator(acc, fmt, rng):
    A = rng.standard_normal((8, 512)).astype(np.float32)
    B = rng.standard_normal((512, 6)).astype(np.float32)
    C = rng.standard_normal((8, 6)).astype(np.float32)
    r = fplab.scaled_matmul(A, B, fmt, fmt, acc=acc, c=C, beta=1.0, error=True)
    assert r.emulated and r.mismatches == 0
    same_bits(r.c, r.ref)
    f = fplab.scaled_matmul(A, B, fmt, fmt, acc="fp32", c=C, beta=1.0)
    assert not np.array_equal(r.c, f.c)


def test_engine_refuses_operands_it_has_no_instruction_for(rng):
    A = rng.standard_normal((4, 64)).astype(np.float32)
    with pytest.raises(ValueError, match="volta:mma"):
        fplab.scaled_matmul(A, A.T.copy(), "e4m3", acc="volta:mma")


def test_engine_promote_must_be_a_multiple_of_the_k(rng):
    """Issue 34: promote=N that is not a multiple of the instruction's k is refused with the k
    (it gave NaN in training), by the same library check as the policy reader's."""
    A = rng.standard_normal((4, 64)).astype(np.float32)
    with pytest.raises(ValueError, match="32, 16, 8"):
        fplab.scaled_matmul(A, A.T.copy(), "e4m3", acc="hopper:wgmma:promote=33")
    with pytest.raises(ValueError, match="k = 16"):
        fplab.scaled_matmul(A, A.T.copy(), "bf16", acc="ampere:mma:promote=12")
    with pytest.raises(ValueError, match="4, 2, 1"):
        fplab.scaled_matmul(A, A.T.copy(), "fp32", acc="cdna1:mfma:k3")
