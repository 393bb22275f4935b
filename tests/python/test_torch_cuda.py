"""fplab.torch_cuda against the CPU library on CUDA tensors: casts and block quantization bit for
bit, telemetry equal. Skips without a CUDA device (make test-torch's machines);
tools/gpu_run.sh runs it where a GPU is lent (all passed on an H200, 2026-11-30)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fplab  # noqa: E402
from conftest import same_bits  # noqa: E402

tc = pytest.importorskip("fplab.torch_cuda")
pytestmark = pytest.mark.skipif(not tc.available(), reason="no CUDA device (or libfplab without nvcc)")


def _bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


# GEMM outputs compare with conftest's same_bits, a NaN equal to any NaN: the hardware makes an
# invalid operation's NaN (inf - inf: x86 0xffc00000, CUDA 0x7fffffff) and IEEE 754 leaves its
# bits open (docs/kernels-cuda.md). Casts compare strictly (_bits): fplab writes their NaNs itself.


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


# --- the emulated-accumulator and engine GEMM (matmul_cuda, torch.ops.fplab.scaled_mm)

@pytest.mark.parametrize("fmt,acc", [("e4m3", "m13:rtz:promote=32"), ("e4m3", "bf16"), ("e5m2", "fp16"),
                                     ("e2m1", "m10:rup"), ("e4m3", "hopper:wgmma:promote=128"),
                                     ("bf16", "ampere:mma"), ("fp16", "cdna3:mfma"), ("e2m1", "blackwell:tcgen05")])
def test_matmul_cuda_matches_cpu(fmt, acc):
    """matmul_cuda on element values (already of fmt) against fplab.scaled_matmul of the same
    values (recipe none: quantizing them again is the identity), K ragged against every block and
    promotion interval, B read transposed in place."""
    g = torch.Generator().manual_seed(5)
    a = torch.from_numpy(fplab.round(torch.randn(37, 301, generator=g).numpy(), fmt))
    w = torch.from_numpy(fplab.round(torch.randn(29, 301, generator=g).numpy(), fmt))  # (N, K)
    c = tc.matmul_cuda(a.cuda(), w.cuda().t(), fmt, acc=acc)
    want = fplab.scaled_matmul(a.numpy(), w.t().numpy(), fmt, scale="none", acc=acc)
    same_bits(c.cpu().numpy(), want.c, f"matmul_cuda {fmt} {acc}")


@pytest.mark.parametrize("fmt,scale,acc", [("e4m3", "mx", "m13:rtz:promote=32"), ("e2m1", "nvfp4", "bf16"),
                                           ("e4m3", "tensor", "hopper:wgmma"), ("e4m3", "row", "ada:mma"),
                                           ("e2m1", "nvfp4", "blackwell:tcgen05"), ("e4m3", "mx", "blackwell:tcgen05"),
                                           ("e5m2", "block:64:e8m0", "m10:rne:promote=16")])
def test_scaled_mm_operator_runs_on_the_device(fmt, scale, acc):
    """torch.ops.fplab.scaled_mm on CUDA tensors: quantized and multiplied on the device
    (scaled_mm_kernel), bit for bit the CPU operator's result. (fp16 itself as the accumulator
    overflows here: blocks scaled to e5m2's 57344 make products past 65504, and every output is
    NaN; m10 keeps fp16's significand without its range.)"""
    import fplab.torch  # noqa: F401  (registers the kernels)
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(33, 200, generator=g), torch.randn(200, 21, generator=g)
    got = torch.ops.fplab.scaled_mm(a.cuda(), b.cuda(), fmt, "", scale, acc)
    want = torch.ops.fplab.scaled_mm(a, b, fmt, "", scale, acc)
    assert got.is_cuda
    assert np.isfinite(want.numpy()).all()  # a case of NaNs would compare nothing
    same_bits(got.cpu().numpy(), want.numpy(), f"scaled_mm {fmt} {scale} {acc}")


def test_matmul_cuda_tensor_scales_on_the_device():
    """Tensor scales as one-element CUDA tensors (read on the device) give the host floats' bits."""
    g = torch.Generator().manual_seed(7)
    a = torch.from_numpy(fplab.round(torch.randn(8, 100, generator=g).numpy(), "e4m3")).cuda()
    b = torch.from_numpy(fplab.round(torch.randn(100, 8, generator=g).numpy(), "e4m3")).cuda()
    ts = torch.tensor([0.75], device="cuda")
    c1 = tc.matmul_cuda(a, b, "e4m3", acc="m13:rtz", a_tscale=ts, b_tscale=3.0)
    c2 = tc.matmul_cuda(a, b, "e4m3", acc="m13:rtz", a_tscale=0.75, b_tscale=3.0)
    same_bits(c1.cpu().numpy(), c2.cpu().numpy(), "device tensor scale")


# --- a policy's casts on the device (autocast's plans: fplab.torch_cuda.policy_cast)

import copy  # noqa: E402

ft = pytest.importorskip("fplab.torch")
from fplab import _autocast  # noqa: E402

ALL_PRESETS = [p.strip() for p in _autocast.presets().split(",")]


@pytest.mark.parametrize("preset", ALL_PRESETS)
def test_policy_cast_op_on_the_device_is_the_hosts(preset):
    """torch.ops.fplab.cast on CUDA tensors (a plan run by the CUDA kernels, no host copy of the
    tensor) against the same policy on the CPU: every matmul site, both orientations, counted
    and not, over steps whose inputs move (delayed scaling's history): values bit for bit, the
    autocast state and telemetry equal."""
    assert tc.plans_on_device()
    lin = torch.nn.Linear(32, 16, bias=False)
    model = torch.nn.ModuleDict({"q_proj": lin})
    pc = ft.apply_policy(model, preset, telemetry="layers", n_layers=1)
    mg = copy.deepcopy(model).cuda()
    (pg,) = ft.applied_policies(mg)
    g = torch.Generator().manual_seed(9)
    for step in range(3):
        for site in [n for n in pc.site_index if n.split(".")[-1] in ("in", "w", "grad")]:
            i = pc.site_index[site]
            for k_rows, count in ((False, True), (True, False)):
                x = torch.randn(7, 48, generator=g) * float(4 ** step)
                yc = torch.ops.fplab.cast(x, pc.handle, i, 0, k_rows, count, 0)
                yg = torch.ops.fplab.cast(x.cuda(), pg.handle, i, 0, k_rows, count, 0)
                assert yg.is_cuda
                assert (_bits(yg.cpu().numpy()) == _bits(yc.numpy())).all(), (site, step, k_rows)
        assert pg.ctx.state() == pc.ctx.state() and pg.ctx.tel_state() == pc.ctx.tel_state()
        pc.end_step(), pg.end_step()


@pytest.mark.parametrize("preset", ["fp32", "bf16-amp", "fp8-current", "fp8-delayed", "mxfp8", "mxfp4", "nvfp4"])
def test_policy_linear_on_the_device(preset):
    """One Linear under a policy on CUDA: its forward casts and dgrad's cast of dout (inputs the
    CPU sees alike: x, W, and dout = 1 from y.sum()) count the telemetry and move the history as
    on the CPU, bit for bit; the products are torch's (cuBLAS), so outputs and gradients agree
    to float32 accuracy only."""
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products, as the CPU's
    lin = torch.nn.Linear(64, 32, bias=False)
    model = torch.nn.ModuleDict({"q_proj": lin})
    pc = ft.apply_policy(model, preset, telemetry="layers", n_layers=1)
    mg = copy.deepcopy(model).cuda()
    (pg,) = ft.applied_policies(mg)
    g = torch.Generator().manual_seed(4)
    for step in range(3):
        x = torch.randn(16, 64, generator=g) * float(2 ** step)
        xg = x.cuda().requires_grad_()
        x.requires_grad_()
        yc, yg = model["q_proj"](x), mg["q_proj"](xg)
        yc.sum().backward(), yg.sum().backward()
        torch.testing.assert_close(yg.detach().cpu(), yc.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(xg.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)
        assert pg.ctx.tel_state() == pc.ctx.tel_state()
        assert pg.ctx.state() == pc.ctx.state()
        pc.end_step(), pg.end_step()
