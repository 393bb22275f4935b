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


# --- a policy's casts as autocast's plans (fplab.torch_cuda.policy_cast): the device path's
# dispatch run on CPU tensors with the host executor (Policy.plan_executor = "host"), which
# computes what the CUDA kernels compute (tests/test_cast_plan_cuda_shim.c holds the two equal)

import copy  # noqa: E402

from conftest import same_bits  # noqa: E402
from test_torch_policy import Toy, data  # noqa: E402

ft = pytest.importorskip("fplab.torch")
from fplab import _autocast  # noqa: E402

ALL_PRESETS = [p.strip() for p in _autocast.presets().split(",")]


def _train(m, pol, x, steps=3):
    """Three steps, two micro-batches in the second, inputs whose magnitude moves (delayed
    scaling's history then moves): the outputs, gradients and each step's telemetry."""
    got = []
    for s in range(steps):
        for micro in range(2 if s == 1 else 1):
            y = m(x * float(2 ** (2 * s + micro)))
            y.square().mean().backward()
            got.append(y.detach().clone())
        got += [p.grad.clone() for p in m.parameters()]
        for p in m.parameters():
            p.grad = None
        pol.end_step()
        got.append(pol.telemetry())
    return got


def _spy(monkeypatch):
    """The casts that run as plans: (site name, layer, k_rows, count) per policy_cast call of an
    active site."""
    seen = []
    real = tc.policy_cast

    def spy(ctx, site, layer, x, k_rows, count, where="cuda", finish=True):
        assert where == "host" and x.device.type == "cpu"
        d = ctx.describe()
        if d["active"][site]:  # an inactive site's plan is a copy: nothing runs
            seen.append((d["site_names"][site], layer, bool(k_rows), bool(count)))
        return real(ctx, site, layer, x, k_rows, count, where, finish)

    monkeypatch.setattr(tc, "policy_cast", spy)
    return seen


@pytest.mark.parametrize("preset", ALL_PRESETS)
def test_plans_give_the_host_paths_bits(preset, monkeypatch):
    """Every preset: a model whose casts run as plans (the device path's dispatch and argument
    mapping, on the host executor) trains to the host path's bits (outputs, gradients), the same
    telemetry every step and the same autocast state (delayed-scaling histories)."""
    _lib_or_skip()
    seen = _spy(monkeypatch)
    a = Toy(layers=1)
    pa = ft.apply_policy(a, preset, telemetry="layers")
    b = copy.deepcopy(a)
    (pb,) = ft.applied_policies(b)
    x = data()
    want = _train(a, pa, x)
    assert not seen  # the host path makes no plan
    pb.plan_executor = "host"
    got = _train(b, pb, x)
    for u, v in zip(got, want):
        if isinstance(u, torch.Tensor):
            same_bits(u.numpy(), v.numpy())
        else:
            assert u == v
    assert pb.ctx.state() == pa.ctx.state()
    matmul_sites = any(pa.active[pa.site_index[f"{p}.{w}"]] for p in ft.PROJECTIONS for w in ("in", "w", "grad"))
    assert bool(seen) == matmul_sites, (preset, len(seen))


def test_what_takes_the_host_path(monkeypatch):
    """Plans where they apply: not for an emulated accumulator's product (its operands are
    element values and scales apart), not for NVFP4's wgrad (the Hadamard rotation), not under
    pol.record (which keeps each cast's input); a plan's counted casts are fprop's and dgrad's
    dout, as autocast counts them."""
    _lib_or_skip()
    seen = _spy(monkeypatch)
    x = data()
    m = Toy(layers=1)
    pol = ft.apply_policy(m, "mxfp8", accumulator="bf16 *.fprop")
    pol.plan_executor = "host"
    m(x).square().mean().backward()
    assert seen and not any(not k and s.endswith((".in", ".w")) and c for s, _, k, c in seen)  # no fprop plan
    assert any(s.endswith(".grad") and not k and c for s, _, k, c in seen)   # dgrad's dout, counted
    assert any(s.endswith(".in") and k and not c for s, _, k, c in seen)     # wgrad's x, uncounted
    seen.clear()
    m = Toy(layers=1)
    pol = ft.apply_policy(m, "nvfp4")
    pol.plan_executor = "host"
    m(x).square().mean().backward()
    assert any(s.endswith(".in") and not k for s, _, k, _ in seen)           # fprop
    assert not any(s.endswith(".in") and k for s, _, k, _ in seen)           # wgrad: host (Hadamard)
    assert any(s.endswith(".w") and k for s, _, k, _ in seen)                # dgrad's W
    seen.clear()
    m = Toy(layers=1)
    pol = ft.apply_policy(m, "mxfp8")
    pol.plan_executor = "host"
    pol.record = []
    m(x).square().mean().backward()
    assert not seen and pol.record


@pytest.mark.parametrize("preset", ["fp8-delayed", "nvfp4", "mxfp8", "fp8-current"])
def test_cast_op_plans_give_the_host_paths_bits(preset):
    """torch.ops.fplab.cast through a plan (the "cuda" kernel's path) equals the host cast, values
    and state, counted and not, both orientations."""
    _lib_or_skip()
    a = Toy(layers=1)
    pa = ft.apply_policy(a, preset, telemetry="layers")
    b = copy.deepcopy(a)
    (pb,) = ft.applied_policies(b)
    pb.plan_executor = "host"
    g = torch.Generator().manual_seed(5)
    for site in ("attn.qkv.in", "mlp.down.grad", "lm_head.w"):
        for k, (k_rows, count) in enumerate(((False, True), (True, False), (False, True))):
            x = torch.randn(3, 5, 32, generator=g) * (10.0 ** k)
            i = pa.site_index[site]
            ya = torch.ops.fplab.cast(x, pa.handle, i, 0, k_rows, count, 0)
            yb = torch.ops.fplab.cast(x, pb.handle, i, 0, k_rows, count, 0)
            same_bits(yb.numpy(), ya.numpy())
            assert yb.shape == x.shape and yb.data_ptr() != x.data_ptr()
    assert pb.ctx.state() == pa.ctx.state() and pb.ctx.tel_state() == pa.ctx.tel_state()


def test_plan_bytes_and_refusals():
    """Context.cast_plan's kinds (0 copy, 1 round: delayed, 2 quantize), run_plan's refusal of a
    copy plan, cast_finish's checks."""
    lib = _lib_or_skip()
    assert lib
    ctx = _autocast.Context(_autocast.policy_text("fp8-delayed"), "test", 2, 0, "sites")
    names = ctx.describe()["site_names"]
    kind, plan, one = ctx.cast_plan(names.index("attn.qkv.in"), 0, 4, 8, False, True)
    assert kind == tc.PLAN_ROUND and not one
    kind, plan2, one = ctx.cast_plan(names.index("master"), -1, 4, 8, False, True)
    assert kind == tc.PLAN_COPY
    x = torch.ones(4, 8)
    with pytest.raises(RuntimeError, match="invalid argument"):
        tc.run_plan(plan2, torch.empty_like(x), x, where="host")
    with pytest.raises(ValueError, match="cast_finish"):
        ctx.cast_finish(plan[:-1], bytes(80), 0.0)
    with pytest.raises(ValueError):
        ctx.cast_plan(names.index("attn.qkv.in"), 5, 4, 8, False, True)  # layer out of range
    ctx = _autocast.Context(_autocast.policy_text("fp8-current"), "test", 2, 0, "sites")
    kind, plan, one = ctx.cast_plan(names.index("attn.qkv.in"), 0, 4, 8, False, True)
    assert kind == tc.PLAN_QUANTIZE and one
