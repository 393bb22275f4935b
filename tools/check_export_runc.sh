#!/usr/bin/env bash
# check_export_runc.sh: the llama2.c export checked with the peer itself. Trains a small model
# (or takes a checkpoint), exports it with `fplab export`, and compares llama2.c run.c's greedy
# output over the whole context (-t 0 -n 0) with `fplab sample --temperature 0` for the same
# prompts, byte for byte. Prints each comparison and the diff; exits 1 on any mismatch.
# run.c is not part of fplab: build it from a karpathy/llama2.c checkout (gcc -O3 -o run run.c -lm).
#
# usage: tools/check_export_runc.sh RUN FPLAB [--ckpt CKPT | --data TEXT] [--steps N]
#            [--train ARGS] [--prompt P]... [--workdir DIR] [--fixture DIR]
#   RUN            the run.c binary
#   FPLAB          the fplab binary (e.g. build/fplab)
#   --ckpt CKPT    a checkpoint to export (default: train one)
#   --data TEXT    the text to train on [/usr/share/games/fortunes/cookie]
#   --steps N      training steps [600]
#   --train ARGS   the model options of the training [--model tiny --seq-len 64]
#   --prompt P     a prompt to compare (repeatable; default: none, then "The")
#   --workdir DIR  keep the files there (default: a temporary directory, removed)
#   --fixture DIR  write tests/fixtures' runc_tiny_ckpt.bin (the checkpoint without its optimizer
#                  state), runc_tiny_noprompt.txt and runc_tiny_prompt.txt (prompt "ROMEO:")
#                  into DIR, from run.c's output; the prompts are then "" and "ROMEO:"
# The model trained by default is fplab's `tiny` config with seq_len 64 (about 10 s on one core).
# tests/fixtures/runc_tiny_* were written with
#   --data tinyshakespeare.txt --steps 1500 --train "--model tiny --dim 32 --hidden-dim 64
#   --seq-len 64 --lr 3e-3" --fixture tests/fixtures
# fplab sample runs with --threads 1: the last bits of its logits depend on the thread count.
# examples:
#   tools/check_export_runc.sh /tmp/llama2.c/run build/fplab
#   tools/check_export_runc.sh /tmp/llama2.c/run build/fplab --ckpt runs/shakespeare/ckpt.bin \
#       --prompt "" --prompt "ROMEO:"
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
RUN=$1 FPLAB=$2
shift 2
CKPT="" DATA=/usr/share/games/fortunes/cookie STEPS=600 TRAIN="--model tiny --seq-len 64" WORK="" FIXTURE="" PROMPTS=() HAVE_PROMPTS=0
while [ $# -gt 0 ]; do
    case "$1" in
    --ckpt) CKPT=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --train) TRAIN=$2; shift 2 ;;
    --prompt) PROMPTS+=("$2"); HAVE_PROMPTS=1; shift 2 ;;
    --workdir) WORK=$2; shift 2 ;;
    --fixture) FIXTURE=$2; shift 2 ;;
    -h | --help) usage ;;
    *) echo "check_export_runc: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -x "$RUN" ] || { echo "check_export_runc: '$RUN' is not an executable run.c binary" >&2; exit 2; }
[ -x "$FPLAB" ] || { echo "check_export_runc: '$FPLAB' is not an executable fplab" >&2; exit 2; }
if [ -n "$FIXTURE" ]; then PROMPTS=("" "ROMEO:"); HAVE_PROMPTS=1; fi
[ $HAVE_PROMPTS = 1 ] || PROMPTS=("" "The")

if [ -z "$WORK" ]; then
    WORK=$(mktemp -d /tmp/check_export_runc.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"

if [ -z "$CKPT" ]; then
    echo "== training: $FPLAB train --data $DATA $TRAIN --steps $STEPS"
    # shellcheck disable=SC2086  # TRAIN is a list of options
    "$FPLAB" train --data "$DATA" $TRAIN --steps "$STEPS" --eval-every 0 \
        --ckpt-dir "$WORK/run" --progress 0 --threads 1 2>&1 | tail -n 1
    CKPT=$WORK/run/ckpt.bin
fi

if [ -n "$FIXTURE" ]; then
    # The fixture keeps only what sampling and export read (config, params, vocab): a checkpoint
    # without optimizer state is what checkpoint.h calls export-only.
    mkdir -p "$FIXTURE"
    python3 - "$CKPT" "$FIXTURE/runc_tiny_ckpt.bin" <<'EOF'
import struct, sys
src, dst = sys.argv[1], sys.argv[2]
b = open(src, 'rb').read()
magic, version, n, _ = struct.unpack('<4I', b[:16])
assert magic == 0x4b43504c and version == 1, 'not an fplab checkpoint'
keep, o = [], 16
for _ in range(n):
    tag = b[o:o + 8]
    size, = struct.unpack('<Q', b[o + 8:o + 16])
    if tag.rstrip(b'\0') in (b'config', b'params', b'vocab'):
        keep.append(b[o:o + 24 + size])
    o += 24 + size
assert len(keep) == 3, 'config, params or vocab missing'
open(dst, 'wb').write(struct.pack('<4I', magic, version, len(keep), 0) + b''.join(keep))
EOF
    CKPT=$FIXTURE/runc_tiny_ckpt.bin
    echo "== wrote $CKPT ($(wc -c <"$CKPT") bytes)"
fi

echo "== exporting: $FPLAB export --ckpt $CKPT"
"$FPLAB" export --ckpt "$CKPT" --llama2c "$WORK/model.bin" --tokenizer "$WORK/tok.bin" 2>/dev/null

fail=0
for i in "${!PROMPTS[@]}"; do
    P=${PROMPTS[$i]}
    # fplab sample says the context and how many tokens it feeds (start token + prompt); run.c
    # runs seq_len positions, so it generates seq_len - fed + 1 tokens.
    info=$("$FPLAB" sample --ckpt "$CKPT" --prompt "$P" --tokens 0 --threads 1 2>&1 >/dev/null)
    T=$(sed -n 's/.*seq_len \([0-9]*\);.*/\1/p' <<<"$info")
    FED=$(sed -n 's/.*; prompt \([0-9]*\) tokens.*/\1/p' <<<"$info")
    if [ -z "$T" ] || [ -z "$FED" ]; then
        echo "check_export_runc: cannot read fplab sample's line: $info" >&2
        exit 1
    fi
    N=$((T - FED + 1))
    args=("$WORK/model.bin" -z "$WORK/tok.bin" -t 0 -n 0)
    [ -z "$P" ] || args+=(-i "$P")
    if ! "$RUN" "${args[@]}" >"$WORK/runc_$i.txt" 2>"$WORK/runc_$i.err"; then
        echo "FAILED: run.c on prompt '$P': $(tail -n 3 "$WORK/runc_$i.err")"
        fail=1
        continue
    fi
    "$FPLAB" sample --ckpt "$CKPT" --prompt "$P" --tokens "$N" --temperature 0 --threads 1 \
        >"$WORK/fplab_$i.txt" 2>/dev/null
    what="prompt '$P' (seq_len $T, $FED tokens fed, $N generated; run.c $(wc -c <"$WORK/runc_$i.txt") bytes, fplab $(wc -c <"$WORK/fplab_$i.txt") bytes)"
    if cmp -s "$WORK/runc_$i.txt" "$WORK/fplab_$i.txt"; then
        echo "identical: $what"
        sed 's/^/  | /' "$WORK/runc_$i.txt"
    else
        echo "DIFFERENT: $what"
        diff --label run.c --label "fplab sample" -u "$WORK/runc_$i.txt" "$WORK/fplab_$i.txt" || true
        fail=1
    fi
done
if [ -n "$FIXTURE" ] && [ $fail = 0 ]; then
    cp "$WORK/runc_0.txt" "$FIXTURE/runc_tiny_noprompt.txt"
    cp "$WORK/runc_1.txt" "$FIXTURE/runc_tiny_prompt.txt"
    echo "== wrote $FIXTURE/runc_tiny_noprompt.txt and runc_tiny_prompt.txt (run.c's output)"
fi
exit $fail
