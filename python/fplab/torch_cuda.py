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
"""
import ctypes
import os
import struct

import torch

__all__ = ["available", "round_cuda", "quantize_cuda", "read_counts", "register_kernels", "NCOUNTS"]

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


def register_kernels():
    """Registers this module's kernels as the "cuda" kernels of torch.ops.fplab.* through
    fplab.torch_ops.register_device_kernels, where torch.cuda.is_available() (import fplab.torch
    calls it). Returns what it registered ({} without CUDA). Only quantize: fplab::cast applies a
    policy's rule (autocast's context on the host: its delayed-scaling history, telemetry and
    stochastic-rounding keys), which has no device kernel, so it keeps the host copy."""
    if not torch.cuda.is_available():
        return {}
    from . import torch_ops
    kernels = {"quantize": quantize_kernel}
    torch_ops.register_device_kernels("cuda", kernels)
    return kernels
