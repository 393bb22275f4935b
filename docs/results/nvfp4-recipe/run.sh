#!/bin/sh
# NVFP4 pretraining, component by component, and Four Over Six in training
# (docs/results/nvfp4-recipe/README.md; issue 38 items 2 and 3). Run from the repository root
# after `make`. 12 policies x 3 seeds of 2000 steps, one thread each: about 4 minutes a run on an
# idle core, 10 to 15 on a loaded one; ablate resumes an interrupted grid (--ckpt-every).
set -eu
D=docs/results/nvfp4-recipe
OUT=${OUT:-runs/nvfp4-recipe}
DATA=${DATA:-data/tinyshakespeare.txt}
P=fp32,bf16-amp,nvfp4
for v in no-hadamard 1d-weights rne-grads fp4-head 4o6-w 4o6-a 4o6-wa plain plain-4o6-wa; do
    P=$P,$D/nvfp4-$v.policy
done
build/fplab ablate --presets "$P" --seeds 3 --model shakespeare --data "$DATA" --steps 2000 \
    --eval-every 200 --threads 1 --ckpt-every 200 --extra "--grad-noise-every 20" --out "$OUT"
python3 tools/study_table.py "$OUT" --ref bf16-amp --vs nvfp4 --shares nvfp4
