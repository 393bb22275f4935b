"""fplab.torch_policy: a precision policy of the C trainer (fplab policy --show NAME) on the
nn.Linear modules of any PyTorch model. Import it as fplab.torch (fplab.torch.apply_policy).

Applying a policy transforms the model: each placed nn.Linear becomes a PolicyLinear (the same
object, its class swapped; remove() swaps it back), whose forward calls the operator
torch.ops.fplab.linear (fplab.torch_ops: fake implementation and autograd formula, so
torch.compile traces it; in plain eager mode the same kernels through one autograd.Function,
torch_ops.call_linear, without the operator's dispatch). The policy's state is the extra state
of the first placed Linear (PolicyLinearState), so model.state_dict(), copy.deepcopy and
torch.save carry it.

Each nn.Linear runs as trainer/llama.c runs a projection, through fplab._autocast (the C
library's autocast context):
  forward  out = cast(x, .in) cast(W, .w)^T            (scales along K = in_features)
  dgrad    dx  = cast(dout, .grad) cast(W, .w)          (W re-quantized with scales along K =
                                                          out_features, uncounted)
  wgrad    dW  = cast(dout, .grad)^T cast(x, .in)       (both re-quantized along K = the tokens,
                                                          uncounted; NVFP4 rotates both first by
                                                          the random Hadamard transform)
Which casts a group's products share (the input's, x's wgrad cast and rotation across members,
dgrad's cast of dout in wgrad) is autocast's rule: the operands come from its ac_fprop_input,
ac_dgrad_operands and ac_wgrad_operands (Context.fprop_input, dgrad_operands, wgrad, ...), as
in the C trainer; under pol.record each cast is made by itself.
On CUDA tensors the casts run on the device as autocast's plans (fplab.torch_cuda.policy_cast:
the same casts in the same order and counts; no host copy) where a plan applies: products in
float32, not NVFP4's wgrad (Hadamard), not under pol.record; the rest copies through the host.
Products accumulate in float32 through PyTorch's own matmul (products="torch", the default), or
through the C trainer's op_matmul_* on the CPU (products="fplab": the C trainer's order of
summation, which tools/check_torch_policy.py needs for bitwise parity), or in the accumulator
the policy emulates (`accumulator SPEC [GEMM]`: any spec the library's grammar takes, engines
included) through mm_cpu. A bias is added in float32 after the product.

Sites. A Linear is placed at a projection of the C trainer (attn.qkv, attn.o, mlp.gate_up,
mlp.down, lm_head) by its name (q_proj -> attn.qkv, ...; NAMES below) or by `sites=`, a list
of (glob over the module path, projection or None) tried first; its layer is the first integer
of its path (model.layers.3.mlp.down_proj -> layer 3); a Linear with no number is model level,
as the C trainer's LM head. Its cast sites are PATH.in, PATH.w, PATH.grad and take the rules
of PROJECTION.in/.w/.grad. Linears of one layer and projection called on the same input tensor
(q, k, v; gate, up) run as one group, as the C trainer's fused projection: the input is cast
once, the gradients are cast and summed in the C trainer's order (q, k, v), so delayed scaling
pushes its amaxes in the same order.

Steps and micro-batches. Casts are keyed (stochastic rounding, telemetry, amax history) by the
optimizer step and the micro-batch within it. The step advances with Policy.end_step() (the
optimizer wrapper and the loss scaler's update call it); micro-batches are counted per group
(a forward after the previous forward's backward starts the next one), and a forward repeated
before its backward (gradient checkpointing's recompute) or run without grad (evaluation)
casts again, identically, without counting.

Feature order. `out_order={glob: permutation}` casts a Linear's output features in another order
than the module stores them: the casts see W[order] (rows) and dout[:, order] (columns), and the
results go back to the module's order. Block scales and stochastic-rounding draws, which are
keyed by element position, then fall as in a model that stores the features in that order.
Hugging Face's Llama holds each q/k head in rotate_half's order where the C trainer (as Meta's
checkpoints and llama2.c) interleaves the rotated pairs: llama_order(config) gives the orders
that make the casts of an HF Llama those of the C trainer, bit for bit.
"""
import contextlib
import fnmatch
import json
import re
import time
import warnings

import torch

from . import _autocast, torch_ops

__all__ = ["apply_policy", "applied_policies", "remove_policy", "Policy", "PolicyLinear", "NAMES", "PROJECTIONS", "policy_text", "rope_pairs_order",
           "llama_order"]

PROJECTIONS = ("attn.qkv", "attn.o", "mlp.gate_up", "mlp.down", "lm_head")  # ac_proj order
FPROP, DGRAD, WGRAD = 0, 1, 2
PRODUCTS = ("torch", "fplab")  # who computes the float32 products (apply_policy's products=)

# The last component of a module path -> the C trainer's projection (Llama, Mistral, Qwen, Gemma,
# OPT/BERT-style names). Anything else falls to `default` (or `sites=`).
NAMES = {
    "q_proj": "attn.qkv", "k_proj": "attn.qkv", "v_proj": "attn.qkv", "qkv_proj": "attn.qkv",
    "query": "attn.qkv", "key": "attn.qkv", "value": "attn.qkv", "Wqkv": "attn.qkv",
    "o_proj": "attn.o", "out_proj": "attn.o", "dense": "attn.o",
    "gate_proj": "mlp.gate_up", "up_proj": "mlp.gate_up", "gate_up_proj": "mlp.gate_up",
    "w1": "mlp.gate_up", "w3": "mlp.gate_up", "fc1": "mlp.gate_up",
    "down_proj": "mlp.down", "w2": "mlp.down", "fc2": "mlp.down",
    "lm_head": "lm_head",
}

_LAYER = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")


def policy_text(policy):
    """The canonical text of a preset name or a policy file (what `fplab policy --show` prints)."""
    return _autocast.policy_text(policy)


def rope_pairs_order(out_features, n_heads):
    """The order that casts a q or k projection stored in rotate_half's layout (Hugging Face:
    head h's feature i rotates with feature i + hs/2) as one stored with the rotated pairs
    adjacent (the C trainer, Meta's Llama, llama2.c: features 2i and 2i+1): position r of the
    result is the stored feature cast at position r. A LongTensor of out_features."""
    if n_heads <= 0 or out_features % n_heads or (out_features // n_heads) % 2:
        raise ValueError(f"rope_pairs_order: {out_features} features do not split into {n_heads} heads of an "
                         "even size")
    hs = out_features // n_heads
    return torch.arange(out_features).reshape(n_heads, 2, hs // 2).transpose(1, 2).reshape(-1)


def llama_order(config):
    """out_order for a Hugging Face Llama-family model (a config with num_attention_heads,
    num_key_value_heads, hidden_size, optional head_dim): its q_proj and k_proj cast in the
    C trainer's interleaved RoPE layout. {"*q_proj": order, "*k_proj": order}."""
    nh = config.num_attention_heads
    nkv = getattr(config, "num_key_value_heads", None) or nh
    hd = getattr(config, "head_dim", None) or config.hidden_size // nh
    return {"*q_proj": rope_pairs_order(nh * hd, nh), "*k_proj": rope_pairs_order(nkv * hd, nkv)}


def permutation(order, n, who, what):
    """order as a LongTensor, checked to be a permutation of range(n) (ValueError naming who and
    what n counts otherwise)."""
    o = torch.as_tensor(order, dtype=torch.long).reshape(-1)
    if o.numel() != n or not torch.equal(torch.sort(o).values, torch.arange(n)):
        raise ValueError(f"{who}: expected a permutation of range({n}) ({what}), got {o.numel()} indices "
                         "that are not one")
    return o


def _orders(placed, out_order):
    """{module path: (order, inverse)} for the placed Linears out_order's globs match (the first
    glob that matches); each order must be a permutation of the module's out_features."""
    res, used = {}, set()
    for path, (mod, _, _) in placed.items():
        for pat, order in out_order.items():
            if not fnmatch.fnmatchcase(path, pat):
                continue
            used.add(pat)
            o = permutation(order, mod.out_features, f"apply_policy: out_order[{pat!r}] for {path}",
                            "its out_features")
            res[path] = (o, torch.argsort(o))
            break
    for pat in out_order:
        if pat not in used:
            raise ValueError(f"apply_policy: out_order glob {pat!r} matches no placed nn.Linear")
    return res


_np = torch_ops._np  # a float32 CPU tensor's memory as a NumPy array (no copy)


class _Group:
    """Linears of one projection and layer that share an input (q, k, v): one operator call and
    one autograd node."""

    def __init__(self, index, proj, layer):
        self.index, self.proj, self.layer = index, proj, layer
        self.members = []          # PolicyLinear modules, in registration order (the C trainer's order)
        self.paths = []            # their module paths
        self.orders = []           # per member: (order, inverse) of its output features, or None
        self.fwd = self.bwd = 0    # counted forwards and backwards of this step
        self.cache = None          # (x, outputs, consumed flags) of the last forward
        self.snap = None           # delayed scaling: the autocast state before the last counted forward
        self.w_casts = {}          # member: (W's version, address, W's cast) of the last forward, for dgrad

    def __getstate__(self):
        d = dict(self.__dict__)
        d["cache"] = d["snap"] = None
        d["w_casts"] = {}
        return d


class PolicyLinear(torch.nn.Linear):
    """An nn.Linear under a policy: apply_policy swaps a placed nn.Linear's class to this one (the
    same module object: its parameters, hooks and place in the model kept) and remove() swaps it
    back. Its forward calls torch.ops.fplab.linear with the policy's handle; it holds a reference
    to the Policy (not a submodule)."""

    def forward(self, x):
        return self._fplab_policy._forward(self._fplab_group, self._fplab_member, x)

    def extra_repr(self):
        return super().extra_repr() + f", policy={self._fplab_policy.name!r}"


class PolicyLinearState(PolicyLinear):
    """The first Linear a policy places: it also holds the policy's state (amax histories, loss
    scaler, step, micro-batch counters) as its extra state, so the state is in the model's
    state_dict() under PATH._extra_state (Transformer Engine's modules keep theirs so too), and
    the model's own containers (Sequential, ModuleList) see no module of fplab's."""

    def get_extra_state(self):
        return self._fplab_policy.get_extra_state()

    def set_extra_state(self, state):
        self._fplab_policy.set_extra_state(state)


_ATTRS = ("_fplab_policy", "_fplab_group", "_fplab_member", "_fplab_path")


def applied_policies(model):
    """The policies applied to model's modules (the Policy modules, each once, in module order;
    [] where none is): how to reach, and remove, a policy whose apply_policy result was not kept."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"applied_policies: expected a torch.nn.Module, got {type(model).__name__}")
    found = {}
    for mod in model.modules():
        if isinstance(mod, PolicyLinear):
            found.setdefault(id(mod._fplab_policy), mod._fplab_policy)
    return list(found.values())


def remove_policy(model):
    """Removes every policy applied to model's modules (their Linears become nn.Linear again).
    Returns how many were removed."""
    pols = applied_policies(model)
    for p in pols:
        p.remove()
    return len(pols)


class Policy:
    """What apply_policy returns: the policy applied to a model, held by the model's Linears (their
    class is PolicyLinear) until remove() (a context manager too: leaving the `with` block removes
    it). Its state (the autocast context's loss scaler and amax histories, the step, the
    micro-batch counters, the count of applied steps) is the extra state of the first Linear it
    places (PolicyLinearState), so it is in the model's state_dict(), and copy.deepcopy /
    torch.save of the model carry it. Attributes: name, text (the policy's
    canonical text), ctx (the fplab._autocast.Context), sites ({module path: (projection,
    layer)}), step, handle (its name in the torch.ops.fplab operators)."""

    def __init__(self, model, policy, *, seed=0, telemetry="sites", sites=(), default="mlp.down",
                 accumulator=None, log=None, n_layers=None, out_order=None, replace=False, dp_group=None,
                 products="torch"):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"apply_policy: expected a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(policy, str):
            raise TypeError(f"apply_policy: policy is a preset name or a policy file path, got {type(policy).__name__}")
        if products not in PRODUCTS:
            raise ValueError(f"apply_policy: products={products!r}; expected one of {', '.join(PRODUCTS)}")
        previous = applied_policies(model)
        if previous and not replace:
            raise ValueError(f"apply_policy: the model already runs under policy {previous[0].name!r}; remove it "
                             "first (pol.remove(); fplab.torch.applied_policies(model) finds it) or pass "
                             "replace=True")
        text = _autocast.policy_text(policy)
        if accumulator is not None:  # passed through to the library's grammar unchanged
            for line in [accumulator] if isinstance(accumulator, str) else accumulator:
                text += f"accumulator {line}\n"
        placed = {}
        for path, mod in model.named_modules():
            if not isinstance(mod, torch.nn.Linear):
                continue
            proj = self._place(path, sites, default)
            if proj is None:
                continue
            if proj not in PROJECTIONS:
                raise ValueError(f"apply_policy: module {path}: projection {proj!r}; expected one of "
                                 f"{', '.join(PROJECTIONS)} or None")
            if type(mod) not in (torch.nn.Linear, PolicyLinear, PolicyLinearState):
                raise TypeError(f"apply_policy: module {path} is a {type(mod).__name__}, a subclass of nn.Linear; "
                                "a policy swaps plain nn.Linear modules only (sites=[(path, None)] leaves it alone)")
            m = _LAYER.search(path)
            placed[path] = (mod, PROJECTIONS.index(proj), int(m.group(1)) if m else -1)
        top = max([l for _, _, l in placed.values()], default=-1) + 1 if n_layers is None else n_layers
        # Model-level Linears take layer n_layers, as the C trainer's LM head (its SR stream).
        placed = {p: (mod, g, top if l < 0 else l) for p, (mod, g, l) in placed.items()}
        if any(l > top for _, _, l in placed.values()):
            raise ValueError(f"apply_policy: n_layers={top}, but a module path numbers layer "
                             f"{max(l for _, _, l in placed.values())}")
        orders = _orders(placed, out_order or {})
        self._ctx_args = (text, f"policy {policy}", top, seed, telemetry)
        self._make_ctx()
        self.sites = {p: (PROJECTIONS[g], l) for p, (_, g, l) in placed.items()}
        # a list: every cast (site, layer, k_rows, count, input, values) is appended, as ac_cast
        # sees it (out_order's features in the cast order)
        self.record = None
        # Where casts of tensors on the CPU run: None (ac_cast and autocast's operand sharing)
        # or "host" (autocast's plans on the host executor: the device path's dispatch, for
        # tests without a GPU). CUDA tensors take the plans on the device where they apply.
        self.plan_executor = None
        # dgrad takes the forward's cast of W where W's rule casts alike in both orientations
        # (NVFP4's 16x16 tiles, bf16): one cast of each weight a micro-batch instead of two, for a
        # copy of the weight held from the forward to its backward. Tests set it False.
        self.keep_w_casts = True
        self.step = self.applied = 0
        self.last_skipped = False
        self.dp_group = dp_group
        self._rank, self._world = _dp_rank(dp_group)
        self._last_telemetry = {}  # the last step end_step closed (telemetry())
        self._log = open(log, "a") if isinstance(log, str) else log
        self._own_log = isinstance(log, str)
        self._t0 = time.monotonic()
        self._tokens = 0
        self._seed = seed
        self.products = products
        for old in previous:  # replace=True, and nothing above refused
            old.remove()
        # Groups: one per (projection, layer, parent module).
        groups, placed_done = {}, []
        for path, (mod, g, l) in placed.items():
            key = (g, l, path.rpartition(".")[0])
            grp = groups.get(key)
            if grp is None:
                grp = groups[key] = _Group(len(groups), g, l)
            grp.members.append(mod)
            grp.paths.append(path)
            grp.orders.append(orders.get(path))
            mod.__class__ = PolicyLinear if placed_done else PolicyLinearState
            placed_done.append(path)
            for k, v in zip(_ATTRS, (self, grp, len(grp.members) - 1, path)):
                object.__setattr__(mod, k, v)
        self.groups = list(groups.values())
        self._applied = True
        if self._log is not None:
            self._log.write(json.dumps({"event": "start", "policy": self.name, "seed": seed, "model": "torch",
                                        "steps": 0, "tokens_per_step": 0, "resumed_from": 0, "ranks": 1},
                                       separators=(",", ":")) + "\n")

    def mm_paths(self):
        """The kernels the C library ran this policy's emulated and engine products on since it was
        applied (or loaded): [{kernel, products, outputs, model_outputs}] (kernels/scaled_mm.h's
        mm_path; e.g. "engine-fast" for hopper:wgmma on fp8)."""
        return self.ctx.mm_paths()

    def _make_ctx(self):
        text, origin, top, seed, telemetry = self._ctx_args
        self.ctx = _autocast.Context(text, origin, top, seed, telemetry)
        d = self.ctx.describe()
        self.name, self.text, self.info = d["name"], d["text"], d
        self.site_index = {n: i for i, n in enumerate(d["site_names"])}
        self.active = d["active"]
        self.emulated = d["emulated"]
        self.both_ways = d["both_ways"]
        self._delayed = bool(re.search(r"^site .* delayed", d["text"], re.M))
        self._replay = False  # a recompute replaying counted casts (records them as uncounted)
        self.handle = torch_ops.register_policy(self)
        self.ctx.begin_step(getattr(self, "step", 0))

    @staticmethod
    def _place(path, sites, default):
        for pat, proj in sites:
            if fnmatch.fnmatchcase(path, pat):
                return proj
        return NAMES.get(path.rpartition(".")[2], default)

    # --- the model's state: extra state, copies and pickles

    def get_extra_state(self):
        """The policy's state as the model's state dict holds it (FIRST_LINEAR._extra_state)."""
        return {"format": 1, "policy": self.text, "seed": self._seed, "n_layers": self._ctx_args[2],
                "step": self.step, "applied": self.applied,
                "micro": [[g.fwd, g.bwd] for g in self.groups],
                "autocast": torch.frombuffer(bytearray(self.ctx.state()), dtype=torch.uint8)}

    def set_extra_state(self, state):
        if not isinstance(state, dict) or state.get("format") != 1:
            raise ValueError("fplab.torch: the checkpoint's policy state is not one this version writes (format 1)")
        if state["policy"] != self.text or state["n_layers"] != self._ctx_args[2]:
            raise ValueError(f"fplab.torch: the checkpoint's policy state is for another policy or layer count "
                             f"({state['n_layers']} layers) than {self.name!r} ({self._ctx_args[2]} layers): apply "
                             "the checkpoint's policy before load_state_dict")
        if len(state["micro"]) != len(self.groups):
            raise ValueError(f"fplab.torch: the checkpoint's policy has {len(state['micro'])} Linear groups, this "
                             f"model {len(self.groups)}")
        if state["seed"] != self._seed:
            self._seed = state["seed"]
            self._ctx_args = self._ctx_args[:3] + (self._seed,) + self._ctx_args[4:]
            self._make_ctx()
        self.ctx.load_state(bytes(state["autocast"].numpy().tobytes()))
        self.step, self.applied = int(state["step"]), int(state["applied"])
        self.ctx.begin_step(self.step)
        for g, (f, b) in zip(self.groups, state["micro"]):
            g.fwd, g.bwd, g.cache = int(f), int(b), None
        self._last_telemetry = {}

    def __getstate__(self):
        d = dict(self.__dict__)
        d["ctx"] = self.ctx.state()
        d.pop("handle", None)
        d["_log"], d["_own_log"], d["record"] = None, False, None  # a copy writes no log of its own
        return d

    def __setstate__(self, d):
        blob = d.pop("ctx")
        self.__dict__.update(d)
        self._make_ctx()
        self.ctx.load_state(blob)
        self.ctx.begin_step(self.step)

    # --- removing

    def remove(self):
        """Swaps the model's Linears back to nn.Linear and detaches the policy from the model (and
        closes a log opened by path). Once removed, a policy does nothing more (a second remove()
        is a no-op)."""
        if not self.__dict__.get("_applied"):
            return
        for grp in self.groups:
            for mod in grp.members:
                if isinstance(mod, PolicyLinear) and mod.__dict__.get("_fplab_policy") is self:
                    for k in _ATTRS:
                        mod.__dict__.pop(k, None)
                    mod.__class__ = torch.nn.Linear
        self._applied = False
        self.close()

    def close(self, how="done"):
        """Writes the log's end line (as the C trainer's: how the run ended, steps, applied,
        skipped) and closes a log opened by path; nothing without a log."""
        if self._log is None:
            return
        sc = self.ctx.scaler()
        self._log.write(json.dumps({"event": "end", "how": how, "step": self.step, "applied": self.applied,
                                    "skipped": sc["skipped"]}, separators=(",", ":")) + "\n")
        self._log.flush()
        if self._own_log:
            self._log.close()
        self._log = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    # --- running

    def _forward(self, grp, i, x):
        if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
            raise TypeError(f"fplab.torch: {self._path(grp, i)}: expected a float32 input, got "
                            f"{getattr(x, 'dtype', type(x).__name__)} (fplab converts nothing; the policy replaces "
                            "torch.autocast: run the model in float32)")
        mod = grp.members[i]
        if mod.weight.dtype != torch.float32:
            raise TypeError(f"fplab.torch: {self._path(grp, i)}: weight is {mod.weight.dtype}; the policy's "
                            "master site sets the weights' precision: keep the module in float32")
        if x.numel() == 0 or mod.weight.numel() == 0:
            # An empty product casts nothing (no step, micro-batch or count moves): nn.Linear's
            # own result, whose gradients are the exact zeros and empties.
            return torch.nn.functional.linear(x, mod.weight, mod.bias)
        members = grp.members
        if len(members) == 1:
            bs = [mod.bias] if mod.bias is not None else []
            return torch_ops.call_linear(x, [mod.weight], bs, self.handle, grp.index, torch.is_grad_enabled())[0]
        c = grp.cache
        if c is not None and c[0] is x and not c[2][i]:
            c[2][i] = True
            if all(c[2]):
                grp.cache = None
            return c[1][i]
        # the biases of the members that have one, in member order (the op adds them)
        outs = torch_ops.call_linear(x, [m.weight for m in members], [m.bias for m in members if m.bias is not None],
                                     self.handle, grp.index, torch.is_grad_enabled())
        flags = [False] * len(members)
        flags[i] = True
        grp.cache = (x, outs, flags)
        return outs[i]

    @staticmethod
    def _path(grp, i):
        return grp.paths[i]

    def _site(self, grp, which):
        return self.site_index[f"{PROJECTIONS[grp.proj]}.{which}"]

    def _micro(self, grp, train):
        """(count, micro) of a forward of grp, at run time: a forward with grad after the previous
        forward's backward is counted and starts the next micro-batch; a forward repeated before
        its backward (recompute) or without grad (evaluation) casts as the last one, uncounted."""
        if train and grp.fwd == grp.bwd:
            grp.fwd += 1
            if grp.fwd * self._world > 64 and (grp.fwd - 1) * self._world <= 64:
                torch_ops.warn_micro()
            return True, self._micro_key(grp.fwd - 1)
        return False, self._micro_key(max(grp.fwd - 1, 0))

    def _micro_key(self, local):
        """The stochastic-rounding key of local micro-batch `local` of this rank: a * ranks + rank,
        as the C trainer's data-parallel runs (trainer/train.c), so that R ranks x A micro-batches
        draw as 1 rank x R*A micro-batches."""
        return (local * self._world + self._rank) % 64

    def cast(self, site, layer, x, rows, cols, k_rows, count):
        """x (a float32 CPU tensor of rows x cols) cast for site (an index) as ac_cast does; x
        itself where the site is inactive."""
        if not self.active[site]:
            return x
        out = torch.empty((rows, cols), dtype=torch.float32)
        self.ctx.cast(_np(out), _np(x), site, layer, rows, cols, k_rows, count)
        if self.record is not None:
            self.record.append((self.info["site_names"][site], layer, bool(k_rows), bool(count) and not self._replay,
                                x.clone(), out.clone()))
        return out

    def _mm(self, pas, a, b, n, ic, oc, acc_into=None, device=None):
        """The float32 product: torch's matmul (products="torch", or a tensor on another device:
        a and b already there), or the C trainer's (llama_ops.h's op_matmul_*) on the CPU."""
        if self.products == "torch" or (device is not None and device.type != "cpu"):
            if pas == FPROP:
                return a @ b.t()
            if pas == DGRAD:
                return a @ b if acc_into is None else acc_into.addmm_(a, b)
            return a.t() @ b
        if pas == FPROP:
            out = torch.empty((n, oc), dtype=torch.float32)
        elif pas == DGRAD:
            out = acc_into if acc_into is not None else torch.empty((n, ic), dtype=torch.float32)
        else:
            out = torch.zeros((oc, ic), dtype=torch.float32)
        self.ctx.matmul(pas, _np(out), _np(a), _np(b), n, ic, oc, pas == DGRAD and acc_into is not None)
        return out

    def _linear_forward(self, grp, x, ws, bs, train):
        """out_i = x W_i^T (+ b_i) for the members of a group, cast and multiplied as the C
        trainer's projection (the kernel of torch.ops.fplab.linear)."""
        count, micro = self._micro(grp, train)
        if self._delayed and train:
            # Delayed scaling: each counted cast pushes its amax, and the next cast of the site
            # (a group's next weight) sees it. A recompute (checkpointing) replays the counted
            # casts on the history its counted forward found, then puts back the present
            # history and telemetry: it casts as the counted forward did, and counts nothing.
            if count:
                grp.snap = self.ctx.state()
            elif getattr(grp, "snap", None) is not None:
                now, tel = self.ctx.state(), self.ctx.tel_state()
                self.ctx.load_state(grp.snap)
                self._replay = True
                try:
                    return self._linear_forward_cast(grp, x, ws, bs, True, micro, train)
                finally:
                    self._replay = False
                    self.ctx.load_state(now)
                    self.ctx.load_tel_state(tel)
        return self._linear_forward_cast(grp, x, ws, bs, count, micro, train)

    def _linear_forward_cast(self, grp, x, ws, bs, count, micro, train):
        IC = x.shape[-1]
        dev = x.device
        x2 = x.detach().reshape(-1, IC).contiguous()
        N = x2.shape[0]
        c = self.ctx
        c.begin_micro(micro)
        L, g = grp.layer, grp.proj
        s_in, s_w = self._site(grp, "in"), self._site(grp, "w")
        outs = []
        # out_order: the weight's rows in the cast order, the output back in the module's
        orders = grp.orders
        where = self._plan_where(dev)
        if where is not None and not self.emulated[g][FPROP]:
            # autocast's plans on the tensors where they are (no host copy): the input once for
            # the group, then each weight, in ac_fprop_input's and the members' order
            xin = self._pcast(where, s_in, L, x2, False, count)
            for w, o in zip(ws, orders):
                wr = _rows(w.detach(), o).contiguous()
                wc = self._pcast(where, s_w, L, wr, False, count)
                outs.append(self._mm(FPROP, xin, wc, N, IC, wr.shape[0], device=dev))
            return self._finish_forward(grp, x, bs, outs)
        xc = _cpu(x2)
        wcs = [_cpu(_rows(w.detach(), o)).contiguous() for w, o in zip(ws, orders)]
        if self.emulated[g][FPROP]:
            for j, wc in enumerate(wcs):
                OC = wc.shape[0]
                out = torch.empty((N, OC), dtype=torch.float32)
                c.matmul_emulated(g, FPROP, _np(out), _np(xc), s_in, N, IC, False, count and j == 0,
                                  _np(wc), s_w, OC, IC, False, count, L, N, OC, IC, False)
                outs.append(out.to(dev))
        else:
            xin = self._fprop_input(grp, xc, N, IC, count).to(dev)
            # W's cast serves dgrad too where W's rule casts alike both ways (autocast's
            # w_cast): kept until this group's backward takes it, with W's version and address
            keep = self.keep_w_casts and train and self.record is None and self.both_ways[s_w] and self.active[s_w]
            grp.w_casts = {}
            for j, (w, wc) in enumerate(zip(ws, wcs)):
                OC = wc.shape[0]
                wc = self.cast(s_w, L, wc, OC, IC, False, count)
                if keep:
                    grp.w_casts[j] = (w._version, w.data_ptr(), wc)
                outs.append(self._mm(FPROP, xin, wc.to(dev), N, IC, OC, device=dev))
        return self._finish_forward(grp, x, bs, outs)

    def _finish_forward(self, grp, x, bs, outs):
        """The members' outputs back in the module's feature order, plus their biases."""
        outs = [_cols(out, o, inverse=True) for out, o in zip(outs, grp.orders)]
        res, k = [], 0
        for out, m in zip(outs, grp.members):
            if m.bias is not None and k < len(bs):
                out = out + bs[k].detach()
                k += 1
            res.append(out.reshape(*x.shape[:-1], out.shape[-1]))
        return res

    def _fprop_input(self, grp, xc, N, IC, count):
        """The group's input xc (N, IC) cast once for all its members: autocast's ac_fprop_input,
        which also notes it for the members' wgrads; under pol.record, the cast as ac_cast makes
        it (recorded)."""
        s_in = self._site(grp, "in")
        if self.record is not None:
            return self.cast(s_in, grp.layer, xc, N, IC, False, count)
        if not self.active[s_in]:
            return xc
        out = torch.empty((N, IC), dtype=torch.float32)
        self.ctx.fprop_input(_np(out), _np(xc), grp.proj, grp.layer, N, IC, recompute=not count)
        return out

    def _linear_backward(self, grp, grads, x, ws, n_bias, need_dx):
        """proj_backward member by member in the group's order (the kernel of
        torch.ops.fplab.linear_backward): (dx, [dW_i], [db_i of the first n_bias members]).
        Each member's dgrad and then wgrad run through autocast (ac_dgrad_operands,
        ac_wgrad_operands), which decides which casts are made again and which are reused (x's
        Hadamard rotation and wgrad cast across the group's members, dgrad's cast of dout in
        wgrad), as in the C trainer's backward."""
        dev = x.device
        IC = x.shape[-1]
        x2 = x.detach().reshape(-1, IC)
        N = x2.shape[0]
        # the micro-batch of the forward this backward belongs to (the last counted one)
        if grp.bwd < grp.fwd:
            grp.bwd += 1
        self.ctx.begin_micro(self._micro_key(max(grp.fwd - 1, 0)))
        # autocast's plans where they apply (products in float32: an emulated accumulator's
        # operands and NVFP4's Hadamard rotation of wgrad's have no plan and cast on the host)
        where = self._plan_where(dev)
        plan_d = where is not None and not self.emulated[grp.proj][DGRAD]
        plan_w = where is not None and not self.emulated[grp.proj][WGRAD] and not self.info["hadamard"]
        xd = x2.detach().contiguous()
        xc = None if plan_w else _cpu(xd)
        grad = self._grad_recorded if self.record is not None else self._grad
        dx = None
        gw, gb = [], []
        for j, w in enumerate(ws):
            OC = w.shape[0]
            g2 = grads[j].detach().reshape(N, OC)
            gb.append(g2.sum(0) if grp.members[j].bias is not None else None)
            o = grp.orders[j]  # out_order: dout's columns and W's rows in the cast order
            gd, wd = _cols(g2, o).contiguous(), _rows(w.detach(), o).contiguous()
            gc_ = None if plan_d and plan_w else _cpu(gd)
            # dgrad: dx (= or +=) cast(dout, .grad) cast(W, .w), scales along OC
            if plan_d:
                dx = self._grad_plan(grp, DGRAD, dx, gd, wd, N, IC, OC, dev, where)
            else:  # the recorded backward makes every cast itself
                kept = {} if self.record is not None else {"w_cast": self._kept_w_cast(grp, j, w)}
                dx = grad(grp, DGRAD, dx, gc_, _cpu(wd), N, IC, OC, dev, **kept)
            # wgrad: dW = cast(dout, .grad)^T cast(x, .in), both with scales along N
            if plan_w:
                dw = self._grad_plan(grp, WGRAD, None, gd, xd, N, IC, OC, dev, where)
            else:
                dw = grad(grp, WGRAD, None, gc_, xc, N, IC, OC, dev)
            gw.append(_rows(dw, o, inverse=True).to(dev))
        dx = dx.to(dev).reshape(x.shape) if need_dx else x.new_empty((0,))
        return dx, gw, [b for b, m in zip(gb, grp.members) if m.bias is not None][:n_bias]

    def _kept_w_cast(self, grp, j, w):
        """The forward's cast of group member j's weight w, taken from the group (once), if it was
        kept and w has not changed since (same version and address); else None."""
        kept = getattr(grp, "w_casts", {}).pop(j, None)  # a group unpickled from an older fplab has none
        return kept[2] if kept is not None and kept[0] == w._version and kept[1] == w.data_ptr() else None

    def _grad(self, grp, pas, acc, dout, other, N, IC, OC, dev, w_cast=None):
        """One product of a member's backward through autocast: dgrad (other = W; acc: the dx
        so far, or None) or wgrad (other = x). autocast casts the operands (ac_dgrad_operands,
        ac_wgrad_operands); the library multiplies emulated accumulators, and wgrad on the CPU
        under products="fplab"; _mm the rest. A product none of whose sites casts skips autocast
        (whose operands would be copies of its inputs)."""
        c = self.ctx
        if pas == DGRAD and self.emulated[grp.proj][DGRAD]:
            return self._dgrad_emulated(grp, acc, dout, other, N, IC, OC)
        req = {"proj": grp.proj, "layer": grp.layer, "N": N, "IC": IC, "OC": OC}
        if pas == WGRAD and ((dev.type == "cpu" and self.products == "fplab") or self.emulated[grp.proj][WGRAD]):
            out = torch.zeros((OC, IC), dtype=torch.float32)
            c.wgrad(out=_np(out), dout=_np(dout), x=_np(other), **req)
            return out
        if not self.info["hadamard"] and not self.active[self._site(grp, "grad")] and \
                not self.active[self._site(grp, "w" if pas == DGRAD else "in")]:
            return self._mm(pas, dout.to(dev), other.to(dev), N, IC, OC, acc_into=acc, device=dev)
        # Not Context.dgrad: its keyword-only `accumulate` does not parse (_autocast.c's format).
        # The operands are views of autocast's buffers (or the inputs themselves), valid until its
        # next call: multiplied (or copied to the device) at once.
        if pas == DGRAD:
            wc = {} if w_cast is None else {"w_cast": _np(w_cast)}
            _, va, vb = c.dgrad_operands(a=None, b=None, dout=_np(dout), w=_np(other), **wc, **req)
        else:
            _, va, vb = c.wgrad_operands(a=None, b=None, dout=_np(dout), x=_np(other), **req)
        a = dout if va is None else torch.frombuffer(va, dtype=torch.float32).view(dout.shape)
        b = other if vb is None else torch.frombuffer(vb, dtype=torch.float32).view(other.shape)
        return self._mm(pas, a.to(dev), b.to(dev), N, IC, OC, acc_into=acc, device=dev)

    def _grad_plan(self, grp, pas, acc, dout, other, N, IC, OC, dev, where):
        """One product of a member's backward with its operands cast by autocast's plans where the
        tensors are (ac_dgrad_operands' and ac_wgrad_operands' casts, each made by itself: the
        same bits, as autocast's sharing changes no bit): dgrad cast(dout, .grad) counted and
        cast(W, .w) along OC; wgrad both along N, uncounted."""
        L = grp.layer
        s_g = self._site(grp, "grad")
        if pas == DGRAD:
            a = self._pcast(where, s_g, L, dout, False, True)
            b = self._pcast(where, self._site(grp, "w"), L, other, True, False)
        else:
            a = self._pcast(where, s_g, L, dout, True, False)
            b = self._pcast(where, self._site(grp, "in"), L, other, True, False)
        return self._mm(pas, a, b, N, IC, OC, acc_into=acc, device=dev)

    # --- casts as autocast's plans (fplab.torch_cuda.policy_cast)

    def _plan_where(self, dev):
        """Where this policy's casts of a tensor on dev run as autocast's plans: "cuda" for a CUDA
        tensor when libfplab has the CUDA casts (torch_cuda.plans_on_device), "host" for a CPU
        tensor under plan_executor="host" (tests); None: the host path (ac_cast, autocast's
        operand sharing; a CUDA tensor is copied to the host and back). Under pol.record every
        cast takes the host path, which records its input."""
        if self.record is not None:
            return None
        if dev.type == "cuda":
            from . import torch_cuda
            return "cuda" if torch_cuda.plans_on_device() else None
        return "host" if dev.type == "cpu" and getattr(self, "plan_executor", None) == "host" else None

    def _pcast(self, where, site, layer, x, k_rows, count):
        """x (rows, cols), contiguous float32 where `where` runs, cast for site by its plan; x itself
        where the site is inactive. Finishing a counted cast (its amax, its telemetry) reads the
        counters back, which synchronises with the stream; nothing to finish when telemetry is
        off and the policy has no delayed scaling."""
        from . import torch_cuda
        finish = self._delayed or self._ctx_args[4] != "off"
        return torch_cuda.policy_cast(self.ctx, site, layer, x, k_rows, count, where, finish=finish)

    def _dgrad_emulated(self, grp, acc, dout, w, N, IC, OC):
        """dgrad in the accumulator the policy emulates: both operands cast afresh (autocast
        reuses no cast for an emulated product)."""
        g, L = grp.proj, grp.layer
        out = acc if acc is not None else torch.empty((N, IC), dtype=torch.float32)
        self.ctx.matmul_emulated(g, DGRAD, _np(out), _np(dout), self._site(grp, "grad"), N, OC, False, True,
                                 _np(w), self._site(grp, "w"), OC, IC, True, False, L, N, IC, OC, acc is not None)
        return out

    def _grad_recorded(self, grp, pas, acc, dout, other, N, IC, OC, dev):
        """_grad under pol.record, which sees every cast with its input: each operand cast by
        itself (ac_cast), as autocast does when a hook observes the casts (nothing reused)."""
        c, L, g = self.ctx, grp.layer, grp.proj
        s_in, s_w, s_g = self._site(grp, "in"), self._site(grp, "w"), self._site(grp, "grad")
        if pas == DGRAD and self.emulated[g][DGRAD]:
            return self._dgrad_emulated(grp, acc, dout, other, N, IC, OC)
        if pas == WGRAD and self.info["hadamard"]:  # NVFP4: both rotated along N first
            dh, xh = torch.empty_like(dout), torch.empty_like(other)
            c.hadamard(_np(dh), _np(dout), N, OC)
            c.hadamard(_np(xh), _np(other), N, IC)
            dout, other = dh, xh
        if pas == WGRAD and self.emulated[g][WGRAD]:
            out = torch.zeros((OC, IC), dtype=torch.float32)
            c.matmul_emulated(g, WGRAD, _np(out), _np(dout), s_g, N, OC, True, False,
                              _np(other), s_in, N, IC, True, False, L, OC, IC, N, True)
            return out
        if pas == DGRAD:
            a = self.cast(s_g, L, dout, N, OC, False, True)
            b = self.cast(s_w, L, other, OC, IC, True, False)
        else:
            a = self.cast(s_g, L, dout, N, OC, True, False)
            b = self.cast(s_in, L, other, N, IC, True, False)
        return self._mm(pas, a.to(dev), b.to(dev), N, IC, OC, acc_into=acc, device=dev)

    # --- steps and telemetry

    def reduce_amax(self):
        """Delayed scaling over data-parallel ranks (dp_group): every amax pushed this step becomes
        the largest over the ranks (an all-reduce MAX of the histories, Transformer Engine's
        convention), so that each rank starts the next step with the same scales. end_step calls
        it; nothing without dp_group or delayed scaling."""
        if self.dp_group is None or not self._delayed or self._world == 1:
            return
        import torch.distributed as dist
        m = re.search(r"^amax_history (\d+)", self.text, re.M)
        hl = int(m.group(1)) if m else 1
        n = _autocast.NSITES * (self._ctx_args[2] + 1) * hl  # the state's tail: the histories
        b = bytearray(self.ctx.state())
        h = torch.frombuffer(b, dtype=torch.uint8)[len(b) - 4 * n:].view(torch.float32).clone()
        dist.all_reduce(h, op=dist.ReduceOp.MAX, group=None if self.dp_group is True else self.dp_group)
        b[len(b) - 4 * n:] = h.numpy().tobytes()
        self.ctx.load_state(bytes(b))

    def telemetry(self):
        """The telemetry of the step in progress so far, as the C trainer's log members, with the
        step's number as the log line's: {"step": N, "sites": ..., "update": ...}. Right after
        end_step, until the next step counts a cast, the step end_step closed (what its log line
        holds); {} before the first count."""
        s = self.ctx.json()
        if not s:
            return dict(self._last_telemetry)
        return {"step": self.step + 1, **json.loads("{" + s[1:] + "}")}

    def end_step(self, loss=None, *, lr=None, grad_norm=None, skipped=None, tokens=0, val_loss=None):
        """Ends optimizer step self.step: writes its log line (the C trainer's JSONL: step, loss,
        lr, grad_norm, tokens_per_s, elapsed_s, loss_scale, skipped, sites, update) when a log
        was given, then starts the next step. skipped: default, what the GradScaler decided.
        tokens: the step's tokens, for tokens_per_s. Returns the line's fields as a dict."""
        if isinstance(loss, torch.Tensor):
            loss = loss.detach().item()
        if skipped is None:
            skipped = self.last_skipped
        self.reduce_amax()
        self.applied += 0 if skipped else 1
        self.last_skipped = False
        self._tokens += tokens
        el = time.monotonic() - self._t0
        nan = float("nan")
        # the line as the C trainer writes it, by the C writer (fplab._autocast's step_line)
        line = self.ctx.step_line(self.step + 1, nan if loss is None else float(loss), nan if lr is None else float(lr),
                                  nan if grad_norm is None else float(grad_norm),
                                  self._tokens / el if el > 0 else 0.0, el, float(self.ctx.scaler()["scale"]),
                                  bool(skipped), nan if val_loss is None else float(val_loss))
        tel = self.ctx.json()
        self._last_telemetry = {"step": self.step + 1, **json.loads("{" + tel[1:] + "}")} if tel else {}
        if self._log is not None:
            self._log.write(line + "\n")
            self._log.flush()
        self.step += 1
        self.ctx.begin_step(self.step)
        for g in self.groups:
            g.fwd = g.bwd = 0
            g.cache = g.snap = None
        return json.loads(line.replace(":nan", ':"nan"').replace(":inf", ':"inf"').replace(":-inf", ':"-inf"'))


def _dp_rank(dp_group):
    """(rank, ranks) in the data-parallel group (True: torch.distributed's default group); (0, 1)
    without one."""
    if dp_group is None:
        return 0, 1
    import torch.distributed as dist
    g = None if dp_group is True else dp_group
    return dist.get_rank(g), dist.get_world_size(g)


def _cpu(t):
    return t if t.device.type == "cpu" else t.cpu()


def _rows(t, o, inverse=False):
    """t's rows in out_order's cast order (inverse: back to the module's order); t without one."""
    return t if o is None else t.index_select(0, o[1 if inverse else 0].to(t.device))


def _cols(t, o, inverse=False):
    return t if o is None else t.index_select(1, o[1 if inverse else 0].to(t.device))


def apply_policy(model, policy, *, seed=0, telemetry="sites", sites=(), default="mlp.down", accumulator=None,
                 log=None, n_layers=None, out_order=None, replace=False, dp_group=None, products="torch"):
    """Runs every nn.Linear of model under a precision policy of the C trainer and returns the
    Policy (also a context manager: `with apply_policy(model, "mxfp8") as pol:` restores the
    model on leaving).

    policy: a preset name (fplab policy --list) or a policy file. accumulator: a spec line or a
    list of them, appended as `accumulator LINE` (e.g. "hopper:wgmma", "m13:promote=128 *.fprop");
    the library parses it. sites: [(glob over module paths, projection or None)] tried before
    the names of NAMES; default: the projection of a Linear neither places (None: leave it as
    it is). seed: the stochastic-rounding key. telemetry: off | sites | layers. log: a path or a
    file to which end_step writes the C trainer's JSONL lines. n_layers: the model's layer count
    (default: one more than the largest layer number of a placed Linear). out_order: {glob over
    module paths: a permutation of that Linear's out_features}, the order in which its output
    features are cast (block scales and stochastic-rounding draws follow positions);
    llama_order(model.config) makes a Hugging Face Llama's casts the C trainer's. products: who
    multiplies the cast operands where the policy accumulates in float32: "torch" (PyTorch's own
    matmul, as plain PyTorch would; the default) or "fplab" (on the CPU, the C trainer's
    op_matmul_*, whose order of summation is the C trainer's: bitwise parity with it, at the
    library's GEMM speed). Emulated accumulators and engines always run in the library.

    The model holds the policy until pol.remove() (or the end of the `with` block). A model that
    already runs under a policy is refused, unless replace=True, which removes that one first.
    copy.deepcopy(model) gives a model under its own copy of the policy; the policy's state is in
    model.state_dict() (the first placed Linear's extra state), so torch.save works either way."""
    return Policy(model, policy, seed=seed, telemetry=telemetry, sites=sites, default=default,
                  accumulator=accumulator, log=log, n_layers=n_layers, out_order=out_order, replace=replace,
                  dp_group=dp_group, products=products)


@contextlib.contextmanager
def policy(model, name, **kw):
    """with fplab.torch.policy(model, "mxfp8") as pol: ... (apply_policy, removed on exit)."""
    pol = apply_policy(model, name, **kw)
    try:
        yield pol
    finally:
        pol.remove()
