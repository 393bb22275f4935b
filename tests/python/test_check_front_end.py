"""The verification front end written once (kernels/mm_check.h): fplab.check_matmul and
`fplab matmul-check --result` make the operands with the same library call and give the same
report on the same files; the extension's matmul calls take keyword arguments only and return
dicts; the library's side recipe (B's tile transposed) gives the scale grids; scales that are
not values of the recipe's scale format are refused, as the CLI refuses them.
"""
import json

import numpy as np
import pytest

import fplab
from fplab import _fplab


def mx_case(rng, M=6, N=5, K=96):
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    qa = fplab.quantize(A, "e4m3", "mx")
    qb = fplab.quantize(B, "e4m3", "mx", axis=0)
    c = fplab.scaled_matmul(A, B, "e4m3", scale="mx", acc="hopper:wgmma").c
    b, sb = np.ascontiguousarray(qb.elements), np.ascontiguousarray(qb.scale_values.T)
    return qa.elements, qa.scale_values, b, sb, c


def test_same_report_as_the_cli(cli, rng, tmp_path):
    a, sa, b, sb, c = mx_case(rng)
    files = {"a": a, "b": b, "sa": sa, "sb": sb, "c": c}
    for k, v in files.items():
        np.save(tmp_path / f"{k}.npy", v)
    p = {k: str(tmp_path / f"{k}.npy") for k in files}
    out = cli("matmul-check", "--a", "e4m3", "--b", "e4m3", "--scale", "mx", "--a-values", p["a"], "--b-values",
              p["b"], "--a-scales", p["sa"], "--b-scales", p["sb"], "--result", p["c"], "--also", "m13:rtz",
              "--format", "json").stdout
    row = json.loads(out)["results"][0]
    r = fplab.check_matmul(a, b, c, "e4m3", scale="mx", a_scales=sa, b_scales=sb, also=["m13:rtz"])
    assert (r.passed, r.judged, r.excluded, r.outside) == (row["pass"], row["judged"], row["excluded"],
                                                           row["outside_bound"])
    assert r.max_err_ulp == row["max_err_ulp"] and r.max_bound_ulp == row["max_bound_ulp"]
    assert r.candidates == {x["acc"]: x["reproduced"] for x in row["candidates"]}
    assert r.candidates["hopper:wgmma"] == r.n


def test_extension_takes_keywords_and_returns_dicts(rng):
    a, sa, b, sb, c = mx_case(rng)
    M, K = a.shape
    N = b.shape[1]
    fmt = fplab.Format("e4m3")
    kw = dict(a=a, b=b, c=c, m=M, n=N, k=K, a_fmt=fmt, b_fmt=fmt, out_fmt=fplab.Format("fp32"), scale="mx",
              a_scales=sa, b_scales=sb)
    d = _fplab.check_matmul(**kw)
    assert d["passed"] and d["n"] == M * N and d["expect"] is None
    cand = {x["acc"]: x for x in d["candidates"]}
    assert cand["hopper:wgmma"]["reproduced"] == M * N and not cand["hopper:wgmma"]["extra"]
    with pytest.raises(TypeError, match="positional"):
        _fplab.check_matmul(a, b, c)
    with pytest.raises(TypeError, match="required"):
        _fplab.check_matmul(a=a, b=b, c=c)
    with pytest.raises(TypeError, match="positional"):
        _fplab.matmul(a, b)
    C = np.empty((M, N), np.float32)
    x = np.ones((M, K), np.float32), np.ones((K, N), np.float32)
    m = _fplab.matmul(a=x[0], b=x[1], c=C, m=M, n=N, k=K, a_fmt=fmt, b_fmt=fmt, out_fmt=fplab.Format("fp32"),
                      acc="m13", exact=np.empty((M, N)))
    assert m["emulated"] and m["verify"]["mismatches"] == 0 and m["verify"]["expect"] == "m13"
    assert m["stats_a"]["n"] == M * K and (C == K).all()


def test_scaling_side_transposes_the_tile():
    a = _fplab.scaling("tile:4x16:fp32", 8, 64, side="a")
    b = _fplab.scaling("tile:4x16:fp32", 64, 8, side="b")
    assert a["grid"] == (2, 4) and b["grid"] == (4, 2)
    assert (a["tile_rows"], a["tile_cols"]) == (4, 16) and (b["tile_rows"], b["tile_cols"]) == (16, 4)
    assert _fplab.scaling("mx", 3, 64)["grid"] == (3, 2)
    with pytest.raises(ValueError, match="side 'c'"):
        _fplab.scaling("mx", 3, 64, side="c")


def test_scales_must_be_values_of_the_scale_format(rng):
    a, sa, b, sb, c = mx_case(rng)
    sb = sb.copy()
    sb[1, 2] = 3.0  # e8m0 holds powers of two only
    with pytest.raises(ValueError, match=r"b_scales / b_tensor_scale: element \[1, 2\] = 3 is not a value of e8m0"):
        fplab.check_matmul(a, b, c, "e4m3", scale="mx", a_scales=sa, b_scales=sb)
