#!/usr/bin/env bash
# gpu_run.sh: everything the CUDA backend needs checked on a machine with a GPU, in one call
# (the device tool's machines: nvcc and PyTorch, no MPFR or Criterion; carry .gpudeps from
# tools/gpu_deps.sh). Unpacks .gpudeps into /tmp/gpudeps and points the compiler at it,
# builds, runs `make test-gpu`, `make bench-gpu` and matmul-check on each path, and writes the
# logs to $OUT (or gpu-out/). Exit status: the build's, else test-gpu's.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
if [ -d .gpudeps ]; then
    mkdir -p /tmp/gpudeps
    for f in .gpudeps/*.deb; do dpkg -x "$f" /tmp/gpudeps; done
    d=/tmp/gpudeps/usr
    export CPATH=$d/include:$d/include/x86_64-linux-gnu${CPATH:+:$CPATH}
    export LIBRARY_PATH=$d/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$d/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
{ nvidia-smi; nvcc --version; } > "$out/device.txt" 2>&1
if ! make -j"$(nproc)" all build/tests/test_mm_cuda build/bench/bench_mm_cuda > "$out/build.log" 2>&1; then
    tail -40 "$out/build.log"
    exit 1
fi
grep -m1 "nvcc=" "$out/build.log"
make test-gpu > "$out/test-gpu.log" 2>&1
st=$?
grep -E "Synthesis|FAIL" "$out/test-gpu.log" | tail -20
make bench-gpu 2>&1 | tee "$out/bench-gpu.log"
for k in tc simt cublaslt; do
    for spec in "e4m3 tensor" "e4m3 mx" "e2m1 nvfp4" "bf16 none"; do
        set -- $spec
        echo "== FPLAB_CUDA_KERNEL=$k $1 $2"
        FPLAB_CUDA_KERNEL=$k build/fplab matmul-check --m 64 --n 64 --k 2048 --a "$1" --b "$1" --scale "$2" \
            --backend cuda 2>&1 | tail -2
    done
done > "$out/matmul-check.log"
grep -E "^==|PASS|FAIL|no GPU|does not apply" "$out/matmul-check.log"
exit $st
