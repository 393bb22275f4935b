#!/usr/bin/env bash
# gpu_run.sh: everything the CUDA backend needs checked on a machine with a GPU, in one call of
# under 8 minutes on a fresh machine holding only the repository (the device tool's machines:
# nvcc and a GPU, no MPFR or Criterion unless .gpudeps from tools/gpu_deps.sh is carried).
# Stages, each with its own timeout and its status recorded (no pipe hides one):
#   1. what is there: GPU, nvcc, the headers the build needs (stops here, saying what is missing);
#   2. the build; 3. make test-gpu (mm_cuda's suite and the casts', test_cast_cuda: element
#   rounding and block quantization on device memory against the CPU library, bit for bit; and
#   test_mm_dev_cuda: the emulated-accumulator and engine GEMM on device pointers against mm_cpu,
#   bit for bit; test_cast_plan_cuda: every preset's casts as autocast's plans on the device
#   against ac_cast, values, telemetry and amax histories);
#   4. the torch suites: tests/python/test_torch_cuda.py (fplab.torch_cuda on CUDA tensors against
#   the CPU: casts, quantize, matmul_cuda and torch.ops.fplab.scaled_mm's "cuda" kernel) and the
#   fplab.torch suites, with the machine's own PyTorch (the extension built in place; skipped, and
#   said, where that python has no torch or pytest), then tools/bench_torch_cuda.py (the casts'
#   bandwidth against a device copy, the device GEMMs against cuBLAS); 5. matmul-check of each
#   CUDA path against MPFR, and which engine model (fplab engines) reproduces cuBLASLt's and the
#   own kernels' results bit for bit (matmul-check's candidate table), and which reproduces
#   torch._scaled_mm's fp8 (tools/gpu_fp8_fixture.py); 6. make bench-gpu (time left permitting).
# Logs go to $OUT (or gpu-out/). Exit status: 0 when every stage passed, else 1.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
fail=0
stage() {  # stage NAME SECONDS CMD...: runs CMD under a timeout into $out/NAME.log, records its status
    local name=$1 secs=$2
    shift 2
    timeout "$secs" "$@" > "$out/$name.log" 2>&1
    local st=$?
    [ $st -eq 124 ] && echo "$name: TIMEOUT after ${secs}s" || echo "$name: exit $st"
    [ $st -ne 0 ] && fail=1
    return $st
}

# 1. what is there
command -v nvidia-smi > /dev/null && nvidia-smi -L || { echo "gpu_run: no GPU (nvidia-smi missing or failing)"; exit 1; }
command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu_run: no CUDA toolkit (nvcc)"; exit 1; }
if [ -d .gpudeps ]; then
    mkdir -p /tmp/gpudeps
    for f in .gpudeps/*.deb; do dpkg -x "$f" /tmp/gpudeps || { echo "gpu_run: cannot unpack $f"; exit 1; }; done
    d=/tmp/gpudeps/usr
    export CPATH=$d/include:$d/include/x86_64-linux-gnu${CPATH:+:$CPATH}
    export LIBRARY_PATH=$d/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$d/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
for h in mpfr.h criterion/criterion.h; do
    printf '#include <%s>\nint main(void){return 0;}\n' "$h" | cc -x c - -o /dev/null 2> /dev/null ||
        { echo "gpu_run: $h not found: carry .gpudeps (tools/gpu_deps.sh) or install the -dev package"; exit 1; }
done
{ nvidia-smi; nvcc --version; } > "$out/device.txt" 2>&1

# 2. build (16 cores: about a minute)
stage build 240 make -j"$(nproc)" all build/libfplab.so build/tests/test_mm_cuda build/tests/test_cast_cuda build/tests/test_mm_dev_cuda \
    build/tests/test_cast_plan_cuda build/bench/bench_mm_cuda ||
    { tail -40 "$out/build.log"; exit 1; }
# 3. the GPU suites
# (test_cast_plan_cuda: about 2,600 device casts, each with its own allocations and a synchronisation)
stage test-gpu 180 make test-gpu
grep -E "Synthesis|FAIL" "$out/test-gpu.log" | tail -20
# 4. the torch suites on the machine's PyTorch (CUDA build), the extension built in place
if python3 -c 'import torch, pytest, numpy; assert torch.cuda.is_available()' > "$out/torch-env.log" 2>&1; then
    if stage torch-ext 120 bash -c 'cd python && FPLAB_BUILD_DIR="$PWD/../build" FPLAB_MAKE_ARGS= python3 setup.py build_ext --inplace'; then
        stage test-torch-cuda 150 env PYTHONPATH="$PWD/python" FPLAB_LIB="$PWD/build/libfplab.so" \
            FPLAB_CLI="$PWD/build/fplab" python3 -m pytest -q -p no:cacheprovider tests/python/test_torch_cuda.py \
            tests/python/test_torch.py tests/python/test_torch_policy.py
        tail -5 "$out/test-torch-cuda.log"
        # fplab.torch_cuda's casts against a device copy, its GEMMs against cuBLAS bf16
        stage bench-torch-cuda 150 env PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/python" FPLAB_LIB="$PWD/build/libfplab.so" \
            python3 tools/bench_torch_cuda.py
        cat "$out/bench-torch-cuda.log"
    fi
else
    echo "torch: skipped (no torch with CUDA, pytest or numpy in python3: $out/torch-env.log)"
fi
# 5. every path against MPFR; the table says which engine reproduces the result
for k in cublaslt tc simt; do
    for spec in "e4m3 tensor 2048" "e4m3 mx 2048" "e2m1 nvfp4 2048" "bf16 none 2048" "fp16 none 1024"; do
        set -- $spec
        name="mmcheck-$k-$1-$2"
        # cuBLASLt's fp8 (fast accumulation off) is hopper:wgmma:promote=128 on an H200 (tests/fixtures/hw)
        also=; [ "$1" = e4m3 ] && also="--also hopper:wgmma:promote=128"
        FPLAB_CUDA_KERNEL=$k timeout 60 build/fplab matmul-check --m 64 --n 64 --k "$3" --a "$1" --b "$1" \
            --scale "$2" --backend cuda $also > "$out/$name.log" 2>&1
        st=$?
        # A forced path that does not take these operands says so (exit 2): not a failure.
        if [ $st -ne 0 ] && ! { [ $st -eq 2 ] && grep -qE "does not apply|does not support" "$out/$name.log"; }; then
            echo "$name: exit $st"; fail=1
        fi
        grep -E "PASS|FAIL|reproduce|does not apply" "$out/$name.log" | sed "s/^/$name: /"
    done
done
# 5b. torch._scaled_mm's fp8 (cuBLASLt) on this GPU: which engine model reproduces it, with fast
# accumulation and without (on an H200: hopper:wgmma and hopper:wgmma:promote=128; the files are
# what tests/fixtures/hw/ holds for that card: commit them for a new one, with its README)
if python3 -c 'import torch; assert torch.cuda.is_available()' > /dev/null 2>&1; then
    mkdir -p "$out/hw"
    if stage hw-fixture 60 python3 tools/gpu_fp8_fixture.py "$out/hw"; then
        for a in e4m3 e5m2; do
            for m in promoted fast; do
                build/fplab matmul-check --a "$a" --b e4m3 --a-values "$out/hw/a_$a.npy" --b-values "$out/hw/b_e4m3.npy" \
                    --result "$out/hw/c_${a}_e4m3_$m.npy" --also hopper:wgmma:promote=128 > "$out/hw-$a-$m.log" 2>&1
                grep -E " 1$|equals" "$out/hw-$a-$m.log" | sed "s/^/hw $a x e4m3 $m: /"
            done
        done
    fi
fi
# 6. speed, with what time is left
stage bench-gpu 150 make bench-gpu
exit $fail
