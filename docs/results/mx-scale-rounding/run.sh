#!/bin/sh
# MX scale rounding in training: OCP's floor against rounding the scale up (mx:up, torchao's
# RCEIL) for MXFP8 and MXFP4 (docs/results/mx-scale-rounding/README.md; issue 38 item 4). Run
# from the repository root after `make`. 5 policies x 3 seeds of 2000 steps, one thread each.
set -eu
D=docs/results/mx-scale-rounding
OUT=${OUT:-runs/mx-scale-rounding}
DATA=${DATA:-data/tinyshakespeare.txt}
build/fplab ablate --presets fp32,mxfp8,$D/mxfp8-up.policy,mxfp4,$D/mxfp4-up.policy --seeds 3 \
    --model shakespeare --data "$DATA" --steps 2000 --eval-every 200 --threads 1 --ckpt-every 200 \
    --extra "--grad-noise-every 20" --out "$OUT"
python3 tools/study_table.py "$OUT" --ref fp32 --sites
