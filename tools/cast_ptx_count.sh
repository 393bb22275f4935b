#!/bin/sh
# cast_ptx_count.sh: the PTX instructions of one element rounded by the device casts
# (kernels/cuda/cast_cuda_kernels.cuh), by the float64 method (cc_round_elem) and by the float32
# method (cc_round_elem32), under one mode: a static count, for a machine without a GPU (the casts
# are bound by arithmetic on the device, docs/benchmarks.md). Each kernel loads one float, rounds
# it with its flags and stores the value and the flags' sum; the count is of its PTX instructions
# (directives and labels left out), and of those on 64-bit operands (.u64 .s64 .b64 .f64), which
# a GPU runs as several 32-bit instructions or at a lower rate.
# Usage: tools/cast_ptx_count.sh [MODE ...]   (default: FMT_RNE FMT_SR; the float32 method for a
#        format of fmt__k32_simple, every element format of the presets: the lanes' branches for
#        the other formats are skipped at run time).
#        Needs nvcc (NVCC or /usr/local/cuda/bin/nvcc) and python3.
set -eu
NVCC=${NVCC:-$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "cast_ptx_count.sh: nvcc not found (set NVCC)" >&2; exit 2; }
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/k.cu" <<'EOF'
#include "kernels/cuda/cast_cuda_kernels.cuh"
__global__ void f64_method(const fmt__kparams k, const float *in, float *out, unsigned *cnt) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    fmt__flags fl;
    out[i] = cc_round_elem(k, MODE, in[i], i, &fl);
    cnt[i] = fl.overflow + fl.underflow + fl.subnormal + fl.nan_in + fl.invalid;
}
__global__ void f32_method(const fmt__kparams k, const fmt__k32 q, const float *in, float *out, unsigned *cnt) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    fmt__flags fl;
    fmt__k32 s = q;  // a format for which fmt__k32_simple holds, known to the compiler: the path
    s.signed_fmt = true, s.m0 = s.flush = s.clamp_min = false;  // every preset's element takes
    out[i] = cc_round_elem32(k, s, MODE, in[i], i, &fl);
    cnt[i] = fl.overflow + fl.underflow + fl.subnormal + fl.nan_in + fl.invalid;
}
EOF
[ $# -gt 0 ] || set -- FMT_RNE FMT_SR
for mode in "$@"; do
    "$NVCC" -O3 -std=c++17 -I. -arch=sm_90 -fmad=false -DMODE="$mode" -ptx "$dir/k.cu" -o "$dir/k.ptx"
    python3 - "$dir/k.ptx" "$mode" <<'EOF'
import re, sys
ptx, mode = open(sys.argv[1]).read(), sys.argv[2]
for name in ("f64_method", "f32_method"):
    body = re.search(r"\.entry _Z\d+" + name + r".*?\n\{(.*?)\n\}", ptx, re.S).group(1)
    ins = [l.strip() for l in body.splitlines() if l.strip() and not l.strip().startswith((".", "//", "$", "{", "}"))]
    wide = [l for l in ins if re.search(r"\.(u64|s64|b64|f64)\b", l)]
    print(f"{mode} {name}: {len(ins)} PTX instructions, {len(wide)} on 64-bit operands")
EOF
done
