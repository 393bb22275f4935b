"""fplab.torch: drop an fplab format into a PyTorch model. fake_quantize(t, fmt, scale=...) returns
the dequantized values of fplab.quantize (any format, any recipe: mx, nvfp4, tiles, ...) as a
tensor, with a straight-through gradient: backward passes the incoming gradient unchanged, as
if the quantization were the identity (the estimator of QAT and of torchao's fake-quant).

Needs torch (not a dependency of fplab; this module is imported only by who asks for it).
float32 tensors only (nothing is converted: call .float() to say so); a tensor on a GPU is
quantized on the CPU and copied back.

    import torch, fplab.torch as fq
    w = torch.randn(64, 256, requires_grad=True)
    y = fq.fake_quantize(w, "e2m1", scale="mx")   # values of MXFP4
    y.sum().backward()                            # w.grad == 1 everywhere
"""
import torch

import fplab

__all__ = ["fake_quantize", "FakeQuantize"]


class _FakeQuantizeSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fmt, scale, axis, kw):
        a = x.detach().to("cpu").contiguous().numpy()
        q = fplab.quantize(a, fmt, scale=scale, axis=axis, **kw)
        return torch.from_numpy(q.values).to(x.device)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None, None, None


def fake_quantize(x, fmt, scale="none", axis=-1, **kw):
    """fplab.quantize(x, fmt, scale, axis, **kw).values as a tensor on x's device, with a
    straight-through gradient. kw: mode, overflow, subnormals, seed, stream, offset, sr_bits
    (fplab.quantize's options; stochastic rounding with a fixed seed draws the same bits on
    every call: vary seed or offset per step for fresh noise)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"fake_quantize: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.float32:
        raise TypeError(f"fake_quantize: expected a float32 tensor, got {x.dtype} (fplab converts nothing; "
                        "x.float() says so)")
    return _FakeQuantizeSTE.apply(x, fmt, scale, axis, kw)


class FakeQuantize(torch.nn.Module):
    """A module form of fake_quantize, e.g. nn.Sequential(FakeQuantize("e4m3", "mx"), layer)."""

    def __init__(self, fmt, scale="none", axis=-1, **kw):
        super().__init__()
        fplab.finfo(fmt)  # a bad name fails here, not in the first forward
        self.fmt, self.scale, self.axis, self.kw = fmt, scale, axis, kw

    def forward(self, x):
        return fake_quantize(x, self.fmt, self.scale, self.axis, **self.kw)

    def extra_repr(self):
        return f"fmt={self.fmt!r}, scale={self.scale!r}, axis={self.axis}"


# Policies on whole models (apply_policy), the loss scaler and the weight-update wrapper: their
# own modules (docs/torch.md).
from .torch_optim import AdamW, PolicyOptimizer  # noqa: E402
from .torch_policy import (NAMES, PROJECTIONS, Policy, PolicyLinear, applied_policies, apply_policy,  # noqa: E402
                           llama_order, policy, policy_text, remove_policy, rope_pairs_order)
from .torch_scaler import GradScaler  # noqa: E402

__all__ += ["AdamW", "GradScaler", "NAMES", "PROJECTIONS", "Policy", "PolicyLinear", "PolicyOptimizer",
            "applied_policies", "apply_policy", "llama_order", "policy", "policy_text", "remove_policy", "rope_pairs_order"]
from .torch_cuda import register_kernels as _register_cuda  # noqa: E402

_register_cuda()  # the "cuda" kernels of torch.ops.fplab.*, where CUDA is available
