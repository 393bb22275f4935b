#!/bin/sh
# When FP4 training stalls (docs/results/fp4-stall/README.md, issue 38 item 5): the gradient's
# norm against the noise that the backward's FP4 casts add to it, logged every 20 steps
# (train --grad-noise-every), under nvfp4 and mxfp4 beside fp32. Run from the repository root
# after `make`; about 70 minutes of one core for the 9 runs (ablate writes report.md and the
# plots, grad_snr.png among them, into OUT/main), about 75 more for the six switch runs.
set -eu
D=docs/results/fp4-stall
OUT=${OUT:-runs/fp4-stall}
DATA=${DATA:-data/tinyshakespeare.txt}
build/fplab ablate --presets fp32,nvfp4,mxfp4 --seeds 3 --model shakespeare --data "$DATA" --steps 2000 \
    --eval-every 200 --threads 1 --extra "--grad-noise-every 20" --out "$OUT/main"
python3 $D/summarize.py "$OUT/main"
# The fixed-schedule switch, seeds 1 to 3: FP4 for 1500 steps (the ablation's run, bit for bit),
# then bf16-amp for the last 500.
for s in 1 2 3; do
    for p in nvfp4 mxfp4; do
        S="$OUT/switch/$p-to-bf16-amp-at-1500-seed-$s"
        build/fplab train --model shakespeare --data "$DATA" --steps 2000 --policy $p --seed $s --eval-every 200 \
            --threads 1 --reproducible 1 --grad-noise-every 20 --ckpt-dir "$S" --stop-at 1500 --progress 0
        build/fplab train --resume "$S/ckpt.bin" --switch-policy bf16-amp --progress 0
    done
done
