#!/usr/bin/env python3
"""Markdown table of docs/results/acc-study/engines.sh's output: per distribution, the median and
largest relative error of each accumulator (rows) at each K (columns)."""
import json
import re
import sys

def spec(name):
    """engines.sh's spelling of an accumulator: matmul-check's JSON has named the sequential
    ones canonically since issue 21 (e8m13:promote=128:rtz for m13:rtz:promote=128)."""
    m = re.fullmatch(r"e8m(\d+)((?::promote=\d+)?)(:rtz)?", name)
    return f"m{m.group(1)}{m.group(3) or ''}{m.group(2)}" if m else name

def main(path):
    rows = {}
    ks = set()
    for line in open(path):
        d = json.loads(line)
        c = d["config"]
        r = d["results"][1]
        key = (c["dist"], spec(c["acc"]))
        rows.setdefault(key, {})[c["k"]] = (r["median_rel_err"], r["max_rel_err"])
        ks.add(c["k"])
    ks = sorted(ks)
    for dist in sorted({k[0] for k in rows}):
        print(f"\n{dist}: median / largest relative error\n")
        print("| accumulator | " + " | ".join(f"K = {k}" for k in ks) + " |")
        print("| --- |" + " --- |" * len(ks))
        for key in [k for k in rows if k[0] == dist]:
            cells = []
            for k in ks:
                v = rows[key].get(k)
                cells.append("%.2g / %.2g" % v if v and all(isinstance(x, float) for x in v) else "-")
            print(f"| {key[1]} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main(sys.argv[1])
