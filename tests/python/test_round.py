"""fplab.round / encode / decode / pack / unpack: the binding's contract. Every mode and option
reaches the library (the CLI's `fplab cast`, the same library through another door, agrees bit
for bit), any shape and strides give what the contiguous call gives, out= works in place, and
bad input raises TypeError/ValueError with the library's message; nothing is converted.
"""
import json

import numpy as np
import pytest

import fplab
from conftest import MODES, same_bits

FORMATS = fplab.formats()
SMALL = ["e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e8m0", "e3m2", "e2m3", "e2m1"]


def sample(rng, n=4096):
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -1.5]
    return x


# --- formats and finfo


def test_formats_and_aliases():
    names = fplab.formats()
    assert names[:5] == ["fp64", "fp32", "tf32", "fp16", "bf16"] and "e2m1" in names
    al = fplab.aliases()
    assert set(al) == set(names)
    assert "float8_e4m3fn" in al["e4m3"] and "bfloat16" in al["bf16"]
    for name, aliases in al.items():
        for a in aliases:
            assert fplab.finfo(a).name == name
            assert fplab.finfo(a.upper()).name == name  # names are case-insensitive


def test_finfo_fields_and_custom():
    f = fplab.finfo("e4m3")
    assert (f.max, f.min, f.smallest_normal, f.smallest_subnormal, f.eps) == (448, -448, 2**-6, 2**-9, 0.125)
    assert (f.bits, f.nexp, f.nmant, f.bias, f.special, f.has_inf, f.nan_codes) == (8, 4, 3, 7, "fn", False, 2)
    assert f.nan_code_list == [0x7F, 0xFF] and f.code_dtype == np.uint8 and f.dtype == np.float32
    assert f.finite_values == 253 and f.tiny == f.smallest_normal
    c = fplab.finfo("e5m7")  # custom: IEEE, bias 15
    assert c.name == "e5m7" and c.bits == 13 and c.max == (2 - 2**-7) * 2**15 and c.has_inf
    assert fplab.finfo(fplab.finfo("bf16")) == fplab.finfo("bfloat16")
    assert "e4m3" in repr(f)


def test_finfo_numpy_fields_match_the_cli(cli):
    """epsneg, maxexp, minexp and precision: Python's (from the library's rounding) and the
    CLI's (fmt_get_info) agree on every format of the table and on a custom one (issue 22)."""
    rows = json.loads(cli("finfo", *FORMATS, "e5m7", "--format", "json").stdout)
    assert len(rows) == len(FORMATS) + 1
    for r in rows:
        f = fplab.finfo(r["name"])
        assert (f.epsneg, f.maxexp, f.minexp, f.precision) == (r["epsneg"], r["maxexp"], r["minexp"],
                                                                r["precision"]), r["name"]


def test_finfo_bad_names():
    with pytest.raises(ValueError, match="format 'e9m99': not a valid format"):
        fplab.finfo("e9m99")
    with pytest.raises(ValueError, match="format 'float7': unknown format; .*known formats: fp64 fp32"):
        fplab.finfo("float7")
    with pytest.raises(ValueError, match="did you mean 'float8_e4m3fn'"):
        fplab.finfo("float8_e4m3fm")
    with pytest.raises(ValueError, match=r"format 'fp8': ambiguous: it names e4m3 \(float8_e4m3fn"):
        fplab.round(np.float32([1]), "fp8")
    with pytest.raises(ValueError, match="a scheme .e2m1 elements under the recipe mx"):
        fplab.round(np.float32([1]), "mxfp4")
    with pytest.raises(TypeError, match="expected a format name"):
        fplab.finfo(8)


# --- rounding: the CLI agrees bit for bit, every mode


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spec", ["e4m3", "e2m1", "bf16", "e8m0", "fp16"])
def test_round_matches_cli_cast(cli, spec, mode, rng):
    x = np.concatenate([sample(rng, 24)[8:], [0.1, 0.3, 300.0, 464.0, 500.0, -2.5, 1e-3]])
    args = ["cast", *[repr(float(v)) for v in x], "--to", spec, "--round", mode, "--format", "json"]
    extra = ["--seed", "7"] if mode == "sr" else []
    rows = json.loads(cli(*args, *extra).stdout, parse_int=float)  # "-0" stays -0.0
    want = np.array([float(r["value"]) for r in rows])
    got = fplab.round(x, spec, mode=mode, seed=7)
    same_bits(got, want)
    codes = fplab.encode(x, spec, mode=mode, seed=7)
    assert [int(r["code"], 16) for r in rows] == codes.tolist()


def test_overflow_subnormals_and_stats():
    x = np.array([500.0, -1000.0, 1e-3, 2**-10, 0.0, np.nan], np.float32)
    st = fplab.Stats()
    y = fplab.round(x, "e4m3", overflow="saturate", subnormals="flush", stats=st)
    assert y[:2].tolist() == [448.0, -448.0] and y[2] == 0 and y[3] == 0 and np.isnan(y[5])
    assert (st.n, st.overflow, st.nan_in) == (6, 2, 1) and st.underflow >= 2 and st.amax == 1000.0
    fplab.round(x, "e4m3", stats=st)  # counts add up over calls
    assert st.n == 12
    assert np.isnan(fplab.round(np.float32(500), "e4m3"))  # IEEE overflow: no inf -> NaN


def test_stochastic_rounding_reproducible_and_counter_based(rng):
    x = rng.standard_normal(10000).astype(np.float32)
    a = fplab.round(x, "bf16", mode="sr", seed=3)
    same_bits(a, fplab.round(x, "bf16", mode="sr", seed=3))
    assert (a != fplab.round(x, "bf16", mode="sr", seed=4)).any()
    assert (a != fplab.round(x, "bf16", mode="sr", seed=3, stream=1)).any()
    # element i draws counter offset + i: a tail with offset=k equals the whole call's tail
    same_bits(fplab.round(x[100:], "bf16", mode="sr", seed=3, offset=100), a[100:])
    # every result is one of the two neighbours
    lo, hi = fplab.round(x, "bf16", mode="rdn"), fplab.round(x, "bf16", mode="rup")
    assert ((a == lo) | (a == hi)).all()
    with pytest.warns(fplab.FplabWarning):
        few = fplab.round(x, "bf16", mode="sr", seed=3, sr_bits=4)
    assert ((few == lo) | (few == hi)).all()


def test_float64_and_fp64():
    x = np.array([0.1, 1 + 2**-40], np.float64)
    assert fplab.round(x, "fp64").tolist() == x.tolist()
    assert fplab.round(x, "fp32").tolist() == x.astype(np.float32).astype(np.float64).tolist()
    assert fplab.round(x, "fp32").dtype == np.float64
    with pytest.raises(TypeError, match="does not fit in float32"):
        fplab.round(x.astype(np.float32), "fp64")
    c = fplab.encode(x, "fp64")
    assert c.dtype == np.uint64 and c.tolist() == x.view(np.uint64).tolist()
    same_bits(fplab.decode(c, "fp64"), x)


# --- shapes, strides, out=


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_and_noncontiguous(dtype, rng):
    base = sample(rng, 64 * 48).astype(dtype).reshape(64, 48)
    want = fplab.round(np.ascontiguousarray(base), "e4m3", mode="sr", seed=1)
    for view, idx in ((base.T, (Ellipsis,)), (base[::2, 1::3], (slice(None, None, 2), slice(1, None, 3))),
                      (np.asfortranarray(base), (Ellipsis,))):
        got = fplab.round(view, "e4m3")
        same_bits(got, fplab.round(np.ascontiguousarray(view), "e4m3"))
    # stochastic rounding: counters follow C order of the array given
    v = base[::2, 1::3]
    same_bits(fplab.round(v, "e4m3", mode="sr", seed=1), fplab.round(v.copy(), "e4m3", mode="sr", seed=1))
    assert want.shape == base.shape


def test_out_in_place_and_strided_out(rng):
    x = sample(rng, 600).astype(np.float32).reshape(20, 30)
    want = fplab.round(x, "e5m2")
    y = x.copy()
    r = fplab.round(y, "e5m2", out=y)
    assert r is y
    same_bits(y, want)
    big = np.zeros((40, 60), np.float32)
    out = big[::2, ::2]
    fplab.round(x, "e5m2", out=out)
    same_bits(out, want)
    assert (big[1::2] == 0).all()
    t = x.copy().T
    fplab.round(t, "e5m2", out=t)  # in place on a transposed view
    same_bits(t, want.T)


def test_zero_size_and_0d():
    for shape in [(0,), (3, 0), (0, 5, 2)]:
        for fn in (lambda a: fplab.round(a, "e4m3"), lambda a: fplab.encode(a, "e4m3")):
            r = fn(np.zeros(shape, np.float32))
            assert r.shape == shape
        assert fplab.decode(np.zeros(shape, np.uint8), "e4m3").shape == shape
    r = fplab.round(np.float32(0.3), "e2m1")
    assert r.shape == () and float(r) == 0.5
    assert fplab.round(0.3, "e2m1").dtype == np.float64  # a Python float is a float64
    assert fplab.pack(np.zeros(0, np.uint8), "e2m1").size == 0


# --- bad input: TypeError for types, ValueError for values; nothing converted


def test_dtypes_refused_not_converted():
    for bad in (np.zeros(4, np.float16), np.zeros(4, np.int32), np.zeros(4, np.complex64), np.zeros(4, bool)):
        with pytest.raises(TypeError, match="expected float32 or float64"):
            fplab.round(bad, "e4m3")
        with pytest.raises(TypeError):
            fplab.encode(bad, "e4m3")
    with pytest.raises(TypeError, match="codes of e4m3 are uint8"):
        fplab.decode(np.zeros(4, np.int64), "e4m3")
    with pytest.raises(TypeError, match="codes of bf16 are uint16"):
        fplab.decode(np.zeros(4, np.uint8), "bf16")


def test_big_endian_refused():
    x = np.arange(4, dtype=">f4")
    with pytest.raises(TypeError, match="big-endian"):
        fplab.round(x, "e4m3")
    with pytest.raises(TypeError, match="big-endian"):
        fplab.quantize(x, "e4m3")
    with pytest.raises(TypeError, match="big-endian"):
        fplab.decode(np.arange(4, dtype=">u2"), "bf16")
    # an explicit byteswap is the user's choice, and then it works
    same_bits(fplab.round(x.astype("<f4"), "e4m3"), fplab.round(np.arange(4, dtype=np.float32), "e4m3"))


def test_bad_options():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="mode 'nearest': unknown rounding mode; expected one of rne rna"):
        fplab.round(x, "e4m3", mode="nearest")
    with pytest.raises(ValueError, match="overflow 'clip': unknown overflow policy"):
        fplab.round(x, "e4m3", overflow="clip")
    with pytest.raises(ValueError, match="subnormals"):
        fplab.round(x, "e4m3", subnormals=True)
    with pytest.raises(ValueError, match="sr_bits 40"):
        fplab.round(x, "e4m3", mode="sr", sr_bits=40)
    with pytest.raises(ValueError, match="seed"):
        fplab.round(x, "e4m3", seed=-1)
    with pytest.raises(ValueError, match="unknown format"):
        fplab.round(x, "e4m4x")
    with pytest.raises(TypeError, match="expected float32"):
        fplab.round(x, "e4m3", out=np.zeros(3, np.float64))
    with pytest.raises(ValueError, match="shape"):
        fplab.round(x, "e4m3", out=np.zeros(4, np.float32))
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fplab.round(x, "e4m3", out=ro)
    with pytest.raises(TypeError, match="fplab.Stats"):
        fplab.round(x, "e4m3", stats={})


def test_library_warning_is_a_python_warning():
    # the library's validate function tells warnings from errors; they become FplabWarning
    with pytest.warns(fplab.FplabWarning, match="4 random bits for bf16"):
        fplab.round(np.ones(2), "bf16", mode="sr", sr_bits=4)


# --- codes and packing


@pytest.mark.parametrize("spec", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_decode_encode_is_round(spec, mode, rng):
    x = sample(rng, 512)
    fits = fplab.finfo(spec).dtype == np.float32
    x = x.astype(np.float32) if fits else x
    c = fplab.encode(x, spec, mode=mode, seed=5)
    assert c.dtype == fplab.finfo(spec).code_dtype
    same_bits(fplab.decode(c, spec, dtype=x.dtype), fplab.round(x, spec, mode=mode, seed=5))


def test_pack_layout_fp4_fp6():
    c = np.array([1, 2, 3, 15, 7], np.uint8)
    p = fplab.pack(c, "e2m1")
    assert p.tolist() == [0x21, 0xF3, 0x07]  # element 0 in the low nibble; unused bits zero
    assert fplab.unpack(p, "e2m1", 5).tolist() == c.tolist()
    c6 = np.array([0x01, 0x02, 0x03, 0x3F], np.uint8)
    p6 = fplab.pack(c6, "e3m2")
    # little-endian bit stream: bits 0-5 = 1, 6-11 = 2, 12-17 = 3, 18-23 = 63
    assert p6.tolist() == [0x81, 0x30, 0xFC]
    assert fplab.unpack(p6, "e3m2").tolist() == c6.tolist()
    assert fplab.unpack(p6, "e3m2", shape=(2, 2)).shape == (2, 2)
    w = np.array([0x1234, 0xABCD], np.uint16)
    assert fplab.pack(w, "bf16").tolist() == [0x34, 0x12, 0xCD, 0xAB]


@pytest.mark.parametrize("spec", ["e2m1", "e3m2", "e2m3", "e4m3", "bf16"])
def test_pack_roundtrip(spec, rng):
    for n in (0, 1, 3, 4, 7, 1001):
        c = fplab.encode(rng.standard_normal(n).astype(np.float32), spec)
        p = fplab.pack(c, spec)
        assert p.dtype == np.uint8 and p.size == -(-n * fplab.finfo(spec).bits // 8)
        assert fplab.unpack(p, spec, n).tolist() == c.tolist()
    with pytest.raises(ValueError, match="fewer than"):
        fplab.unpack(np.zeros(1, np.uint8), spec, 100)
    with pytest.raises(TypeError):
        fplab.unpack(np.zeros(4, np.int8), spec)


# --- issue 20: codes out of range, out overlapping codes


@pytest.mark.parametrize("fn", ["decode", "pack"])
def test_out_of_range_codes_raise(fn):
    # e2m1 has 4 bits: 255 is no code of it (masked, it decoded as -6 and packed as 0xf)
    codes = np.array([1, 255, 2], np.uint8)
    with pytest.raises(ValueError, match="element 1 is 255, not a code of e2m1"):
        getattr(fplab, fn)(codes, "e2m1")
    with pytest.raises(ValueError, match="not a code of e3m2"):
        getattr(fplab, fn)(np.array([64], np.uint8), "e3m2")
    getattr(fplab, fn)(np.array([15, 0], np.uint8), "e2m1")  # the top code is fine


def test_decode_into_out_overlapping_codes():
    # a float32 out sharing the codes' buffer: every element still decodes from its own code
    rng = np.random.default_rng(20)
    buf = np.zeros(4 << 20, np.uint8)
    n = 1 << 20
    codes = buf[: n]
    codes[:] = rng.integers(0, 256, n, dtype=np.uint8)
    want = fplab.decode(codes.copy(), "e4m3")
    out = buf.view(np.float32)[:n]  # bytes 0 .. 4n: the codes are its first quarter
    got = fplab.decode(codes, "e4m3", out=out)
    assert got is out
    assert same_bits(out, want)


def test_p3109_projections_by_name():
    # IEEE P3109: an extended format's inf, its saturation modes, and the stochastic variants
    x = np.array([1e6, -np.inf, 0.3], np.float32)
    assert fplab.round(x, "binary8p3se", overflow="satnone").tolist() == [np.inf, -np.inf, 0.3125]
    assert fplab.round(x, "binary8p3se", overflow="satpropagate").tolist() == [49152, -np.inf, 0.3125]
    assert fplab.round(x, "binary8p3se", overflow="satfinite").tolist() == [49152, -49152, 0.3125]
    assert fplab.round(np.array([-1.0], np.float32), "binary8p4ue", overflow="saturate").tolist() == [0.0]
    y = np.full(4096, 1.3, np.float32)
    with pytest.warns(fplab.FplabWarning):  # 2 random bits: the library says what it costs
        a, b = (fplab.round(y, "e4m3", mode=m, seed=5, sr_bits=2) for m in ("sr:a", "sr:c"))
    # 1.3 is 0.4 of an ulp above 1.25: with 2 random bits A rounds up with probability
    # floor(0.4*4)/4 = 1/4, C with RNE(0.4*4)/4 = 2/4
    assert abs((a > 1.3).mean() - 0.25) < 0.05 and abs((b > 1.3).mean() - 0.5) < 0.05
    with pytest.warns(fplab.FplabWarning):
        same_bits(a, fplab.round(y, "e4m3", mode="sr", seed=5, sr_bits=2))
    with pytest.raises(ValueError, match="sr:b"):
        fplab.round(y, "e4m3", mode="sr:d")
