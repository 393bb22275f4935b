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
"""
import torch

from .torch_policy import permutation

__all__ = ["PolicyOptimizer"]


from .torch_ops import _np  # noqa: E402


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

    def step(self, closure=None):
        self.cast_grads()
        pol = self.policy
        upd = pol.active[self._master]
        ps = self._params()
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
        for st in self.optimizer.state.values():
            for key, site in (("exp_avg", self._m), ("momentum_buffer", self._m), ("exp_avg_sq", self._v)):
                t = st.get(key)
                if isinstance(t, torch.Tensor) and pol.active[site]:
                    c = t if t.device.type == "cpu" else t.cpu()
                    c = c.contiguous()
                    pol.ctx.cast(_np(c), _np(c), site, -1, c.numel(), 1, False, True)
                    if c is not t:
                        t.copy_(c)
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
