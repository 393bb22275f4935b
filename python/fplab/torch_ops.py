"""fplab.torch_ops: fplab's casts and products as PyTorch operators (torch.ops.fplab.*), with
fake (meta) implementations for torch.compile and autograd formulas. Import fplab.torch to
register them.

Operators of a policy (fplab.torch.apply_policy), which name it by its handle (an int; the
policy's autocast context, amax histories, telemetry and micro-batch counters stay in the policy,
so that a compiled graph calls the same C library at run time and its telemetry counts as in
eager mode):
  fplab::linear(x, weights, biases, handle, group, train) -> outputs   a group of Linears as the
        C trainer's projection (forward casts, products, emulated accumulators); its backward is
  fplab::linear_backward(grads, x, weights, n_bias, handle, group, need_dx) -> (dx, dws, dbs)
  fplab::cast(x, handle, site, layer, k_rows, count, micro) -> values   one site's cast (ac_cast; on
        a CUDA tensor autocast's plan run on the device, fplab.torch_cuda.policy_cast)
Operators without a policy:
  fplab::quantize(x, fmt, scale, axis, mode, seed, offset) -> (values, stats)   fplab.quantize
        (element rounding in every mode, stochastic rounding included, every scaling recipe),
        stats = (n, overflow, underflow, subnormal, nan_in, invalid) as int64
  fplab::matmul(a, b, pass_) -> out          the C trainer's float32 products (op_matmul_*)
  fplab::scaled_mm(a, b, a_fmt, b_fmt, scale, acc) -> c   fplab.scaled_matmul on the CPU
        (emulated accumulators and engines)
The casts' gradients are straight-through (the identity); the products' are the products'.

Devices. Each operator has one CPU kernel, registered here with the operator. A kernel for
another device registers beside it, in one place: `register_device_kernels(device, kernels)`
below, which calls torch.library.register_kernel(op, device, f) for each; fplab.torch_cuda's
register_kernels registers quantize's "cuda" kernel there (import fplab.torch, where CUDA is
available).
"""
import itertools
import warnings
import weakref
from typing import List, Tuple

import numpy as np
import torch

import fplab

from . import _autocast

__all__ = ["register_device_kernels", "OPS"]

FPROP, DGRAD, WGRAD = 0, 1, 2
_POLICIES = weakref.WeakValueDictionary()
_HANDLES = itertools.count(1)


def register_policy(pol):
    """A fresh handle naming pol in the operators (weakly held: a collected policy is gone)."""
    h = next(_HANDLES)
    _POLICIES[h] = pol
    return h


def policy_of(handle):
    pol = _POLICIES.get(handle)
    if pol is None:
        raise RuntimeError(f"fplab: policy handle {handle} names no applied policy (removed, or its model was "
                           "collected)")
    return pol


def _np(t):
    """A contiguous float32 CPU tensor's memory as a NumPy array (no copy). Not t.numpy(): that
    marks the tensor's storage as not resizable, and FSDP2 frees its all-gathered weights by
    resizing their storage to 0 after each forward."""
    if t.numel() == 0 or not t.is_contiguous():
        return t.detach().numpy()
    v = _View()
    v.__array_interface__ = {"data": (t.data_ptr(), False), "shape": (t.numel(),), "typestr": "<f4", "version": 3}
    return np.asarray(v)


class _View:
    """An array interface over a tensor's memory (what _np gives NumPy)."""
    __slots__ = ("__array_interface__",)


def _cpu(t):
    return t if t.device.type == "cpu" else t.cpu()


# --- fplab::linear: a group of Linears of one projection and layer on one input

@torch.library.custom_op("fplab::linear", mutates_args=())
def linear(x: torch.Tensor, weights: List[torch.Tensor], biases: List[torch.Tensor], handle: int, group: int,
           train: bool) -> List[torch.Tensor]:
    pol = policy_of(handle)
    return pol._linear_forward(pol.groups[group], x, weights, biases, train)


@linear.register_fake
def _(x, weights, biases, handle, group, train):
    return [x.new_empty((*x.shape[:-1], w.shape[0])) for w in weights]


@torch.library.custom_op("fplab::linear_backward", mutates_args=())
def linear_backward(grads: List[torch.Tensor], x: torch.Tensor, weights: List[torch.Tensor], n_bias: int,
                    handle: int, group: int, need_dx: bool) -> Tuple[torch.Tensor, List[torch.Tensor],
                                                                      List[torch.Tensor]]:
    pol = policy_of(handle)
    return pol._linear_backward(pol.groups[group], grads, x, weights, n_bias, need_dx)


@linear_backward.register_fake
def _(grads, x, weights, n_bias, handle, group, need_dx):
    dx = x.new_empty(x.shape if need_dx else (0,))
    dbs = [w.new_empty((w.shape[0],)) for w in weights[:n_bias]] if n_bias else []
    return dx, [w.new_empty(w.shape) for w in weights], dbs


def _linear_setup(ctx, inputs, output):
    x, weights, biases, handle, group, train = inputs
    ctx.save_for_backward(x, *weights)
    ctx.k, ctx.handle, ctx.group, ctx.n_bias = len(weights), handle, group, len(biases)


def _linear_grad(ctx, grads):
    x, *ws = ctx.saved_tensors
    gs = [x.new_zeros((*x.shape[:-1], w.shape[0])) if g is None else g for g, w in zip(grads, ws)]
    dx, dws, dbs = linear_backward(gs, x, ws, ctx.n_bias, ctx.handle, ctx.group, ctx.needs_input_grad[0])
    return (dx if ctx.needs_input_grad[0] else None), dws, dbs, None, None, None


linear.register_autograd(_linear_grad, setup_context=_linear_setup)


# --- the same kernels in eager mode, without the operators' dispatch

class _LinearEager(torch.autograd.Function):
    """fplab::linear and its backward as one autograd.Function: the same Policy kernels
    (_linear_forward, _linear_backward) called directly. A custom operator's Python dispatch
    (schema check, autograd wrapper, redispatch of its backward operator) costs about 0.4 ms a
    call (docs/benchmarks.md), a sizable part of a small Linear's step; eager mode needs none of
    it. Inputs: handle, group, train, k (the weights' count), x, the k weights, the biases."""

    @staticmethod
    def forward(ctx, handle, group, train, k, x, *params):
        pol = policy_of(handle)
        weights, biases = list(params[:k]), list(params[k:])
        ctx.save_for_backward(x, *weights)
        ctx.handle, ctx.group, ctx.n_bias = handle, group, len(biases)
        return tuple(pol._linear_forward(pol.groups[group], x, weights, biases, train))

    @staticmethod
    def backward(ctx, *grads):
        x, *ws = ctx.saved_tensors
        pol = policy_of(ctx.handle)
        need_dx = ctx.needs_input_grad[4]
        dx, dws, dbs = pol._linear_backward(pol.groups[ctx.group], list(grads), x, ws, ctx.n_bias, need_dx)
        return (None, None, None, None, dx if need_dx else None, *dws, *dbs)


def _plain_eager(tensors):
    """Whether a call on these tensors may skip the operators: eager mode (not traced by
    torch.compile or export), plain tensors and parameters (no subclass such as FakeTensor or
    DTensor), and no dispatch mode or functorch transform active. Anything else takes
    torch.ops.fplab.linear."""
    return (not torch.compiler.is_compiling() and torch._C._len_torch_dispatch_stack() == 0
            and not torch._C._are_functorch_transforms_active()
            and all(type(t) in _PLAIN for t in tensors))


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def call_linear(x, weights, biases, handle, group, train):
    """fplab::linear's outputs (a list): the operator where a tracer or a tensor subclass needs
    it, else _LinearEager (bit for bit the operator's results: the same kernels)."""
    if _EAGER_FAST and _plain_eager((x, *weights, *biases)):
        return list(_LinearEager.apply(handle, group, train, len(weights), x, *weights, *biases))
    return torch.ops.fplab.linear(x, weights, biases, handle, group, train)


# Tests set it False to hold the eager path to the operator's bits.
_EAGER_FAST = True


# --- fplab::cast: one site's cast

@torch.library.custom_op("fplab::cast", mutates_args=())
def cast(x: torch.Tensor, handle: int, site: int, layer: int, k_rows: bool, count: bool,
         micro: int) -> torch.Tensor:
    pol = policy_of(handle)
    where = pol._plan_where(x.device)
    if where is not None:  # autocast's plan, run where x is (a CUDA tensor stays on its device)
        x2 = x.detach().reshape(-1, x.shape[-1] if x.dim() else 1).contiguous()
        pol.ctx.begin_micro(micro)
        out = pol._pcast(where, site, layer, x2, k_rows, count)
        return (out.clone() if out is x2 else out).reshape(x.shape)
    x2 = _cpu(x.detach()).reshape(-1, x.shape[-1] if x.dim() else 1).contiguous()
    pol.ctx.begin_micro(micro)
    out = pol.cast(site, layer, x2, x2.shape[0], x2.shape[1], k_rows, count)
    return (out.clone() if out is x2 else out).reshape(x.shape).to(x.device)


@cast.register_fake
def _(x, handle, site, layer, k_rows, count, micro):
    return torch.empty_like(x)


def _no_setup(ctx, inputs, output):
    pass


def _cast_grad(ctx, g):  # straight through
    return g, None, None, None, None, None, None


cast.register_autograd(_cast_grad, setup_context=_no_setup)


# --- fplab::quantize: fplab.quantize without a policy, with its counts as a tensor

STATS = ("n", "overflow", "underflow", "subnormal", "nan_in", "invalid")


@torch.library.custom_op("fplab::quantize", mutates_args=())
def quantize(x: torch.Tensor, fmt: str, scale: str, axis: int, mode: str, seed: int,
             offset: int) -> Tuple[torch.Tensor, torch.Tensor]:
    return quantize_host(x, fmt, scale, axis, mode, seed, offset)


def quantize_host(x, fmt, scale, axis, mode, seed, offset):
    """fplab::quantize's CPU kernel: fplab.quantize on the host (a tensor on another device is
    copied there and back)."""
    a = _cpu(x.detach()).contiguous().numpy()
    kw = {"mode": mode, "seed": seed, "offset": offset}
    q = fplab.quantize(a, fmt, scale=None if scale == "" else scale, axis=axis, **kw)
    st = torch.tensor([getattr(q.stats, f) for f in STATS], dtype=torch.int64)
    return torch.from_numpy(np.ascontiguousarray(q.values)).reshape(x.shape).to(x.device), st.to(x.device)


@quantize.register_fake
def _(x, fmt, scale, axis, mode, seed, offset):
    return torch.empty_like(x), x.new_empty((len(STATS),), dtype=torch.int64)


def _quantize_grad(ctx, g, gstats):  # straight through
    return g, None, None, None, None, None, None


quantize.register_autograd(_quantize_grad, setup_context=_no_setup)


# --- fplab::matmul: the C trainer's float32 products

_FP32 = []


def _fp32_ctx():
    if not _FP32:
        _FP32.append(_autocast.Context(_autocast.policy_text("fp32"), "fplab::matmul"))
    return _FP32[0]


def _mm_shape(a, b, pass_):
    if pass_ == FPROP:
        return (a.shape[0], b.shape[0])
    if pass_ == DGRAD:
        return (a.shape[0], b.shape[1])
    return (a.shape[1], b.shape[1])


@torch.library.custom_op("fplab::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor, pass_: int) -> torch.Tensor:
    """pass_ 0 (fprop): a (N, IC) b (OC, IC)^T; 1 (dgrad): a (N, OC) b (OC, IC); 2 (wgrad):
    a (N, OC)^T b (N, IC)."""
    if pass_ not in (FPROP, DGRAD, WGRAD):
        raise ValueError(f"fplab::matmul: pass {pass_}: expected 0 (fprop), 1 (dgrad) or 2 (wgrad)")
    ac, bc = _cpu(a.detach()).contiguous(), _cpu(b.detach()).contiguous()
    if pass_ == FPROP:
        n, ic, oc = ac.shape[0], ac.shape[1], bc.shape[0]
    elif pass_ == DGRAD:
        n, oc, ic = ac.shape[0], ac.shape[1], bc.shape[1]
    else:
        n, oc, ic = ac.shape[0], ac.shape[1], bc.shape[1]
    out = torch.zeros(_mm_shape(a, b, pass_), dtype=torch.float32)
    if n and ic and oc:
        _fp32_ctx().matmul(pass_, _np(out), _np(ac), _np(bc), n, ic, oc, False)
    return out.to(a.device)


@matmul.register_fake
def _(a, b, pass_):
    return a.new_empty(_mm_shape(a, b, pass_))


def _matmul_setup(ctx, inputs, output):
    a, b, pass_ = inputs
    ctx.save_for_backward(a, b)
    ctx.pass_ = pass_


def _matmul_grad(ctx, g):
    a, b = ctx.saved_tensors
    if ctx.pass_ == FPROP:    # out = a b^T
        return matmul(g, b, DGRAD), matmul(g, a, WGRAD), None
    if ctx.pass_ == DGRAD:    # out = a b
        return matmul(g, b, FPROP), matmul(a, g, WGRAD), None
    return matmul(b, g, FPROP), matmul(a, g, DGRAD), None  # out = a^T b


matmul.register_autograd(_matmul_grad, setup_context=_matmul_setup)


# --- fplab::scaled_mm: fplab.scaled_matmul (emulated accumulators, engines)

@torch.library.custom_op("fplab::scaled_mm", mutates_args=())
def scaled_mm(a: torch.Tensor, b: torch.Tensor, a_fmt: str, b_fmt: str, scale: str, acc: str) -> torch.Tensor:
    """a (M, K) b (K, N) quantized to a_fmt / b_fmt ("" for a_fmt's) under the recipe scale and
    summed in acc, as fplab.scaled_matmul; gradients straight-through the quantization."""
    r = fplab.scaled_matmul(_cpu(a.detach()).numpy(), _cpu(b.detach()).numpy(), a_fmt, b_fmt or None, scale=scale,
                            acc=acc)
    return torch.from_numpy(np.ascontiguousarray(r.c)).to(a.device)


@scaled_mm.register_fake
def _(a, b, a_fmt, b_fmt, scale, acc):
    return a.new_empty((a.shape[0], b.shape[1]))


def _smm_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _smm_grad(ctx, g):
    a, b = ctx.saved_tensors
    return g @ b.t(), a.t() @ g, None, None, None, None


scaled_mm.register_autograd(_smm_grad, setup_context=_smm_setup)

OPS = {"linear": linear, "linear_backward": linear_backward, "cast": cast, "quantize": quantize, "matmul": matmul,
       "scaled_mm": scaled_mm}


def register_device_kernels(device, kernels):
    """The one place where a device's kernels join the CPU ones: kernels is {operator name (a key
    of OPS): function with the operator's signature}; each is registered with
    torch.library.register_kernel("fplab::NAME", device, function)."""
    for name, fn in kernels.items():
        if name not in OPS:
            raise ValueError(f"register_device_kernels: {name!r}: expected one of {', '.join(OPS)}")
        torch.library.register_kernel(f"fplab::{name}", device, fn)


def warn_micro():
    warnings.warn("fplab.torch: 64 micro-batches in one step: the stochastic-rounding keys repeat from here; "
                  "call Policy.end_step() after each optimizer step", stacklevel=3)
