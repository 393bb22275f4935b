#!/bin/sh
# One fp8 training under three vendors' matrix arithmetic (docs/results/vendor-arith/README.md;
# issue 38 item 1). Run from the repository root after `make`. 15 policies x 3 seeds of 1000
# steps, one thread each; the engine policies run at about a quarter of fp8-current's speed
# (docs/benchmarks.md), so the grid is about 15 hours of one core: spread it with --jobs, or
# over machines with --shard i/n (each shard resumes where it stopped).
set -eu
D=docs/results/vendor-arith
OUT=${OUT:-runs/vendor-arith}
DATA=${DATA:-data/tinyshakespeare.txt}
P=fp32,fp8-current,fp8-delayed
for s in current delayed; do
    for e in hopper blackwell cdna3; do
        P=$P,$D/fp8-$s-$e.policy,$D/fp8-$s-$e-p128.policy
    done
done
build/fplab ablate --presets "$P" --seeds 3 --model shakespeare --data "$DATA" --steps 1000 \
    --eval-every 100 --threads 1 --ckpt-every 100 "$@" --out "$OUT"
python3 tools/study_table.py "$OUT" --ref fp8-current --vs fp32 --sites
