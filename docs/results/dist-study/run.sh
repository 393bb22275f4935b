#!/usr/bin/env bash
# The data-parallel study of docs/results/dist-study: 4 ranks (oversubscribed, 1 thread each) on
# Tiny Shakespeare, 3 seeds, 14 configurations. Each run writes OUT/runs/CONFIG/seed-S/ (the
# layout of `fplab ablate`, so `fplab report OUT` tabulates them with "fp32" as the reference).
# A run whose log already ends is skipped, so the script resumes after an interruption.
#   usage: docs/results/dist-study/run.sh [OUT [FPLAB]]   (defaults: runs/dist-study build/fplab)
set -euo pipefail
out=${1:-runs/dist-study}
fplab=${2:-build/fplab}
steps=${STEPS:-1000}
seeds=${SEEDS:-"1 2 3"}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# name | options. Global batch 12 (4 ranks x 3 sequences), nanoGPT's CPU recipe otherwise.
configs=(
  "fp32|"
  "bf16|--comm bf16"
  "e4m3|--comm e4m3:tensor"
  "e4m3-ef|--comm e4m3:tensor --error-feedback 1"
  "mxfp4|--comm mxfp4"
  "mxfp4-ef|--comm mxfp4 --error-feedback 1"
  "nvfp4|--comm nvfp4"
  "nvfp4-ef|--comm nvfp4 --error-feedback 1"
  "local-sgd-1|--local-sgd 1"
  "local-sgd-4|--local-sgd 4"
  "local-sgd-8|--local-sgd 8"
  "local-sgd-32|--local-sgd 32"
  "diloco-32|--local-sgd 32 --outer-opt nesterov --outer-lr 0.7 --outer-momentum 0.9"
  "diloco-32-nvfp4|--local-sgd 32 --outer-opt nesterov --outer-lr 0.7 --outer-momentum 0.9 --comm nvfp4"
)
mkdir -p "$out"
for seed in $seeds; do
  for c in "${configs[@]}"; do
    name=${c%%|*} opts=${c#*|}
    dir=$out/runs/$name/seed-$seed
    if [[ -f $dir/log.jsonl ]] && grep -q '"event":"end","how":"done"' "$dir/log.jsonl"; then continue; fi
    mkdir -p "$dir"
    echo "$(date +%T) $name seed $seed"
    # shellcheck disable=SC2086
    mpirun -np 4 "$fplab" train --data data/tinyshakespeare.txt --model shakespeare --batch 3 \
      --steps "$steps" --eval-every 100 --eval-batches 80 --seed "$seed" --threads 1 --progress 0 \
      --ckpt-dir "$dir" --overwrite 1 $opts > "$dir/stdout.txt" 2>&1 || echo "  failed: see $dir/stdout.txt"
  done
done
