#!/usr/bin/env python3
"""Writes tests/fixtures/p3109_gfloat.txt: IEEE P3109 formats (finite and extended) as gfloat
(PyPI) computes them, for tests/test_p3109.c. Run by `make check-p3109` with a Python that has gfloat, e.g.

    python3 -m venv /tmp/venv-gfloat && /tmp/venv-gfloat/bin/pip install gfloat numpy
    make check-p3109 P3109_PYTHON=/tmp/venv-gfloat/bin/python

Lines (values as Python's repr: the shortest text that reads back exactly; 'nan' for NaN):
    D NAME CODE VALUE          every code of every format with K = 3..8, and 64 codes spread
                               over K = 10, 12, 16 with the edges (NaN, max, 0x80 +- 1, 1)
                               (gfloat.decode_float)
    R NAME MODE SAT X Y        gfloat.round_float(fi, X, rnd=MODE, sat=SAT) on targeted inputs (every
                               value, each midpoint, a little either side, beyond max, below the
                               smallest subnormal; 16 of them drawn with a fixed seed) and two random
                               ones, for K = 4 and 8
NAME is the WG's spelling, binaryKpP{s|u}{e|f}; MODE is fplab's name of gfloat's RoundMode.
"""
import math
import random
import sys

import gfloat
from gfloat import decode_float, round_float
from gfloat.formats import format_info_p3109
from gfloat.types import Domain, RoundMode, Signedness

MODES = {"rne": RoundMode.TiesToEven, "rna": RoundMode.TiesToAway, "rtz": RoundMode.TowardZero,
         "rup": RoundMode.TowardPositive, "rdn": RoundMode.TowardNegative}


def formats(ks):
    for k in ks:
        for signed in (True, False):
            for p in range(1, (k - 1 if signed else k) + 1):
                if (k - p if signed else k - p + 1) > 11:
                    continue  # beyond float64's exponent range (fplab refuses those names)
                for dom, d in ((Domain.Finite, "f"), (Domain.Extended, "e")):
                    fi = format_info_p3109(k, p, Signedness.Signed if signed else Signedness.Unsigned, dom)
                    yield f"binary{k}p{p}{'s' if signed else 'u'}{d}", fi, k


def hexv(v):
    return "nan" if math.isnan(v) else repr(float(v))  # the shortest text that reads back exactly


def main(out_path):
    rng = random.Random(3109)
    from importlib.metadata import version
    lines = [f"# IEEE P3109 formats from gfloat {version('gfloat')} (tools/p3109_gfloat.py)"]
    for name, fi, k in formats([3, 4, 5, 6, 7, 8, 10, 12, 16]):
        step = 1 if k <= 8 else (1 << k) // 64 + 1
        edges = {(1 << k) - 1, (1 << k) - 2, 1 << (k - 1), (1 << (k - 1)) - 1, (1 << (k - 1)) + 1, 1}
        for code in sorted(set(range(0, 1 << k, step)) | edges):
            v = decode_float(fi, code).fval
            lines.append(f"D {name} {code} {hexv(v)}")
        if k not in (4, 8):
            continue
        vals = sorted({decode_float(fi, c).fval for c in range(1 << k)} - {float("nan")},
                      key=lambda v: v)
        vals = [v for v in vals if math.isfinite(v)]  # the extended formats' inf is not a grid point
        xs = set()
        for a, b in zip(vals, vals[1:]):
            m = (a + b) / 2
            xs.update([a, m, math.nextafter(m, -math.inf), math.nextafter(m, math.inf)])
        top, tiny = max(vals), min(v for v in vals if v > 0)
        xs.update([top * 1.25, top * 4, tiny / 2, tiny / 3, -tiny / 2, 0.0, -0.0])
        xs = sorted(xs)
        xs = rng.sample(xs, min(len(xs), 16)) + [rng.uniform(-top, top) for _ in range(2)] + [top * 1.25, -top * 1.25]
        for mode, rm in MODES.items():
            for sat in (False, True):
                for x in xs:
                    y = round_float(fi, x, rnd=rm, sat=sat)
                    lines.append(f"R {name} {mode} {int(sat)} {hexv(x)} {hexv(y)}")
    with open(out_path, "w") as fp:
        fp.write("\n".join(lines) + "\n")
    print(f"p3109_gfloat: wrote {len(lines) - 1} lines to {out_path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/p3109_gfloat.txt")
