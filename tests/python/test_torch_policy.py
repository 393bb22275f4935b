"""fplab.torch.apply_policy (only where torch is installed): the casts of each nn.Linear against
fplab.quantize (the same library through another path), orientation along each GEMM's K, fused
q/k/v groups, telemetry counts, recompute, out_order (casts in another feature order), emulated
accumulators against fplab.scaled_matmul, the loss scaler, the weight-update wrapper, and the
log that `fplab report` reads."""
import json
import math
import os

import numpy as np
import pytest

import fplab
from conftest import same_bits

torch = pytest.importorskip("torch")
ft = pytest.importorskip("fplab.torch")
LM_HEAD = 4  # fplab.torch_policy.PROJECTIONS.index("lm_head")


class Attn(torch.nn.Module):
    def __init__(self, c, kv):
        super().__init__()
        self.q_proj = torch.nn.Linear(c, c, bias=False)
        self.k_proj = torch.nn.Linear(c, kv, bias=False)
        self.v_proj = torch.nn.Linear(c, kv, bias=False)
        self.o_proj = torch.nn.Linear(c + 2 * kv, c, bias=False)

    def forward(self, x):
        return self.o_proj(torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], -1))


class Mlp(torch.nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.gate_proj = torch.nn.Linear(c, h, bias=False)
        self.up_proj = torch.nn.Linear(c, h, bias=False)
        self.down_proj = torch.nn.Linear(h, c, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(torch.nn.Module):
    def __init__(self, c, kv, h):
        super().__init__()
        self.self_attn, self.mlp = Attn(c, kv), Mlp(c, h)

    def forward(self, x):
        x = x + self.self_attn(x)
        return x + self.mlp(x)


class Toy(torch.nn.Module):
    """A Llama-shaped stack of Linears (names as Hugging Face's), float32."""

    def __init__(self, c=64, kv=32, h=96, v=40, layers=2, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.layers = torch.nn.ModuleList([Block(c, kv, h) for _ in range(layers)])
        self.lm_head = torch.nn.Linear(c, v, bias=False)
        self.checkpoint = False

    def forward(self, x):
        for b in self.layers:
            if self.checkpoint:
                x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
            else:
                x = b(x)
        return self.lm_head(x)


def data(n=32, c=64, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, c, generator=g) * 2


def casts(rec, site, layer, k_rows):
    return [(x, y) for s, l, k, _, x, y in rec if s == site and l == layer and k == k_rows]


def test_sites_follow_module_paths():
    m = Toy()
    with ft.apply_policy(m, "mxfp8") as pol:
        assert pol.sites["layers.1.mlp.down_proj"] == ("mlp.down", 1)
        assert pol.sites["layers.0.self_attn.k_proj"] == ("attn.qkv", 0)
        assert pol.sites["lm_head"] == ("lm_head", 2)  # model level: layer n_layers, as the C trainer's head
        assert pol.name == "mxfp8" and "site attn.qkv.in e4m3 mx" in pol.text
    assert type(m.lm_head) is torch.nn.Linear  # restored


def test_forward_and_backward_casts_along_k():
    """mxfp8: e4m3 activations and weights, e5m2 gradients, blocks of 32 along each product's K."""
    m = Toy()
    x = data().requires_grad_(True)
    pol = ft.apply_policy(m, "mxfp8")
    pol.record = []
    m(x).square().mean().backward()
    rec = pol.record
    (xin, xc), = casts(rec, "mlp.down.in", 0, False)  # forward: blocks along the features
    same_bits(xc.numpy(), fplab.quantize(xin.numpy(), "e4m3", scale="mx").values)
    (_, xt), = casts(rec, "mlp.down.in", 0, True)  # wgrad: blocks along the tokens
    same_bits(xt.numpy(), fplab.quantize(xin.numpy(), "e4m3", scale="mx", axis=0).values)
    w = m.layers[0].mlp.down_proj.weight.detach()
    (w0, wf), = casts(rec, "mlp.down.w", 0, False)
    same_bits(w0.numpy(), w.numpy())
    same_bits(wf.numpy(), fplab.quantize(w.numpy(), "e4m3", scale="mx").values)  # along in_features
    (_, wd), = casts(rec, "mlp.down.w", 0, True)  # dgrad: along out_features
    same_bits(wd.numpy(), fplab.quantize(w.numpy(), "e4m3", scale="mx", axis=0).values)
    (g, gc), = casts(rec, "mlp.down.grad", 0, False)
    same_bits(gc.numpy(), fplab.quantize(g.numpy(), "e5m2", scale="mx").values)
    (_, gt), = casts(rec, "mlp.down.grad", 0, True)
    same_bits(gt.numpy(), fplab.quantize(g.numpy(), "e5m2", scale="mx", axis=0).values)
    # the LM head stays bf16 (the preset's lm_head.* line): plain rounding
    (hin, hc), = casts(rec, "lm_head.in", 2, False)
    same_bits(hc.numpy(), fplab.round(hin.numpy(), "bf16"))
    # the products are the cast operands' (float32 sums: gamma_K bound)
    wgrad = m.layers[0].mlp.down_proj.weight.grad.numpy().astype(np.float64)
    want = gt.numpy().astype(np.float64).T @ xt.numpy().astype(np.float64)
    bound = 2 * xt.shape[0] * 2.0 ** -24 * (np.abs(gt.numpy()).T.astype(np.float64) @ np.abs(xt.numpy()))
    assert np.all(np.abs(wgrad - want) <= bound + 1e-30)
    pol.remove()


def test_qkv_group_casts_input_once_and_counts_like_the_trainer():
    m = Toy()
    x = data()
    n, c, kv = x.shape[0], 64, 32
    with ft.apply_policy(m, "mxfp8", telemetry="layers") as pol:
        pol.record = []
        m(x).sum().backward()
        fwd_in = [r for r in pol.record if r[0] == "attn.qkv.in" and r[1] == 0 and not r[2]]
        assert len(fwd_in) == 1  # q, k and v read one cast of their input
        sites = pol.telemetry()["sites"]
        assert sites["L0.attn.qkv.in"]["n"] == n * c
        assert sites["L0.attn.qkv.w"]["n"] == c * c + 2 * kv * c
        assert sites["L0.attn.qkv.grad"]["n"] == n * (c + 2 * kv)
        assert sites["attn.qkv.in"]["n"] == 2 * n * c  # both layers
        order = [r[4].shape[0] for r in pol.record if r[0] == "attn.qkv.grad" and r[1] == 1 and not r[2]]
        assert order == [n, n, n]


def test_recompute_and_eval_are_uncounted_and_identical():
    x = data()
    grads, tels = [], []
    for ckpt in (False, True):
        m = Toy()
        m.checkpoint = ckpt
        with ft.apply_policy(m, "nvfp4") as pol:  # SR gradients and the Hadamard transform
            m(x).square().mean().backward()
            with torch.no_grad():
                m(x)  # evaluation: cast, not counted
            tels.append(pol.telemetry())
        grads.append([p.grad.clone() for p in m.parameters()])
    assert tels[0] == tels[1]
    for a, b in zip(*grads):
        same_bits(a.numpy(), b.numpy())


def _q_model(w):
    m = torch.nn.Sequential()
    m.add_module("q_proj", torch.nn.Linear(w.shape[1], w.shape[0], bias=False))
    with torch.no_grad():
        m.q_proj.weight.copy_(w)
    return m


def _q_run(m, x, r, order=None, **kw):
    """One forward and backward of m (a lone q_proj) under nvfp4 (stochastic-rounding gradients,
    16x16 weight tiles, the Hadamard transform); the loss weights the output, in `order`, by r."""
    x = x.clone().requires_grad_(True)
    with ft.apply_policy(m, "nvfp4", **kw) as pol:
        pol.record = []
        y = m(x)
        (y if order is None else y[:, order]).mul(r).sum().backward()
        return y.detach(), x.grad, m.q_proj.weight.grad, pol.record


def test_out_order_casts_as_the_model_that_stores_that_order():
    """out_order=rope_pairs_order: a q projection in rotate_half's layout casts, multiplies and
    differentiates bit for bit as the same projection stored with its rows in the C trainer's
    interleaved layout (the parity of tools/check_torch_policy.py rests on it). Without it, the
    gradients' stochastic rounding draws fall on other elements."""
    nh, hs, c = 4, 16, 64
    order = ft.rope_pairs_order(nh * hs, nh)
    assert order[:4].tolist() == [0, 8, 1, 9]  # pairs (i, i + hs/2) made adjacent
    g = torch.Generator().manual_seed(2)
    w = torch.randn(nh * hs, c, generator=g) * 0.1
    x, r = data(32, c), torch.randn(32, nh * hs, generator=g)
    yb, dxb, dwb, recb = _q_run(_q_model(w[order]), x, r)  # stored in the cast order
    ya, dxa, dwa, reca = _q_run(_q_model(w), x, r, order, out_order={"q_proj": order})
    same_bits(ya[:, order].numpy(), yb.numpy())
    same_bits(dxa.numpy(), dxb.numpy())
    same_bits(dwa[order].numpy(), dwb.numpy())
    assert [e[:4] for e in reca] == [e[:4] for e in recb]
    for ea, eb in zip(reca, recb):  # every cast sees the same tensor and gives the same values
        same_bits(ea[4].numpy(), eb[4].numpy())
        same_bits(ea[5].numpy(), eb[5].numpy())
    _, _, dwn, recn = _q_run(_q_model(w), x, r, order)  # the module's own order
    sr = [(a[5], b[5]) for a, b in zip(recn, recb) if a[0] == "attn.qkv.grad"]
    assert sr and not all(torch.equal(a[:, order], b) for a, b in sr)
    assert not torch.equal(dwn[order], dwb)
    with pytest.raises(ValueError, match="permutation"):
        ft.apply_policy(_q_model(w), "nvfp4", out_order={"q_proj": order[:-1]})
    with pytest.raises(ValueError, match="matches no"):
        ft.apply_policy(_q_model(w), "nvfp4", out_order={"*.k_proj": order})


def _sr_step(w, g, flat_order=None):
    """One SGD step of a lone 16 x 16 Linear under pure-bf16-sr (bf16 weights, the update rounded
    stochastically), its weight w and gradient g given; returns the new weight."""
    m = torch.nn.Sequential()
    m.add_module("down_proj", torch.nn.Linear(16, 16, bias=False))
    with torch.no_grad():
        m.down_proj.weight.copy_(w)
    with ft.apply_policy(m, "pure-bf16-sr") as pol:
        opt = ft.PolicyOptimizer(torch.optim.SGD(m.parameters(), lr=1e-3), pol, flat_order=flat_order)
        m.down_proj.weight.grad = g.clone()
        opt.step()
    return m.down_proj.weight.detach().clone()


def test_flat_order_rounds_updates_as_the_model_that_stores_that_order():
    """PolicyOptimizer(flat_order=...): the update's stochastic rounding draws as in a model whose
    parameters are stored in that order (tools/check_torch_policy.py passes the C trainer's
    buffer order); without it the draws fall on other elements."""
    g = torch.Generator().manual_seed(3)
    w, grad = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    order = torch.randperm(256, generator=g)
    perm = lambda t: t.reshape(-1)[order].reshape(16, 16)  # noqa: E731
    stored = _sr_step(perm(w), perm(grad))  # the model that stores that order
    ordered = _sr_step(w, grad, flat_order=order)
    same_bits(perm(ordered).numpy(), stored.numpy())
    plain = _sr_step(w, grad)
    assert not torch.equal(perm(plain), stored)
    with pytest.raises(ValueError, match="permutation"):
        _sr_step(w, grad, flat_order=order[:-1])


def test_emulated_accumulator_spec_passes_through():
    """An accumulator line goes to the library's grammar unchanged; the product is mm_cpu's with
    that accumulator, as fplab.scaled_matmul computes it."""
    lin = torch.nn.Linear(64, 16, bias=False)
    mod = torch.nn.Sequential()
    mod.add_module("fc1", lin)
    x = data()
    with ft.apply_policy(mod, "bf16-amp", accumulator="bf16") as pol:
        assert pol.emulated[ft.PROJECTIONS.index("mlp.gate_up")] == (True, True, True)
        y = mod(x)
    want = fplab.scaled_matmul(x.numpy(), np.ascontiguousarray(lin.weight.detach().numpy().T), "bf16",
                               acc="bf16").c
    same_bits(y.detach().numpy(), want)
    with pytest.raises(ValueError, match="accumulator"):
        ft.apply_policy(mod, "bf16-amp", accumulator="no-such-acc")


def test_fp32_is_plain_float32():
    m = Toy()
    x = data()
    ref = m(x)
    with ft.apply_policy(m, "fp32"):
        y = m(x)
    assert torch.allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_products_torch_is_plain_pytorch_and_fplab_the_c_trainers():
    """fp32 under products="torch" (the default) is plain PyTorch bit for bit, forward and
    gradients: nothing is cast and torch multiplies. Under products="fplab" the products are the
    C trainer's (torch.ops.fplab.matmul: op_matmul_*), bit for bit, forward and gradients. (One
    Linear per group: a group's dx sums its members' products in the C trainer's order, which
    autograd's sum over the input's uses need not follow.)"""
    x = data()

    def Toy():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 64, bias=False),
                                   torch.nn.Tanh(), torch.nn.Linear(64, 40))

    def run(m):
        xi = x.clone().requires_grad_()
        y = m(xi)
        y.square().mean().backward()
        return [y.detach(), xi.grad] + [p.grad for p in m.parameters()]

    def fplab_linear(mod, inp):  # nn.Linear's products as torch.ops.fplab.matmul computes them
        out = torch.ops.fplab.matmul(inp.reshape(-1, inp.shape[-1]), mod.weight, 0)
        return (out + mod.bias if mod.bias is not None else out).reshape(*inp.shape[:-1], -1)

    want_torch = run(Toy())
    m = Toy()
    for mod in m.modules():
        if isinstance(mod, torch.nn.Linear):
            mod.forward = (lambda mod: (lambda inp: fplab_linear(mod, inp)))(mod)
    want_fplab = run(m)
    for products, want in (("torch", want_torch), ("fplab", want_fplab)):
        m = Toy()
        with ft.apply_policy(m, "fp32", products=products):
            got = run(m)
        for a, b in zip(got, want):
            same_bits(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="products"):
        ft.apply_policy(Toy(), "fp32", products="blas")


def test_refusals():
    m = Toy()
    with pytest.raises(ValueError):
        ft.apply_policy(m, "no-such-preset")
    with ft.apply_policy(m, "bf16-amp"):
        with pytest.raises(TypeError, match="float32"):
            m(data().bfloat16())


def test_loss_scaler_skips_and_backs_off():
    m = Toy()
    opt = torch.optim.SGD(m.parameters(), lr=0.0)
    with ft.apply_policy(m, "fp16-amp") as pol:
        sc = ft.GradScaler(pol)
        assert sc.get_scale() == 65536.0
        loss = m(data()).square().mean()
        sc.scale(loss * 1e30).backward()  # overflows fp16 gradients: inf
        sc.step(opt)
        sc.update()
        assert sc.last_skipped and sc.get_scale() == 32768.0
        pol.end_step(loss)
        opt.zero_grad()
        sc.scale(m(data()).square().mean()).backward()
        sc.step(opt)
        sc.update()
        assert not sc.last_skipped and sc.get_scale() == 32768.0


@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), None])
def test_scaler_sees_one_non_finite_element(bad):
    """One NaN or inf element in one gradient (the last parameter's, at its last element) skips
    the step and leaves every weight as it was; the largest finite float32 does not."""
    m = Toy()
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    with ft.apply_policy(m, "fp32") as pol:
        sc = ft.GradScaler(pol)
        sc.scale(m(data()).square().mean()).backward()
        last = list(m.parameters())[-1]
        big = torch.finfo(torch.float32).max
        last.grad.view(-1)[-1] = big if bad is None else bad
        before = [p.detach().clone() for p in m.parameters()]
        sc.step(opt)
        sc.update()
        assert sc.last_finite == (bad is None)
        g = last.grad.view(-1)[-1].item()
        assert g == big if bad is None else not math.isfinite(g)  # the check changed no value
        moved = [not torch.equal(a, p.detach()) for a, p in zip(before, m.parameters())]
        assert all(moved) if bad is None else not any(moved)


def test_pure_bf16_sr_optimizer():
    m = Toy()
    with ft.apply_policy(m, "pure-bf16-sr") as pol:
        opt = ft.PolicyOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-3), pol)
        for p in m.parameters():  # the master site: weights stored in bf16 from the start
            same_bits(p.detach().numpy(), fplab.round(p.detach().numpy(), "bf16"))
        m(data()).square().mean().backward()
        opt.step()
        for p in m.parameters():
            same_bits(p.detach().numpy(), fplab.round(p.detach().numpy(), "bf16"))
            st = opt.state[p]
            same_bits(st["exp_avg"].numpy(), fplab.round(st["exp_avg"].numpy(), "bf16"))
        line = pol.end_step(1.0)
        assert 0 <= line["update"]["swamped"] <= 1 and line["update"]["changed"] > 0
        assert line["sites"]["master"]["n"] > 0 and line["sites"]["grads"]["n"] > 0


def _three_steps(m, pol, opt, frozen_at=None):
    """Three steps of the Toy m under pol with opt (layer 1's MLP frozen at step frozen_at): the
    weights, the step lines without timings, the Kahan compensation and the optimizer's states."""
    lines = []
    for step in range(3):
        if frozen_at is not None:
            m.layers[1].mlp.requires_grad_(step != frozen_at)
        m(data(seed=step + 1)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        line = pol.end_step(1.0)
        lines.append({k: v for k, v in line.items() if k not in ("elapsed_s", "tokens_per_s")})
    kahan = None if opt._kahan is None else opt._kahan.clone()
    states = [[t.clone() for t in st.values()] for st in opt.state.values()]
    return [p.detach().clone() for p in m.parameters()], lines, kahan, states


@pytest.mark.parametrize("preset", ["pure-bf16-sr", "pure-bf16-kahan"])
def test_update_in_place_is_the_flat_update(preset, monkeypatch):
    """PolicyOptimizer rounds each CPU parameter where it lies (round_update's `first`: the draws
    of its elements' indices in the flat vector) instead of a flat copy of all weights: three
    AdamW steps give the flat path's weights, moments, Kahan compensation and telemetry, bit
    for bit; with the index not passed the stochastic draws fall elsewhere."""
    from fplab import torch_optim

    def run(in_place, first=True):
        monkeypatch.setattr(torch_optim.PolicyOptimizer, "_in_place", lambda self, ps: in_place)
        m = Toy()
        with ft.apply_policy(m, preset) as pol:
            opt = ft.PolicyOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-2), pol)
            if not first:  # every tensor drawing from index 0
                def from_zero(self, ps, old):
                    with torch.no_grad():
                        for p, q in zip(ps, old):
                            self.policy.ctx.round_update(torch_optim._np(p.detach()), torch_optim._np(q), None,
                                                         p.numel(), 0)
                monkeypatch.setattr(torch_optim.PolicyOptimizer, "_round_in_place", from_zero)
            return _three_steps(m, pol, opt)[:3]
    (wf, lf, kf), (wi, li, ki) = run(False), run(True)
    for a, b in zip(wf, wi):
        same_bits(a.numpy(), b.numpy())
    assert lf == li
    assert (kf is None) == (ki is None) and (kf is None or torch.equal(kf, ki))
    if preset == "pure-bf16-sr":
        w0 = run(True, first=False)[0]
        assert any(not torch.equal(a, b) for a, b in zip(wf, w0))


def _adamw_reference(p, m, v, g, t, lr, b1, b2, eps, wd):
    """fplab.torch.AdamW's documented arithmetic in NumPy float32, one operation at a time."""
    f = np.float32
    b1, b2, lr, eps, wd = f(b1), f(b2), f(lr), f(eps), f(wd)
    c1, c2 = f(1.0 - float(b1) ** t), f(1.0 - float(b2) ** t)
    m[:] = b1 * m + (f(1) - b1) * g
    v[:] = b2 * v + (f(1) - b2) * g * g
    p -= (lr * wd) * p
    p -= lr * (m / c1) / (np.sqrt(v / c2) + eps)


def test_adamw_torch_ops_take_a_correctly_rounded_sqrt():
    """The torch-ops AdamW's square root is C's sqrtf bit for bit, on every CPU (ATen's float32
    sqrt is 1 ulp off for 17% of inputs on an AMD EPYC): 2^20 float32 inputs over every binade,
    subnormals, 0 and inf, against NumPy's (the hardware's correctly rounded sqrt)."""
    from fplab.torch_optim import _sqrt_rn
    bits = np.random.default_rng(5).integers(0, 0x7F800001, 1 << 20, dtype=np.uint32)
    bits[:4] = [0, 1, 0x7F7FFFFF, 0x7F800000]
    x = bits.view(np.float32)
    same_bits(_sqrt_rn(torch.from_numpy(x)).numpy(), np.sqrt(x), "sqrt")


@pytest.mark.parametrize("path", ["c", "torch ops"])
def test_fplab_adamw_is_its_documented_arithmetic(path, monkeypatch):
    """fplab.torch.AdamW, in C and in the torch operations that other devices take, gives the
    float32 operations of its docstring bit for bit over three steps (two parameter groups with
    their own hyperparameters), and stays within a few float32 ulps of torch.optim.AdamW: each
    differs from the exact update by at most ~10 roundings of 2^-24 relative a step, stated as
    64 ulps of |p| + lr after three steps."""
    from fplab import torch_optim
    if path == "torch ops":
        monkeypatch.setattr(torch_optim, "_fast", lambda t: False)
    g = torch.Generator().manual_seed(3)
    ps = [torch.nn.Parameter(torch.randn(37, 29, generator=g)), torch.nn.Parameter(torch.randn(300, generator=g))]
    ref = [p.detach().clone() for p in ps]
    groups = [dict(params=[ps[0]], lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95)),
              dict(params=[ps[1]], lr=3e-3, weight_decay=0.0, betas=(0.8, 0.99), eps=1e-6)]
    opt = ft.AdamW(groups)
    tref = torch.optim.AdamW([dict(gr, params=[r]) for gr, r in zip(groups, ref)])
    npm = [np.zeros(p.numel(), np.float32) for p in ps]
    npv = [np.zeros(p.numel(), np.float32) for p in ps]
    npp = [p.detach().numpy().reshape(-1).copy() for p in ps]
    for t in range(1, 4):
        for i, (p, r) in enumerate(zip(ps, ref)):
            p.grad = torch.randn(p.shape, generator=g) * (1e-3 if i else 1.0)
            r.grad = p.grad.clone()
            gr = opt.param_groups[i]
            _adamw_reference(npp[i], npm[i], npv[i], p.grad.numpy().reshape(-1), t, gr["lr"], *gr["betas"],
                             gr["eps"], gr["weight_decay"])
        opt.step()
        tref.step()
        for i, p in enumerate(ps):
            same_bits(p.detach().numpy().reshape(-1), npp[i])
            same_bits(opt.state[p]["exp_avg"].numpy().reshape(-1), npm[i])
            same_bits(opt.state[p]["exp_avg_sq"].numpy().reshape(-1), npv[i])
    for p, r, gr in zip(ps, ref, opt.param_groups):
        tol = 64 * 2.0 ** -24 * (r.detach().abs() + gr["lr"])
        assert bool(((p.detach() - r.detach()).abs() <= tol).all())
    assert int(opt.state[ps[0]]["step"]) == 3


@pytest.mark.parametrize("preset", ["fp32", "pure-bf16-sr", "pure-bf16-kahan", "pure-bf16"])
def test_fused_policy_step_is_the_separate_passes(preset, monkeypatch):
    """PolicyOptimizer over fplab.torch.AdamW runs the step and the policy's weight side in one
    pass: three steps (one with a module frozen, whose weights are still rounded and counted and
    whose moments are cast again) give the separate passes' weights, moments, Kahan compensation
    and step lines bit for bit; and the fused path is the one taken."""
    from fplab import torch_optim
    taken = []

    def run(fused):
        monkeypatch.setattr(torch_optim.PolicyOptimizer, "_fused",
                            (lambda self, ps: taken.append(1) or True) if fused else (lambda self, ps: False))
        m = Toy()
        with ft.apply_policy(m, preset) as pol:
            opt = ft.PolicyOptimizer(ft.AdamW(m.parameters(), lr=1e-2), pol)
            return _three_steps(m, pol, opt, frozen_at=1)
    (wa, la, ka, sa), (wb, lb, kb, sb) = run(False), run(True)
    assert taken
    for a, b in zip(wa, wb):
        same_bits(a.numpy(), b.numpy())
    for x, y in zip(sa, sb):
        for a, b in zip(x, y):
            same_bits(a.numpy(), b.numpy())
    assert la == lb
    assert (ka is None) == (kb is None) and (ka is None or torch.equal(ka, kb))
    if preset != "fp32":
        assert la[0]["update"]["changed"] > 0


def test_fused_step_is_the_default_for_fplab_adamw():
    """PolicyOptimizer takes the fused pass for fplab.torch.AdamW over CPU float32 parameters, and
    not for torch's AdamW or with flat_order."""
    m = Toy()
    with ft.apply_policy(m, "pure-bf16-sr") as pol:
        ps = list(m.parameters())
        assert ft.PolicyOptimizer(ft.AdamW(ps), pol)._fused(ps)
        assert not ft.PolicyOptimizer(torch.optim.AdamW(ps), pol)._fused(ps)
        n = sum(p.numel() for p in ps)
        assert not ft.PolicyOptimizer(ft.AdamW(ps), pol, flat_order=list(range(n))[::-1])._fused(ps)

        class Sub(ft.AdamW):  # a subclass's own step is kept
            pass
        assert not ft.PolicyOptimizer(Sub(ps), pol)._fused(ps)
    from fplab import torch_optim

    class Shard(torch.Tensor):  # a tensor subclass (as FSDP2's DTensor) never reaches the C pass
        pass
    assert torch_optim._fast(torch.zeros(4)) and not torch_optim._fast(torch.zeros(4).as_subclass(Shard))


@pytest.mark.parametrize("preset", ["pure-bf16-sr", "pure-bf16-kahan"])
def test_fused_policy_step_resumes_from_a_checkpoint(tmp_path, preset):
    """Two steps, torch.save of the model's and the PolicyOptimizer's state dicts, one more step
    after loading them into a fresh model and optimizer: the uninterrupted run's weights, moments
    and Kahan compensation, bit for bit (pure-bf16-sr: the update's draws are keyed by the
    policy's step, which the model's state dict carries)."""
    def make():
        m = Toy()
        pol = ft.apply_policy(m, preset)
        return m, pol, ft.PolicyOptimizer(ft.AdamW(m.parameters(), lr=1e-2), pol)

    def step(m, pol, opt, i):
        m(data(seed=i + 1)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        pol.end_step(1.0)

    m, pol, opt = make()
    for i in range(3):
        step(m, pol, opt, i)
        if i == 1:
            torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, tmp_path / "ck.pt")
    m2, pol2, opt2 = make()
    ck = torch.load(tmp_path / "ck.pt", weights_only=False)
    m2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    step(m2, pol2, opt2, 2)
    for a, b in zip(m.parameters(), m2.parameters()):
        same_bits(a.detach().numpy(), b.detach().numpy())
    for a, b in zip(opt.state.values(), opt2.state.values()):
        for k in ("exp_avg", "exp_avg_sq"):
            same_bits(a[k].numpy(), b[k].numpy())
        assert int(a["step"]) == int(b["step"]) == 3
    assert (opt._kahan is None) == (opt2._kahan is None)
    assert opt._kahan is None or torch.equal(opt._kahan, opt2._kahan)
    pol.remove(), pol2.remove()


def test_fused_step_is_an_optimizer_step_for_hooks_and_schedulers():
    """The fused pass runs through the inner optimizer's step(): a step hook sees each step and an
    LR scheduler attached to the inner optimizer neither warns nor falls out of step."""
    import warnings
    m = Toy()
    with ft.apply_policy(m, "pure-bf16-sr") as pol:
        inner = ft.AdamW(m.parameters(), lr=1e-2)
        opt = ft.PolicyOptimizer(inner, pol)
        assert opt._fused(list(m.parameters()))
        seen = []
        inner.register_step_post_hook(lambda o, a, k: seen.append(1))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched = torch.optim.lr_scheduler.StepLR(inner, step_size=1, gamma=0.5)
            for i in range(2):
                m(data(seed=i + 1)).square().mean().backward()
                opt.step()
                opt.zero_grad()
                sched.step()
                pol.end_step(1.0)
        assert len(seen) == 2 and inner.param_groups[0]["lr"] == pytest.approx(2.5e-3)


def test_scaled_moments_take_the_separate_passes(tmp_path):
    """Moment sites with a delayed or per-tensor scale are cast in the separate passes' order: the
    fused pass is not taken for them."""
    base = ft.policy_text("pure-bf16-sr")
    for rule in ("site adam.v e5m2 delayed", "site adam.m e4m3 tensor"):
        f = tmp_path / "p.policy"
        f.write_text(base + rule + "\n")
        m = Toy()
        with ft.apply_policy(m, str(f)) as pol:
            assert not ft.PolicyOptimizer(ft.AdamW(m.parameters()), pol)._fused(list(m.parameters()))


def test_fplab_adamw_refuses_what_it_does_not_compute():
    p = torch.nn.Parameter(torch.zeros(3, dtype=torch.bfloat16))
    p.grad = torch.zeros_like(p)
    with pytest.raises(TypeError, match="float32"):
        ft.AdamW([p]).step()
    q = torch.nn.Parameter(torch.zeros(3))
    q.grad = torch.zeros_like(q)
    with pytest.raises(ValueError, match="amsgrad"):
        ft.AdamW([dict(params=[q], amsgrad=True)]).step()
    from fplab import _autocast
    z = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="Context.adamw_step"):
        _autocast.adamw_step(z, z.copy(), z.copy(), z.copy(), 3, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, first=2)


def test_fplab_adamw_refuses_bad_hyperparameters():
    p = [torch.nn.Parameter(torch.zeros(3))]
    for kw in (dict(lr=-1.0), dict(lr=float("nan")), dict(betas=(1.0, 0.9)), dict(eps=-1e-8), dict(weight_decay=-0.1)):
        with pytest.raises(ValueError, match=list(kw)[0]):
            ft.AdamW(p, **kw)


def test_log_reads_in_fplab_report(tmp_path, cli):
    m = Toy()
    run = tmp_path / "runs" / "mxfp8" / "seed-0"
    run.mkdir(parents=True)
    pol = ft.apply_policy(m, "mxfp8", log=str(run / "log.jsonl"))
    opt = ft.PolicyOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-3), pol)
    for _ in range(3):
        loss = m(data()).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        pol.end_step(loss.item(), lr=1e-3, tokens=32)
    pol.remove()
    lines = [json.loads(s.replace(":nan", ':"nan"')) for s in (run / "log.jsonl").read_text().splitlines()]
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "end" and len(lines) == 5
    assert lines[1]["sites"]["attn.qkv.in"]["n"] == 2 * 32 * 64
    cli("report", str(tmp_path), "--no-plots")
    assert "mxfp8" in (tmp_path / "report.md").read_text()
    assert os.path.exists(tmp_path / "report.md")


# --- issue 34: the model holds its policy; second applies, copies, saves, empty batches, telemetry

def _down(seed=0):
    torch.manual_seed(seed)
    m = torch.nn.Sequential()
    m.add_module("down_proj", torch.nn.Linear(64, 64))
    return m


def _under(preset, x, seed=0):
    """The output of a fresh _down(seed) under preset, its policy held by a `with` block."""
    m = _down(seed)
    with ft.apply_policy(m, preset):
        return m(x).detach()


def test_policy_stays_until_removed():
    """apply_policy as a statement (its Policy not kept): the model still runs the policy after a
    collection, until the policy is removed (found again by applied_policies)."""
    import gc
    x = data()
    m = _down()
    plain = m(x).detach()
    want = _under("mxfp4", x)
    assert not torch.equal(want, plain)
    ft.apply_policy(m, "mxfp4")
    gc.collect()
    same_bits(m(x).detach().numpy(), want.numpy())
    pols = ft.applied_policies(m)
    assert [p.name for p in pols] == ["mxfp4"]
    pols[0].remove()
    assert ft.applied_policies(m) == [] and type(m.down_proj) is torch.nn.Linear
    same_bits(m(x).detach().numpy(), plain.numpy())


def test_second_apply_refused_unless_replace():
    x = data()
    m = _down()
    plain = m(x).detach()
    p1 = ft.apply_policy(m, "mxfp4")
    with pytest.raises(ValueError, match="already runs under policy 'mxfp4'.*replace=True"):
        ft.apply_policy(m, "bf16-amp")
    with pytest.raises(ValueError, match="already runs under"):  # a submodule of it too
        ft.apply_policy(m.down_proj, "bf16-amp", default="mlp.down")
    same_bits(m(x).detach().numpy(), _under("mxfp4", x).numpy())  # the refusal changed nothing
    p2 = ft.apply_policy(m, "bf16-amp", replace=True)
    want = _under("bf16-amp", x)
    same_bits(m(x).detach().numpy(), want.numpy())
    p1.remove()  # already removed by the replacement: leaves the second in place
    assert ft.applied_policies(m) == [p2]
    same_bits(m(x).detach().numpy(), want.numpy())
    p2.remove()
    same_bits(m(x).detach().numpy(), plain.numpy())


def _under_model(m, preset, x):
    with ft.apply_policy(m, preset):
        return m(x).detach()


PRESETS = ["fp32", "bf16-amp", "fp16-amp", "pure-bf16-sr", "fp8-delayed", "mxfp8", "mxfp4", "nvfp4"]


@pytest.mark.parametrize("preset", PRESETS)
def test_zero_size_batch(preset):
    """An empty batch gives nn.Linear's empty result (exact zero weight and bias gradients), casts
    and counts nothing, and leaves the step's micro-batch count as it was: the next batch's casts
    and telemetry are those of a policy that never saw the empty one."""
    x = data()
    runs = []
    for empty in (True, False):
        m = Toy()
        with ft.apply_policy(m, preset) as pol:
            if empty:
                xe = torch.zeros(2, 0, 64, requires_grad=True)
                y = m(xe)
                assert y.shape == (2, 0, 40)
                y.sum().backward()
                assert xe.grad.shape == (2, 0, 64)
                for p in m.parameters():
                    assert p.grad is not None and not p.grad.any()
                assert pol.telemetry() == {}
                m.zero_grad()
            m(x).square().mean().backward()
            runs.append((pol.telemetry(), [p.grad.clone() for p in m.parameters()]))
    assert runs[0][0] == runs[1][0]
    for a, b in zip(runs[0][1], runs[1][1]):
        same_bits(a.numpy(), b.numpy())


def test_telemetry_after_end_step():
    """telemetry() after end_step is the step end_step closed (its log line's sites), with its
    number; the next step's first counted cast starts the new step's."""
    m = Toy()
    x = data()
    with ft.apply_policy(m, "mxfp8") as pol:
        assert pol.telemetry() == {}
        m(x).square().mean().backward()
        during = pol.telemetry()
        assert during["step"] == 1 and during["sites"]["mlp.down.in"]["n"] == 2 * 32 * 96
        line = pol.end_step(1.0)
        after = pol.telemetry()
        assert after == {"step": 1, "sites": line["sites"]} and after == during
        with torch.no_grad():
            m(x)  # evaluation counts nothing: still step 1's
        assert pol.telemetry() == after
        m(x[:16]).square().mean().backward()
        nxt = pol.telemetry()
        assert nxt["step"] == 2 and nxt["sites"]["mlp.down.in"]["n"] == 2 * 16 * 96


class _Reuse:
    """A policy's autocast context that notes which casts its wgrads reused."""

    def __init__(self, ctx):
        self._ctx, self.reused, self.dgrad = ctx, [], []

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def dgrad_operands(self, **kw):  # (reused, a view, b view): a=b=None
        r = self._ctx.dgrad_operands(**kw)
        self.dgrad.append((kw["proj"], r[0]["fprop_w"], "w_cast" in kw))
        return r

    def wgrad(self, **kw):  # products="fplab": the library's wgrad product
        r = self._ctx.wgrad(**kw)
        self.reused.append((kw["proj"], r))
        return r

    def wgrad_operands(self, **kw):  # products="torch": the operands, multiplied by torch
        r = self._ctx.wgrad_operands(**kw)  # (reused, a view, b view) when a=b=None
        self.reused.append((kw["proj"], r[0] if isinstance(r, tuple) else r))
        return r


@pytest.mark.parametrize("products", ["torch", "fplab"])
@pytest.mark.parametrize("preset,dout,w", [("bf16-amp", True, True), ("nvfp4", False, True), ("mxfp8", False, False),
                                           ("fp8-delayed", True, False), ("pure-bf16-sr", True, True)])
def test_backward_shares_casts_through_autocast_bit_for_bit(preset, dout, w, products):
    """The backward's casts come from autocast's ac_dgrad_operands / ac_wgrad_operands, which
    reuse one wgrad cast of x (after NVFP4's rotation) for k and v after q (gate and up) and,
    where a rule casts alike in both orientations (bf16-amp's gradients; the bf16 LM head of the
    others but NVFP4, whose rotation changes wgrad's dout) or is delayed scaling whose scale the
    amax of dgrad's cast did not move (fp8-delayed's second step), dgrad's cast of dout; dgrad
    takes the forward's cast of W where W's rule casts alike both ways (bf16; NVFP4's 16x16
    tiles; not MX's 1x32 blocks or delayed scaling's moving history); under pol.record every
    cast is made by itself. Both give the same gradients and telemetry, bit for bit, over two steps. dout and w:
    whether the body's projections reuse dgrad's dout and the forward's W."""
    res = []
    for record in (False, True):
        m = Toy()
        with ft.apply_policy(m, preset, seed=3, products=products) as pol:
            spy = pol.ctx = _Reuse(pol.ctx)
            grads, tel = [], []
            for step in range(2):
                pol.record = [] if record else None
                m.zero_grad()
                m(data(seed=step)).square().mean().backward()
                grads.append([p.grad.clone() for p in m.parameters()])
                tel.append(pol.telemetry())
                pol.end_step()
            pol.ctx = spy._ctx
        res.append((grads, tel))
        if not record:
            body = {k for p, r in spy.reused if p != LM_HEAD for k, v in r.items() if v}
            head = {k for p, r in spy.reused if p == LM_HEAD for k, v in r.items() if v}
            assert body == ({"wgrad_x", "dgrad_dout"} if dout else {"wgrad_x"}), (preset, products, body)
            assert head == (set() if preset == "nvfp4" else {"dgrad_dout"}), (preset, products, head)
            # every dgrad is offered W's forward cast where W's rule allows it, and takes it
            assert {(p == LM_HEAD, took, offered) for p, took, offered in spy.dgrad} == \
                {(False, w, w), (True, True, True)}, (preset, products, spy.dgrad)
        else:
            assert not spy.reused and not spy.dgrad  # the recorded backward makes every cast itself
    for a, b in zip(res[0][0], res[1][0]):
        for x, y in zip(a, b):
            same_bits(x.numpy(), y.numpy())
    assert res[0][1] == res[1][1]
