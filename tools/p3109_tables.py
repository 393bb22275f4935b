#!/usr/bin/env python3
"""Turns the IEEE P3109 working group's value tables into the fixture tests/test_p3109.c reads.

The tables are in github.com/P3109/Public, folder "Value Tables/Hexadecimal": one CSV per format,
K{K}/P{P}/{signed,unsigned}/Binary{K}p{P}{s|u}{e|f}.csv, lines "codepoint,value,subnormal" with
the value as a C99 hexadecimal float (or Inf, -Inf, NaN) and '*' on subnormals. Get them with

    git clone --depth 1 https://github.com/P3109/Public /tmp/P3109-Public
    make check-p3109-tables P3109_TABLES="/tmp/P3109-Public/Value Tables/Hexadecimal"

Usage: p3109_tables.py TABLES_DIR OUT [--all]
Writes lines "NAME CODE VALUE SUB" (NAME as the table's file names it, VALUE as the table
writes it, SUB 1 on a subnormal). By default a subset for the committed fixture: every code of
K = 3..6 and 40 codes of each larger
format (the ends, both sides of the sign bit, and codes spread between); --all writes every code
of every table. Formats with more exponent bits than float64 (K - P > 11 signed, K - P + 1 > 11
unsigned: binary16p1se, ...) are written like the others: their values are hexadecimal floats
beyond float64, which the test compares exactly (fmt_code_exact).
"""
import csv
import os
import re
import sys

NAME = re.compile(r"Binary(\d+)p(\d+)([su])([ef])\.csv$")


def wanted_codes(k, every):
    n = 1 << k
    if every or k <= 6:
        return range(n)
    half = n >> 1
    ends = set(range(4)) | set(range(half - 3, half + 4)) | set(range(n - 4, n))
    step = n // 20
    return sorted(ends | set(range(step // 2, n, step)))


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    root, out, every = argv[1], argv[2], "--all" in argv[3:]
    lines, tables = [], 0
    for dirpath, _, files in sorted(os.walk(root)):
        for fn in sorted(files):
            m = NAME.match(fn)
            if not m:
                continue
            k = int(m.group(1))
            name = fn[:-4]
            tables += 1
            with open(os.path.join(dirpath, fn), newline="") as fp:
                rows = list(csv.reader(fp))
            if rows[0][:2] != ["codepoint", "value"] or len(rows) != (1 << k) + 1:
                sys.exit(f"p3109_tables: {fn}: expected a header and {1 << k} codes")
            for code in wanted_codes(k, every):
                cp, value, sub = rows[code + 1][0], rows[code + 1][1], rows[code + 1][2].strip()
                if int(cp, 16) != code:
                    sys.exit(f"p3109_tables: {fn}: row {code + 1} is code {cp}")
                lines.append(f"{name} {code} {value} {1 if sub == '*' else 0}")
    if not tables:
        sys.exit(f"p3109_tables: no Binary*.csv under {root}: expected the folder 'Value Tables/Hexadecimal'")
    with open(out + ".tmp", "w") as fp:
        fp.write(f"# IEEE P3109 value tables (github.com/P3109/Public), {tables} tables, "
                 f"{'every code' if every else 'a subset'} (tools/p3109_tables.py)\n")
        fp.write("\n".join(lines) + "\n")
    os.replace(out + ".tmp", out)
    print(f"p3109_tables: {len(lines)} lines from {tables} tables to {out}")


if __name__ == "__main__":
    main(sys.argv)
