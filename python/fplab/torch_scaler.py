"""fplab.torch_scaler: the policy's loss scaler (autocast/scaler.c) behind torch.amp.GradScaler's
interface, so a standard PyTorch loop runs it unchanged:

    scaler = fplab.torch.GradScaler(pol)        # pol = fplab.torch.apply_policy(model, "fp16-amp")
    scaler.scale(loss).backward()
    scaler.unscale_(opt); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # optional
    scaler.step(opt)                            # skipped when a gradient is inf/NaN (dynamic, static)
    scaler.update()

The scale, its growth and backoff, the skip decision and the counts are the C library's
(ac_scaler_update with the policy's loss_scale line); a policy without loss scaling has scale 1
and never skips, as the C trainer. Differences from torch.amp.GradScaler: the scale moves in
step() (the C trainer decides and updates at once), update() only closes the step, and
update(new_scale) is refused (the policy owns the scale).
"""
import torch

__all__ = ["GradScaler"]


class GradScaler:
    def __init__(self, policy):
        self.policy = policy
        self._unscaled = set()
        self.last_skipped = False
        self.last_finite = True

    def is_enabled(self):
        return True

    def get_scale(self):
        return float(self.policy.ctx.scaler()["scale"])

    def scale(self, outputs):
        """outputs times the loss scale (a power of two for the presets: exact in float32)."""
        s = self.get_scale()
        if isinstance(outputs, torch.Tensor):
            return outputs * s
        return type(outputs)(self.scale(o) for o in outputs)

    def unscale_(self, optimizer):
        """Casts the gradients for the policy's grads site (when the optimizer is a PolicyOptimizer,
        as the C trainer rounds the scaled sums), then divides them by the scale in float32."""
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() was already called on this optimizer since the last update()")
        cast = getattr(optimizer, "cast_grads", None)
        if cast is not None:
            cast()
        s = self.get_scale()
        if s != 1.0:
            inv = 1.0 / torch.tensor(s, dtype=torch.float32)
            for g in _grads(optimizer):
                g.mul_(inv.to(g.device))
        self._unscaled.add(id(optimizer))

    def step(self, optimizer, *args, **kwargs):
        """Unscales (if not done), asks the C scaler whether every gradient is finite enough to
        step, and runs optimizer.step unless the step is skipped. Returns its result, or None."""
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        finite = _all_finite(list(_grads(optimizer)))
        self.last_finite = finite
        self.last_skipped = bool(self.policy.ctx.scaler_update(finite))
        self.policy.last_skipped = self.last_skipped
        if self.last_skipped or not finite:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        if new_scale is not None:
            raise ValueError("GradScaler.update(new_scale): the policy's loss_scale line owns the scale")
        self._unscaled.clear()

    def state_dict(self):
        return dict(self.policy.ctx.scaler())

    def load_state_dict(self, d):
        raise NotImplementedError("the scaler's state is the policy's, in the model's state dict: restore it with "
                                  "model.load_state_dict")


def _all_finite(grads):
    """Whether every gradient is finite: PyTorch's own fused check (GradScaler's
    _amp_foreach_non_finite_check_and_unscale_, here with an unscale by 1, which changes no value),
    one call and one read-back per device and dtype instead of one per gradient."""
    check = getattr(torch, "_amp_foreach_non_finite_check_and_unscale_", None)
    if check is None:
        return all(bool(torch.isfinite(g).all()) for g in grads)
    by = {}
    for g in grads:
        by.setdefault((g.device, g.dtype), []).append(g)
    found = []
    for (dev, _), gs in by.items():
        f = torch.zeros(1, dtype=torch.float32, device=dev)
        check(gs, f, torch.ones(1, dtype=torch.float32, device=dev))
        found.append(f)
    return not any(bool(f.item()) for f in found)


def _grads(optimizer):
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                yield p.grad
