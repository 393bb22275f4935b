"""Issue 36, item 2: fplab's casts and products as torch.ops.fplab operators: opcheck passes for
each; torch.compile(fullgraph=True) of a model under every preset gives the eager forward and
gradients bit for bit (aot_eager for every preset, inductor for one); activation checkpointing
recomputes the same casts (stochastic-rounding draws included) and gives the same gradients;
the telemetry counts of a compiled step are the eager step's."""
import copy

import pytest

import fplab
from conftest import same_bits

torch = pytest.importorskip("torch")
ft = pytest.importorskip("fplab.torch")

from test_torch_policy import PRESETS, Toy, data  # noqa: E402


def test_opcheck_every_operator():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 64, generator=g, requires_grad=True)
    w = [torch.randn(16, 64, generator=g, requires_grad=True), torch.randn(8, 64, generator=g, requires_grad=True)]
    b = [torch.randn(16, generator=g, requires_grad=True)]
    m = torch.nn.Module()  # one group of two Linears (gate and up: one input), the first with a bias
    m.gate_proj, m.up_proj = torch.nn.Linear(64, 16), torch.nn.Linear(64, 8, bias=False)
    for preset in ("nvfp4",):  # stochastic rounding, the Hadamard transform
        pol = ft.apply_policy(m, preset, replace=True)
        torch.library.opcheck(torch.ops.fplab.linear, (x, w, b, pol.handle, 0, True))
        gs = [torch.randn(8, 16, generator=g), torch.randn(8, 8, generator=g)]
        torch.library.opcheck(torch.ops.fplab.linear_backward, (gs, x.detach(), [t.detach() for t in w], 1,
                                                                 pol.handle, 0, True))
        site = pol.site_index["mlp.gate_up.in"]
        torch.library.opcheck(torch.ops.fplab.cast, (x, pol.handle, site, 0, False, False, 0))
    ft.remove_policy(m)
    for fmt, scale, mode in (("e4m3", "mx", "rne"), ("e2m1", "nvfp4", "sr"), ("bf16", "none", "sr"),
                             ("e4m3", "fp8block1x128", "rtz")):
        torch.library.opcheck(torch.ops.fplab.quantize, (x, fmt, scale, -1, mode, 7, 0))
    for p in (0, 1, 2):
        a = torch.randn(8, 16, generator=g, requires_grad=True)
        bb = torch.randn(*((16, 64) if p == 1 else (8, 64) if p == 2 else (32, 16)), generator=g,
                         requires_grad=True)
        torch.library.opcheck(torch.ops.fplab.matmul, (a, bb, p))
    a, bm = torch.randn(8, 64, generator=g, requires_grad=True), torch.randn(64, 4, generator=g, requires_grad=True)
    torch.library.opcheck(torch.ops.fplab.scaled_mm, (a, bm, "bf16", "", "none", "bf16"))


def test_quantize_op_is_fplab_quantize_with_counts():
    x = data() * 1e3
    v, st = torch.ops.fplab.quantize(x, "e4m3", "tensor", -1, "sr", 5, 0)
    q = fplab.quantize(x.numpy(), "e4m3", scale="tensor", mode="sr", seed=5)
    same_bits(v.numpy(), q.values)
    assert st.tolist() == [q.stats.n, q.stats.overflow, q.stats.underflow, q.stats.subnormal, q.stats.nan_in,
                           q.stats.invalid]
    y = ft.fake_quantize(x.requires_grad_(True), "e4m3", scale="tensor")
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))  # straight through


def _step(m, x):
    y = m(x)
    y.square().mean().backward()
    return y.detach(), [p.grad.clone() for p in m.parameters()]


def _compare(preset, backend, x):
    base = Toy(layers=1)
    pe = ft.apply_policy(base, preset)
    mc = copy.deepcopy(base)  # its own policy, same state
    (pc,) = ft.applied_policies(mc)
    ye, ge = _step(base, x)
    cm = torch.compile(mc, backend=backend, fullgraph=True)
    yc, gc = _step(cm, x)
    same_bits(yc.numpy(), ye.numpy())
    for a, b in zip(gc, ge):
        same_bits(a.numpy(), b.numpy())
    assert pc.telemetry() == pe.telemetry()  # counted at run time by the compiled graph too
    return pe, pc


@pytest.mark.parametrize("preset", PRESETS)
def test_compile_fullgraph_equals_eager(preset):
    torch._dynamo.reset()
    _compare(preset, "aot_eager", data())


def test_compile_inductor_equals_eager():
    torch._dynamo.reset()
    _compare("mxfp8", "inductor", data())


def _eager_run(preset, fast, monkeypatch):
    """Two steps of a Toy (checkpointed blocks, bias on the q/k/v group) under preset, eager,
    through _LinearEager (fast) or torch.ops.fplab.linear: outputs, gradients, telemetry, state
    and how many Linear groups took the fast path."""
    from fplab import torch_ops
    monkeypatch.setattr(torch_ops, "_EAGER_FAST", fast)
    taken = []
    apply = torch_ops._LinearEager.apply
    monkeypatch.setattr(torch_ops._LinearEager, "apply", lambda *a: taken.append(1) or apply(*a))
    m = Toy()
    m.checkpoint = True
    torch.manual_seed(5)
    for b in m.layers:  # a bias on the first member of each q/k/v group
        b.self_attn.q_proj = torch.nn.Linear(64, 64)
    with ft.apply_policy(m, preset) as pol:
        out = []
        for step in range(2):
            y, g = _step(m, data(seed=step + 1))
            out += [y, *g]
            m.zero_grad()
            pol.end_step(1.0)
        return out, pol.telemetry(), pol.get_extra_state(), len(taken)


@pytest.mark.parametrize("preset", PRESETS)
def test_eager_path_is_the_operator_bit_for_bit(preset, monkeypatch):
    """Eager mode calls the policy's kernels through one autograd.Function instead of the
    operators' dispatch (fplab.torch_ops.call_linear): the same outputs, gradients, telemetry
    and policy state, checkpointing's recompute included, and the path is the one claimed."""
    fast, slow = _eager_run(preset, True, monkeypatch), _eager_run(preset, False, monkeypatch)
    assert fast[3] > 0 and slow[3] == 0
    for a, b in zip(fast[0], slow[0]):
        same_bits(a.numpy(), b.numpy())
    assert fast[1] == slow[1]
    assert fast[2].keys() == slow[2].keys()
    for k in fast[2]:
        a, b = fast[2][k], slow[2][k]
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b, k


def test_traced_calls_take_the_operator():
    """Under a dispatch mode (as export and the fake tensors of tracing install) call_linear takes
    torch.ops.fplab.linear, never the Python kernels on what may be no real data."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from fplab import torch_ops
    seen = []

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    m = Toy(layers=1)
    with ft.apply_policy(m, "mxfp8"):
        assert torch_ops._plain_eager((data(),))
        with Seen():
            assert not torch_ops._plain_eager((data(),))
            m(data())
    assert any("fplab.linear" in s for s in seen)


@pytest.mark.parametrize("preset", ["nvfp4", "pure-bf16-sr", "fp8-delayed"])
def test_checkpoint_recomputes_the_same_casts(preset):
    """torch.utils.checkpoint (non-reentrant) recomputes each block's casts uncounted and with
    the same stochastic-rounding draws: the gradients and telemetry equal the run without it."""
    x = data()
    runs = []
    for ckpt in (False, True):
        m = Toy()
        m.checkpoint = ckpt
        with ft.apply_policy(m, preset) as pol:
            pol.record = []
            _, g = _step(m, x)
            runs.append((g, pol.telemetry(), [r for r in pol.record if r[3]]))
    for a, b in zip(runs[0][0], runs[1][0]):
        same_bits(a.numpy(), b.numpy())
    assert runs[0][1] == runs[1][1]
    assert len(runs[0][2]) == len(runs[1][2])  # the counted casts once each


def test_cuda_kernels_registered_where_cuda_is(monkeypatch):
    """fplab.torch_cuda.register_kernels: nothing without CUDA; with it, quantize's and
    scaled_mm's "cuda" kernels through torch_ops.register_device_kernels (the one place), and not
    cast's (a policy's rule runs on the host)."""
    import fplab.torch_cuda as tc
    import fplab.torch_ops as ops
    seen = []
    monkeypatch.setattr(ops, "register_device_kernels", lambda dev, k: seen.append((dev, sorted(k))))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert tc.register_kernels() == {} and not seen
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert tc.register_kernels() == {"quantize": tc.quantize_kernel, "scaled_mm": tc.scaled_mm_kernel}
    assert seen == [("cuda", ["quantize", "scaled_mm"])]


@pytest.mark.parametrize("fmt,scale,axis,mode", [("e4m3", "mx", -1, "rne"), ("e4m3", "mx", 0, "rne"),
                                                 ("mxfp4", "", 1, "rne"), ("e5m2", "", -1, "sr"),
                                                 ("e2m1", "nvfp4", -1, "sr")])
def test_cuda_quantize_kernel_passes_fplab_quantize_arguments(monkeypatch, fmt, scale, axis, mode):
    """The "cuda" kernel of fplab::quantize on the host, its device call (quantize_cuda, which
    blocks along the last dim) replaced by fplab.quantize: the scheme names, the axis moved last
    and back, and the counts give the CPU kernel's result bit for bit."""
    import fplab.torch_cuda as tc
    import fplab.torch_ops as ops

    def host(a, elem, recipe, mode, seed, offset):
        q = fplab.quantize(a.numpy(), elem, scale=recipe, mode=mode, seed=seed, offset=offset)
        counts = torch.tensor([getattr(q.stats, f) for f in ops.STATS] + [0] * 4, dtype=torch.int64)
        return torch.from_numpy(q.values), None, None, counts

    monkeypatch.setattr(tc, "quantize_cuda", host)
    x = torch.randn(3, 64, 48, generator=torch.Generator().manual_seed(5)) * 10
    got = tc.quantize_kernel(x, fmt, scale, axis, mode, 7, 11)
    want = ops.quantize_host(x, fmt, scale, axis, mode, 7, 11)
    same_bits(got[0].numpy(), want[0].numpy())
    assert got[0].shape == x.shape and got[1].tolist() == want[1].tolist()
