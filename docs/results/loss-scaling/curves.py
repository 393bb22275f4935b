#!/usr/bin/env python3
"""Per-step gradient underflow of each *.grad site and the loss scale, from the JSON-lines logs
of `fplab train` (an ablation's runs/PRESET/seed-S/log.jsonl), into one gnuplot data file with
a block per run, and a gnuplot script that draws it (underflow.png).
usage: curves.py OUT_DIR RUN_DIR..."""
import json
import os
import sys

out, runs = sys.argv[1], sys.argv[2:]
sites = ["attn.qkv.grad", "attn.o.grad", "mlp.gate_up.grad", "mlp.down.grad", "lm_head.grad"]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "underflow.dat"), "w") as f:
    for i, run in enumerate(runs):
        name = "/".join(run.rstrip("/").split("/")[-2:])
        f.write(("\n\n" if i else "") + f"# {name}\n# step\tloss_scale\t" + "\t".join(sites) + "\n")
        for line in open(os.path.join(run, "log.jsonl")):
            r = json.loads(line)
            if "step" not in r or "event" in r:
                continue
            tel = r.get("sites", {})
            f.write(f"{r['step']}\t{r['loss_scale']}\t" +
                    "\t".join(str(tel.get(s, {}).get("underflow", 0)) for s in sites) + "\n")
names = ["/".join(r.rstrip("/").split("/")[-2:]) for r in runs]
with open(os.path.join(out, "underflow.gp"), "w") as g:
    g.write('set terminal pngcairo noenhanced size 1200,%d font ",10"\nset output "underflow.png"\n' % (300 * len(runs)))
    g.write('set multiplot layout %d,1\nset logscale y\nset yrange [1e-5:1]\nset key outside right\n' % len(runs))
    g.write('set ylabel "underflow fraction"\nset xlabel "optimizer step"\n')
    for i, n in enumerate(names):
        plots = ", ".join(f'"underflow.dat" index {i} using 1:{3 + k} with lines title "{s}"'
                          for k, s in enumerate(sites))
        g.write(f'set title "{n}"\nplot {plots}\n')
    g.write("unset multiplot\n")
