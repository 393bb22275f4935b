#!/usr/bin/env bash
# check_results.sh: re-runs a short prefix of each study (seed 1 of every policy, the study's own
# model and options, --reproducible 1 --threads 1) and compares each log with the one committed
# under docs/results/STUDY/check/, bit for bit, so that a numerics change that moves a published
# number shows the day it lands. The comparison leaves out the timings (tokens_per_s, elapsed_s)
# the start event, which names the commit and the machine of the committed run, and the mm_paths
# event (which kernels ran the products: a property of the build, not of the numbers); with
# --reproducible 1 every float32 matmul is summed in one fixed order, so the logs are the same on
# every x86-64 CPU (docs/benchmarks.md, "Reproducible mode").
# Usage: tools/check_results.sh [--update] [STUDY...]
#   --update   rewrite the committed logs (after an intended numerics change; say why in the commit)
#   FPLAB=build/fplab DATA=data/tinyshakespeare.txt
set -euo pipefail
FPLAB=${FPLAB:-build/fplab}
DATA=${DATA:-data/tinyshakespeare.txt}
update=0
if [ "${1:-}" = --update ]; then update=1; shift; fi
want=" $* "
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
strip_log() { sed -E 's/"tokens_per_s":[^,]*,"elapsed_s":[^,]*,//' "$1" | grep -v -e '"event":"start"' -e '"event":"mm_paths"'; }
pass=0 fail=0

# check STUDY STEPS "TRAIN OPTIONS" POLICY...: one run of STEPS steps per policy, validation at the
# last step on 4 batches (the studies use 20; 4 keep the check short and still test evaluation).
check() {
    local study=$1 steps=$2 opts=$3
    shift 3
    [ "$want" = "  " ] || [[ $want == *" $study "* ]] || return 0
    local dir=docs/results/$study/check
    mkdir -p "$dir"
    for p in "$@"; do
        local name log ref
        name=$(basename "$p" .policy)
        log=$T/$study-$name.jsonl ref=$dir/$name.jsonl
        # shellcheck disable=SC2086  # opts is a list of options
        if ! "$FPLAB" train --data "$DATA" --policy "$p" --seed 1 --steps "$steps" --eval-every "$steps" \
            --eval-batches 4 --threads 1 --reproducible 1 --ckpt-dir '' --log "$log" --progress 0 $opts \
            >"$T/out" 2>&1; then
            echo "FAIL $study/$name: train failed"; tail -3 "$T/out"; fail=$((fail + 1)); continue
        fi
        if [ $update = 1 ]; then
            cp "$log" "$ref.tmp" && mv "$ref.tmp" "$ref"
            echo "wrote $ref"
        elif [ ! -f "$ref" ]; then
            echo "FAIL $study/$name: no committed log $ref (make check-results UPDATE=1 writes it)"; fail=$((fail + 1))
        elif ! diff <(strip_log "$ref") <(strip_log "$log") >"$T/diff"; then
            echo "FAIL $study/$name: differs from $ref (first lines: committed <, now >)"; head -4 "$T/diff"
            fail=$((fail + 1))
        else
            echo "ok   $study/$name ($steps steps)"; pass=$((pass + 1))
        fi
    done
}

# fp4-stall logs the gradient's noise every 20 steps: the prefix measures it twice.
check fp4-stall 20 "--model shakespeare --grad-noise-every 10" fp32 nvfp4 mxfp4
A=docs/results/acc-study
check acc-study 10 "--model shakespeare --hidden-dim 2048 --batch 16" fp32 fp8-current \
    $A/fp8-acc14-rne.policy $A/fp8-acc14-rtz.policy $A/fp8-acc14-rtz-p128.policy $A/fp8-acc11-rtz.policy \
    $A/fp8-acc11-rtz-p128.policy $A/fp8-acc8-rtz.policy $A/fp8-acc8-rtz-p128.policy
# The engine kernel runs about 6x fp8-current's time per step: a shorter prefix.
check acc-study 3 "--model shakespeare --hidden-dim 2048 --batch 16" $A/fp8-hopper-wgmma.policy \
    $A/fp8-hopper-wgmma-p128.policy
check shakespeare-precision 10 "--model shakespeare" fp32 bf16-amp fp16-amp fp16-amp-noscale fp16-static-1024 \
    pure-bf16 pure-bf16-sr pure-bf16-kahan fp8-delayed fp8-current fp8-block mxfp8 mxfp6 mxfp4 nvfp4
N=docs/results/nvfp4-recipe
check nvfp4-recipe 20 "--model shakespeare --grad-noise-every 10" bf16-amp $N/nvfp4-no-hadamard.policy \
    $N/nvfp4-1d-weights.policy $N/nvfp4-rne-grads.policy $N/nvfp4-fp4-head.policy $N/nvfp4-4o6-w.policy \
    $N/nvfp4-4o6-a.policy $N/nvfp4-4o6-wa.policy $N/nvfp4-plain.policy $N/nvfp4-plain-4o6-wa.policy
M=docs/results/mx-scale-rounding
check mx-scale-rounding 20 "--model shakespeare --grad-noise-every 10" mxfp8 $M/mxfp8-up.policy $M/mxfp4-up.policy
V=docs/results/vendor-arith
check vendor-arith 3 "--model shakespeare" $V/fp8-current-hopper.policy $V/fp8-current-hopper-p128.policy \
    $V/fp8-current-blackwell.policy $V/fp8-current-blackwell-p128.policy $V/fp8-current-cdna3.policy \
    $V/fp8-current-cdna3-p128.policy $V/fp8-delayed-hopper.policy $V/fp8-delayed-hopper-p128.policy \
    $V/fp8-delayed-blackwell.policy $V/fp8-delayed-blackwell-p128.policy $V/fp8-delayed-cdna3.policy \
    $V/fp8-delayed-cdna3-p128.policy

echo "check-results: $pass same, $fail failed"
[ $fail = 0 ]
