#!/usr/bin/env python3
"""summarize.py OUT: the table of docs/results/dist-study/README.md from the logs that run.sh
wrote (OUT/runs/CONFIG/seed-S/log.jsonl): final validation loss (mean [min, max] over seeds), the
gap to DP fp32 paired by seed, and the communication telemetry per step (bytes rank 0 sent,
seconds in the reduction, values rounded, underflow and overflow shares). Standard library only."""
import json
import os
import sys


def load(path):
    steps, end = [], None
    for line in open(path):
        try:
            o = json.loads(line)
        except json.JSONDecodeError:  # the last line of a run still writing
            continue
        if "step" in o and "event" not in o:
            steps.append(o)
        elif o.get("event") == "end":
            end = o
    return steps, end


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summarize.py OUT (the directory run.sh wrote)")
    root = os.path.join(sys.argv[1], "runs")
    order = ["fp32", "bf16", "e4m3", "e4m3-ef", "mxfp4", "mxfp4-ef", "nvfp4", "nvfp4-ef", "local-sgd-1",
             "local-sgd-4", "local-sgd-8", "local-sgd-32", "diloco-32", "diloco-32-nvfp4"]
    names = [c for c in order if os.path.isdir(os.path.join(root, c))]
    names += sorted(c for c in os.listdir(root) if c not in names)
    res = {}
    for c in names:
        for sd in sorted(os.listdir(os.path.join(root, c))):
            path = os.path.join(root, c, sd, "log.jsonl")
            if not os.path.exists(path):
                continue
            steps, end = load(path)
            if not end or end.get("how") != "done":
                continue
            val = [s["val_loss"] for s in steps if "val_loss" in s]
            comm = [s["comm"] for s in steps if "comm" in s]
            n = sum(c_["n"] for c_ in comm) or 1
            res.setdefault(c, {})[sd] = {
                "val": val[-1],
                "bytes": sum(c_["bytes"] for c_ in comm) / len(steps),
                "secs": sum(c_["seconds"] for c_ in comm) / len(steps),
                "under": sum(c_["underflow"] for c_ in comm) / n,
                "over": sum(c_["overflow"] for c_ in comm) / n,
                "tok_s": steps[-1]["tokens_per_s"],
            }
    ref = res.get("fp32", {})
    print("| config | seeds | val loss | gap to DP fp32 (per seed: mean [min, max]) | bytes sent / step "
          "(rank 0) | reduction ms / step | wire underflow | wire overflow |")
    print("|---|---:|---|---|---:|---:|---:|---:|")
    for c in names:
        runs = res.get(c, {})
        if not runs:
            continue
        v = [r["val"] for r in runs.values()]
        gaps = [runs[s]["val"] - ref[s]["val"] for s in runs if s in ref]
        gap = "reference" if c == "fp32" else (
            f"{sum(gaps) / len(gaps):+.4f} [{min(gaps):+.4f}, {max(gaps):+.4f}]" if gaps else "-")
        m = lambda k: sum(r[k] for r in runs.values()) / len(runs)
        print(f"| {c} | {len(runs)} | {sum(v) / len(v):.4f} [{min(v):.4f}, {max(v):.4f}] | {gap} | "
              f"{m('bytes') / 1e3:,.1f} kB | {m('secs') * 1e3:.2f} | {m('under'):.2e} | {m('over'):.2e} |")
    # What one change does, paired by seed: error feedback on, 4-bit outer gradients.
    print()
    print("| change | against | gap (per seed: mean [min, max]) |")
    print("|---|---|---|")
    for c in names:
        for suffix in ("-ef", "-nvfp4"):
            base = c[: -len(suffix)]
            if c.endswith(suffix) and base in res:
                g = [res[c][s]["val"] - res[base][s]["val"] for s in res[c] if s in res[base]]
                if g:
                    print(f"| {c} | {base} | {sum(g) / len(g):+.4f} [{min(g):+.4f}, {max(g):+.4f}] |")


if __name__ == "__main__":
    main()
