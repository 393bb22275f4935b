"""fplab from Python: the formats, rounding, codes, block scaling and scaled matmul of the fplab
C library (libfplab.so), on NumPy arrays.

    >>> import numpy as np, fplab
    >>> fplab.round(np.array([0.1, 300, 464, 500], np.float32), "e4m3").tolist()
    [0.1015625, 288.0, 448.0, nan]
    >>> q = fplab.quantize(np.ones((2, 64), np.float32) * 3, "e2m1", scale="mx")
    >>> q.codes.dtype, q.scales.shape, q.scale_format
    (dtype('uint8'), (2, 2), 'e8m0')

Every number comes from the C library; this layer checks arguments, allocates arrays and maps
strided views onto the library's contiguous buffers. Nothing is converted to another dtype: a
float16 or int array, a big-endian array, or codes of the wrong width raise TypeError. Errors of
the library (unknown format, bad recipe, shape the recipe cannot tile) raise ValueError with the
library's message. The C calls release the GIL. See docs/python.md.
"""

import math as _math
import os as _os
import warnings as _warnings

import numpy as _np

# libgomp reads its spin count once, when it loads (with libfplab, just below). Its default
# (300,000 spins) lets an idle OpenMP thread take a shared core's time slices from the working
# one between the parallel regions of every product: on a loaded 2-core machine a product
# through Python ran 3 to 4x slower than the same mm_cpu call from the fplab command, which
# starts with GOMP_SPINCOUNT=1000 for this reason (kernels/blas_tune.h, mm_blas_env_wanted;
# docs/benchmarks.md). The package takes the same value for its process where the user chose
# neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY (docs/python.md, "OpenBLAS and OpenMP").
if "GOMP_SPINCOUNT" not in _os.environ and "OMP_WAIT_POLICY" not in _os.environ:
    _os.environ["GOMP_SPINCOUNT"] = "1000"

from . import _fplab  # noqa: E402  (after the environment libgomp reads)

__version__ = _fplab.VERSION

__all__ = [
    "Format", "FplabWarning", "MatmulCheck", "Quantized", "ScaledMatmul", "Stats", "aliases",
    "blas_env_wanted", "check_matmul", "decode", "encode", "finfo", "formats", "pack", "quantize", "random", "round", "scaled_matmul",
    "unpack",
]

Format = _fplab.Format


class FplabWarning(UserWarning):
    """A valid request the library thinks worth a remark (e.g. double rounding possible)."""


# --------------------------------------------------------------------------------------------
# formats

_cache = {}


def _format(fmt):
    """A parsed Format from a name, an alias, a custom eXmY spec, a finfo or a Format."""
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, finfo):
        fmt = fmt.name
    if not isinstance(fmt, str):
        raise TypeError(f"fmt: expected a format name (str), got {type(fmt).__name__}")
    f = _cache.get(fmt)
    if f is None:
        f = Format(fmt)  # ValueError with the library's message
        if len(_cache) < 4096:
            _cache[fmt] = f
    return f


def formats(p3109=False):
    """The names of the table of formats, in the order `fplab finfo` prints them. With
    p3109=True, then every IEEE P3109 name binaryKpP{s|u}{e|f} that fplab computes with (K = 3..16
    bits, inside float64's range: 454 names; the 50 wider ones only `fplab finfo`, `values` and
    `cast` take), in the order `fplab finfo --aliases` lists them."""
    names = [name for name, _ in _fplab.table()]
    if not p3109:
        return names
    for k in range(3, 17):
        for sg in "su":
            for p in range(1, k + (sg == "u")):
                for dm in "ef":
                    name = f"binary{k}p{p}{sg}{dm}"
                    try:  # the library decides which it takes (wide ones raise)
                        _format(name)
                    except ValueError:
                        continue
                    names.append(name)
    return names


def aliases():
    """{name: (alias, ...)} for every format of the table (names are case-insensitive)."""
    return {name: al for name, al in _fplab.table()}


_CODE_DTYPES = {1: _np.dtype(_np.uint8), 2: _np.dtype(_np.uint16), 4: _np.dtype(_np.uint32),
                8: _np.dtype(_np.uint64)}


class finfo:
    """Machine limits of an fplab format, with the fields of numpy.finfo / ml_dtypes.finfo:
    bits, eps, epsneg, iexp, machep, max, maxexp, min, minexp, negep, nexp, nmant, precision,
    resolution, smallest_normal, smallest_subnormal, tiny, dtype (the NumPy dtype that holds the
    values: float32 for formats up to fp32, else float64); and fplab's: name, kind ('table',
    'peer': a format only peers name, 'custom': an eXmY spec no name gives), aliases, bias,
    is_signed, special ('ieee', 'fn', 'fnuz', 'finite', 'e8m0', 'extended'), emin, emax, finite_values,
    nan_codes (their number), nan_code_list, has_inf, has_nan, has_zero, has_negzero,
    has_subnormals, code_bytes, code_dtype. Definitions as NumPy's: eps = 2**-nmant is the gap
    above 1, epsneg = 2**-(nmant+1) the gap below, maxexp = emax + 1 the first power of two that
    overflows, minexp = emin, precision = floor(-log10(eps)), resolution = 10**-precision.
    min is the most negative finite value (the smallest value of an unsigned format)."""

    def __init__(self, fmt):
        f = _format(fmt)
        d = f.describe()
        self._format = f
        self.name = d["name"]
        self.kind = d["kind"]  # 'table', 'peer' (a format only peers name) or 'custom'
        self.aliases = aliases().get(self.name, ())
        self.bits = d["bits"]
        self.nexp = self.iexp = d["exponent_bits"]
        self.nmant = d["mantissa_bits"]
        self.bias = d["bias"]
        self.is_signed = d["is_signed"]
        self.special = d["special"]
        self.emin, self.emax = d["emin"], d["emax"]
        self.max, self.min = d["max"], d["min"]
        self.smallest_normal = self.tiny = d["smallest_normal"]
        self.smallest_subnormal = d["smallest_subnormal"]
        self.eps = d["eps"]
        self.resolution = d["resolution"]
        # epsneg: the gap below 1, from the library: 1 - (the largest value of the format below 1).
        # eps / 2 in most formats; eps where 1 is the smallest normal (e2m1, e2m3).
        prev = _np.array([_np.nextafter(1.0, 0.0)])
        _fplab.round(f, prev, mode="rdn")
        self.epsneg = 1.0 - float(prev[0])
        self.machep, self.negep = -self.nmant, _math.frexp(self.epsneg)[1] - 1
        self.maxexp, self.minexp = self.emax + 1, self.emin
        self.precision = int(_math.floor(-_math.log10(self.eps)))
        self.finite_values = d["finite_values"]
        self.nan_codes = d["nan_codes"]
        self.nan_code_list = f.nan_code_list(8) if self.nan_codes <= 8 else None
        for k in ("has_inf", "has_nan", "has_zero", "has_negzero", "has_subnormals", "code_bytes"):
            setattr(self, k, d[k])
        self.code_dtype = _CODE_DTYPES[self.code_bytes]
        self.dtype = _np.dtype(_np.float32 if d["values_fit_f32"] else _np.float64)

    def __repr__(self):
        return (f"fplab.finfo(name={self.name}, bits={self.bits}, max={self.max:g}, min={self.min:g}, "
                f"smallest_normal={self.smallest_normal:g}, smallest_subnormal={self.smallest_subnormal:g}, "
                f"eps={self.eps:g})")

    def __eq__(self, other):
        return isinstance(other, finfo) and self.describe() == other.describe()

    def __hash__(self):
        return hash(tuple(sorted(self.describe().items())))

    def describe(self):
        """Every property the C library derives from the descriptor, as a dict."""
        return self._format.describe()


_F32_MAX = float(_np.finfo(_np.float32).max)


def _fits_f32(f):
    return f.describe()["values_fit_f32"]


# --------------------------------------------------------------------------------------------
# statistics

class Stats:
    """What happened in one or more calls: n (elements seen), overflow, underflow, subnormal,
    nan_in, invalid (counts, see formats/round.h) and amax (largest |x| of the input, NaN
    ignored). Pass one as stats= to round/encode to add a call's counts to it."""

    _FIELDS = ("n", "overflow", "underflow", "subnormal", "nan_in", "invalid", "amax")

    def __init__(self, n=0, overflow=0, underflow=0, subnormal=0, nan_in=0, invalid=0, amax=0.0):
        self.n, self.overflow, self.underflow, self.subnormal = n, overflow, underflow, subnormal
        self.nan_in, self.invalid, self.amax = nan_in, invalid, amax

    def _add(self, d):
        """Adds the counts of one call (the extension's stats dict, keyed as _FIELDS)."""
        for k in self._FIELDS[:-1]:
            setattr(self, k, getattr(self, k) + d[k])
        if d["amax"] > self.amax:
            self.amax = d["amax"]
        return self

    def as_dict(self):
        return {k: getattr(self, k) for k in self._FIELDS}

    def __eq__(self, other):
        return isinstance(other, Stats) and self.as_dict() == other.as_dict()

    def __repr__(self):
        return "Stats(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS) + ")"


def _collect(stats, t, warning):
    if warning:
        _warnings.warn(warning, FplabWarning, stacklevel=3)
    if stats is None:
        return
    if not isinstance(stats, Stats):
        raise TypeError(f"stats: expected an fplab.Stats, got {type(stats).__name__}")
    stats._add(t)


# --------------------------------------------------------------------------------------------
# argument checks: dtypes are checked, never converted

_FLOATS = (_np.dtype(_np.float32), _np.dtype(_np.float64))


def _float_array(x, what, dtypes=_FLOATS):
    a = x if isinstance(x, _np.ndarray) else _np.asarray(x)
    if a.dtype.kind == "f" and not a.dtype.isnative:
        raise TypeError(f"{what}: big-endian {a.dtype.newbyteorder('=').name} ('{a.dtype.str}'); fplab reads "
                        "native (little-endian) arrays and converts nothing: byteswap explicitly, e.g. "
                        "x.astype(x.dtype.newbyteorder('='))")
    if a.dtype not in dtypes:
        names = " or ".join(d.name for d in dtypes)
        raise TypeError(f"{what}: expected {names}, got {a.dtype} (fplab converts nothing; use .astype "
                        "where a conversion is meant)")
    return a


def _code_array(codes, f, what="codes"):
    a = codes if isinstance(codes, _np.ndarray) else _np.asarray(codes)
    want = _CODE_DTYPES[f.code_bytes]
    if a.dtype.kind in "ui" and not a.dtype.isnative:
        raise TypeError(f"{what}: big-endian codes ('{a.dtype.str}'); expected native {want.name}")
    if a.dtype != want:
        raise TypeError(f"{what}: codes of {f.name} are {want.name} (one per element), got {a.dtype}")
    return a


def _out_array(out, shape, dtype, what="out"):
    if not isinstance(out, _np.ndarray):
        raise TypeError(f"{what}: expected a NumPy array, got {type(out).__name__}")
    if out.dtype != dtype or not out.dtype.isnative:
        raise TypeError(f"{what}: expected {dtype.name}, got {out.dtype}")
    if out.shape != tuple(shape):
        raise ValueError(f"{what}: shape {out.shape}, expected {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError(f"{what}: read-only array")
    return out


def _round_kw(mode, overflow, subnormals, seed, stream, offset, sr_bits):
    """The rounding options as the extension takes them, positionally: (mode, overflow, flush,
    sr_bits, seed, stream, offset). Names are checked by the library (ValueError with its
    message); what it cannot see (negative counters wrap in C) is checked here."""
    if (subnormals == "keep" and sr_bits is None and type(mode) is str and type(overflow) is str
            and type(seed) is int and type(stream) is int and type(offset) is int
            and 0 <= seed < 2**64 and 0 <= stream < 2**64 and 0 <= offset < 2**64):
        return (mode, overflow, False, 0, seed, stream, offset)  # the common case, checked cheaply
    if subnormals == "keep":
        flush = False
    elif subnormals == "flush":
        flush = True
    else:
        raise ValueError(f"subnormals {subnormals!r}: expected 'keep' or 'flush'")
    if seed or stream or offset:
        for k, v in (("seed", seed), ("stream", stream), ("offset", offset)):
            if not isinstance(v, (int, _np.integer)) or isinstance(v, bool) or not 0 <= v < 2**64:
                raise ValueError(f"{k} {v!r}: expected an integer in [0, 2^64)")
    elif not all(isinstance(v, (int, _np.integer)) for v in (seed, stream, offset)):
        raise ValueError("seed, stream and offset are integers in [0, 2^64)")
    if sr_bits is None:
        sr_bits = 0
    elif not isinstance(sr_bits, (int, _np.integer)) or isinstance(sr_bits, bool) or not 1 <= sr_bits <= 32:
        raise ValueError(f"sr_bits {sr_bits!r}: expected 1..32 (None: 32)")
    if type(mode) is not str or not (overflow is None or type(overflow) is str):
        raise TypeError("mode and overflow are names (e.g. mode='sr', overflow='saturate')")
    return (mode, overflow, flush, int(sr_bits), int(seed), int(stream), int(offset))


def _kw(t):
    return dict(zip(("mode", "overflow", "flush", "sr_bits", "seed", "stream", "offset"), t))


# --------------------------------------------------------------------------------------------
# rounding and codes

def round(x, fmt, *, mode="rne", overflow="ieee", subnormals="keep", seed=0, stream=0, offset=0,
          sr_bits=None, out=None, stats=None):
    """Round x (float32 or float64, any shape, any strides) to the values of fmt and return them
    in x's dtype: in out if given (out=x rounds in place), else in a new array.

    mode: rne (default), rna, rtz, rup, rdn, rto, sr (sr:a, sr:b, sr:c: IEEE P3109's stochastic
    variants; sr is sr:a). overflow: 'ieee' (inf where fmt has it, else NaN), 'saturate' (+-max;
    P3109's 'satfinite'), 'satpropagate' or 'satnone' (P3109; docs/formats.md).
    subnormals: 'keep' or 'flush' (to signed zero). Stochastic
    rounding: element i (C order) draws counter offset + i of the generator keyed by (seed,
    stream), with sr_bits random bits (default 32): the same bits for the same arguments, on any
    thread count. stats: an fplab.Stats to add this call's counts to.
    float32 arrays need a format whose values fit in float32 (every named one but fp64)."""
    f = _cache.get(fmt) if type(fmt) is str else None
    if f is None:
        f = _format(fmt)
    a = x if type(x) is _np.ndarray else _np.asarray(x)
    if a.dtype not in _FLOATS:
        _float_array(a, "x")  # raises the TypeError that says why
    opts = _round_kw(mode, overflow, subnormals, seed, stream, offset, sr_bits)
    want = stats is not None
    if out is None:
        out = a.copy()  # C order, same dtype
        t, warning = _fplab.round(f, out, *opts, want)
    else:
        _out_array(out, a.shape, a.dtype)
        if out.flags.c_contiguous:
            if out is not a:
                _np.copyto(out, a)
            t, warning = _fplab.round(f, out, *opts, want)
        else:
            tmp = a.copy()
            t, warning = _fplab.round(f, tmp, *opts, want)
            out[...] = tmp
    if want or warning:
        _collect(stats, t, warning)
    return out


def encode(x, fmt, *, mode="rne", overflow="ieee", subnormals="keep", seed=0, stream=0, offset=0,
           sr_bits=None, out=None, stats=None):
    """Codes of round(x): one unsigned integer per element (uint8 for formats of 8 bits or
    fewer, uint16, uint32, uint64), x's shape; options as round. decode(encode(x)) == round(x)."""
    f = _cache.get(fmt) if type(fmt) is str else None
    if f is None:
        f = _format(fmt)
    a = x if type(x) is _np.ndarray else _np.asarray(x)
    if a.dtype not in _FLOATS:
        _float_array(a, "x")
    opts = _round_kw(mode, overflow, subnormals, seed, stream, offset, sr_bits)
    want = stats is not None
    cd = _CODE_DTYPES[f.code_bytes]
    src = _np.ascontiguousarray(a)  # a same-dtype copy only where x is strided
    if out is None:
        out = _np.empty(a.shape, cd)
    else:
        _out_array(out, a.shape, cd)
    if out.flags.c_contiguous:
        t, warning = _fplab.encode(f, out, src, *opts, want)
    else:
        tmp = _np.empty(a.shape, cd)
        t, warning = _fplab.encode(f, tmp, src, *opts, want)
        out[...] = tmp
    if want or warning:
        _collect(stats, t, warning)
    return out


def decode(codes, fmt, *, dtype=None, out=None):
    """Values of codes (unsigned integers of fmt's code width, as encode returns them), as float32
    (default for formats that fit in it) or float64 (dtype=numpy.float64, or out's dtype).
    A code with bits set above fmt's width raises ValueError (it is no code of fmt). out may
    overlap codes."""
    f = _format(fmt)
    c = _np.ascontiguousarray(_code_array(codes, f))
    if out is not None:
        dt = out.dtype
    else:
        dt = _np.dtype(dtype) if dtype is not None else _np.dtype(_np.float32 if _fits_f32(f) else _np.float64)
    if dt not in _FLOATS:
        raise TypeError(f"dtype: expected float32 or float64, got {dt}")
    if out is None:
        out = _np.empty(c.shape, dt)
    else:
        _out_array(out, c.shape, dt)
    # An out that overlaps the codes (a view of the same buffer) would be written while the codes
    # are still being read: decode into a fresh array then.
    if out.flags.c_contiguous and not _np.may_share_memory(out, c):
        _fplab.decode(f, out, c)
    else:
        tmp = _np.empty(c.shape, dt)
        _fplab.decode(f, tmp, c)
        out[...] = tmp
    return out


def pack(codes, fmt):
    """Packed bytes (uint8, 1-D) of codes in C order: formats under 8 bits as a little-endian bit
    stream (fp4: element 0 in the low nibble, two per byte; fp6: four codes in three bytes);
    wider formats as their little-endian bytes. Unused bits of the last byte are zero. A code with
    bits set above fmt's width raises ValueError."""
    f = _format(fmt)
    c = _np.ascontiguousarray(_code_array(codes, f))
    out = _np.empty(_fplab.packed_bytes(f, c.size), _np.uint8)
    _fplab.pack(f, out, c)
    return out


def unpack(packed, fmt, count=None, *, shape=None):
    """Codes (1-D, or shape) of the first count elements of packed bytes (uint8), as pack wrote
    them. count defaults to prod(shape), or to every whole code the bytes hold."""
    f = _format(fmt)
    p = packed if isinstance(packed, _np.ndarray) else _np.asarray(packed)
    if p.dtype != _np.uint8:
        raise TypeError(f"packed: expected uint8 bytes, got {p.dtype}")
    p = _np.ascontiguousarray(p)
    if count is None:
        if shape is not None:
            count = int(_np.prod(shape, dtype=_np.int64))
        else:
            count = p.size * 8 // f.bits
    if shape is None:
        shape = (count,)
    elif int(_np.prod(shape, dtype=_np.int64)) != count:
        raise ValueError(f"shape {tuple(shape)} holds {int(_np.prod(shape))} codes, not {count}")
    out = _np.empty(shape, _CODE_DTYPES[f.code_bytes])
    _fplab.unpack(f, out, p)
    return out


# --------------------------------------------------------------------------------------------
# block scaling

class Quantized:
    """The result of quantize(): what `fplab quantize` computes, with the codes and scales.

    values        dequantized float32 values, x's shape (what `fplab quantize` writes)
    elements      the element values q before the multiplication by the scale (float32)
    codes         the codes of elements in fmt (uint8, ...), x's shape
    scales        the block scales as codes of scale_format (None for 'none'); shape: the tile
                  grid of the matrix view (rows, cols), or, for 1-row tiles (row, mx, nvfp4,
                  block:K), x's shape with axis moved last and replaced by the blocks
    scale_values  the decoded scales, float32, scales' shape (x ~= elements * scale_values *
                  tensor_scale)
    scale_format  name of the scale format (None for 'none')
    tensor_scale  the fp32 second-level scale (1.0 when the recipe has none)
    stats         Stats of the element rounding (amax of x), and the error of values against x
                  (as `fplab quantize --stats`; over the elements where both are finite): mse,
                  sqnr_db = 10 log10(sum x^2 / sum (values - x)^2), max_abs_err, max_rel_err
                  (over x != 0), err_nonfinite (elements left out)
    scales_clipped  tiles whose scale left the scale format's range; scales_nan: tiles whose
                  scale is NaN (:nanblock)
    overflow      the element overflow policy used ('saturate' or 'ieee')
    format, recipe, axis   the element format, the recipe's canonical name, the blocked axis
    """

    def __repr__(self):
        return (f"fplab.Quantized(format={self.format}, recipe={self.recipe}, shape={self.values.shape}, "
                f"scales={None if self.scales is None else self.scales.shape}, tensor_scale={self.tensor_scale}, "
                f"stats={self.stats})")


def quantize(x, fmt, scale=None, axis=-1, *, mode="rne", overflow=None, subnormals="keep", seed=0,
             stream=0, offset=0, sr_bits=None):
    """Quantize x with a scaling recipe and return a Quantized (values, codes, scales, stats).

    fmt: a format, or a scheme (mxfp8, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4, mxint8,
    nvfp4): its element format, and its recipe where scale is None (the default; 'none' for a
    format).
    scale: none, tensor, row, col, mx, nvfp4, fp8block1x128[:pow2], fp8block128x128[:pow2],
    block:K:SCALEFMT, tile:RxC:SCALEFMT, with an optional scale rule (:ocp/:up/:rne/:ceil/:even/
    :rceil, :4over6 for nvfp4) and :nanblock (docs/formats.md, "Scaling recipes").
    overflow: None (default) is the recipe's own: 'saturate' for every recipe with a scale (OCP MX clamps scaled values to
    the element's max), 'ieee' for 'none' (a plain cast, as NumPy); other options as round.
    x is viewed as a matrix whose rows run
    along axis (default -1, the last; the other axes, in C order, make the rows), so 1-D blocks
    (mx, nvfp4, block:K) run along axis. A 1-D or 2-D x with axis=-1 is exactly `fplab quantize
    IN.npy` (element i of the C-order matrix draws stochastic counter offset + i).
    float32 x, any recipe; float64 x only with scale='none' (rounded from float64 directly, the
    values stay float64): `fplab quantize` would round float64 to float32 first, which can
    double-round, so fplab asks you to say so: quantize(x.astype(numpy.float32), ...)."""
    scheme = _fplab.scheme(fmt) if isinstance(fmt, str) else None
    if scheme is not None:  # a scheme (mxfp4, nvfp4, ...): its element format and recipe
        fmt = scheme[0]
        scale = scheme[1] if scale is None else scale
    scale = "none" if scale is None else scale
    f = _format(fmt)
    a = _float_array(x, "x")
    kw = _kw(_round_kw(mode, overflow, subnormals, seed, stream, offset, sr_bits))
    if not isinstance(scale, str):
        raise TypeError(f"scale: expected a recipe name (str), got {type(scale).__name__}")
    if a.ndim == 0:
        a = a.reshape(1)
        shape0 = ()
    else:
        shape0 = a.shape
    if not isinstance(axis, (int, _np.integer)) or not -a.ndim <= axis < a.ndim:
        raise ValueError(f"axis {axis!r}: out of range for a {a.ndim}-D array")
    axis = int(axis) % a.ndim
    moved = _np.moveaxis(a, axis, -1)
    cols = moved.shape[-1]
    rows = int(_np.prod(moved.shape[:-1], dtype=_np.int64)) if moved.ndim > 1 else 1
    sg = _fplab.scaling(scale, rows, cols)
    nscales, sfmt, tr, (grid_r, grid_c) = sg["count"], sg["scale_format"], sg["tile_rows"], sg["grid"]
    q = Quantized()
    q.format, q.recipe, q.axis = f.name, sg["name"], axis if len(shape0) else None
    q.stats = Stats()
    if a.dtype == _np.float64:
        if sfmt is not None:
            raise TypeError("quantize: float64 x with a scaling recipe; scaled quantization works in float32 "
                            "(as `fplab quantize` does after rounding float64 to float32): pass "
                            "x.astype(numpy.float32) to say so")
        q.overflow = kw["overflow"] or "ieee"
        vals = round(a, f, stats=q.stats, **_kw_for_round(dict(kw, overflow=q.overflow)))
        q.values = vals.reshape(shape0)
        q.elements = q.values
        q.codes = encode(q.values, f)
        _error_stats(q.stats, _fplab.qerror(_np.ascontiguousarray(q.values).ravel(), _np.ascontiguousarray(a).ravel()))
        q.scales = q.scale_values = q.scale_format = None
        q.tensor_scale, q.scales_clipped, q.scales_nan = 1.0, 0, 0
        return q
    src = _np.ascontiguousarray(moved).reshape(rows, cols) if moved.size else _np.empty((rows, cols), _np.float32)
    out = _np.empty((rows, cols), _np.float32)
    elems = _np.empty((rows, cols), _np.float32)
    codes = _np.empty((rows, cols), _CODE_DTYPES[f.code_bytes])
    svals = _np.empty(nscales, _np.float32) if sfmt is not None else None
    scodes = _np.empty(nscales, _CODE_DTYPES[sfmt.code_bytes]) if sfmt is not None else None
    # One library call: values, element values, codes, scales and scale codes (fmt_quantize_codes_f32).
    r = _fplab.quantize(fmt=f, spec=scale, out=out, x=src, rows=rows, cols=cols, elems=elems, scales=svals,
                        codes=codes, scale_codes=scodes, **kw)
    q.overflow = r["overflow"]
    _collect(q.stats, r["stats"], r["warning"])
    _error_stats(q.stats, r["error"])

    def back(m):  # (rows, cols) -> x's shape
        return _np.moveaxis(m.reshape(moved.shape), -1, axis).reshape(shape0)

    q.values = back(out)
    q.elements = back(elems)
    q.codes = back(codes)
    q.tensor_scale, q.scales_clipped, q.scales_nan = r["tensor_scale"], r["scales_clipped"], r["scales_nan"]
    if sfmt is None:
        q.scales = q.scale_values = q.scale_format = None
    else:
        # The tile grid (fmt_scale_grid); for 1-row tiles, x's shape with axis moved last and
        # replaced by the blocks.
        shape = (grid_r, grid_c)
        if tr == 1 and len(shape0) != 2 and moved.ndim >= 1:
            shape = moved.shape[:-1] + (grid_c,)
        q.scale_values = svals.reshape(shape)
        q.scale_format = sfmt.name
        q.scales = scodes.reshape(shape)
    return q


def _error_stats(st, err):
    """Stats st gets the error metrics of _fplab.qerror (or quantize's "error")."""
    for k in ("mse", "sqnr_db", "max_abs_err", "max_rel_err", "err_nonfinite"):
        setattr(st, k, err[k])


def _kw_for_round(kw):
    return dict(mode=kw["mode"], overflow=kw["overflow"], subnormals="flush" if kw["flush"] else "keep",
                seed=kw["seed"], stream=kw["stream"], offset=kw["offset"], sr_bits=kw["sr_bits"] or None)


# --------------------------------------------------------------------------------------------
# scaled matmul

class ScaledMatmul:
    """The result of scaled_matmul().

    c              the product, float32 (M, N), rounded to the output format
    emulated       True when the accumulator is emulated (rounded step by step)
    kernel         the kernel backend 'cpu' ran (kernels/scaled_mm.h's mm_path: "blas", "fixed",
                   "emu-f32", "emu-f64", "engine-fast", "engine-model", ...); None on 'ref'
    model_outputs  how many outputs the engine's scalar model computed (engine-fast: the lanes
                   its vectors could not do exactly; engine-model: all)
    stats_a/b      Stats of the operands' quantization; scales_clipped_a/b
    and, with error=True:
    ref            mm_ref's result with the same options (MPFR; bit-exact ground truth for
                   emulated accumulators)
    exact          the exact product before output rounding (float64 nearest), fp32
                   accumulation semantics: infinitely precise sums
    absdot         |alpha ta tb| sum_k |a b sa sb| (+|beta C|), for the bound gamma_{K+2} absdot
    err_ulp        |c - exact| / ulp_out(exact), ulp_out(e) = 2^(max(floor(log2|e|), emin) - mbits),
                   NaN where exact overflows the output format
    max_err_ulp, median_err_ulp, mismatches (results whose bits differ from ref; NaN == NaN)
    """

    def __repr__(self):
        extra = "" if self.ref is None else f", max_err_ulp={self.max_err_ulp:g}, mismatches={self.mismatches}"
        return f"fplab.ScaledMatmul(shape={self.c.shape}, emulated={self.emulated}, kernel={self.kernel!r}{extra})"


def scaled_matmul(a, b, a_fmt, b_fmt=None, *, out="fp32", scale="none", acc="fp32", backend="cpu", alpha=1.0,
                  beta=0.0, c=None, round_mode="rne", overflow="ieee", seed=0, quant_mode="rne",
                  quant_overflow="saturate", error=False):
    """C = round_out(alpha * A B + beta * C) with A (M, K) and B (K, N) quantized to a_fmt and b_fmt
    (default a_fmt) under the scaling recipe (tiles along K: A gets the recipe's tile, B its
    transpose; elements rounded with quant_mode and quant_overflow, default rne + saturate as
    `fplab matmul-check`), accumulated as acc says (fp32, bf16, fp16, mNN, any format, with
    :promote=N and :rtz/...: kernels/scaled_mm.h) on backend 'cpu' or 'ref' (MPFR), and rounded
    to out with round_mode/overflow (seed for sr). error=True adds the MPFR reference and the
    exact product (see ScaledMatmul). a and b: float32 2-D arrays (any strides)."""
    A = _float_array(a, "a", (_FLOATS[0],))
    B = _float_array(b, "b", (_FLOATS[0],))
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"scaled_matmul: shapes {A.shape} @ {B.shape}; expected (M, K) @ (K, N)")
    M, K = A.shape
    N = B.shape[1]
    fa = _format(a_fmt)
    fb = _format(b_fmt if b_fmt is not None else a_fmt)
    fo = _format(out)
    for k, v in (("scale", scale), ("acc", acc), ("backend", backend)):
        if not isinstance(v, str):
            raise TypeError(f"{k}: expected a str, got {type(v).__name__}")
    cin = None
    if beta != 0.0:
        if c is None:
            raise ValueError("scaled_matmul: beta != 0 needs c (the matrix C to add)")
        cin = _np.ascontiguousarray(_float_array(c, "c", (_FLOATS[0],)))
        if cin.shape != (M, N):
            raise ValueError(f"c: shape {cin.shape}, expected {(M, N)}")
    A = _np.ascontiguousarray(A)
    B = _np.ascontiguousarray(B)
    C = _np.empty((M, N), _np.float32)
    ref = _np.empty((M, N), _np.float32) if error else None
    exact = _np.empty((M, N), _np.float64) if error else None
    absdot = _np.empty((M, N), _np.float64) if error else None
    err_ulp = _np.empty((M, N), _np.float64) if error else None
    d = _fplab.matmul(a=A, b=B, m=M, n=N, k=K, a_fmt=fa, b_fmt=fb, out_fmt=fo, scale=scale, acc=acc,
                      backend=backend, c=C, c_in=cin, alpha=float(alpha), beta=float(beta), quant_mode=quant_mode,
                      quant_overflow=quant_overflow, round_mode=round_mode, overflow=overflow, seed=int(seed),
                      ref=ref, exact=exact, absdot=absdot, err_ulp=err_ulp)
    r = ScaledMatmul()
    r.c, r.emulated, r.kernel, r.model_outputs = C, d["emulated"], d["kernel"], d["model_outputs"]
    r.stats_a, r.stats_b = Stats()._add(d["stats_a"]), Stats()._add(d["stats_b"])
    r.scales_clipped_a, r.scales_clipped_b = d["scales_clipped_a"], d["scales_clipped_b"]
    r.ref, r.exact, r.absdot, r.err_ulp = ref, exact, absdot, err_ulp
    r.max_err_ulp = r.median_err_ulp = r.mismatches = None
    ver = d["verify"]
    if ver is not None:  # the library's verifier (kernels/mm_verify.h), as matmul-check
        r.max_err_ulp, r.median_err_ulp, r.mismatches = ver["max_err_ulp"], ver["median_err_ulp"], ver["mismatches"]
    return r


def _f32_exact(x, what):
    """x (float32 or float64) as a C-ordered float32 array; float64 values must be float32 values."""
    a = _float_array(x, what)
    f = _np.ascontiguousarray(a, _np.float32)
    if a.dtype != _np.float32:
        bad = ~((f.astype(_np.float64) == a) | _np.isnan(a))
        if bad.any():
            i = tuple(int(v) for v in _np.argwhere(bad)[0])
            raise ValueError(f"{what}{list(i)} = {a[i]!r} is not a float32 value; expected values of the format")
    return f


class MatmulCheck:
    """The result of check_matmul(): the verification of a matmul result c (kernels/mm_verify.h,
    the verifier of `fplab matmul-check`).

    passed           True when a rule held (rule: "bound", "bit-exact" or "none")
    rule_acc         the accumulator that reproduced c bit for bit (rule "bit-exact"), else None
    n, judged, excluded  outputs; judged: exact value finite and within the output format
                     (never passed with judged == 0)
    outside          judged outputs outside the bound
    u, gamma         the bound's unit roundoff and gamma_{K+2}(u) (NaN under an engine's bound)
    bound_engine     the engine whose own bound was used (check_matmul's engine=), else None
    max_err_ulp, median_err_ulp, max_bound_ulp, median_bound_ulp, max_rel_err, median_rel_err
    candidates       {accumulator spec: outputs reproduced bit for bit}; share(spec) = fraction
    per output (NumPy, (M, N)): exact (MPFR, nearest float64), absdot (sum|a b s|, the bound's
                     term), err (c - exact), err_ulp, bound_ulp (the bound in ulps), judged and
                     in_bound (bool)
    """

    def share(self, spec):
        return self.candidates[spec] / self.n

    def as_dict(self):
        return dict(self.__dict__)

    def __repr__(self):
        best = max(self.candidates.items(), key=lambda kv: kv[1]) if self.candidates else ("-", 0)
        return (f"fplab.MatmulCheck(passed={self.passed}, rule={self.rule!r}, rule_acc={self.rule_acc!r}, "
                f"judged={self.judged}/{self.n}, outside={self.outside}, max_err_ulp={self.max_err_ulp:g}, "
                f"max_bound_ulp={self.max_bound_ulp:g}, best={best[0]} {best[1]}/{self.n})")


def check_matmul(a, b, c, a_fmt, b_fmt=None, *, out="fp32", scale="none", a_scales=None, b_scales=None,
                 a_tensor_scale=1.0, b_tensor_scale=1.0, alpha=1.0, beta=0.0, c_in=None, round_mode="rne",
                 u=2.0 ** -24, also=(), expect=None, engine=None, candidates=True):
    """Verifies c (M, N), the result of any kernel, as alpha * A B (+ beta * c_in) rounded to out:
    a (M, K) and b (K, N) hold element values of a_fmt and b_fmt (before scaling; each must be a
    value of its format); with a scaling recipe, a_scales and b_scales are its tile scales: a's
    as fplab.quantize(a, fmt, scale).scales gives them ((M, ceil(K / tile)) for mx/nvfp4/block,
    (M, 1) for row, (1, 1) for tensor), b's with the tile transposed ((ceil(K / tile), N), (1, N),
    (1, 1)); a_tensor_scale/b_tensor_scale the second level (nvfp4). Reports the exact error
    (MPFR), the error in ulps of out, the classical bound |err| <= gamma_{K+2}(u) sum|a b s| +
    ulp/2, and which accumulators reproduce c bit for bit: "exact-rounded", every engine of
    fplab's engine list that takes the formats (with and without :f16), and the specs in also.
    u must lie in (0, 1/(2(K+2))) (a larger u bounds nothing); tensor scales must be finite and
    > 0. engine: c claims that engine's arithmetic (e.g. "hopper:wgmma"): its own error bound
    (from its k, alignment bits and chaining) replaces the u one, and PASS means the engine could
    give c. expect: pass only if that accumulator reproduces c. Returns a MatmulCheck."""
    A, B, Cr = (_f32_exact(x, w) for x, w in ((a, "a"), (b, "b"), (c, "c")))
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"check_matmul: shapes {A.shape} @ {B.shape}; expected (M, K) @ (K, N)")
    M, K = A.shape
    N = B.shape[1]
    if Cr.shape != (M, N):
        raise ValueError(f"check_matmul: c has shape {Cr.shape}, expected {(M, N)}")
    fa = _format(a_fmt)
    fb = _format(b_fmt if b_fmt is not None else a_fmt)
    fo = _format(out)
    sa = None if a_scales is None else _f32_exact(a_scales, "a_scales")
    sb = None if b_scales is None else _f32_exact(b_scales, "b_scales")
    ga = _fplab.scaling(scale, M, K, side="a")
    if ga["scale_format"] is not None:
        # Each side's tile grid as the library takes it (B's tile transposed: mm_side_scaling).
        grids = {"a_scales": (sa, ga["grid"]), "b_scales": (sb, _fplab.scaling(scale, K, N, side="b")["grid"])}
        for what, (x, g) in grids.items():
            if x is None:
                raise ValueError(f"check_matmul: scale {scale!r} needs {what} (shape {g})")
            if x.shape != g and not (g == (1, 1) and x.size == 1):
                hint = (" (fplab.quantize(b, fmt, scale, axis=0).scale_values.T has it)" if what == "b_scales" else
                        " (fplab.quantize(a, fmt, scale).scale_values has it)")
                raise ValueError(f"check_matmul: {what} has shape {x.shape}; scale {scale!r} on "
                                 f"{'a ' + str((M, K)) if what == 'a_scales' else 'b ' + str((K, N))} makes {g}{hint}")
    cin = None
    if beta != 0.0:
        if c_in is None:
            raise ValueError("check_matmul: beta != 0 needs c_in (the C that beta multiplies)")
        cin = _f32_exact(c_in, "c_in")
        if cin.shape != (M, N):
            raise ValueError(f"c_in: shape {cin.shape}, expected {(M, N)}")
    if isinstance(also, str):
        also = [also]
    per = {k: _np.empty((M, N), _np.float64) for k in ("exact", "absdot", "err", "err_ulp", "bound_ulp")}
    per.update({k: _np.empty((M, N), _np.uint8) for k in ("judged", "in_bound")})
    d = _fplab.check_matmul(a=A, b=B, c=Cr, m=M, n=N, k=K, a_fmt=fa, b_fmt=fb, out_fmt=fo, scale=scale, a_scales=sa,
                            b_scales=sb, a_tensor_scale=float(a_tensor_scale), b_tensor_scale=float(b_tensor_scale),
                            alpha=float(alpha), beta=float(beta), c_in=cin, round_mode=round_mode, u=float(u),
                            also=[str(x) for x in also], expect=expect, engine=engine, candidates=bool(candidates),
                            **per)
    r = MatmulCheck()
    cands = d.pop("candidates")
    d.pop("expect")
    for k, v in d.items():
        setattr(r, k, v)
    r.candidates = {c["acc"]: c["reproduced"] for c in cands}
    r.extra = [c["acc"] for c in cands if c["extra"]]
    r.exact, r.absdot, r.err, r.err_ulp, r.bound_ulp = (per[k] for k in ("exact", "absdot", "err", "err_ulp",
                                                                        "bound_ulp"))
    r.judged_mask, r.in_bound = per["judged"].astype(bool), per["in_bound"].astype(bool)
    return r


def _ulp_out(e, fmt):
    """fmt's ulp at e, 2^(max(floor(log2|e|), emin) - mbits) (fmt_ulp, as matmul-check)."""
    x = _np.ascontiguousarray(e, _np.float64)
    out = _np.empty_like(x)
    _fplab.ulp(_format(fmt), out.reshape(-1), x.reshape(-1))
    return out


def random(shape, dist="normal", seed=0, stream=0):
    """float32 draws of the library's test distributions (normal, uniform, lognormal, outliers):
    element i (C order) is a pure function of (seed, stream, i), as `fplab matmul-check` draws
    A (stream 1) and B (stream 2)."""
    out = _np.empty(shape, _np.float32)
    _fplab.random(out, dist, int(seed), int(stream))
    return out


def blas_env_wanted():
    """{variable: value} that OpenBLAS and libgomp should see when the process starts (an
    OPENBLAS_CORETYPE this CPU's OpenBLAS does not pick by itself, GOMP_SPINCOUNT=1000): the
    `fplab` command re-executes itself with them; a Python program cannot, so export them before
    starting Python (the package sets GOMP_SPINCOUNT itself, before libgomp loads, where neither
    it nor OMP_WAIT_POLICY is set). Empty when nothing would help."""
    return _fplab.blas_env_wanted()
