#!/usr/bin/env bash
# The product-error part of the accumulator study under the real engines (kernels/engine.h):
# 256 dot products (M = N = 16) of K exact fp8 products each, every engine and the old
# sequential models, each against the exact (MPFR) value of the same quantized operands.
# Writes OUT/engines.jsonl (one matmul-check JSON per line, with the spec and K), then the
# table: python3 docs/results/acc-study/summarize_engines.py OUT/engines.jsonl
# Usage: docs/results/acc-study/engines.sh [OUT]   (FPLAB=build/fplab; a few minutes of one core)
set -euo pipefail
OUT=${1:-runs/acc-engines}
FPLAB=${FPLAB:-build/fplab}
mkdir -p "$OUT"
: > "$OUT/engines.jsonl.tmp"
for dist in uniform normal lognormal outliers; do
  for K in 256 1024 4096 16384; do
    for spec in fp32 m13:rtz m13:rtz:promote=128 m14:rtz hopper:wgmma hopper:wgmma:promote=128 \
                ada:mma blackwell:tcgen05 rtx-blackwell:mma cdna3:mfma; do
      a=e4m3
      [ "$spec" = cdna3:mfma ] && a=e4m3fnuz   # CDNA3's fp8 is the fnuz encoding
      echo "engines: $dist K=$K $spec" >&2
      "$FPLAB" matmul-check --m 16 --n 16 --k "$K" --a "$a" --b "$a" --scale tensor --acc "$spec" \
        --dist "$dist" --format json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d))' \
        >> "$OUT/engines.jsonl.tmp" || true
    done
  done
done
mv "$OUT/engines.jsonl.tmp" "$OUT/engines.jsonl"
