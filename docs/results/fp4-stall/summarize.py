#!/usr/bin/env python3
"""The FP4-stall study's table from its runs' logs (docs/results/fp4-stall/README.md).

usage: summarize.py ABLATION_DIR [--logs OUT]
ABLATION_DIR holds runs/PRESET/seed-S/log.jsonl (fplab ablate). Prints Markdown: per preset and
seed, the last validation loss and its gap to fp32's of the same seed at the same step, and the ratio
r = exact_norm / noise_norm of the measured steps (train --grad-noise-every): at the first
measurement, its smallest value, its mean over the last 10% of the steps, and the first step
where r fell below sqrt(3) (Chmiel et al. 2025's threshold), or "never"."""
import glob
import json
import math
import os
import sys

THRESHOLD = math.sqrt(3)


def read(log):
    vals, snr, steps = {}, [], 0
    with open(log) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a run still writing its last line
                continue
            if "step" not in rec or "event" in rec:
                continue
            steps = rec["step"]
            if "val_loss" in rec:
                vals[rec["step"]] = rec["val_loss"]
            g = rec.get("grad_noise")
            if g and isinstance(g.get("noise_norm"), (int, float)) and g["noise_norm"] > 0:
                snr.append((rec["step"], g["exact_norm"] / g["noise_norm"]))
    return vals, snr, steps


def extract(log, out):
    """The run's record without "sites": events, and the steps with grad_noise or val_loss."""
    lines = []
    with open(log) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "event" in rec or "grad_noise" in rec or "val_loss" in rec:
                rec.pop("sites", None)
                lines.append(json.dumps(rec, separators=(",", ":")))
    if not any('"event":"end"' in s for s in lines):
        return False  # unfinished
    with open(out + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(out + ".tmp", out)
    return True


def main():
    args = sys.argv[1:]
    logs_out = None
    if len(args) == 3 and args[1] == "--logs":
        logs_out = args[2]
    elif len(args) != 1:
        sys.exit(__doc__)
    runs = {}
    for log in sorted(glob.glob(os.path.join(args[0], "runs", "*", "seed-*", "log.jsonl"))):
        parts = log.split(os.sep)
        runs.setdefault(parts[-3], {})[int(parts[-2].split("-")[1])] = read(log)
        if logs_out:
            os.makedirs(logs_out, exist_ok=True)
            extract(log, os.path.join(logs_out, f"{parts[-3]}-{parts[-2]}.jsonl"))
    if not runs:
        sys.exit(f"summarize.py: no runs/*/seed-*/log.jsonl under {args[0]}")
    base = runs.get("fp32", {})
    print("| preset | seed | steps | val loss (at step) | gap to fp32 | r first | r min (step) | r last 10% | r < sqrt(3) from |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for preset in sorted(runs, key=lambda p: (p != "fp32", p)):
        for seed, (vals, snr, steps) in sorted(runs[preset].items()):
            at = max(vals) if vals else None
            val = vals[at] if vals else None
            b = base.get(seed, ({},))[0].get(at)
            gap = f"{val - b:+.4f}" if val is not None and b is not None and preset != "fp32" else ""
            cells = ["", "", "", ""]
            if snr:
                lo = min(snr, key=lambda s: s[1])
                tail = [r for s, r in snr if s > 0.9 * steps]
                below = next((s for s, r in snr if r < THRESHOLD), None)
                cells = [f"{snr[0][1]:.1f}", f"{lo[1]:.1f} ({lo[0]})",
                         f"{sum(tail) / len(tail):.1f}" if tail else "", str(below) if below else "never"]
            v = f"{val:.4f} ({at})" if val is not None else "-"
            print(f"| {preset} | {seed} | {steps} | {v} | {gap} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
