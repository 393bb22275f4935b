"""fplab.torch_cuda against the CPU library on CUDA tensors: casts and block quantization bit for
bit, telemetry equal. Skips without a CUDA device (every machine of make test-torch so far);
tools/gpu_run.sh runs it where a GPU is lent."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fplab  # noqa: E402

tc = pytest.importorskip("fplab.torch_cuda")
pytestmark = pytest.mark.skipif(not tc.available(), reason="no CUDA device (or libfplab without nvcc)")


def _bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1", "bf16", "fp16", "e8m0"])
@pytest.mark.parametrize("mode", ["rne", "rtz", "sr", "sr:c"])
def test_round_matches_cpu(fmt, mode):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4099, generator=g) * 100
    out, counts = tc.round_cuda(x.cuda(), fmt, mode=mode, seed=3, offset=17)
    want = fplab.round(x.numpy(), fmt, mode=mode, seed=3, offset=17)
    assert (_bits(out.cpu().numpy()) == _bits(want)).all()
    assert tc.read_counts(counts)["n"] == x.numel()


@pytest.mark.parametrize("fmt,recipe", [("e4m3", "mx"), ("e2m1", "nvfp4"), ("e2m1", "nvfp4:4over6"),
                                        ("e4m3", "fp8block128x128"), ("e5m2", "tensor")])
def test_quantize_matches_cpu(fmt, recipe):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(33, 160, generator=g)
    out, elems, scales, counts = tc.quantize_cuda(x.cuda(), fmt, recipe)
    want = fplab.quantize(x.numpy(), fmt, scale=recipe)
    assert (_bits(out.cpu().numpy()) == _bits(want.values)).all()


@pytest.mark.parametrize("fmt,scale,axis", [("e4m3", "mx", -1), ("e4m3", "mx", 0), ("mxfp4", "", -1),
                                            ("e5m2", "", -1), ("e2m1", "nvfp4", 1)])
def test_quantize_operator_runs_on_the_device(fmt, scale, axis):
    """torch.ops.fplab.quantize on a CUDA tensor: the "cuda" kernel (register_kernels), on the
    device, with fplab.quantize's values and counts."""
    import fplab.torch  # noqa: F401  (registers the kernels)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 64, 48, generator=g) * 10
    vals, stats = torch.ops.fplab.quantize(x.cuda(), fmt, scale, axis, "rne", 0, 0)
    assert vals.is_cuda and stats.is_cuda
    want = fplab.quantize(x.numpy(), fmt, scale=scale or None, axis=axis)
    assert (_bits(vals.cpu().numpy()) == _bits(want.values)).all()
    assert stats.cpu().tolist() == [getattr(want.stats, f) for f in ("n", "overflow", "underflow", "subnormal",
                                                                     "nan_in", "invalid")]
