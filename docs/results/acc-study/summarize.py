#!/usr/bin/env python3
"""Tables and a plot for the accumulator study from the runs' logs.

usage: summarize.py RUNS_DIR [PLOTS_DIR]
RUNS_DIR holds the ablation directories of run.sh (main/, sweep/), each with
runs/PRESET/seed-S/log.jsonl. Prints Markdown: final validation loss per preset (mean and
per-seed values), the gap to fp8-current taken per seed, and the validation loss at every
evaluation; writes val_loss.dat, val_loss.gp and val_loss.png (gnuplot) into PLOTS_DIR."""
import glob
import json
import os
import subprocess
import sys


def read_runs(root):
    runs = {}  # preset -> seed -> {step: val_loss}
    for log in sorted(glob.glob(os.path.join(root, "*", "runs", "*", "seed-*", "log.jsonl"))):
        parts = log.split(os.sep)
        preset, seed = parts[-3], int(parts[-2].split("-")[1])
        vals = {}
        with open(log) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:  # the last line of a run still writing
                    continue
                if "val_loss" in rec and "step" in rec:
                    vals[rec["step"]] = rec["val_loss"]
        if vals:
            runs.setdefault(preset, {})[seed] = vals
    return runs


ORDER = ["fp32", "fp8-current", "fp8-acc14-rne", "fp8-acc14-rtz", "fp8-acc14-rtz-p128",
         "fp8-acc11-rtz", "fp8-acc11-rtz-p128", "fp8-acc8-rtz", "fp8-acc8-rtz-p128"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = read_runs(sys.argv[1])
    plots = sys.argv[2] if len(sys.argv) > 2 else None
    presets = [p for p in ORDER if p in runs] + sorted(p for p in runs if p not in ORDER)
    last = max(max(v) for s in runs.values() for v in s.values())
    ref = runs.get("fp8-current", {})
    print("| policy | seeds | val loss at %d (per seed) | gap to fp8-current (per seed) |" % last)
    print("| --- | --- | --- | --- |")
    for p in presets:
        seeds = sorted(s for s in runs[p] if last in runs[p][s])
        vals = [runs[p][s][last] for s in seeds]
        gaps = [runs[p][s][last] - ref[s][last] for s in seeds if s in ref and last in ref[s]]
        mean = sum(vals) / len(vals) if vals else float("nan")
        print("| %s | %d | %.4f (%s) | %s |" % (p, len(vals), mean, ", ".join("%.4f" % v for v in vals),
              ", ".join("%+.4f" % g for g in gaps) if p != "fp8-current" else "reference"))
    steps = sorted({st for p in presets for s in runs[p].values() for st in s})
    print()
    print("| policy | " + " | ".join(str(s) for s in steps) + " |")
    print("| --- |" + " --- |" * len(steps))
    for p in presets:
        row = []
        for st in steps:
            v = [runs[p][s][st] for s in runs[p] if st in runs[p][s]]
            row.append("%.4f" % (sum(v) / len(v)) if v else "")
        print("| %s (seed mean) | " % p + " | ".join(row) + " |")
    if not plots:
        return
    os.makedirs(plots, exist_ok=True)
    with open(os.path.join(plots, "val_loss.dat"), "w") as f:
        f.write("# step " + " ".join(presets) + "  (seed mean of the validation loss)\n")
        for st in steps:
            cells = []
            for p in presets:
                v = [runs[p][s][st] for s in runs[p] if st in runs[p][s]]
                cells.append("%.6f" % (sum(v) / len(v)) if v else "NaN")
            f.write("%d %s\n" % (st, " ".join(cells)))
    with open(os.path.join(plots, "val_loss.gp"), "w") as f:
        f.write('set terminal pngcairo size 900,560\nset output "val_loss.png"\n')
        f.write('set title "Validation loss by accumulator (e4m3/e5m2 operands, K up to 2048)"\n')
        f.write('set xlabel "step"\nset ylabel "validation loss"\nset key top right\nset grid\n')
        f.write("plot " + ", \\\n     ".join('"val_loss.dat" using 1:%d with linespoints title "%s"' % (i + 2, p)
                                            for i, p in enumerate(presets)) + "\n")
    subprocess.run(["gnuplot", "val_loss.gp"], cwd=plots, check=False)


if __name__ == "__main__":
    main()
