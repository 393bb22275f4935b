#!/usr/bin/env python3
"""A study's tables from its ablation's logs, with issue 38's rule for what counts as an effect.

usage: study_table.py ABLATION_DIR --ref PRESET [--vs PRESET] [--shares FULL] [--sites] [--logs OUT]

ABLATION_DIR holds runs/PRESET/seed-S/log.jsonl (fplab ablate). Prints Markdown:
- per preset: the last validation loss of each seed (the same step for every run), mean and
  spread (max - min), and the gap to --ref per seed with its mean;
- the effect rule: a gap counts only where every seed's gap has the same sign and the mean gap
  is larger than the seed spread of both presets compared (at least 3 seeds each); otherwise
  "inside the noise" (or "too few seeds");
- --vs PRESET: the same gaps against a second reference (e.g. the full recipe);
- --shares FULL: for each preset P named FULL-..., (loss(P) - loss(FULL)) / (loss(FULL) - loss(REF)) per
  seed and its mean: the share of FULL's gap to REF that removing P's difference adds back
  (positive: the component helps);
- r = ||g|| / ||g_policy - g|| over the last 10% of the steps, where the runs logged grad_noise;
- --sites: per site, the mean fraction of values that overflowed (saturated) and underflowed
  over all steps and finished seeds, per preset;
- --logs OUT: each finished run's events, evaluations and grad_noise lines (no per-site
  telemetry) into OUT/PRESET-seed-S.jsonl, to commit beside the study.
"""
import argparse
import glob
import json
import os
import sys


def read(log):
    run = {"vals": {}, "snr": [], "steps": 0, "sites": {}, "nsteps": 0, "lines": [], "done": False}
    with open(log) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a run still writing its last line
                continue
            if "event" in rec:
                run["done"] |= rec["event"] == "end"
                run["lines"].append(rec)
                continue
            if "step" not in rec:
                continue
            run["steps"] = rec["step"]
            if "val_loss" in rec:
                run["vals"][rec["step"]] = rec["val_loss"]
            g = rec.get("grad_noise")
            if g and isinstance(g.get("noise_norm"), (int, float)) and g["noise_norm"] > 0:
                run["snr"].append((rec["step"], g["exact_norm"] / g["noise_norm"]))
            for site, t in (rec.get("sites") or {}).items():
                acc = run["sites"].setdefault(site, [0.0, 0.0])
                acc[0] += t.get("overflow", 0.0)
                acc[1] += t.get("underflow", 0.0)
            run["nsteps"] += 1 if rec.get("sites") else 0
            if "val_loss" in rec or "grad_noise" in rec:
                rec = dict(rec)
                rec.pop("sites", None)
                run["lines"].append(rec)
    return run


def final(run):
    return (max(run["vals"]), run["vals"][max(run["vals"])]) if run["vals"] else (None, None)


def spread(xs):
    return max(xs) - min(xs) if xs else 0.0


def verdict(gaps, sa, sb):
    if len(gaps) < 3:
        return "too few seeds"
    mean = sum(gaps) / len(gaps)
    same_sign = all(g > 0 for g in gaps) or all(g < 0 for g in gaps)
    return "**effect**" if same_sign and abs(mean) > max(sa, sb) else "inside the noise"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--ref", required=True)
    ap.add_argument("--vs")
    ap.add_argument("--shares")
    ap.add_argument("--sites", action="store_true")
    ap.add_argument("--logs")
    a = ap.parse_args()
    runs = {}
    for log in sorted(glob.glob(os.path.join(a.dir, "runs", "*", "seed-*", "log.jsonl"))):
        parts = log.split(os.sep)
        runs.setdefault(parts[-3], {})[int(parts[-2].split("-")[1])] = read(log)
    if not runs:
        sys.exit(f"study_table.py: no runs/*/seed-*/log.jsonl under {a.dir}")
    if a.logs:
        os.makedirs(a.logs, exist_ok=True)
        for p, seeds in runs.items():
            for s, r in seeds.items():
                if r["done"]:
                    out = os.path.join(a.logs, f"{p}-seed-{s}.jsonl")
                    with open(out + ".tmp", "w") as f:
                        f.write("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in r["lines"]))
                    os.replace(out + ".tmp", out)
    # Only finished runs count; the step is the one every finished run reached.
    loss = {p: {s: final(r)[1] for s, r in seeds.items() if r["done"]} for p, seeds in runs.items()}
    order = sorted(runs, key=lambda p: (p != a.ref, p != a.vs, p))

    def gaps_to(p, ref):
        return [loss[p][s] - loss[ref][s] for s in sorted(loss[p]) if s in loss.get(ref, {})]

    def fmt(xs):
        return ", ".join(f"{x:+.4f}" for x in xs) + (f" (mean {sum(xs) / len(xs):+.4f})" if xs else "")

    refs = [r for r in (a.ref, a.vs) if r]
    head = "| preset | seeds: val loss | mean; spread | " + " | ".join(f"gap to {r} per seed | vs {r}" for r in refs)
    print(head + " | r, last 10% |")
    print("| --- " * (3 + 2 * len(refs)) + "| --- |")
    for p in order:
        vals = [loss[p][s] for s in sorted(loss[p])]
        cells = [", ".join(f"{v:.4f}" for v in vals) or "running",
                 f"{sum(vals) / len(vals):.4f}; {spread(vals):.4f}" if vals else ""]
        for r in refs:
            if p == r or r not in loss:
                cells += ["reference" if p == r else "", ""]
                continue
            g = gaps_to(p, r)
            cells += [fmt(g), verdict(g, spread(vals), spread(list(loss[r].values())))]
        tails = []
        for s, run in sorted(runs[p].items()):
            t = [x for st, x in run["snr"] if st > 0.9 * run["steps"]]
            if t:
                tails.append(f"{sum(t) / len(t):.1f}")
        print(f"| {p} | " + " | ".join(cells) + f" | {', '.join(tails)} |")
    if a.shares and a.shares in loss and a.ref in loss:
        full = a.shares
        print(f"\nShare of {full}'s gap to {a.ref} that each variant adds back, per seed: "
              f"(loss(variant) - loss({full})) / (loss({full}) - loss({a.ref}))\n")
        print("| variant | per seed | mean |")
        print("| --- | --- | --- |")
        for p in order:
            if not p.startswith(full + "-"):  # the variants are named after the full recipe
                continue
            sh = [(loss[p][s] - loss[full][s]) / (loss[full][s] - loss[a.ref][s])
                  for s in sorted(loss[p]) if s in loss[full] and s in loss[a.ref] and loss[full][s] != loss[a.ref][s]]
            if sh:
                print(f"| {p} | " + ", ".join(f"{x:+.2f}" for x in sh) + f" | {sum(sh) / len(sh):+.2f} |")
    if a.sites:
        print("\nMean fraction of values that overflowed (saturated) / underflowed, over all steps and finished "
              "seeds:\n")
        sites = sorted({s for seeds in runs.values() for r in seeds.values() for s in r["sites"]})
        print("| site | " + " | ".join(order) + " |")
        print("| --- " * (len(order) + 1) + "|")
        for site in sites:
            cells = []
            for p in order:
                o = u = n = 0
                for r in runs[p].values():
                    if r["done"] and site in r["sites"] and r["nsteps"]:  # not a running run's first steps
                        o += r["sites"][site][0] / r["nsteps"]
                        u += r["sites"][site][1] / r["nsteps"]
                        n += 1
                cells.append(f"{o / n:.2e} / {u / n:.2e}" if n else "")
            print(f"| {site} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
