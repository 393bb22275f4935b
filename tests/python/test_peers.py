"""fplab from Python against its peers, running the peers' own code: ml_dtypes' astype and finfo
for every format ml_dtypes has (three of them only as custom eXmY specs in fplab), NumPy's for
float16/32/64. Inputs are built in bit space: every value of the format (a sample for 16 bits),
every midpoint, one float32 ulp either side, the overflow threshold, zeros, infinities, NaNs,
float32 subnormals, both signs, and seeded random bits (FPLAB_TEST_SEED).

Options that reproduce astype: the defaults (rne, IEEE overflow), except e8m0, where ml_dtypes
rounds ties away from zero (mode='rna'). Two known differences are accepted, as in
tests/test_peers.c: a NaN into a format without NaN (fp6, fp4) is -0 in fplab for both signs
(ml_dtypes: +0 for a negative NaN), and ml_dtypes 0.6 rounds e8m0 inputs in (2^-127, 1.5*2^-127)
up to 2^-126 although 2^-127 is nearer (fplab must give code 0).
"""
import math

import numpy as np
import pytest

import fplab
from conftest import ML_DTYPES, NUMPY_FLOATS, ml_dtype, same_bits

SPECS = list(ML_DTYPES)


def boundary_inputs(spec, rng):
    f = fplab.finfo(spec)
    bits = f.bits
    codes = np.arange(1 << bits, dtype=f.code_dtype)
    vals = fplab.decode(codes, spec)
    v = np.unique(vals[np.isfinite(vals) & (vals >= 0)].astype(np.float64))
    if bits > 8:  # 16 bits: the ends, the binades around 1 and a sample
        one = int(np.searchsorted(v, 1.0))
        idx = np.unique(np.concatenate([np.arange(64), np.arange(len(v) - 64, len(v)),
                                        np.arange(max(one - 64, 0), min(one + 64, len(v))),
                                        rng.choice(len(v), 256, replace=False)]))
        v = v[idx]
    nxt = 2 * v[-1] if f.nmant == 0 else v[-1] + (v[-1] - v[-2])  # the value after max, unbounded
    w = np.append(v, nxt)
    pts = np.concatenate([v, (w[:-1] + w[1:]) / 2, [nxt, 2 * nxt, 4 * nxt], v[v > 0][:1] * [0.5, 0.25, 0.75],
                          [2.0**-149, 2.0**-126, 2.0**100, float(np.finfo(np.float32).max), 0.1, 0.3, 1e-30, 1e30]])
    with np.errstate(over="ignore"):
        x = pts.astype(np.float32)
    x = x[np.isfinite(x)]
    b = x.view(np.uint32)
    nb = np.concatenate([b, b + 1, np.where(b > 0, b - 1, 0)]).astype(np.uint32)
    nb = nb[(nb & 0x7F800000) != 0x7F800000]
    specials = np.array([0, 1, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000, 0x7FC00000, 0x7F800001,
                         0x7FFFFFFF], np.uint32)
    lo = max(math.floor(math.log2(f.smallest_subnormal)) - 3, -149)
    hi = min(math.floor(math.log2(f.max)) + 3, 127)
    near = ((rng.random(1024) + 1) * 2.0 ** rng.integers(lo, hi + 1, 1024)).astype(np.float32).view(np.uint32)
    anyb = rng.integers(0, 1 << 32, 512, dtype=np.uint64).astype(np.uint32)
    allb = np.concatenate([nb, specials, near, anyb]).astype(np.uint32)
    allb = np.unique(np.concatenate([allb & 0x7FFFFFFF, allb | 0x80000000]).astype(np.uint32))
    return allb.view(np.float32)


def peer_mode(spec):
    return "rna" if spec == "e8m0" else "rne"


def known_difference(spec, x, got_codes, want_codes):
    f = fplab.finfo(spec)
    ok = np.zeros(x.shape, bool)
    if not f.has_nan:
        z = (fplab.decode(got_codes, spec) == 0) & (fplab.decode(want_codes, spec) == 0)
        ok |= np.isnan(x) & z
    if spec == "e8m0":
        a = x.view(np.uint32)
        sub = (a > 0x00400000) & (a < 0x00600000)
        assert (got_codes[sub] == 0).all(), "e8m0 subnormal inputs must round to code 0 (2^-127)"
        ok |= sub & (want_codes == 1)
    return ok


@pytest.mark.parametrize("spec", SPECS)
def test_codes_and_values_match_ml_dtypes(spec, rng):
    dt = ml_dtype(spec)
    x = boundary_inputs(spec, rng)
    with np.errstate(all="ignore"):
        peer = x.astype(dt)
    bits = fplab.finfo(spec).bits
    want = peer.view(np.uint8 if bits <= 8 else np.uint16) & ((1 << bits) - 1)
    got = fplab.encode(x, spec, mode=peer_mode(spec))
    diff = got != want
    # NaN codes: any NaN of the format where ml_dtypes has a NaN (payloads and signs aside)
    nan_both = np.isnan(fplab.decode(got, spec)) & np.isnan(fplab.decode(want.astype(got.dtype), spec))
    diff &= ~nan_both
    diff &= ~known_difference(spec, x, got, want.astype(got.dtype))
    assert not diff.any(), (f"{spec} vs ml_dtypes.{ML_DTYPES[spec]}: {diff.sum()} of {x.size} codes differ, e.g. "
                            f"{[(hex(int(x.view(np.uint32)[i])), hex(int(got[i])), hex(int(want[i]))) for i in np.flatnonzero(diff)[:6]]}")
    # the values: round() returns what astype's round trip returns
    vals = fplab.round(x, spec, mode=peer_mode(spec))
    peer_vals = peer.astype(np.float32)
    ok = known_difference(spec, x, got, want.astype(got.dtype))
    same_bits(np.where(ok, np.float32(0), vals), np.where(ok, np.float32(0), peer_vals))


@pytest.mark.parametrize("spec", SPECS)
def test_every_code_decodes_as_ml_dtypes(spec):
    dt = ml_dtype(spec)
    f = fplab.finfo(spec)
    codes = np.arange(1 << f.bits, dtype=f.code_dtype)
    same_bits(fplab.decode(codes, spec), codes.astype(np.uint8 if f.bits <= 8 else np.uint16).view(dt).astype(np.float32))


FINFO_FIELDS = ["bits", "eps", "epsneg", "max", "min", "smallest_normal", "tiny", "smallest_subnormal", "nmant",
                "nexp", "iexp", "machep", "negep", "maxexp", "minexp", "precision"]


def check_finfo(ours, theirs, spec, skip=()):
    for k in FINFO_FIELDS:
        if k in skip:
            continue
        a, b = getattr(ours, k), getattr(theirs, k)
        assert float(a) == float(b), f"{spec}.{k}: fplab {a!r}, peer {b!r}"
    # resolution: NumPy and ml_dtypes store 10**-precision rounded into the format; fplab keeps
    # the double (as `fplab finfo` prints it): rounding it gives theirs.
    if "precision" not in skip:
        r = fplab.round(np.float64(ours.resolution), spec) if ours.bits > 32 else \
            fplab.round(np.float32(ours.resolution), spec)
        assert float(r) == float(theirs.resolution), f"{spec}.resolution: {float(r)} vs {theirs.resolution}"


@pytest.mark.parametrize("spec", SPECS)
def test_finfo_matches_ml_dtypes(spec):
    ml = pytest.importorskip("ml_dtypes")
    dt = ml_dtype(spec)
    # ml_dtypes sets precision = 1 for every 8-bit float (NumPy's formula floor(-log10(eps)), which
    # fplab and `fplab finfo` keep, gives 0 there), and resolution = 0.1 rounded into the format.
    check_finfo(fplab.finfo(spec), ml.finfo(dt), spec, skip=("precision",) if fplab.finfo(spec).bits == 8 else ())


@pytest.mark.parametrize("spec", list(NUMPY_FLOATS))
def test_finfo_matches_numpy(spec):
    check_finfo(fplab.finfo(spec), np.finfo(NUMPY_FLOATS[spec]), spec)
    assert fplab.finfo(spec).dtype == (np.float64 if spec == "fp64" else np.float32)


@pytest.mark.parametrize("spec", ["fp16", "fp32"])
def test_round_matches_numpy_astype(spec, rng):
    x = np.concatenate([rng.standard_normal(4096) * 10.0 ** rng.integers(-8, 8, 4096),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 65519.99, 2**-24, 2**-25, 3 * 2**-26]])
    with np.errstate(over="ignore"):
        want = x.astype(NUMPY_FLOATS[spec]).astype(np.float64)
    same_bits(fplab.round(x, spec), want)
