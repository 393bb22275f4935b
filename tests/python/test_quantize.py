"""fplab.quantize: exactly what `fplab quantize` computes (values bit for bit, the --stats lines),
plus the codes and scales it keeps inside: elements == decode(codes), scale_values ==
decode(scales), and x ~= elements * scales * tensor_scale (exactly for power-of-two scales).
Axis, N-d, ragged and empty tensors; errors carry the library's message.
"""
import os
import tempfile

import numpy as np
import pytest

import fplab
from conftest import same_bits

RECIPES = ["none", "tensor", "row", "col", "mx", "nvfp4", "block:16:e4m3", "tile:8x16:e8m0:up", "mx:up",
           "block:32:bf16:rne", "mx:nanblock"]


def data(rng, shape, spread=6):
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread, shape)).astype(np.float32)


def cli_quantize(cli, x, *args):
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.npy"), os.path.join(d, "out.npy")
        np.save(src, x)
        r = cli("quantize", src, dst, *args, "--stats")
        stats = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
        return np.load(dst), stats


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("spec,mode", [("e4m3", "rne"), ("e2m1", "rne"), ("e5m2", "sr"), ("e2m1", "sr"),
                                       ("e3m2", "rtz")])
def test_matches_cli_quantize(cli, rng, spec, mode, recipe):
    x = data(rng, (24, 80))
    x[0, :3] = [np.nan, 1e6, -1e-9]
    want, st = cli_quantize(cli, x, "--to", spec, "--scale", recipe, "--round", mode, "--seed", "11")
    q = fplab.quantize(x, spec, scale=recipe, mode=mode, seed=11)
    same_bits(q.values, want)
    s = q.stats
    got = {"n": s.n, "overflow": s.overflow, "underflow": s.underflow, "subnormal": s.subnormal,
           "nan_in": s.nan_in, "invalid": s.invalid, "scales_clipped": q.scales_clipped,
           "scales_nan": q.scales_nan}
    assert got == {k: int(st[k]) for k in got}
    assert float(st["amax"]) == s.amax and float(st["tensor_scale"]) == q.tensor_scale
    for k, attr in (("mse", "mse"), ("sqnr_db", "sqnr_db"), ("max_abs_err", "max_abs_err"),
                    ("max_rel_err", "max_rel_err")):
        assert float(st[k]) == getattr(s, attr), k
    assert int(st["err_nonfinite"]) == s.err_nonfinite


def test_cli_options_agree(cli, rng):
    x = data(rng, (4, 64), spread=12)
    want, st = cli_quantize(cli, x, "--to", "e4m3", "--scale", "mx", "--overflow", "saturate", "--flush",
                            "--round", "sr", "--seed", "3", "--sr-bits", "8")
    q = fplab.quantize(x, "e4m3", scale="mx", overflow="saturate", subnormals="flush", mode="sr", seed=3, sr_bits=8)
    same_bits(q.values, want)
    want, _ = cli_quantize(cli, x * 1e3, "--to", "e4m3", "--scale", "mx", "--overflow", "ieee")
    q = fplab.quantize(x * 1e3, "e4m3", scale="mx", overflow="ieee")
    assert q.overflow == "ieee"
    same_bits(q.values, want)
    assert fplab.quantize(x, "e4m3", scale="mx").overflow == "saturate"
    assert fplab.quantize(x, "e4m3").overflow == "ieee"
    # a 1-D array is one row, as the CLI reads it
    want1, _ = cli_quantize(cli, x[0], "--to", "e2m1", "--scale", "nvfp4")
    same_bits(fplab.quantize(x[0], "e2m1", scale="nvfp4").values, want1)
    # float64 with no scaling: rounded from float64 directly, as the CLI does
    x64 = x.astype(np.float64) * (1 + 2.0**-30)
    want64, _ = cli_quantize(cli, x64, "--to", "bf16")
    q64 = fplab.quantize(x64, "bf16")
    assert q64.values.dtype == np.float64
    same_bits(q64.values.astype(np.float32), want64)


@pytest.mark.parametrize("recipe,sfmt", [("mx", "e8m0"), ("nvfp4", "e4m3"), ("tensor", "fp32"), ("row", "fp32"),
                                         ("block:16:e4m3", "e4m3"), ("tile:8x16:e8m0", "e8m0")])
def test_codes_and_scales(rng, recipe, sfmt):
    x = data(rng, (16, 64))
    q = fplab.quantize(x, "e2m1", scale=recipe)
    assert q.scale_format == sfmt and q.scales.dtype == fplab.finfo(sfmt).code_dtype
    assert q.codes.dtype == np.uint8 and q.codes.shape == x.shape
    same_bits(fplab.decode(q.codes, "e2m1"), q.elements)
    same_bits(fplab.decode(q.scales, sfmt), q.scale_values)
    # expand the scales over their tiles and rebuild x from elements * scale * tensor scale
    gr, gc = q.scale_values.shape
    tr, tc = -(-16 // gr), -(-64 // gc)
    s = np.repeat(np.repeat(q.scale_values, tr, 0), tc, 1)[:16, :64]
    rebuilt = q.elements * s * np.float32(q.tensor_scale)
    if sfmt == "e8m0":
        same_bits(rebuilt, q.values)  # power-of-two scales: exact
    else:
        np.testing.assert_allclose(rebuilt, q.values, rtol=2**-22, atol=0)


def test_shapes_mx():
    x = np.arange(2 * 64, dtype=np.float32).reshape(2, 64)
    q = fplab.quantize(x, "e4m3", scale="mx")
    assert q.scales.shape == (2, 2) and q.recipe == "mx" and q.format == "e4m3"
    assert fplab.quantize(x, "e4m3", scale="mx:ocp").recipe == "mx"
    x3 = np.ones((2, 3, 100), np.float32)
    q3 = fplab.quantize(x3, "e2m1", scale="mx")  # ragged: 100 = 32 + 32 + 32 + 4
    assert q3.scales.shape == (2, 3, 4) and q3.values.shape == x3.shape
    t = fplab.quantize(x, "e4m3", scale="tensor")
    assert t.scales.shape == (1, 1)
    n = fplab.quantize(x, "e4m3")
    assert n.scales is None and n.scale_format is None and n.tensor_scale == 1.0
    assert "Quantized" in repr(q)


def test_axis(rng):
    x = data(rng, (64, 12))
    a0 = fplab.quantize(x, "e4m3", scale="mx", axis=0)
    aT = fplab.quantize(np.ascontiguousarray(x.T), "e4m3", scale="mx")
    same_bits(a0.values, aT.values.T)
    assert a0.scales.shape == (12, 2) and (a0.scales == aT.scales).all()
    x3 = data(rng, (4, 64, 3))
    q = fplab.quantize(x3, "e2m1", scale="mx", axis=1)
    ref = fplab.quantize(np.ascontiguousarray(np.moveaxis(x3, 1, -1)), "e2m1", scale="mx")
    same_bits(q.values, np.moveaxis(ref.values, -1, 1))
    assert q.scales.shape == (4, 3, 2)
    same_bits(fplab.quantize(x3[:, ::2, :], "e2m1", scale="mx", axis=1).values,
              fplab.quantize(np.ascontiguousarray(x3[:, ::2, :]), "e2m1", scale="mx", axis=1).values)
    with pytest.raises(ValueError, match="axis 3"):
        fplab.quantize(x3, "e2m1", axis=3)


def test_empty(rng):
    for shape in [(0, 64), (4, 0), (0,)]:
        q = fplab.quantize(np.zeros(shape, np.float32), "e4m3", scale="mx")
        assert q.values.shape == shape and q.codes.shape == shape and q.scales.size == 0


def test_errors():
    x = np.ones((4, 32), np.float32)
    with pytest.raises(ValueError, match="scaling 'block:0:e8m0'"):
        fplab.quantize(x, "e4m3", scale="block:0:e8m0")
    with pytest.raises(ValueError, match="mxx"):
        fplab.quantize(x, "e4m3", scale="mxx")
    with pytest.raises(ValueError, match="does not fit in float32"):
        fplab.quantize(x, "e4m3", scale="block:32:fp64")
    with pytest.raises(TypeError, match="float64 x with a scaling recipe"):
        fplab.quantize(x.astype(np.float64), "e4m3", scale="mx")
    with pytest.raises(ValueError, match="quantize works in float32"):
        fplab.quantize(x, "fp64")
    with pytest.raises(TypeError, match="expected float32 or float64"):
        fplab.quantize(x.astype(np.float16), "e4m3")
    with pytest.raises(TypeError, match="recipe name"):
        fplab.quantize(x, "e4m3", scale=32)


@pytest.mark.parametrize("recipe", ["none", "tensor", "row", "col", "mx", "nvfp4", "tile:8x16:e8m0:up",
                                    "block:32:bf16:rne", "mx:nanblock"])
@pytest.mark.parametrize("spec,mode", [("e4m3", "rne"), ("e2m1", "sr"), ("bf16", "rne")])
@pytest.mark.parametrize("shape", [(24, 80), (80,), (3, 0)])
def test_cli_codes_and_scales_match(cli, rng, spec, mode, recipe, shape):
    """`fplab quantize --codes/--scales` writes exactly .codes and .scales (dtype and shape too)."""
    x = data(rng, shape)
    if x.size:
        x.flat[:3] = [np.nan, 1e6, -1e-9]
    q = fplab.quantize(x, spec, scale=recipe, mode=mode, seed=5)
    with tempfile.TemporaryDirectory() as d:
        src, dst, cp, sp = (os.path.join(d, n) for n in ("in.npy", "out.npy", "c.npy", "s.npy"))
        np.save(src, x)
        extra = [] if recipe == "none" else ["--scales", sp]
        cli("quantize", src, dst, "--to", spec, "--scale", recipe, "--round", mode, "--seed", "5", "--codes", cp,
            *extra)
        codes = np.load(cp)
        assert codes.dtype == q.codes.dtype and codes.shape == q.codes.shape
        assert np.array_equal(codes, q.codes)
        if recipe != "none":
            scales = np.load(sp)
            assert scales.dtype == q.scales.dtype and scales.shape == q.scales.shape
            assert np.array_equal(scales, q.scales)


def test_error_stats(rng):
    """MSE, SQNR, max abs/rel error of quantize(...).stats against NumPy on the same arrays."""
    x = data(rng, (16, 64))
    x[0, 0] = np.inf  # left out of every metric, and counted
    for recipe in ("none", "mx", "nvfp4", "row"):
        q = fplab.quantize(x, "e4m3", scale=recipe)
        ok = np.isfinite(x) & np.isfinite(q.values)
        d = q.values[ok].astype(np.float64) - x[ok].astype(np.float64)
        xs = x[ok].astype(np.float64)
        assert q.stats.err_nonfinite == int((~ok).sum()) >= 1
        assert np.isclose(q.stats.mse, np.mean(d * d), rtol=1e-12)
        assert np.isclose(q.stats.sqnr_db, 10 * np.log10(np.sum(xs * xs) / np.sum(d * d)), rtol=1e-12)
        assert q.stats.max_abs_err == np.abs(d).max()
        nz = xs != 0
        assert q.stats.max_rel_err == (np.abs(d[nz]) / np.abs(xs[nz])).max()
    q = fplab.quantize(np.float32([1, 2, 0.5]), "fp32")
    assert q.stats.mse == 0 and q.stats.sqnr_db == float("inf")


def test_schemes():
    """A scheme names an element format with its recipe."""
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    for scheme, elem, recipe in (("mxfp4", "e2m1", "mx"), ("nvfp4", "e2m1", "nvfp4"), ("mxfp8", "e4m3", "mx"),
                                 ("mxfp6_e3m2", "e3m2", "mx")):
        q, r = fplab.quantize(x, scheme), fplab.quantize(x, elem, scale=recipe)
        assert q.format == elem and q.recipe == recipe
        same_bits(q.values, r.values)
    assert fplab.quantize(x, "mxfp4", scale="mx:up").recipe == "mx:up"
    with pytest.raises(ValueError, match="mxfp6 is ambiguous"):
        fplab.quantize(x, "e3m2", scale="mxfp6")


def test_exact_quotients_against_fractions(rng):
    """Row, tensor, column and NVFP4 recipes round the exact quotient x / s (s the decoded scale)
    in every mode of nearest rounding: checked with Python's fractions on random rows and on
    constructed ties; ':recip' (x * fl(1/s)) differs on some of them."""
    from fractions import Fraction as Fr

    def rne_value(fmt, z):  # the nearest value of fmt to the rational z, ties to the even code
        vals = VALUES[fmt]
        i = np.searchsorted(vals, float(z))
        cands = [vals[j] for j in (i - 1, i) if 0 <= j < len(vals)]
        best = min(cands, key=lambda v: (abs(Fr(v) - z), CODE_PARITY[fmt][v]))
        return best

    VALUES, CODE_PARITY = {}, {}
    for fmt in ("e4m3", "e2m1"):
        codes = np.arange(1 << fplab.finfo(fmt).bits, dtype=np.uint8)
        v = fplab.decode(codes, fmt).astype(np.float64)
        keep = np.isfinite(v)
        VALUES[fmt] = np.unique(v[keep])
        CODE_PARITY[fmt] = {float(val): int(c) & 1 for c, val in zip(codes[keep], v[keep])}
        CODE_PARITY[fmt][0.0] = 0
    differ = 0
    for it in range(300):
        fmt = "e4m3" if it % 2 else "e2m1"
        mx = fplab.finfo(fmt).max
        s = np.float32(rng.integers(1, 1 << 12)) * np.float32(2.0 ** rng.integers(-10, 10))
        row = (rng.uniform(-1, 1, 16) * mx * float(s)).astype(np.float32)
        row[0] = np.float32(mx * float(s))  # amax: the row's scale is s exactly
        if it % 3 == 0:  # a constructed tie: s times a midpoint of two neighbours
            mids = (VALUES[fmt][1:] + VALUES[fmt][:-1]) / 2
            row[1] = np.float32(float(s) * mids[rng.integers(len(mids) // 2, len(mids))])
        for recipe in ("row", "tensor"):
            q = fplab.quantize(row, fmt, scale=recipe)
            sc = Fr(float(q.scale_values.ravel()[0]))
            for xi, qi in zip(row, q.elements):
                z = Fr(float(xi)) / sc
                z = max(min(z, Fr(mx)), Fr(-mx))  # saturation
                assert qi == rne_value(fmt, z), (fmt, recipe, float(s), float(xi), float(qi))
            differ += not np.array_equal(q.elements, fplab.quantize(row, fmt, scale=recipe + ":recip").elements)
        qc = fplab.quantize(row.reshape(-1, 1), fmt, scale="col")
        sc = Fr(float(qc.scale_values.ravel()[0]))
        for xi, qi in zip(row, qc.elements.ravel()):
            z = max(min(Fr(float(xi)) / sc, Fr(mx)), Fr(-mx))
            assert qi == rne_value(fmt, z)
    assert differ > 0
    # NVFP4: the decoded scale of block b is scale_values[b] * tensor_scale as float32 arithmetic
    # gives it: fl(sf / s_enc), which the element divides exactly
    for it in range(100):
        x = data(rng, (1, 64))
        q = fplab.quantize(x, "e2m1", scale="nvfp4")
        s_enc = np.float32(6 * 448) / np.float32(np.abs(x).max())  # fmt_scaling_tensor_enc
        for b in range(4):
            d = np.float32(q.scale_values[0, b]) / s_enc
            for xi, qi in zip(x[0, 16 * b:16 * b + 16], q.elements[0, 16 * b:16 * b + 16]):
                if d == 0:
                    continue
                z = max(min(Fr(float(xi)) / Fr(float(d)), Fr(6)), Fr(-6))
                assert qi == rne_value("e2m1", z), (float(xi), float(d), float(qi))
