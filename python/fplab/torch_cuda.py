"""fplab.torch_cuda: the CUDA casts of libfplab (kernels/cast_cuda.h) on CUDA tensors, for the
"cuda" kernels of the torch.ops.fplab.* operators. The calls take the tensors' device pointers and
PyTorch's current stream and return without synchronising; nothing is copied to the host (the
telemetry counters stay a CUDA int64 tensor until the caller reads them).

Loaded through ctypes from libfplab.so: $FPLAB_LIB, else build/libfplab.so beside the source
tree, else the system's. The library must have been built with nvcc (else every call raises
RuntimeError "built without nvcc").

Status: written without a GPU. Nothing here has run on a GPU yet (see docs/torch.md, "CUDA");
the kernels' logic is tested on the CPU by tests/test_cast_cuda_shim.c.

    out, counts = round_cuda(x, "e4m3", mode="sr", seed=1, offset=step * x.numel())
    out, elems, scales, counts = quantize_cuda(w, "e2m1", "nvfp4")
    stats = read_counts(counts)   # synchronises: a dict of the fmt_stats / fmt_quant_info counts
    c = matmul_cuda(a_elems, b_elems, "e4m3", acc="hopper:wgmma", a_scales=sa, b_scales=sb, block_k=32)

matmul_cuda is the emulated-accumulator and engine GEMM of kernels/scaled_mm_cuda_dev.h (one thread
per output, bit for bit mm_cpu; the kernels' logic is tested on the CPU by
tests/test_mm_dev_cuda_shim.c). torch.ops.fplab.scaled_mm's "cuda" kernel quantizes with
quantize_cuda and multiplies with matmul_cuda, all on the device.

policy_cast is a policy's cast (autocast's rule: format, mode, recipe, delayed scale, keyed
stochastic rounding, telemetry) on a CUDA tensor: the plan made on the host (Context.cast_plan),
run on the device (run_plan: ac_cast_plan_run), its counts fed back (Context.cast_finish; a
read-back of 88 bytes that synchronises). torch.ops.fplab.cast and fplab.torch's Linears call it
(tests/test_cast_plan_cuda_shim.c holds the kernels' plans to ac_cast bit for bit).
"""
import ctypes
import os
import struct

import torch

__all__ = ["available", "round_cuda", "quantize_cuda", "read_counts", "matmul_cuda", "register_kernels", "NCOUNTS",
           "run_plan", "policy_cast", "plans_on_device", "PlanRefused"]

NCOUNTS = 10  # MM_CUDA_NCOUNTS; the order of kernels/cast_cuda.h's enum
_COUNT_NAMES = ("n", "overflow", "underflow", "subnormal", "nan_in", "invalid", "amax", "scales_clipped",
                "scales_nan", "tensor_scale")
_ERRORS = {1: "invalid argument (format, recipe, mode or options)", 2: "out of memory",
           3: "no CUDA device, or libfplab built without nvcc", 4: "unsupported"}
_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.environ.get("FPLAB_LIB"), os.path.join(here, "..", "..", "build", "libfplab.so"), "libfplab.so"]
    err = None
    for c in cands:
        if not c:
            continue
        try:
            lib = ctypes.CDLL(c)
            break
        except OSError as e:
            err = e
    else:
        raise RuntimeError(f"fplab.torch_cuda: cannot load libfplab.so ({err}); set FPLAB_LIB")
    P, S, U64, I, C = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p
    lib.mm_cuda_round_f32_named.argtypes = [P, P, S, C, C, C, I, I, U64, U64, U64, P, P]
    lib.mm_cuda_round_f32_named.restype = I
    lib.mm_cuda_quantize_f32_named.argtypes = [P, P, P, P, S, S, C, C, C, C, I, I, U64, U64, U64, P, P]
    lib.mm_cuda_quantize_f32_named.restype = I
    lib.fmt_scale_count.restype = S
    F = ctypes.c_float
    lib.mm_cuda_dev_named.argtypes = [P, S, P, S, I, C, P, I, F, P, P, S, I, C, P, I, F, P, S, S, S, C, C, C, F, F,
                                      U64, U64, U64, P, C, S]
    lib.mm_cuda_dev_named.restype = I
    lib.mm_acc_from_name.argtypes = [P, C, P, S]
    lib.mm_acc_from_name.restype = I
    lib.mm_acc_is_emulated.argtypes = [P]
    lib.mm_acc_is_emulated.restype = ctypes.c_bool
    lib.ac_cast_plan_run.argtypes = [C, I, P, P, P, P, P]
    lib.ac_cast_plan_run.restype = I
    _lib = lib
    return lib


def available():
    """True when CUDA is available to torch and libfplab loads."""
    try:
        _load()
    except RuntimeError:
        return False
    return torch.cuda.is_available()


def _check(x, what):
    if not isinstance(x, torch.Tensor) or not x.is_cuda or x.dtype != torch.float32:
        raise TypeError(f"{what}: expected a float32 CUDA tensor, got "
                        f"{getattr(x, 'dtype', type(x).__name__)} on {getattr(x, 'device', '?')}")
    return x.contiguous()


def _status(st, what):
    if st != 0:
        raise RuntimeError(f"{what}: {_ERRORS.get(st, f'status {st}')}")


def _b(s):
    return None if s is None else s.encode()


def round_cuda(x, fmt, mode="rne", overflow=None, flush_subnormals=False, sr_bits=0, seed=0, stream=0,
               offset=0, counts=None):
    """fmt_round_f32 of a float32 CUDA tensor: (out, counts). counts: an int64 CUDA tensor of
    NCOUNTS that the call adds to (a new zeroed one when None)."""
    x = _check(x, "round_cuda")
    out = torch.empty_like(x)
    if counts is None:
        counts = torch.zeros(NCOUNTS, dtype=torch.int64, device=x.device)
    st = _load().mm_cuda_round_f32_named(
        out.data_ptr(), x.data_ptr(), x.numel(), fmt.encode(), mode.encode(), _b(overflow), int(flush_subnormals),
        sr_bits, seed, stream, offset, counts.data_ptr(), torch.cuda.current_stream(x.device).cuda_stream)
    _status(st, f"round_cuda({fmt}, {mode})")
    return out, counts


def quantize_cuda(x, elem, recipe, mode="rne", overflow=None, flush_subnormals=False, sr_bits=0, seed=0, stream=0,
                  offset=0, counts=None):
    """fmt_quantize_f32 of a float32 CUDA tensor viewed as (rows, last dim): (out, elems, scales,
    counts), scales over fmt_scale_grid's tiles."""
    x = _check(x, "quantize_cuda")
    cols = x.shape[-1] if x.dim() else 1
    rows = x.numel() // cols if cols else 0
    out, elems = torch.empty_like(x), torch.empty_like(x)
    lib = _load()
    grid = (ctypes.c_size_t * 2)()
    sc = ctypes.create_string_buffer(512)  # fmt_scaling, filled by the parser only to count tiles
    if lib.fmt_scaling_from_name(sc, recipe.encode(), None, 0) != 0:
        raise ValueError(f"quantize_cuda: unknown recipe {recipe!r}")
    lib.fmt_scale_grid(sc, ctypes.c_size_t(rows), ctypes.c_size_t(cols), grid)
    scales = torch.empty((grid[0], grid[1]), dtype=torch.float32, device=x.device)
    if counts is None:
        counts = torch.zeros(NCOUNTS, dtype=torch.int64, device=x.device)
    st = lib.mm_cuda_quantize_f32_named(
        out.data_ptr(), elems.data_ptr(), scales.data_ptr(), x.data_ptr(), rows, cols, elem.encode(),
        recipe.encode(), mode.encode(), _b(overflow), int(flush_subnormals), sr_bits, seed, stream, offset,
        counts.data_ptr(), torch.cuda.current_stream(x.device).cuda_stream)
    _status(st, f"quantize_cuda({elem}, {recipe})")
    return out, elems, scales, counts


def read_counts(counts):
    """The counters as a dict (copies to the host, so it synchronises with the stream)."""
    c = [int(v) & 0xFFFFFFFFFFFFFFFF for v in counts.cpu().tolist()]
    d = dict(zip(_COUNT_NAMES, c))
    for k in ("amax", "tensor_scale"):
        d[k] = struct.unpack("<f", struct.pack("<I", d[k] & 0xFFFFFFFF))[0]
    if c[9] == 0:
        d["tensor_scale"] = 1.0
    return d


# --- a policy's casts: autocast's plans (autocast.h) run on the device

AC_EXEC = {"host": 0, "cuda": 1}  # ac_exec
PLAN_COPY, PLAN_ROUND, PLAN_QUANTIZE = 0, 1, 2  # ac_plan_kind


class PlanRefused(RuntimeError):
    """The executor cannot run a plan (a library built without nvcc, no device): the caller keeps
    the host copy."""


_PLANS_ON_DEVICE = []


def plans_on_device():
    """Whether a policy's casts of CUDA tensors run on the device (autocast's plans on
    kernels/cast_cuda.h): CUDA available to torch, and libfplab loads and was built with nvcc
    (an empty cast answers MM_OK, not MM_ENODEV). Otherwise the policy keeps the host copy.
    Asked once per process."""
    if not _PLANS_ON_DEVICE:
        ok = False
        if torch.cuda.is_available():
            try:
                ok = _load().mm_cuda_round_f32_named(None, None, 0, b"e4m3", b"rne", None, 0, 0, 0, 0, 0, None,
                                                     None) == 0
            except RuntimeError:
                ok = False
        _PLANS_ON_DEVICE.append(ok)
    return _PLANS_ON_DEVICE[0]


def run_plan(plan, out, x, counts=None, one_scale=None, where="cuda"):
    """ac_cast_plan_run: out = the cast of x that plan (bytes from Context.cast_plan) describes,
    on executor where: "cuda" (kernels/cast_cuda.h on x's device and torch's current stream;
    asynchronous, nothing copied to the host) or "host" (the library's CPU casts on CPU tensors:
    what the tests run without a GPU). out and x: contiguous float32 tensors of the plan's shape
    on that executor's device; counts: int64 of NCOUNTS or more, zeroed (None: nothing counted);
    one_scale: a pointer (int) to one float32 in that memory for the tensor's single scale.
    PlanRefused for MM_ENODEV (the host path then casts), RuntimeError for other statuses."""
    stream = torch.cuda.current_stream(x.device).cuda_stream if where == "cuda" else None
    st = _load().ac_cast_plan_run(plan, AC_EXEC[where], out.data_ptr(), one_scale, x.data_ptr(),
                                  counts.data_ptr() if counts is not None else None, stream)
    if st == 3:
        raise PlanRefused(f"run_plan: {_ERRORS[3]}")
    _status(st, "run_plan")


def policy_cast(ctx, site, layer, x, k_rows, count, where="cuda", finish=True):
    """One cast of a policy (ctx: its fplab._autocast.Context) on x (rows, cols), a contiguous
    float32 tensor on the executor's device, as ac_cast makes it: the plan made on the host
    (Context.cast_plan: format, rounding, stochastic-rounding key, delayed scale), run on the
    device (run_plan), and, where count and finish, finished (Context.cast_finish: the amax joins
    the delayed-scaling history, the counts the telemetry). Finishing reads the counters back:
    one copy of 88 bytes to the host, which synchronises with the stream. Returns x itself for an
    inactive site, else a new tensor. PlanRefused where the executor cannot run (nothing was
    counted; the caller casts on the host instead)."""
    rows, cols = x.shape
    kind, plan, one = ctx.cast_plan(site, layer, rows, cols, k_rows, count)
    if kind == PLAN_COPY:
        return x
    out = torch.empty_like(x)
    done = count and finish
    # the counters and, in the slot after them, the single scale: one read-back for both
    counts = torch.zeros(NCOUNTS + 1, dtype=torch.int64, device=x.device) if done else None
    scale_ptr = counts.data_ptr() + 8 * NCOUNTS if done and one else None
    run_plan(plan, out, x, counts, scale_ptr, where)
    if done:
        c = counts.cpu().numpy().tobytes()  # synchronises
        ctx.cast_finish(plan, c[:8 * NCOUNTS], struct.unpack("<f", c[8 * NCOUNTS:8 * NCOUNTS + 4])[0])
    return out


# --- the emulated-accumulator and engine GEMM

_TSCALE_BYTE = 8 * 9  # MM_CUDA_TSCALE's counter: the float32 bits in its low 4 bytes (little-endian)


def _operand(x, what, rows, cols):
    """(pointer, ld, trans) of a float32 CUDA matrix viewed as (rows, cols): one of its strides
    must be 1 (row-major with ld, or stored transposed); anything else is copied contiguous."""
    if x.dim() != 2 or tuple(x.shape) != (rows, cols):
        raise ValueError(f"matmul_cuda: {what} has shape {tuple(x.shape)}, expected {(rows, cols)}")
    if rows and cols and x.stride(1) == 1 and x.stride(0) >= max(cols, 1):
        return x, x.stride(0), False
    if rows and cols and x.stride(0) == 1 and x.stride(1) >= max(rows, 1):
        return x, x.stride(1), True
    x = x.contiguous()
    return x, max(cols, 1), False


def _tscale(t, what, device):
    """A tensor scale: (host float, device pointer or None, tensor kept alive)."""
    if t is None:
        return 1.0, None, None
    if isinstance(t, torch.Tensor):
        if not t.is_cuda or t.dtype != torch.float32 or t.numel() != 1 or t.device != device:
            raise TypeError(f"matmul_cuda: {what}: expected a float, or a float32 CUDA tensor of one element on "
                            f"{device}, got {t.dtype} {tuple(t.shape)} on {t.device}")
        t = t.contiguous()
        return 0.0, t.data_ptr(), t
    return float(t), None, None


def check_matmul_args(a, b, a_scales=None, b_scales=None, block_k=0, c=None, beta=0.0):
    """matmul_cuda's checks of its tensors (no library call, no device needed): a (M, K) and b
    (K, N), scales A's (M, nblocks) and B's (nblocks, N), nblocks = ceil(K / block_k) (1 for
    block_k 0), c (M, N) where beta != 0; then every one a float32 CUDA tensor on a's device.
    ValueError (shapes) or TypeError (type, device) naming the argument; returns (M, N, K)."""
    for x, what in ((a, "a"), (b, "b"), (a_scales, "a_scales"), (b_scales, "b_scales"), (c, "c")):
        if x is not None and not isinstance(x, torch.Tensor):
            raise TypeError(f"matmul_cuda: {what}: expected a torch.Tensor, got {type(x).__name__}")
    if a is None or b is None or a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul_cuda: shapes {tuple(getattr(a, 'shape', ()))} @ {tuple(getattr(b, 'shape', ()))}; "
                         "expected (M, K) @ (K, N)")
    M, K = a.shape
    N = b.shape[1]
    if not isinstance(block_k, int) or block_k < 0:
        raise ValueError(f"matmul_cuda: block_k {block_k!r}: expected an int >= 0 (0: one block spanning K)")
    nb = -(-K // block_k) if block_k else 1
    for x, what, shape in ((a_scales, "a_scales", (M, nb)), (b_scales, "b_scales", (nb, N))):
        if x is not None and tuple(x.shape) != shape:
            raise ValueError(f"matmul_cuda: {what} has shape {tuple(x.shape)}, expected {shape} (block_k {block_k})")
    if beta != 0.0 and c is None:
        raise ValueError("matmul_cuda: beta != 0 needs c (the matrix C to add)")
    if c is not None and beta != 0.0 and tuple(c.shape) != (M, N):
        raise ValueError(f"matmul_cuda: c has shape {tuple(c.shape)}, expected {(M, N)}")
    for x, what in ((a, "a"), (b, "b"), (a_scales, "a_scales"), (b_scales, "b_scales"), (c if beta else None, "c")):
        if x is not None and (not x.is_cuda or x.dtype != torch.float32 or x.device != a.device):
            raise TypeError(f"matmul_cuda: {what}: expected a float32 CUDA tensor on a's device, got {x.dtype} on "
                            f"{x.device}")
    return M, N, K


def matmul_cuda(a, b, a_fmt, b_fmt=None, *, acc, a_scales=None, b_scales=None, block_k=0, a_tscale=None,
                b_tscale=None, out="fp32", round_mode="rne", alpha=1.0, beta=0.0, c=None, seed=0, stream=0,
                offset=0):
    """C (M, N) = round_out(alpha * ta * tb * sum_g sa sb P_g + beta * c), the definition of
    kernels/scaled_mm.h, on the device (mm_cuda_dev: no copy to the host, torch's current stream).
    a (M, K), b (K, N): float32 CUDA tensors of element values of a_fmt, b_fmt (already quantized;
    a transposed view, such as w.t(), is read in place); a_scales (M, nblocks), b_scales (nblocks,
    N): their block scales over K-blocks of block_k (0: one per row / column); a_tscale,
    b_tscale: tensor scales, a float or a one-element CUDA tensor (read on the device). acc: an
    emulated accumulator ("m13:rtz:promote=128", "bf16", "fp16") or an engine ("hopper:wgmma");
    plain fp32 is refused (torch's own matmul does it). out / round_mode / seed / offset: C's
    rounding (stochastic: element (i, j) draws counter offset + i * N + j). Bit for bit mm_cpu's
    result (fplab.scaled_matmul with the same operands)."""
    M, N, K = check_matmul_args(a, b, a_scales, b_scales, block_k, c, beta)
    dev = a.device
    A, lda, ta_ = _operand(a, "a", M, K)
    B, ldb, tb_ = _operand(b, "b", K, N)
    sa = a_scales.contiguous() if a_scales is not None else None
    sb = b_scales.contiguous() if b_scales is not None else None
    ta, ta_dev, keep_a = _tscale(a_tscale, "a_tscale", dev)
    tb, tb_dev, keep_b = _tscale(b_tscale, "b_tscale", dev)
    C = c.detach().clone().contiguous() if beta != 0.0 else torch.empty((M, N), dtype=torch.float32, device=dev)
    msg = ctypes.create_string_buffer(512)
    st = _load().mm_cuda_dev_named(
        C.data_ptr(), max(N, 1), A.data_ptr(), lda, int(ta_), a_fmt.encode(), sa.data_ptr() if sa is not None else None,
        block_k, ta, ta_dev, B.data_ptr(), ldb, int(tb_), (b_fmt or a_fmt).encode(),
        sb.data_ptr() if sb is not None else None, block_k, tb, tb_dev, M, N, K, acc.encode(), out.encode(),
        round_mode.encode(), alpha, beta, seed, stream, offset, torch.cuda.current_stream(dev).cuda_stream, msg, 512)
    # The launch is queued on torch's current stream: the caching allocator hands freed memory out
    # again only in that stream's order, after the kernels, so the copies may go now.
    del keep_a, keep_b
    if st != 0:
        raise (ValueError if st in (1, 4) else RuntimeError)(
            f"matmul_cuda({a_fmt} x {b_fmt or a_fmt}, acc {acc}): {_ERRORS.get(st, f'status {st}')}"
            f"{': ' + msg.value.decode() if msg.value else ''}")
    return C


def _side_cuda(x, fmt, scale, side, sg):
    """One operand of fplab.scaled_matmul quantized on the device as kernels/mm_operand.c's
    mm_qmat_from_f32 does (rne, saturating): (elements (rows, cols) view, scales or None, block_k,
    tensor scale (float or one-element CUDA tensor), tensors to keep). B is quantized as B^T (N, K)
    with A's tile, which makes the same tiles as B with the transposed tile."""
    xs = x if side == "a" else x.t()
    out, elems, scales, counts = quantize_cuda(xs.contiguous(), fmt, scale, overflow="saturate")
    el = elems if side == "a" else elems.t()
    if sg["scale_format"] is None:  # "none"
        return el, None, 0, 1.0, (elems,)
    tr, tcl = sg["tile_rows"], sg["tile_cols"]
    if tr == 0 and tcl == 0 and not sg["two_level"]:  # "tensor": the one tile scale is the tensor scale
        return el, None, 0, scales.reshape(1), (elems, scales)
    s = scales if side == "a" else scales.t().contiguous()
    ts = counts.view(torch.uint8)[_TSCALE_BYTE:_TSCALE_BYTE + 4].view(torch.float32) if sg["two_level"] else 1.0
    return el, s, tcl if tcl > 0 else 0, ts, (elems, s, counts)


def acc_on_device(acc):
    """Whether mm_cuda_dev takes accumulator spec acc: an emulated one or an engine (the library's
    mm_acc_from_name and mm_acc_is_emulated); False for plain fp32 and for a spec it cannot read
    (the host path then says why)."""
    lib = _load()
    buf = ctypes.create_string_buffer(4096)  # an mm_acc (an fmt_t and a few ints), with room to spare
    if lib.mm_acc_from_name(buf, acc.encode(), None, 0) != 0:
        return False
    return bool(lib.mm_acc_is_emulated(buf))


def scaled_mm_device_ok(acc, sg):
    """Whether torch.ops.fplab.scaled_mm's "cuda" kernel runs on the device: an emulated or engine
    accumulator (acc_on_device) and a recipe (sg: fplab._fplab.scaling's dict) whose tiles are one
    row along K (block:k, mx, nvfp4, row), one tile ("tensor") or none. Other recipes (2-D tiles,
    whose B tiles the transposed quantization would visit in another order) and plain fp32 take
    the host path."""
    if not acc_on_device(acc):
        return False
    if sg["scale_format"] is None:
        return True
    return sg["tile_rows"] == 1 or (sg["tile_rows"] == 0 and sg["tile_cols"] == 0 and not sg["two_level"])


# --- the "cuda" kernels of torch.ops.fplab.*

def quantize_kernel(x, fmt, scale, axis, mode, seed, offset):
    """torch.ops.fplab.quantize on a CUDA tensor: fplab.quantize's arguments and result (values in
    x's shape; stats, an int64 CUDA tensor of (n, overflow, underflow, subnormal, nan_in,
    invalid)) through quantize_cuda, on the device. A library built without nvcc: the host
    kernel (copies)."""
    import fplab
    from . import torch_ops
    scheme = fplab._fplab.scheme(fmt)
    elem, recipe = (scheme[0], scale or scheme[1]) if scheme else (fmt, scale or "none")
    a = x.detach().reshape(1) if x.dim() == 0 else x.detach()
    ax = axis % a.dim()  # fplab.quantize: blocks run along axis, moved last
    try:
        out, _, _, counts = quantize_cuda(a.movedim(ax, -1).contiguous(), elem, recipe, mode=mode, seed=seed,
                                          offset=offset)
    except RuntimeError as e:  # libfplab not found, or built without nvcc
        if "without nvcc" not in str(e) and "cannot load libfplab" not in str(e):
            raise
        return torch_ops.quantize_host(x, fmt, scale, axis, mode, seed, offset)
    return out.movedim(-1, ax).reshape(x.shape).contiguous(), counts[:6].clone()


def scaled_mm_kernel(a, b, a_fmt, b_fmt, scale, acc):
    """torch.ops.fplab.scaled_mm on CUDA tensors: fplab.scaled_matmul's result (quantization rne
    with saturation, fp32 output) computed on the device: both operands quantized by quantize_cuda
    (B as B^T), multiplied by matmul_cuda, tensor scales read on the device. Where the device path
    does not apply (scaled_mm_device_ok; a library built without nvcc), the host library, with
    copies."""
    import fplab
    M, K = a.shape
    N = b.shape[1]
    bf = b_fmt or a_fmt
    try:
        sg = fplab._fplab.scaling(scale, M, K)
        on_device = M and N and K and scaled_mm_device_ok(acc, sg)
    except (RuntimeError, ValueError):
        on_device = False
    if on_device:
        try:
            ea, sa, bka, ta, keep_a = _side_cuda(a.detach().float(), a_fmt, scale, "a", sg)
            eb, sb, _, tb, keep_b = _side_cuda(b.detach().float(), bf, scale, "b", sg)
            c = matmul_cuda(ea, eb, a_fmt, bf, acc=acc, a_scales=sa, b_scales=sb, block_k=bka, a_tscale=ta,
                            b_tscale=tb)
            del keep_a, keep_b
            return c
        except RuntimeError as e:  # libfplab not found, or built without nvcc
            if "without nvcc" not in str(e) and "cannot load libfplab" not in str(e):
                raise
    r = fplab.scaled_matmul(a.detach().cpu().numpy(), b.detach().cpu().numpy(), a_fmt, b_fmt or None, scale=scale,
                            acc=acc)
    return torch.from_numpy(r.c.copy()).to(a.device)


def register_kernels():
    """Registers this module's kernels as the "cuda" kernels of torch.ops.fplab.* through
    fplab.torch_ops.register_device_kernels, where torch.cuda.is_available() (import fplab.torch
    calls it). Returns what it registered ({} without CUDA): quantize and scaled_mm. fplab::cast
    and fplab::linear need no kernel of their own here: their one implementation casts a CUDA
    tensor on its device through autocast's plans (policy_cast; the policy's rule decided on the
    host) where plans_on_device() and a plan applies, else through host memory. Not
    fplab::matmul: the C trainer's plain float32 products, whose order is the host's (the device
    GEMM is for emulated accumulators and engines)."""
    if not torch.cuda.is_available():
        return {}
    from . import torch_ops
    kernels = {"quantize": quantize_kernel, "scaled_mm": scaled_mm_kernel}
    torch_ops.register_device_kernels("cuda", kernels)
    return kernels
