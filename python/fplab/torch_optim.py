"""fplab.torch_optim: the weight side of a policy around any torch optimizer: the stored precision
of the weights (the master site: pure-bf16 keeps bf16 weights), the rounding of each update
(update round | sr | kahan: nearest, stochastic, Kahan-compensated, with the swamped-update
count of the telemetry), the gradients' site (grads) and the optimizer moments' (adam.m, adam.v).

    opt = fplab.torch.PolicyOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), pol)

Every rounding is the C library's (ac_cast for the sites, ac_round_update for the update), on
the flat concatenation of the parameters in the optimizer's order, as the C trainer rounds its
one parameter buffer: element i of that buffer draws stochastic-rounding counter i. flat_order
(a permutation of range(number of parameter elements)) rounds them in another order: position i
of the rounded buffer is element flat_order[i] of the concatenation, so the draws fall as in a
model that stores its parameters in that order (tools/check_torch_policy.py passes the C
trainer's). The inner optimizer is `opt.optimizer` (attach LR schedulers to it).

fplab.torch.AdamW is AdamW in one C pass per parameter, with the C trainer's arithmetic. Inside
a PolicyOptimizer, its step and the policy's weight side (the update's rounding, the moments'
casts) run in that one pass, with the same bits and counts as the separate passes.
"""
import numpy as np
import torch

from . import _autocast
from .torch_policy import permutation

__all__ = ["AdamW", "PolicyOptimizer"]


from .torch_ops import _PLAIN, _np  # noqa: E402


def _fast(t):
    """Whether t's memory is the C pass's to read and write: a plain contiguous float32 CPU tensor
    (not a subclass such as FSDP2's DTensor, whose elements are a shard of other memory)."""
    return type(t) in _PLAIN and t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous()


class AdamW(torch.optim.Optimizer):
    """AdamW whose step is one pass over each parameter in C, with the arithmetic of the C trainer
    (trainer/optim.h), in float32 in this order, t the parameter's step count from 1:

        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g
        p -= (lr wd) p;  p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

    This is torch.optim.AdamW's update (decoupled weight decay on every parameter of a group; lr,
    betas, eps and weight_decay with torch's defaults; state `step`, `exp_avg` and `exp_avg_sq`)
    with its roundings in another order: a step differs from torch's by a few float32 ulps. Not
    torch's amsgrad or maximize (a group that asks for them is refused). Float32 parameters only:
    contiguous CPU ones run in C, any other (a CUDA one) the same float32 operations as torch ops.
    Under a PolicyOptimizer the policy's weight side joins the pass, and the optimizer's step
    hooks and LR schedulers see an ordinary step()."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            if not value >= 0.0:
                raise ValueError(f"fplab.torch.AdamW: {name} {value}: expected a number >= 0")
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"fplab.torch.AdamW: betas {betas}: expected two values in [0, 1)")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        fuse, self._fuse = getattr(self, "_fuse", None), None
        if fuse is None:
            self._step_with(None)
        else:  # PolicyOptimizer's fused step: its keys after the closure, then the one pass
            fuse[0]()
            self._step_with(*fuse[1:])
        return loss

    def _step_with(self, ctx, offsets=None, kahan=None):
        """One step of every parameter with a gradient; ctx (a policy's context) fuses its weight
        side: parameter i is elements offsets[i].. of the flat vector, kahan the compensation."""
        i = 0
        for group in self.param_groups:
            for flag in ("amsgrad", "maximize"):
                if group.get(flag):
                    raise ValueError(f"fplab.torch.AdamW: a parameter group with {flag}=True: not supported")
            b1, b2 = group["betas"]
            hyper = dict(lr=group["lr"], beta1=b1, beta2=b2, eps=group["eps"], weight_decay=group["weight_decay"])
            for p in group["params"]:
                o = offsets[i] if offsets is not None else 0
                i += 1
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("fplab.torch.AdamW does not support sparse gradients")
                if p.dtype != torch.float32:
                    raise TypeError(f"fplab.torch.AdamW: a {p.dtype} parameter: expected float32 (the arithmetic "
                                    "is float32's)")
                st = self.state[p]
                if not st:
                    st["step"] = torch.tensor(0.0, dtype=torch.float32)
                    st["exp_avg"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
                    st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
                t = int(st["step"]) + 1  # a tensor, or a number from an older checkpoint
                st["step"] = torch.tensor(float(t), dtype=torch.float32)
                m, v, g = st["exp_avg"], st["exp_avg_sq"], p.grad
                if _fast(p) and _fast(m) and _fast(v) and g.device.type == "cpu":
                    g = g.contiguous().float()
                    if ctx is None:
                        _autocast.adamw_step(_np(p.detach()), _np(m), _np(v), _np(g), p.numel(), step=t, **hyper)
                    else:
                        comp = None if kahan is None else _np(kahan[o:o + p.numel()])
                        ctx.adamw_step(_np(p.detach()), _np(m), _np(v), _np(g), p.numel(), step=t, first=o, comp=comp,
                                       **hyper)
                elif ctx is not None:
                    raise RuntimeError("fplab.torch.AdamW: a fused policy step needs contiguous float32 CPU "
                                       "parameters and states")
                else:
                    _adamw_torch(p.detach(), m, v, g.to(p.dtype), t, **hyper)


def _adamw_torch(p, m, v, g, t, lr, beta1, beta2, eps, weight_decay):
    """trainer/optim.h's AdamW float32 operations as torch ops, for parameters the C pass does not
    take. The constants are float32 as in C; the divisors are tensors on p's device, so that no
    backend turns a division by a scalar into a multiplication by its reciprocal."""
    f = np.float32
    b1, b2, lr32, eps32 = f(beta1), f(beta2), f(lr), f(eps)
    c1 = torch.tensor(f(1.0 - float(b1) ** t), device=p.device)
    c2 = torch.tensor(f(1.0 - float(b2) ** t), device=p.device)
    m.mul_(float(b1)).add_(g * float(f(1) - b1))
    v.mul_(float(b2)).add_((g * float(f(1) - b2)) * g)
    p.sub_(p * float(lr32 * f(weight_decay)))
    p.sub_((m / c1 * float(lr32)) / (_sqrt_rn(v / c2) + float(eps32)))


def _sqrt_rn(x):
    """float32 x's square root correctly rounded, as C's sqrtf. ATen's CPU sqrt is not on every
    CPU (torch 2.15's wheel: 17% of all float32 inputs 1 ulp off on an AMD EPYC); through float64 it
    is: the root of a float32 lies at least 4 float64 ulps from a float32 rounding boundary (x -
    b^2 is a nonzero multiple of b's ulp^2 / 4 for a midpoint b), so a float64 root within 3 ulps
    rounds to it (all 2^31 non-negative inputs checked). Where float64 is absent (MPS), torch's."""
    if x.device.type == "mps":
        return x.sqrt()
    return x.double().sqrt().float()


class PolicyOptimizer:
    def __init__(self, optimizer, policy, flat_order=None):
        self.optimizer = optimizer
        self.policy = policy
        self._order = None
        if flat_order is not None:
            self._order = permutation(flat_order, self._numel(), "PolicyOptimizer: flat_order",
                                      "the optimizer's parameter elements")
        idx = policy.site_index
        self._master, self._grads = idx["master"], idx["grads"]
        self._m, self._v = idx["adam.m"], idx["adam.v"]
        self._kahan = None
        self._old = None
        self._grads_cast = False
        if policy.active[self._master]:
            # the C trainer rounds the initial weights to the master format (uncounted)
            self._flat_apply(lambda flat, n: policy.ctx.cast(_np(flat), _np(flat), self._master, -1, n, 1, False, False))
            if policy.info["update"] == "kahan":
                self._kahan = torch.zeros(self._numel(), dtype=torch.float32)

    def _params(self):
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    def _numel(self):
        return sum(p.numel() for p in self._params())

    def _flat(self):
        """The parameters' concatenation, in flat_order where one was given."""
        ps = self._params()
        flat = torch.cat([p.detach().reshape(-1).cpu() for p in ps]) if ps else torch.empty(0)
        return flat if self._order is None else flat[self._order]

    def _flat_apply(self, fn):
        ps = self._params()
        with torch.no_grad():
            flat = self._flat()
            fn(flat, flat.numel())
            if self._order is not None:
                back = torch.empty_like(flat)
                back[self._order] = flat
                flat = back
            o = 0
            for p in ps:
                p.copy_(flat[o:o + p.numel()].view_as(p))
                o += p.numel()

    def _step_key(self):
        """The step's own casts (the gradients once, the update, the moments) draw as micro-batch
        0 on every rank, whatever the accumulation, as the C trainer's update: the ranks of DDP
        stay replicas and R ranks x A micro-batches step as 1 rank x R*A (micro 0's stream: these
        sites cast nowhere else, and runs without accumulation keep their bits)."""
        self.policy.ctx.begin_micro(0)

    def cast_grads(self):
        """Rounds the gradients for the grads site (counted), once per step."""
        if self._grads_cast or not self.policy.active[self._grads]:
            return
        self._step_key()
        for p in self._params():
            if p.grad is not None:
                g = p.grad if p.grad.device.type == "cpu" else p.grad.cpu()
                g = g.contiguous()
                self.policy.ctx.cast(_np(g), _np(g), self._grads, -1, g.numel(), 1, False, True)
                if g is not p.grad:
                    p.grad.copy_(g)
        self._grads_cast = True

    def _in_place(self, ps):
        """Whether the update rounds each parameter where it lies (no flat copy of the weights, the
        step's largest cost after the optimizer's own): contiguous float32 CPU parameters and no
        flat_order. Stochastic rounding draws by the index in the flat vector, which
        round_update's `first` gives tensor by tensor: the same bits as the flat call."""
        return self._order is None and all(p.device.type == "cpu" and p.dtype == torch.float32 and p.is_contiguous()
                                           for p in ps)

    def _round_in_place(self, ps, old):
        with torch.no_grad():
            o = 0
            for p, q in zip(ps, old):
                n = p.numel()
                comp = None if self._kahan is None else _np(self._kahan[o:o + n])
                self.policy.ctx.round_update(_np(p.detach()), _np(q), comp, n, o)
                o += n

    def _kept_copy(self, ps):
        """The weights before the step, copied into buffers kept from step to step: a fresh clone
        of every weight each step paid the kernel's page faults on top of the copy."""
        keep = self._old
        if keep is None or len(keep) != len(ps) or any(k.shape != p.shape for k, p in zip(keep, ps)):
            keep = self._old = [torch.empty_like(p) for p in ps]
        with torch.no_grad():
            for k, p in zip(keep, ps):
                k.copy_(p)
        return keep

    def _fused(self, ps):
        """Whether the step runs as fplab.torch.AdamW's fused pass (the update's rounding and the
        moments' casts inside it): an fplab AdamW (not a subclass, whose step may differ) over
        contiguous float32 CPU parameters, no flat_order, every existing state contiguous float32
        on the CPU, and moment sites that round element by element without a scale (the fused pass
        casts the moments in the parameters' order, the separate one in the state's: a delayed
        or per-tensor scale would see them in another order)."""
        return (type(self.optimizer) is AdamW and self._order is None and all(_fast(p) for p in ps)
                and self._moments_elementwise() and all(
                    _fast(t) for st in self.optimizer.state.values() for t in st.values()
                    if isinstance(t, torch.Tensor) and t.dim() > 0))

    def _moments_elementwise(self):
        """Whether adam.m and adam.v are inactive or round without a recipe (the policy's canonical
        text: `site NAME FORMAT RECIPE MODE OVERFLOW`)."""
        rules = {}
        for line in self.policy.info["text"].splitlines():
            w = line.split()
            if len(w) >= 4 and w[0] == "site" and w[1] in ("adam.m", "adam.v"):
                rules[w[1]] = w[3]
        return all(rules.get(name, "none") == "none" for name, site in (("adam.m", self._m), ("adam.v", self._v))
                   if self.policy.active[site])

    def _fused_step(self, ps, closure):
        """fplab.torch.AdamW's step with the policy's weight side in its pass: the same bits and
        counts as the inner step followed by _round_in_place and the moments' casts. A parameter
        without a gradient keeps its value but is rounded and counted as in that sequence, and its
        moments (if it has any) are cast again."""
        offs, o = [], 0
        for p in ps:
            offs.append(o)
            o += p.numel()
        # through the inner optimizer's own step(), so that its hooks and LR schedulers see a step
        self.optimizer._fuse = (self._step_key, self.policy.ctx, offs, self._kahan)
        try:
            r = self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        finally:
            self.optimizer._fuse = None
        with torch.no_grad():
            pol = self.policy
            for p, o in zip(ps, offs):
                if p.grad is not None:
                    continue
                if pol.active[self._master]:
                    comp = None if self._kahan is None else _np(self._kahan[o:o + p.numel()])
                    before = p.detach().clone()  # held: _np's view does not keep it alive
                    pol.ctx.round_update(_np(p.detach()), _np(before), comp, p.numel(), o)
                self._cast_states([self.optimizer.state.get(p, {})])
        self._grads_cast = False
        return r

    def _cast_states(self, states):
        pol = self.policy
        for st in states:
            for key, site in (("exp_avg", self._m), ("momentum_buffer", self._m), ("exp_avg_sq", self._v)):
                t = st.get(key)
                if isinstance(t, torch.Tensor) and pol.active[site]:
                    c = t if t.device.type == "cpu" else t.cpu()
                    c = c.contiguous()
                    pol.ctx.cast(_np(c), _np(c), site, -1, c.numel(), 1, False, True)
                    if c is not t:
                        t.copy_(c)

    def step(self, closure=None):
        self.cast_grads()
        pol = self.policy
        upd = pol.active[self._master]
        ps = self._params()
        if self._fused(ps):
            return self._fused_step(ps, closure)
        in_place = upd and self._in_place(ps)
        old = None
        if upd:
            old = self._kept_copy(ps) if in_place else self._flat()
        r = self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        self._step_key()  # after a closure's forward and backward
        if in_place:
            self._round_in_place(ps, old)
        elif upd:
            comp = None if self._kahan is None else _np(self._kahan)
            self._flat_apply(lambda flat, n: pol.ctx.round_update(_np(flat), _np(old), comp, n))
        self._cast_states(self.optimizer.state.values())
        self._grads_cast = False
        return r

    def zero_grad(self, set_to_none=True):
        self._grads_cast = False
        return self.optimizer.zero_grad(set_to_none=set_to_none)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def state_dict(self):
        d = {"optimizer": self.optimizer.state_dict()}
        if self._kahan is not None:
            d["kahan"] = self._kahan.clone()
        return d

    def load_state_dict(self, d):
        self.optimizer.load_state_dict(d["optimizer"])
        if "kahan" in d:
            self._kahan = d["kahan"].clone()
