#!/usr/bin/env python3
"""The tables of README.md from `fplab eval --format json --per-site 1` output (stdin):
per policy the loss increase over fp32 with its standard error, the three sites that cost
most when quantized alone, and the largest underflow / overflow fraction of any site."""
import json
import sys

rows = [json.loads(l) for l in sys.stdin if l.strip()]
whole = [r for r in rows if r["site"] is None]
print("| policy | val loss | increase over fp32 (± s.e.) | sites that cost most alone (increase) | worst underflow | worst overflow |")
print("| --- | --- | --- | --- | --- | --- |")
for w in whole:
    p = w["policy"]
    sites = sorted((r for r in rows if r["policy"] == p and r["site"]), key=lambda r: -r["delta"])
    top = ", ".join(f"{r['site']} {r['delta']:+.4f}" for r in sites[:3])
    tel = w.get("sites", {})
    uf = max(((v["underflow"], k) for k, v in tel.items()), default=(0, "-"))
    of = max(((v["overflow"], k) for k, v in tel.items()), default=(0, "-"))
    fmt = lambda x: f"{x[0]:.2g} ({x[1]})" if x[0] else "0"
    print(f"| {p} | {w['val_loss']:.4f} | {w['delta']:+.4f} ± {w['delta_se']:.4f} | {top or '-'} | {fmt(uf)} | {fmt(of)} |")
