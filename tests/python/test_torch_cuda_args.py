"""fplab.torch_cuda's argument checking and dispatch decisions, without a GPU (every machine of
make test-torch): matmul_cuda's shape, type and device checks (check_matmul_args), which
accumulators and recipes torch.ops.fplab.scaled_mm runs on the device, and mm_cuda_dev_named's
refusal of unknown names. tests/python/test_torch_cuda.py runs the kernels on a GPU."""
import ctypes

import pytest

torch = pytest.importorskip("torch")
tc = pytest.importorskip("fplab.torch_cuda")


def _lib_or_skip():
    try:
        return tc._load()
    except RuntimeError as e:
        pytest.skip(str(e))


def test_shapes_are_checked_before_devices():
    a, b = torch.zeros(4, 8), torch.zeros(8, 3)
    with pytest.raises(ValueError, match=r"expected \(M, K\) @ \(K, N\)"):
        tc.check_matmul_args(a, torch.zeros(7, 3))
    with pytest.raises(ValueError, match="a_scales has shape"):
        tc.check_matmul_args(a, b, a_scales=torch.zeros(4, 2), block_k=32)  # ceil(8 / 32) = 1 block
    with pytest.raises(ValueError, match="b_scales has shape"):
        tc.check_matmul_args(a, b, b_scales=torch.zeros(3, 2), block_k=4)  # (2, 3) expected
    with pytest.raises(ValueError, match="block_k"):
        tc.check_matmul_args(a, b, block_k=-1)
    with pytest.raises(ValueError, match="beta != 0 needs c"):
        tc.check_matmul_args(a, b, beta=1.0)
    with pytest.raises(TypeError, match="expected a torch.Tensor"):
        tc.check_matmul_args(a.numpy(), b)


def test_cpu_tensors_are_refused():
    a, b = torch.zeros(4, 8), torch.zeros(8, 3)
    with pytest.raises(TypeError, match="float32 CUDA tensor"):
        tc.check_matmul_args(a, b)
    with pytest.raises(TypeError, match="float32 CUDA tensor"):
        tc.matmul_cuda(a, b, "e4m3", acc="bf16")


def test_which_accumulators_run_on_the_device():
    _lib_or_skip()
    for acc in ("m13:rtz", "m13:rtz:promote=128", "bf16", "fp16", "fp32:rtz", "hopper:wgmma", "cdna3:mfma"):
        assert tc.acc_on_device(acc), acc
    for acc in ("fp32", "not-an-accumulator"):
        assert not tc.acc_on_device(acc), acc


def test_which_recipes_run_on_the_device():
    _lib_or_skip()
    import fplab
    for scale, ok in (("none", True), ("mx", True), ("nvfp4", True), ("row", True), ("tensor", True),
                      ("block:64:e8m0", True), ("fp8block128x128", False)):
        sg = fplab._fplab.scaling(scale, 64, 256)
        assert tc.scaled_mm_device_ok("m13:rtz", sg) == ok, scale
        assert not tc.scaled_mm_device_ok("fp32", sg), scale


def test_named_call_refuses_unknown_names():
    lib = _lib_or_skip()
    msg = ctypes.create_string_buffer(512)
    x = (ctypes.c_float * 4)()

    def call(fa=b"e4m3", acc=b"m13:rtz", out=b"", mode=b"rne"):
        return lib.mm_cuda_dev_named(x, 2, x, 2, 0, fa, None, 0, 1.0, None, x, 2, 0, b"e4m3", None, 0, 1.0, None, 2,
                                     2, 2, acc, out, mode, 1.0, 0.0, 0, 0, 0, None, msg, 512)
    assert call(acc=b"nonsense") == 1 and b"accumulator" in msg.value
    assert call(fa=b"nosuchformat") == 1 and b"format" in msg.value
    assert call(out=b"nope") == 1 and b"output format" in msg.value
    assert call(acc=b"fp32") == 4 and b"fp32" in msg.value  # plain fp32: no device kernel


@pytest.mark.parametrize("fmt,scale,acc", [("e4m3", "mx", "m13:rtz:promote=32"), ("e2m1", "nvfp4", "bf16"),
                                           ("e4m3", "tensor", "hopper:wgmma"), ("e4m3", "row", "ada:mma"),
                                           ("e2m1", "nvfp4", "blackwell:tcgen05"), ("e5m2", "none", "fp16"),
                                           ("e5m2", "block:64:e8m0", "fp16:promote=16")])
def test_scaled_mm_kernel_builds_the_cpu_operands(monkeypatch, fmt, scale, acc):
    """torch.ops.fplab.scaled_mm's "cuda" kernel on the host, its device calls replaced:
    quantize_cuda by fplab.quantize (its counts carrying the tensor scale's bits, as the device's
    do), matmul_cuda by a recorder. The operands it would hand the device (B as B^T quantized,
    scales transposed, block_k, tensor scales read from the counts' bytes) must reproduce the CPU
    operator's result bit for bit with the accumulator (fplab.check_matmul, expect=acc)."""
    _lib_or_skip()
    import numpy as np
    import fplab

    def quantize_host(x, elem, recipe, mode="rne", overflow=None, **kw):
        q = fplab.quantize(x.numpy(), elem, scale=recipe, mode=mode, overflow=overflow)
        counts = torch.zeros(tc.NCOUNTS, dtype=torch.int64)
        counts[9] = int(np.float32(q.tensor_scale).view(np.uint32))
        sv = q.scale_values if q.scale_values is not None else np.ones((1, 1), np.float32)
        return (torch.from_numpy(q.values), torch.from_numpy(np.ascontiguousarray(q.elements)),
                torch.from_numpy(np.ascontiguousarray(sv, np.float32)).reshape(-1, sv.shape[-1]), counts)

    seen = {}

    def record(a, b, a_fmt, b_fmt=None, *, acc, a_scales=None, b_scales=None, block_k=0, a_tscale=None,
               b_tscale=None, **kw):
        seen.update(a=a, b=b, sa=a_scales, sb=b_scales, bk=block_k, ta=a_tscale, tb=b_tscale)
        return torch.zeros(a.shape[0], b.shape[1])

    monkeypatch.setattr(tc, "quantize_cuda", quantize_host)
    monkeypatch.setattr(tc, "matmul_cuda", record)
    g = torch.Generator().manual_seed(8)
    a, b = torch.randn(9, 200, generator=g), torch.randn(200, 7, generator=g)
    tc.scaled_mm_kernel(a, b, fmt, "", scale, acc)
    want = fplab.scaled_matmul(a.numpy(), b.numpy(), fmt, scale=scale, acc=acc).c

    def val(t):
        return 1.0 if t is None else float(t.reshape(-1)[0]) if isinstance(t, torch.Tensor) else float(t)

    sa, sb, ta, tb = seen["sa"], seen["sb"], val(seen["ta"]), val(seen["tb"])
    if scale == "tensor":  # one tile: its scale went as the tensor scale
        sa, sb, ta, tb = torch.tensor([[ta]]), torch.tensor([[tb]]), 1.0, 1.0
    assert seen["b"].shape == (200, 7) and seen["b"].stride() == (1, 200)  # B^T's elements, read transposed
    r = fplab.check_matmul(seen["a"].numpy(), np.ascontiguousarray(seen["b"].numpy()), want, fmt, scale=scale,
                           a_scales=None if sa is None else sa.numpy(), b_scales=None if sb is None else sb.numpy(),
                           a_tensor_scale=ta, b_tensor_scale=tb, expect=acc, candidates=False)
    assert r.passed, (scale, acc, r.candidates)
    assert seen["bk"] == {"mx": 32, "nvfp4": 16, "block:64:e8m0": 64}.get(scale, 0)
