"""fplab.torch (only where torch is installed): fake_quantize gives fplab.quantize's values and a
straight-through gradient; non-float32 tensors are refused."""
import numpy as np
import pytest

import fplab
from conftest import same_bits

torch = pytest.importorskip("torch")
fq = pytest.importorskip("fplab.torch")


def test_values_and_straight_through_gradient():
    w = torch.randn(8, 64, generator=torch.Generator().manual_seed(0)) * 10
    w.requires_grad_(True)
    y = fq.fake_quantize(w, "e2m1", scale="mx")
    same_bits(y.detach().numpy(), fplab.quantize(w.detach().numpy(), "e2m1", scale="mx").values)
    (y * torch.arange(64.0)).sum().backward()
    assert torch.equal(w.grad, torch.arange(64.0).expand(8, 64))


def test_module_and_refusals():
    m = torch.nn.Sequential(fq.FakeQuantize("e4m3", "tensor"), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4, requires_grad=True)
    m(x).sum().backward()
    assert x.grad is not None and "e4m3" in repr(m)
    with pytest.raises(TypeError, match="float32 tensor"):
        fq.fake_quantize(torch.ones(3, dtype=torch.bfloat16), "e4m3")
    with pytest.raises(ValueError, match="unknown format"):
        fq.FakeQuantize("e9m9x")
    assert np.isnan(fq.fake_quantize(torch.tensor([500.0]), "e4m3").item())


def test_torch_dtype_names_are_torch_dtypes():
    """Issue 34: after "torch." fplab reads exactly torch's floating dtypes: each one the installed
    torch has names the format with torch.finfo's max; a name torch does not have
    (torch.float8_e4m3, which would be ml_dtypes' IEEE-style e4m3, max 240) is refused with the
    list."""
    names = [n for n in dir(torch)
             if isinstance(getattr(torch, n), torch.dtype) and getattr(torch, n).is_floating_point]
    assert "float8_e4m3fn" in names and not hasattr(torch, "float8_e4m3")
    for n in names:
        fi = fplab.finfo("torch." + n)
        if n != "float4_e2m1fn_x2":  # packed two to a byte: torch.finfo has no row for it
            assert fi.max == torch.finfo(getattr(torch, n)).max, n
    assert fplab.finfo("torch.float4_e2m1fn_x2").max == 6
    for bad in ("torch.float8_e4m3", "torch.e4m3", "torch.float8_e3m4"):
        with pytest.raises(ValueError, match="not a torch dtype that fplab maps.*torch.float8_e4m3fn"):
            fplab.finfo(bad)
    assert fplab.finfo("float8_e4m3").max == 240  # the bare name stays ml_dtypes'
