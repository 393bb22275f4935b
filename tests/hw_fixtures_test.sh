#!/usr/bin/env bash
# hw_fixtures_test.sh: outputs of real GPUs (tests/fixtures/hw/*/README.md says how each was
# made) against fplab's engine models: each is reproduced bit for bit by its model, and not by
# the model of the other accumulation mode (so a check that reproduces everything cannot pass).
# Usage: bash tests/hw_fixtures_test.sh build/fplab. Exits 1 on a failure.
set -u
F=${1:?usage: hw_fixtures_test.sh path/to/fplab}
[[ $F == */* ]] || F=./$F
D=$(dirname "$0")/fixtures/hw/h200_cublaslt_fp8
pass=0 fail=0

# check A MODE MODEL RC: matmul-check with --expect MODEL on the result of A x e4m3 in MODE exits RC.
check() {
    local a=$1 mode=$2 model=$3 want=$4
    local out
    out=$("$F" matmul-check --a "$a" --b e4m3 --a-values "$D/a_$a.npy" --b-values "$D/b_e4m3.npy" \
        --result "$D/c_${a}_e4m3_$mode.npy" --expect "$model" 2>&1)
    local rc=$?
    if [[ $rc == "$want" ]]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: h200 cuBLASLt $a x e4m3 ($mode) with --expect $model: exit $rc, expected $want"
        printf '%s\n' "$out" | tail -5
    fi
}
for a in e4m3 e5m2; do
    check "$a" promoted hopper:wgmma:promote=128 0
    check "$a" fast hopper:wgmma 0
    check "$a" promoted hopper:wgmma 1
    check "$a" fast hopper:wgmma:promote=128 1
done
echo "hw_fixtures_test: $pass passed, $fail failed"
[[ $fail == 0 ]]
