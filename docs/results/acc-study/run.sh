#!/bin/sh
# The accumulator study (docs/results/acc-study/README.md): the per-product error of short
# accumulators against K, then training runs with each accumulator emulated bit for bit in
# every matmul but the LM head's. Run from the repository root after `make`; about 2 h of one
# core for the 16 training runs (the emulated rne accumulator is the slow one: 4x rtz).
set -eu
D=docs/results/acc-study
OUT=${OUT:-runs/acc-study}
DATA=${DATA:-data/tinyshakespeare.txt}
mkdir -p "$OUT"

# 1. The error of one product: e4m3 operands (one tensor scale each), K products per result,
#    median and largest relative error of the 256 results against the exact (MPFR) product.
for k in 128 768 2048 4096; do
    for acc in m13 m13:rtz m13:rtz:promote=128 m10:rtz m10:rtz:promote=128; do
        printf '%s %s ' "$k" "$acc"
        build/fplab matmul-check --m 16 --n 16 --k "$k" --a e4m3 --b e4m3 --scale tensor --acc "$acc" \
            --dist uniform --format json |
            python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin)["results"] if x["backend"]=="cpu"][0]; print(r["median_rel_err"], r["max_rel_err"])'
    done
done >"$OUT/product-error.txt"

# 2. Training: the shakespeare Llama with a 2048-wide MLP (mlp.down sums K = 2048 products in
#    the forward, mlp.gate_up 2048 in dgrad) and 16 x 64 = 1024 tokens per step (every wgrad
#    sums K = 1024).
COMMON="--model shakespeare --data $DATA --steps 500 --eval-every 100 --threads 1"
build/fplab ablate --presets fp32,fp8-current,$D/fp8-acc14-rne.policy,$D/fp8-acc14-rtz.policy,$D/fp8-acc14-rtz-p128.policy \
    --seeds 2 $COMMON --extra "--hidden-dim 2048 --batch 16" --out "$OUT/main"
# 3. Shorter accumulators, to find where the effect starts (one seed at 11 bits, two at 8).
build/fplab ablate --presets $D/fp8-acc11-rtz.policy,$D/fp8-acc11-rtz-p128.policy \
    --seeds 1 $COMMON --extra "--hidden-dim 2048 --batch 16" --out "$OUT/sweep11"
build/fplab ablate --presets $D/fp8-acc8-rtz.policy,$D/fp8-acc8-rtz-p128.policy \
    --seeds 2 $COMMON --extra "--hidden-dim 2048 --batch 16" --out "$OUT/sweep8"
python3 $D/summarize.py "$OUT" $D/plots
