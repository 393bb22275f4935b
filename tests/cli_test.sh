#!/usr/bin/env bash
# cli_test.sh: end-to-end checks of the fplab command: every subcommand's output on known
# cases, numbers as the shortest text that reads back, --help (defaults in brackets, examples
# that run as pasted), exit status 2 on bad input, and OUT.npy untouched when quantize fails.
# Usage: bash tests/cli_test.sh build/fplab. Prints "N passed, M failed" last; exits 1 on a failure.
# Needs only bash and coreutils; checks that need numpy run when python3 can import it.
set -u
F=${1:?usage: cli_test.sh path/to/fplab}
[[ $F == */* ]] || F=./$F
T=$(mktemp -d /tmp/fplab_cli_XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; [[ -n ${2:-} ]] && printf '  %s\n' "$2" | head -20; }

# expect_rc NAME CODE CMD...: CMD exits with CODE.
expect_rc() {
    local name=$1 code=$2; shift 2
    local out; out=$("$@" 2>&1); local rc=$?
    [[ $rc == "$code" ]] && ok || bad "$name: exit $rc, expected $code" "$out"
}
# expect_has NAME TEXT CMD...: CMD exits 0 and its stdout+stderr contain TEXT (fixed string).
expect_has() {
    local name=$1 text=$2; shift 2
    local out; out=$("$@" 2>&1); local rc=$?
    [[ $rc == 0 && $out == *"$text"* ]] && ok || bad "$name: exit $rc, output lacks '$text'" "$out"
}
# expect_err NAME TEXT CMD...: CMD exits 2 and says TEXT.
expect_err() {
    local name=$1 text=$2; shift 2
    local out; out=$("$@" 2>&1); local rc=$?
    [[ $rc == 2 && $out == *"$text"* ]] && ok || bad "$name: exit $rc (expected 2), output lacks '$text'" "$out"
}
# expect_eq NAME EXPECTED ACTUAL
expect_eq() { [[ $2 == "$3" ]] && ok || bad "$1: got '$3', expected '$2'"; }
# csv_field CSV_LINE N: the Nth comma-separated field.
csv_field() { cut -d, -f"$2" <<<"$1"; }

# --- help and dispatch
expect_has "top --help" "subcommands:" "$F" --help
expect_has "top -h" "quantize" "$F" -h
for c in finfo values cast quantize; do
    expect_has "$c --help" "usage: fplab $c" "$F" "$c" --help
    expect_has "$c -h" "usage: fplab $c" "$F" "$c" -h
done
# Every subcommand's --help ends with examples (some subcommands are still being written).
for c in finfo values cast quantize matmul-check train sample eval export policy ablate report; do
    expect_has "$c --help has examples" "examples:" "$F" "$c" --help
done
# Examples name the command one way, as pasted from the repository root: build/fplab, never a bare
# fplab (issue 24); train's --resume text points at the run-only marks where they are (above it).
for c in finfo values cast quantize matmul-check train sample eval export policy ablate report; do
    expect_eq "$c --help: examples say build/fplab" "" \
        "$("$F" "$c" --help | sed -n '/^examples:$/,$p' | grep -E '^ +(mpirun [^ ]+ [^ ]+ )?fplab ')"
done
h=$("$F" train --help)
expect_eq "train --help: run-only marks precede --resume's text" "yes" \
    "$(grep -q 'marked run-only above' <<<"$h" && [[ $(grep -n '(run-only)' <<<"$h" | tail -1 | cut -d: -f1) -lt \
       $(grep -n -- '--resume CKPT' <<<"$h" | tail -1 | cut -d: -f1) ]] && echo yes)"
# These show defaults one way: "options (default in brackets):", "[value]" after an option's
# text (no "(default ...)" in the text), and "examples:" is the last section.
for c in finfo values cast matmul-check ablate report; do
    h=$("$F" "$c" --help 2>&1)
    expect_has "$c --help: defaults in brackets" "options (default in brackets):" printf '%s' "$h"
    expect_eq "$c --help: no default written another way" "" \
        "$(grep -v '^options (default in brackets):$' <<<"$h" | grep -iE '\(default|default\)|default:')"
    expect_eq "$c --help: examples: is the last section" "" "$(sed -n '/^examples:$/,$p' <<<"$h" | tail -n +2 | grep -v '^  ')"
done
# The examples of the commands that only print, run as pasted from the repository root.
ROOT=$(cd "$(dirname "$0")/.." && pwd) FABS=$(cd "$(dirname "$F")" && pwd)/$(basename "$F")
for c in finfo values cast matmul-check; do
    n=0
    while IFS= read -r line; do
        cmd=${line#  build/fplab }; cmd=${cmd%%#*}
        n=$((n + 1))
        expect_rc "$c --help example: fplab $cmd" 0 bash -c "cd '$ROOT' && '$FABS' $cmd"
    done < <("$F" "$c" --help | sed -n '/^examples:$/,$p' | grep '^  build/fplab ')
    [[ $n -gt 0 ]] && ok || bad "$c --help: no example of the form '  build/fplab ...'"
done
# quantize and policy --help: defaults in brackets, examples last; their examples run as pasted
for c in quantize policy; do
    h=$("$F" "$c" --help 2>&1)
    expect_has "$c --help: defaults in brackets" "options (default in brackets):" printf '%s' "$h"
    expect_eq "$c --help: no default written another way" "" \
        "$(grep -v '^options (default in brackets):$' <<<"$h" | grep -iE '\(default|default\)|default:')"
    expect_eq "$c --help: examples: is the last section" "" "$(sed -n '/^examples:$/,$p' <<<"$h" | tail -n +2 | grep -v '^  ')"
    ex=$(sed -n '/^examples:$/,$p' <<<"$h" | tail -n +2 | grep -v -e '^  #' | sed "s|^  build/fplab |'$FABS' |; s|^  ||")
    expect_rc "$c --help: the examples run as pasted" 0 bash -ec "cd '$ROOT'; $ex"
done
# --version: the version, the commit and the build's features (issue 24)
v=$("$F" --version)
for k in "fplab $("$F" --version | head -1 | cut -d' ' -f2) (commit " "cuda: " "mpi: " "openmp: " "blas: " "compiled for: " \
         "rounding paths on this CPU: generic"; do
    [[ $v == *"$k"* ]] && ok || bad "--version lacks '$k'" "$v"
done
expect_err "no subcommand" "usage" "$F"
expect_err "unknown subcommand" "unknown subcommand 'frobnicate'" "$F" frobnicate
expect_err "unknown option" "unrecognized option" "$F" finfo --bogus

# --- finfo
expect_has "finfo e4m3 json max" '"max": 448,' "$F" finfo e4m3 --format json
expect_has "finfo e4m3 json nan list" '"nan_code_list": ["0x7f", "0xff"]' "$F" finfo e4m3 --format json
expect_has "finfo e5m2 json inf" '"has_inf": true' "$F" finfo e5m2 --format json
expect_has "finfo e2m1 json" '"smallest_subnormal": 0.5,' "$F" finfo fp4 --format json
expect_has "finfo bf16 exact max" '"max": 3.3895313892515355e+38' "$F" finfo bfloat16 --format json
expect_has "finfo json: shortest text that reads back" '"smallest_subnormal": 9.183549615799121e-41,' "$F" finfo bf16 --format json
expect_eq "finfo csv e4m3 row" "e4m3,8,4,3,7,448,-448,0.015625,0.001953125,0.125,1,253,false,2,table,0.0625,9,-6,0,17.807354922057606" "$("$F" finfo e4m3 --format csv | tail -1)"
# NumPy's epsneg, maxexp, minexp and precision (issue 22); exact numbers; 100 columns by default
expect_has "finfo fp16 json: epsneg maxexp minexp precision" '"epsneg": 0.00048828125, "maxexp": 16, "minexp": -14, "precision": 3' \
    "$F" finfo fp16 --format json
expect_has "finfo e2m1 epsneg (1 is the smallest normal)" '"epsneg": 0.5,' "$F" finfo e2m1 --format json
expect_eq "finfo table: exact powers of two" "e4m3 8 4 3 7 448 2^-6 2^-9 2^-3 17.81 no table" "$("$F" finfo e4m3 | tail -1 | tr -s ' ')"
expect_eq "finfo table fits 100 columns" "yes" "$("$F" finfo | awk 'length > 100 {w = 1} END {print w ? "no" : "yes"}')"
expect_has "finfo --format wide: every column, exact" "0.001953125" "$F" finfo e4m3 --format wide
expect_has "finfo --format md: exact" "| 1.7976931348623157e+308 |" "$F" finfo fp64 --format md
expect_has "finfo custom e5m7" '"finite_values": 7935' "$F" finfo e5m7 --format json
expect_eq "finfo alias == name" "$("$F" finfo e4m3 --format csv)" "$("$F" finfo float8_e4m3fn --format csv)"
out=$("$F" finfo --format csv)
expect_eq "finfo csv header" "name,bits,exponent_bits,mantissa_bits,bias,max,min,smallest_normal,smallest_subnormal,eps,resolution,finite_values,has_inf,nan_codes,kind,epsneg,maxexp,minexp,precision,dynamic_range" "$(head -1 <<<"$out")"
expect_eq "finfo csv fp16 row" "fp16,16,5,10,15,65504,-65504,6.103515625e-05,5.9604644775390625e-08,0.0009765625,0.001,63487,true,2046,table,0.00048828125,16,-14,3,39.99929538702341" "$(grep '^fp16,' <<<"$out")"
rows_csv=$(($(wc -l <<<"$out") - 1)) rows_table=$(($("$F" finfo | wc -l) - 1))
expect_eq "finfo table and csv list the same formats" "$rows_csv" "$rows_table"
out=$("$F" finfo e4m3 e2m1 --format md)
expect_eq "finfo md header" "| name | bits |" "$(head -1 <<<"$out" | cut -c1-15)"
expect_eq "finfo md rule" "| --- | ---: |" "$(sed -n 2p <<<"$out" | cut -c1-14)"
expect_eq "finfo md rows" 4 "$(wc -l <<<"$out")"
expect_err "finfo unknown format" "'nosuchfmt'" "$F" finfo nosuchfmt
# names of peers, ambiguity, did-you-mean, custom said, schemes (issue 22)
expect_has "finfo ml_dtypes float8_e4m3" '"max": 240,' "$F" finfo float8_e4m3 --format json
expect_has "finfo ml_dtypes float8_e3m4" '"max": 15.5,' "$F" finfo float8_e3m4 --format json
expect_has "finfo ml_dtypes float8_e4m3b11fnuz" '"max": 30,' "$F" finfo float8_e4m3b11fnuz --format json
expect_eq "finfo torch name == name" "$("$F" finfo e4m3 --format csv)" "$("$F" finfo torch.float8_e4m3fn --format csv)"
expect_err "finfo fp8 is ambiguous" "e4m3 (float8_e4m3fn, OCP E4M3) or e5m2" "$F" finfo fp8
expect_err "finfo did you mean" "did you mean 'float8_e4m3fn'" "$F" finfo float8_e4m3fm
expect_has "finfo custom said" "not a named format: a custom 9-bit format" "$F" finfo e4m4
expect_has "finfo custom kind" '"kind": "custom"' "$F" finfo e4m4 --format json
expect_has "finfo scheme" "mxfp4 is a scheme: e2m1 elements under the recipe mx" "$F" finfo mxfp4
expect_has "finfo --aliases" "float8_e4m3b11fnuz peer" "$F" finfo --aliases
expect_err "cast refuses a scheme" "a scheme (e2m1 elements under the recipe mx)" "$F" cast 1 --to mxfp4
expect_err "finfo bad --format" "expected table|csv|json|md" "$F" finfo --format xml

# --- values
out=$("$F" values e2m1 --format csv)
expect_eq "values e2m1: 16 codes" 16 "$(tail -n +2 <<<"$out" | wc -l)"
expect_eq "values e2m1 first" "0x0,0|00|0,0,zero" "$(sed -n 2p <<<"$out")"
expect_eq "values e2m1 subnormal" "0x1,0|00|1,0.5,subnormal" "$(sed -n 3p <<<"$out")"
expect_eq "values e2m1 last" "0xf,1|11|1,-6,normal" "$(tail -1 <<<"$out")"
expect_eq "values e2m1 table: header + 16" 17 "$("$F" values e2m1 | wc -l)"
out=$("$F" values e4m3 --format csv)
expect_eq "values e4m3: 256 codes" 256 "$(tail -n +2 <<<"$out" | wc -l)"
expect_eq "values e4m3 max" "0x7e,0|1111|110,448,normal" "$(grep '^0x7e,' <<<"$out")"
expect_eq "values e4m3 nan" "0x7f,0|1111|111,nan,nan" "$(grep '^0x7f,' <<<"$out")"
expect_eq "values e5m2 inf" "0x7c,0|11111|00,inf,inf" "$("$F" values e5m2 --format csv | grep '^0x7c,')"
expect_eq "values e8m0 (unsigned, no mantissa)" "0x7f,01111111,1,normal" "$("$F" values e8m0 --format csv | grep '^0x7f,')"
expect_has "values json" '{"code": "0xff", "bits": "1|1111|111", "value": "nan", "class": "nan"}' "$F" values e4m3 --format json
expect_err "values bf16 too wide" "expected 8 bits or fewer" "$F" values bf16
expect_err "values no format" "expected exactly one FORMAT" "$F" values
expect_err "values md not offered" "expected table|csv|json" "$F" values e2m1 --format md

# --- cast
cast_value() { local l; l=$("$F" cast "$@" --format csv | tail -1); csv_field "$l" 4; }
expect_eq "cast 464 -> e4m3" 448 "$(cast_value 464 --to e4m3)"
expect_eq "cast 500 -> e4m3 ieee" nan "$(cast_value 500 --to e4m3)"
expect_eq "cast 500 -> e4m3 saturate" 448 "$(cast_value 500 --to e4m3 --overflow saturate)"
expect_eq "cast 500 -> e4m3 rtz" 448 "$(cast_value 500 --to e4m3 --round rtz)"
expect_eq "cast 1e6 -> e5m2 ieee" inf "$(cast_value 1e6 --to e5m2)"
expect_eq "cast negative positional" -0.5 "$(cast_value -0.3 --to e2m1)"
expect_eq "cast hex float" 0.1875 "$(cast_value 0x1.8p-3 --to e5m2)"
expect_eq "cast -inf" -inf "$(cast_value -inf --to fp16)"
expect_eq "cast 0.1 -> bf16 rtz" 0.099609375 "$(cast_value 0.1 --to bf16 --round rtz)"
expect_eq "cast flush" 0 "$(cast_value 0.002 --to e4m3 --flush)"
expect_eq "cast 464 row" "464,0x7e,0|1111|110,448,16,0.034482758620689655,-0.5" "$("$F" cast 464 --to e4m3 --format csv | tail -1)"
expect_eq "cast 2.5 rne ties to even" "2.5,0x4,0|10|0,2,0.5,0.2,-0.5" "$("$F" cast 2.5 --to e2m1 --format csv | tail -1)"
# Numbers print as the shortest text that reads back to the same double (not %.17g's
# 0.10000000000000001), in every output format of cast.
expect_eq "cast 0.1 row: shortest round trip" "0.1,0x1d,0|0011|101,0.1015625,0.0015624999999999944,0.015624999999999944,0.1999999999999993" \
    "$("$F" cast 0.1 --to e4m3 --format csv | tail -1)"
expect_eq "cast 0.1 table: input as typed" "0.1 0x1d 0|0011|101 0.1015625" "$("$F" cast 0.1 --to e4m3 | sed -n 2p | awk '{print $1, $2, $3, $4}')"
expect_has "cast 0.1 json" '{"input": 0.1, "code": "0x1d"' "$F" cast 0.1 --to e4m3 --format json
expect_eq "cast 1e23 input (%.17g: 9.9999999999999992e+22)" 1e+23 "$(csv_field "$("$F" cast 1e23 --to fp32 --format csv | tail -1)" 1)"
expect_eq "cast 0.1+0.2 needs 17 digits" 0.30000000000000004 "$(csv_field "$("$F" cast 0.30000000000000004 --to fp64 --format csv | tail -1)" 1)"
expect_eq "cast 240 stays fixed" "240,240" "$("$F" cast 240 --to e4m3 --format csv | tail -1 | cut -d, -f1,4)"
expect_eq "cast -0" "-0,-0" "$("$F" cast -0 --to e4m3 --format csv | tail -1 | cut -d, -f1,4)"
expect_eq "cast 2.5 rna" 3 "$(cast_value 2.5 --to e2m1 --round rna)"
expect_eq "cast keeps argument order" "1 -0.5 6" "$("$F" cast 1 -0.3 7 --to e2m1 --format csv | tail -n +2 | cut -d, -f4 | tr '\n' ' ' | sed 's/ $//')"
sr1=$("$F" cast 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 --to e2m1 --round sr --seed 7 --format csv)
sr2=$("$F" cast 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 --to e2m1 --round sr --seed 7 --format csv)
expect_eq "cast sr reproducible" "$sr1" "$sr2"
expect_eq "cast sr gives neighbours only" "" "$(tail -n +2 <<<"$sr1" | cut -d, -f4 | grep -vx -e 0 -e 0.5)"
expect_has "cast sr-bits warning" "warning" "$F" cast 0.3 --to e4m3 --round sr --sr-bits 2
expect_has "cast json" '"value": 448' "$F" cast 464 --to e4m3 --format json
expect_err "cast trailing garbage" "'1.5x'" "$F" cast 1.5x --to e4m3
expect_err "cast empty value" "expected a real number" "$F" cast "" --to e4m3
expect_err "cast unknown format" "--to 'e4m9x'" "$F" cast 1 --to e4m9x
expect_err "cast unknown mode" "--round 'nearest'" "$F" cast 1 --to e4m3 --round nearest
expect_err "cast unknown overflow" "--overflow 'clip'" "$F" cast 1 --to e4m3 --overflow clip
expect_err "cast bad sr-bits" "--sr-bits '0'" "$F" cast 1 --to e4m3 --sr-bits 0
expect_err "cast bad seed" "--seed '-1'" "$F" cast 1 --to e4m3 --seed -1
expect_err "cast without --to" "--to FORMAT is required" "$F" cast 1
expect_err "cast without values" "expected at least one VALUE" "$F" cast --to e4m3
# IEEE P3109: an extended format's inf, its saturation modes and stochastic variants by name
expect_eq "cast binary8p3se satnone: 1e6 -> inf (code 0x7f)" "inf 0x7f" \
    "$("$F" cast 1e6 --to binary8p3se --overflow satnone --format csv | tail -1 | awk -F, '{print $4, $2}')"
expect_eq "cast binary8p3se satpropagate: 1e6 -> max, -inf stays" "49152 -inf" \
    "$("$F" cast 1e6 -inf --to binary8p3se --overflow satpropagate --format csv | tail -2 | cut -d, -f4 | tr '\n' ' ' | sed 's/ $//')"
expect_eq "cast binary8p4ue satfinite: -1 -> 0" "0" \
    "$("$F" cast -1 --to binary8p4ue --overflow satfinite --format csv | tail -1 | cut -d, -f4)"
expect_has "cast --sr-variant c" "1.375" "$F" cast 1.3 1.3 1.3 1.3 --to e4m3 --round sr --sr-variant c --seed 3
expect_err "cast bad sr-variant" "--sr-variant 'd'" "$F" cast 1 --to e4m3 --round sr --sr-variant d
# P3109 beyond float64: finfo, values and cast with exact hexadecimal floats; other commands refuse
expect_eq "finfo binary16p1se: max, tiny, min_sub as powers of two" "2^16382 2^-16383 2^-16383" \
    "$("$F" finfo binary16p1se 2>/dev/null | tail -1 | awk '{print $6, $7, $8}')"
expect_has "finfo binary16p2uf json: exact extremes as strings" '"max": "0x1p+16383"' "$F" finfo binary16p2uf --format json
expect_has "finfo binary16p1se says it is beyond float64" "reaches beyond float64" "$F" finfo binary16p1se
expect_eq "values binary16p2uf --codes: the WG table's values" "0 0x1p-16384 0x1p-16383 0x1.8p-16383" \
    "$("$F" values binary16p2uf --codes 0:3 --format csv | tail -4 | cut -d, -f3 | tr '\n' ' ' | sed 's/ $//')"
expect_eq "values bf16 --codes: a 16-bit range" "inf nan" \
    "$("$F" values bf16 --codes 0x7f80:0x7f81 --format csv | tail -2 | cut -d, -f3 | tr '\n' ' ' | sed 's/ $//')"
expect_err "values of a 16-bit format needs --codes" "or --codes A:B" "$F" values bf16
expect_err "values --codes beyond the format" "expected A <= B <= 0xff" "$F" values e4m3 --codes 0:0x100
expect_eq "cast to binary16p1sf: 3 -> 4 (tie to the even code), DBL_MAX -> 2^1024, inf saturates to 2^16383" "4 0x1p+1024 0x1p+16383" \
    "$("$F" cast 3 1.7976931348623157e308 inf --to binary16p1sf --overflow saturate --format csv 2>/dev/null | tail -3 | cut -d, -f4 | tr '\n' ' ' | sed 's/ $//')"
expect_err "matmul-check with a P3109 format beyond float64" "wider than float64" "$F" matmul-check --a binary16p1se --b e4m3
# ... and in a policy, where the canonical form keeps the variant
pol_p3109=$(mktemp)
printf 'name p3109\nsite *.in binary8p3se tensor sr:c satpropagate\n' >"$pol_p3109"
expect_has "policy with a P3109 format, sr:c and satpropagate" "site attn.qkv.in binary8p3se tensor sr:c satpropagate" \
    "$F" policy --check "$pol_p3109"
rm -f "$pol_p3109"

# --- quantize, with a .npy written by printf: '<f4', shape (4,), 1 464 500 0.1f
# npy_f4 FILE DICT HEXBYTES: a version 1.0 file whose data starts at byte 128 (header 118 bytes).
npy_f4() {
    local dict=$2 pad=$((128 - 10 - ${#2} - 1))
    { printf '\x93NUMPY\x01\x00\x76\x00'; printf '%s%*s\n' "$dict" "$pad" ""; printf "$3"; } >"$1"
}
d4="{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
npy_f4 "$T/in.npy" "$d4" '\x00\x00\x80\x3f\x00\x00\xe8\x43\x00\x00\xfa\x43\xcd\xcc\xcc\x3d'
words() { od -An -tx4 -j128 -v "$1" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }
expect_eq "printf npy is well formed" "3f800000 43e80000 43fa0000 3dcccccd" "$(words "$T/in.npy")"
expect_rc "quantize e4m3 saturate" 0 "$F" quantize "$T/in.npy" "$T/out.npy" --to e4m3 --overflow saturate
expect_eq "quantize e4m3 values" "3f800000 43e00000 43e00000 3dd00000" "$(words "$T/out.npy")"
expect_eq "quantize writes NumPy's header" "$(head -c 128 "$T/in.npy" | od -An -tx1)" "$(head -c 128 "$T/out.npy" | od -An -tx1)"
expect_rc "quantize fp32 is a copy" 0 "$F" quantize "$T/in.npy" "$T/same.npy" --to fp32
expect_eq "quantize fp32 is a copy (data)" "$(words "$T/in.npy")" "$(words "$T/same.npy")"
out=$("$F" quantize "$T/in.npy" "$T/out2.npy" --to e4m3 --stats 2>"$T/err")
expect_eq "quantize --stats n" "n: 4" "$(grep '^n:' <<<"$out")"
expect_eq "quantize --stats overflow" "overflow: 1" "$(grep '^overflow:' <<<"$out")"
expect_eq "quantize --stats amax" "amax: 500" "$(grep '^amax:' <<<"$out")"
expect_eq "quantize --stats scales" "scales_clipped: 0" "$(grep '^scales_clipped:' <<<"$out")"
expect_has "quantize prints its configuration" "to=e4m3 round=rne overflow=ieee scale=" cat "$T/err"
expect_eq "quantize ieee overflow -> nan" "3f800000 43e00000 7fc00000 3dd00000" "$(words "$T/out2.npy" | sed 's/ffc00000/7fc00000/')"
expect_rc "quantize --scale mx" 0 "$F" quantize "$T/in.npy" "$T/mx.npy" --to e4m3 --scale mx
expect_rc "quantize --scale tensor" 0 "$F" quantize "$T/in.npy" "$T/ts.npy" --to e2m1 --scale tensor --round sr --seed 1
# --- quantize: recipes with a scale saturate unless --overflow is given (OCP MX v1.0, 6.3); :nanblock
d32="{'descr': '<f4', 'fortran_order': False, 'shape': (32,), }"
ones31=$(for i in {1..31}; do printf '%s' '\x00\x00\x80\x3f'; done)
npy_f4 "$T/b500.npy" "$d32" '\x00\x00\xfa\x43'"$ones31"   # [500, 1 x 31]
expect_has "quantize mx saturates by default" "overflow=saturate scale=mx" "$F" quantize "$T/b500.npy" "$T/b.npy" --to e4m3 --scale mx
expect_eq "quantize mx: 500 -> 448 (not NaN)" "43e00000 3f800000" "$(words "$T/b.npy" | cut -d' ' -f1-2)"
expect_has "quantize none stays ieee" "overflow=ieee scale=none" "$F" quantize "$T/b500.npy" "$T/b.npy" --to e4m3
expect_rc "quantize mx --overflow ieee" 0 "$F" quantize "$T/b500.npy" "$T/b.npy" --to e4m3 --scale mx --overflow ieee
expect_eq "quantize mx --overflow ieee: 500 -> NaN" "7fc00000" "$(words "$T/b.npy" | cut -d' ' -f1 | sed 's/ffc00000/7fc00000/')"
npy_f4 "$T/binf.npy" "$d32" '\x00\x00\x80\x7f'"$ones31"   # [inf, 1 x 31]
out=$("$F" quantize "$T/binf.npy" "$T/b.npy" --to e5m2 --scale mx:nanblock --stats 2>/dev/null)
expect_eq "quantize mx:nanblock --stats" "scales_nan: 1" "$(grep '^scales_nan:' <<<"$out")"
expect_eq "quantize mx:nanblock: the whole block is NaN" "" "$(words "$T/b.npy" | tr ' ' '\n' | grep -v -e 7fc00000 -e ffc00000)"
expect_rc "quantize mx, inf block, ieee" 0 "$F" quantize "$T/binf.npy" "$T/b.npy" --to e5m2 --scale mx --overflow ieee
expect_eq "quantize mx: inf block keeps scale 1 (inf, 1)" "7f800000 3f800000" "$(words "$T/b.npy" | cut -d' ' -f1-2)"
expect_err "quantize :nanblock needs a scale format with NaN" "no NaN" "$F" quantize "$T/binf.npy" "$T/b.npy" --to e5m2 --scale block:32:e3m2:nanblock
cp "$T/in.npy" "$T/in_keep.npy"
expect_err "quantize onto its input" "same file as IN" "$F" quantize "$T/in.npy" "$T/in.npy" --to e4m3
ln -sf in.npy "$T/in_link.npy"
expect_err "quantize onto a link to its input" "same file as IN" "$F" quantize "$T/in.npy" "$T/in_link.npy" --to e4m3
expect_rc "quantize: the input survived" 0 cmp "$T/in.npy" "$T/in_keep.npy"
# --- policy --list: one line per preset, name and its description
expect_eq "policy --list: one line per preset" 22 "$("$F" policy --list | wc -l | tr -d " ")"
expect_eq "policy --list: every line has a description" "" "$("$F" policy --list | grep -vE '^[a-z0-9-]+  +[^ ].{20,}$')"
expect_has "policy --list: mxfp8's description" "OCP MXFP8: e4m3" "$F" policy --list

# Bad inputs: exit 2, OUT keeps its bytes, no temporary file left.
cp "$T/out.npy" "$T/keep.npy"
bad_npy() {  # bad_npy NAME TEXT FILE-MAKER-ARGS...: quantize from that file must fail cleanly
    local name=$1 text=$2
    expect_err "quantize $name" "$text" "$F" quantize "$T/bad.npy" "$T/out.npy" --to e4m3
    expect_rc "quantize $name: OUT untouched" 0 cmp "$T/out.npy" "$T/keep.npy"
}
printf 'PK\x03\x04 not numpy at all, a zip maybe' >"$T/bad.npy"; bad_npy "bad magic" "magic"
npy_f4 "$T/bad.npy" "$d4" '\x00\x00\x80\x3f'; bad_npy "truncated data" "shorter than its header says"
npy_f4 "$T/bad.npy" "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }" '\x00\x00\x00\x00'; bad_npy "int dtype" "'<i4'"
npy_f4 "$T/bad.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,4), }" ''; bad_npy "3-D" "3-D"
npy_f4 "$T/bad.npy" "{'descr': '<f4', 'fortran_order': True, 'shape': (2,2), }" ''; bad_npy "fortran order" "fortran_order"
{ printf '\x93NUMPY\x05\x00\x36\x00'; } >"$T/bad.npy"; bad_npy "version 5.0" "version 5.0"
expect_err "quantize missing input" "cannot open" "$F" quantize "$T/nope.npy" "$T/out.npy" --to e4m3
expect_err "quantize unknown recipe" "'blocky'" "$F" quantize "$T/in.npy" "$T/out.npy" --to e4m3 --scale blocky
expect_err "quantize unknown format" "--to 'e4m3x'" "$F" quantize "$T/in.npy" "$T/out.npy" --to e4m3x
expect_err "quantize unknown mode" "--round 'up'" "$F" quantize "$T/in.npy" "$T/out.npy" --to e4m3 --round up
expect_err "quantize one path" "expected IN.npy and OUT.npy" "$F" quantize "$T/in.npy" --to e4m3
expect_err "quantize unwritable OUT" "nodir/o.npy" "$F" quantize "$T/in.npy" "$T/nodir/o.npy" --to e4m3
expect_rc "quantize failures: OUT untouched" 0 cmp "$T/out.npy" "$T/keep.npy"
expect_eq "quantize failures: no temporary files" "" "$(ls "$T" | grep '\.tmp\.')"

# --- numpy round trips, when numpy is there
if python3 -c 'import numpy' 2>/dev/null; then
    python3 - "$T" <<'EOF'
import sys, numpy as np
t = sys.argv[1]
rng = np.random.default_rng(1)
np.save(f"{t}/x64.npy", rng.standard_normal((3, 40)) * 100)
np.save(f"{t}/x32.npy", (rng.standard_normal(50) * 100).astype(np.float32))
EOF
    expect_rc "numpy: quantize f8 to fp32" 0 "$F" quantize "$T/x64.npy" "$T/y64.npy" --to fp32
    expect_rc "numpy: f8 -> fp32 equals astype(float32)" 0 python3 -c "
import numpy as np, sys
x = np.load('$T/x64.npy'); y = np.load('$T/y64.npy')
sys.exit(not (y.dtype == np.float32 and y.shape == x.shape and np.array_equal(y, x.astype(np.float32))))"
    expect_rc "numpy: quantize 1-D to e4m3" 0 "$F" quantize "$T/x32.npy" "$T/y32.npy" --to e4m3 --overflow saturate
    "$F" values e4m3 --format csv | tail -n +2 | cut -d, -f3 >"$T/e4m3_values"
    expect_rc "numpy: every result is an e4m3 value, nearest" 0 python3 -c "
import numpy as np, sys
x = np.load('$T/x32.npy'); y = np.load('$T/y32.npy')
v = np.array([float(s) for s in open('$T/e4m3_values') if s.strip() != 'nan'])
ok = y.shape == x.shape and np.isin(y, v).all()
d = np.abs(v[None, :] - x[:, None]).min(axis=1)  # distance to the nearest value
ok = ok and np.all(np.abs(y - x) <= d + 0.0)
sys.exit(not ok)"
    expect_rc "numpy: mx on a 2-D f8 tensor" 0 "$F" quantize "$T/x64.npy" "$T/ymx.npy" --to e4m3 --scale mx
    expect_rc "numpy: mx result shape" 0 python3 -c "
import numpy as np, sys; sys.exit(np.load('$T/ymx.npy').shape != (3, 40))"
else
    echo "note: numpy not importable; numpy round trips skipped"
fi

# --- matmul-check: small cases on the cpu backend pass (exit 0), bad input exits 2, json parses
MC=("$F" matmul-check --m 8 --n 12 --k 40)
expect_has "matmul-check --help" "usage: fplab matmul-check" "$F" matmul-check --help
expect_has "matmul-check e4m3 tensor" "PASS: 0 of 96 results outside" "${MC[@]}" --a e4m3 --b e4m3 --scale tensor
expect_has "matmul-check prints its configuration" "M=8 N=12 K=40 a=e4m3 b=e5m2 out=bf16 scale=row" \
    "${MC[@]}" --a e4m3 --b e5m2 --scale row --out bf16
expect_rc "matmul-check mx e2m1 outliers" 0 "${MC[@]}" --a e2m1 --b e2m1 --scale mx --dist outliers
expect_rc "matmul-check nvfp4 lognormal" 0 "${MC[@]}" --a e2m1 --b e2m1 --scale nvfp4 --dist lognormal
expect_rc "matmul-check 2-D tiles, e4m3 out" 0 "${MC[@]}" --a e4m3 --b e4m3 --scale tile:4x16:fp32 --out e4m3
expect_rc "matmul-check bf16 x fp16 uniform" 0 "${MC[@]}" --a bf16 --b fp16 --dist uniform
expect_has "matmul-check m13 promote=16 is bit-exact" "PASS: 0 of 96 results differ from mm_ref" \
    "${MC[@]}" --a e4m3 --b e4m3 --scale tensor --acc m13:promote=16
expect_rc "matmul-check bf16 accumulator, mx" 0 "${MC[@]}" --a e5m2 --b e3m2 --scale mx --acc bf16 --seed 3
expect_err "matmul-check no --a" "--a FORMAT and --b FORMAT are required" "$F" matmul-check --b e4m3
expect_err "matmul-check unknown format" "--a 'e4m9x'" "$F" matmul-check --a e4m9x --b e4m3
expect_err "matmul-check bad recipe" "--scale" "$F" matmul-check --a e4m3 --b e4m3 --scale block:0:e8m0
expect_err "matmul-check bad accumulator" "--acc" "$F" matmul-check --a e4m3 --b e4m3 --acc m99
expect_err "matmul-check bad dist" "--dist 'cauchy'" "$F" matmul-check --a e4m3 --b e4m3 --dist cauchy
expect_err "matmul-check bad backend" "--backend 'tpu'" "$F" matmul-check --a e4m3 --b e4m3 --backend tpu
expect_err "matmul-check zero size" "--m" "$F" matmul-check --a e4m3 --b e4m3 --m 0
expect_err "matmul-check wide operand, emulated acc" "at most 12" "$F" matmul-check --a fp32 --b fp32 --acc bf16
expect_err "matmul-check bad --format" "expected table|json" "$F" matmul-check --a e4m3 --b e4m3 --format csv
# --backend cuda: 0 on a GPU that passes, 3 ("no GPU: ...") without one; nothing else.
out=$("${MC[@]}" --a e4m3 --b e4m3 --backend cuda 2>&1); rc=$?
if [[ $rc == 0 || ($rc == 3 && $out == *"no GPU: "*) ]]; then ok; else bad "matmul-check cuda: exit $rc" "$out"; fi
"${MC[@]}" --a e2m1 --b e4m3 --scale nvfp4 --acc m13:promote=8 --format json >"$T/mc.json" 2>"$T/mc.err"
expect_eq "matmul-check json exit" 0 $?
expect_eq "matmul-check json: stdout holds only the object" "{" "$(head -c1 "$T/mc.json")"
if command -v python3 >/dev/null; then
    expect_rc "matmul-check json parses" 0 python3 -m json.tool "$T/mc.json"
    expect_rc "matmul-check json fields" 0 python3 -c "
import json, sys
d = json.load(open('$T/mc.json'))
ok = d['pass'] is True and d['config']['k'] == 40 and d['config']['promote_every'] == 8
ok = ok and [r['backend'] for r in d['results']] == ['ref', 'cpu'] and d['results'][1]['mismatches_vs_ref'] == 0
sys.exit(not ok)"
else
    echo "note: python3 not found; matmul-check json parse skipped"
fi

# --- matmul-check external mode: a kernel's C from given A and B (.npy written by npy_f4)
d24="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }"
d42="{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }"
d22="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
d11="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }"
npy_f4 "$T/xa.npy" "$d24" '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\x00\x3f\x00\x00\x80\x3f\x00\x00\xc0\x3f\x00\x00\x00\x40'  # [[1 2 3 4] [.5 1 1.5 2]]
npy_f4 "$T/xb.npy" "$d42" '\x00\x00\x80\x3f\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x80\xbf'  # [[1 0] [0 1] [1 1] [2 -1]]
npy_f4 "$T/xc.npy" "$d22" '\x00\x00\x40\x41\x00\x00\x80\x3f\x00\x00\xc0\x40\x00\x00\x00\x3f'  # A B = [[12 1] [6 .5]]
npy_f4 "$T/xcbad.npy" "$d22" '\x00\x00\x40\x41\x00\x00\xc0\x3f\x00\x00\xc0\x40\x00\x00\x00\x3f'  # C[0,1] = 1.5
npy_f4 "$T/xc4.npy" "$d22" '\x00\x00\x40\x42\x00\x00\x80\x40\x00\x00\xc0\x41\x00\x00\x00\x40'  # 4 A B
npy_f4 "$T/two.npy" "$d11" '\x00\x00\x00\x40'
npy_f4 "$T/xa11.npy" "$d24" '\xcd\xcc\x8c\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\x00\x3f\x00\x00\x80\x3f\x00\x00\xc0\x3f\x00\x00\x00\x40'  # 1.1 first
npy_f4 "$T/x448a.npy" "$d24" "$(for i in {1..8}; do printf '%s' '\x00\x00\xe0\x43'; done)"
npy_f4 "$T/x448b.npy" "$d42" "$(for i in {1..8}; do printf '%s' '\x00\x00\xe0\x43'; done)"
npy_f4 "$T/xinf.npy" "$d22" "$(for i in {1..4}; do printf '%s' '\x00\x00\x80\x7f'; done)"
XC=("$F" matmul-check --a e4m3 --b e4m3 --a-values "$T/xa.npy" --b-values "$T/xb.npy")
expect_has "matmul-check external: a correct C passes" "PASS: 0 of 4 results outside" "${XC[@]}" --result "$T/xc.npy"
expect_has "matmul-check external: the candidates are listed" "hopper:wgmma" "${XC[@]}" --result "$T/xc.npy"
expect_rc "matmul-check external: a wrong C fails (exit 1)" 1 "${XC[@]}" --result "$T/xcbad.npy"
out=$("${XC[@]}" --result "$T/xcbad.npy" 2>&1)
[[ $out == *"FAIL: 1 of 4 results outside"* && $out == *"exact-rounded                   3"* ]] && ok || bad "matmul-check external: the violation is counted" "$out"
expect_rc "matmul-check external: --expect an engine that reproduces C" 0 "${XC[@]}" --result "$T/xc.npy" --expect hopper:wgmma --also m13:rtz
expect_rc "matmul-check external: tensor scales" 0 "${XC[@]}" --result "$T/xc4.npy" --scale tensor --a-scales "$T/two.npy" --b-scales "$T/two.npy"
expect_rc "matmul-check external: tensor scales, unscaled C fails" 1 "${XC[@]}" --result "$T/xc.npy" --scale tensor --a-scales "$T/two.npy" --b-scales "$T/two.npy"
"${XC[@]}" --result "$T/xcbad.npy" --errors "$T/xerr.npy" >/dev/null
expect_eq "matmul-check external: --errors writes 4 x 6 float64" "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 6), }" "$(head -c 128 "$T/xerr.npy" | tail -c +11 | tr -d '\n' | sed 's/ *$//')"
out=$("$F" matmul-check --a e4m3 --b e4m3 --out fp16 --a-values "$T/x448a.npy" --b-values "$T/x448b.npy" --result "$T/xinf.npy"); rc=$?
expect_eq "matmul-check external: all outputs overflow -> fail (exit 1)" 1 $rc
[[ $out == *"FAIL: 0 of 0 results"* && $out == *"4 of 4 exact results overflow"* ]] && ok || bad "matmul-check all-overflow report" "$out"
# Codes in place of values (issue 21), as 'fplab quantize --codes/--scales' writes them: decoded
# with --a/--b (and the recipe's scale format), refused when their width or range is not the
# format's; commands that want values refuse codes by name.
"$F" quantize "$T/xa.npy" "$T/xaq.npy" --to e4m3 --codes "$T/xa_codes.npy" 2>/dev/null
"$F" quantize "$T/xb.npy" "$T/xbq.npy" --to e4m3 --codes "$T/xb_codes.npy" 2>/dev/null
XK=("$F" matmul-check --a e4m3 --b e4m3 --a-values "$T/xa_codes.npy" --b-values "$T/xb_codes.npy")
expect_has "matmul-check external: codes as A and B" "PASS: 0 of 4 results outside" "${XK[@]}" --result "$T/xc.npy"
expect_rc "matmul-check external: codes, a wrong C fails" 1 "${XK[@]}" --result "$T/xcbad.npy"
expect_err "matmul-check external: codes of another width" "fp16 codes are uint16" \
    "$F" matmul-check --a fp16 --b e4m3 --a-values "$T/xa_codes.npy" --b-values "$T/xb_codes.npy" --result "$T/xc.npy"
expect_err "matmul-check external: codes out of the format's range" "is not a 4-bit code of e2m1" \
    "$F" matmul-check --a e2m1 --b e4m3 --a-values "$T/xa_codes.npy" --b-values "$T/xb_codes.npy" --result "$T/xc.npy"
expect_err "matmul-check external: codes as the result" "holds uint8 codes; expected float32 or float64 values" \
    "${XC[@]}" --result "$T/xa_codes.npy"
expect_err "quantize: codes as IN" "IN holds uint8 codes; expected float32 or float64 values" \
    "$F" quantize "$T/xa_codes.npy" "$T/q_of_codes.npy" --to e4m3
if python3 -c 'import numpy' 2>/dev/null; then  # MX codes and scale codes, B's tiles transposed
    python3 -c "
import numpy as np
r = np.random.default_rng(1)
np.save('$T/mxa.npy', r.standard_normal((8, 64)).astype(np.float32))
np.save('$T/mxbt.npy', r.standard_normal((4, 64)).astype(np.float32))"
    "$F" quantize "$T/mxa.npy" "$T/mxaq.npy" --to e4m3 --scale mx --codes "$T/mxac.npy" --scales "$T/mxas.npy" 2>/dev/null
    "$F" quantize "$T/mxbt.npy" "$T/mxbtq.npy" --to e4m3 --scale mx --codes "$T/mxbtc.npy" --scales "$T/mxbts.npy" 2>/dev/null
    python3 -c "
import numpy as np
a, bt = np.load('$T/mxaq.npy').astype(np.float64), np.load('$T/mxbtq.npy').astype(np.float64)
np.save('$T/mxc.npy', (a @ bt.T).astype(np.float32))
np.save('$T/mxc_bad.npy', (a[:, :32] @ bt.T[:32]).astype(np.float32))  # a dropped K block
for n in ('mxbtc', 'mxbts'): np.save('$T/%s_t.npy' % n, np.ascontiguousarray(np.load('$T/%s.npy' % n).T))"
    XM=("$F" matmul-check --a e4m3 --b e4m3 --scale mx --a-values "$T/mxac.npy" --a-scales "$T/mxas.npy"
        --b-values "$T/mxbtc_t.npy" --b-scales "$T/mxbts_t.npy")
    expect_has "matmul-check external: MX codes and scale codes" "PASS: 0 of 32 results outside" "${XM[@]}" --result "$T/mxc.npy"
    expect_rc "matmul-check external: MX codes, a dropped block fails" 1 "${XM[@]}" --result "$T/mxc_bad.npy"
fi
expect_err "matmul-check external: not a value of the format" "is not a value of e4m3" "$F" matmul-check --a e4m3 --b e4m3 --a-values "$T/xa11.npy" --b-values "$T/xb.npy" --result "$T/xc.npy"
expect_err "matmul-check external: shapes" "expected A (M x K) and B (K x N)" "$F" matmul-check --a e4m3 --b e4m3 --a-values "$T/xa.npy" --b-values "$T/xa.npy" --result "$T/xc.npy"
expect_err "matmul-check external: result shape" "expected M x N = 2 x 2" "${XC[@]}" --result "$T/xa.npy"
expect_err "matmul-check external: needs all three files" "together" "$F" matmul-check --a e4m3 --b e4m3 --result "$T/xc.npy"
expect_err "matmul-check external: no generated-mode options" "generated mode" "${XC[@]}" --result "$T/xc.npy" --k 8
expect_err "matmul-check external: scales need a recipe" "needs --a-scales" "${XC[@]}" --result "$T/xc.npy" --scale tensor
expect_err "matmul-check external: bad --expect" "m99" "${XC[@]}" --result "$T/xc.npy" --expect m99
if command -v python3 >/dev/null; then
    "${XC[@]}" --result "$T/xcbad.npy" --format json >"$T/xc.json"
    expect_rc "matmul-check external json" 0 python3 -c "
import json, sys
d = json.load(open('$T/xc.json'))
r = d['results'][0]
ok = d['pass'] is False and d['config']['mode'] == 'external' and r['outside_bound'] == 1 and r['judged'] == 4
ok = ok and r['rule'] == 'none' and 'gflops' not in r and any(c['acc'] == 'exact-rounded' and c['reproduced'] == 3 for c in r['candidates'])
sys.exit(not ok)"
fi

# --- ablate and report: help, bad input (exit 2), and a tiny real grid (tiny model, 4 steps)
expect_has "ablate --help" "usage: fplab ablate" "$F" ablate --help
expect_has "report --help" "usage: fplab report" "$F" report --help
expect_err "report missing dir" "'$T/no-such-abl': no such file or directory" "$F" report "$T/no-such-abl"
expect_err "report without DIR" "expected at least one INPUT" "$F" report
mkdir -p "$T/empty-abl"
expect_err "report dir without runs" "no runs/ directory" "$F" report "$T/empty-abl"
head -c 4000 "$(dirname "$0")/fixtures/ml_dtypes_float16.txt" >"$T/corpus.txt"
expect_err "ablate without --presets" "--presets LIST is required" "$F" ablate --data "$T/corpus.txt" --out "$T/abl"
expect_err "ablate unknown preset" "'nosuch'" "$F" ablate --presets fp32,nosuch --data "$T/corpus.txt" --out "$T/abl"
expect_err "ablate reserved --extra" "is set by ablate" "$F" ablate --presets fp32 --data "$T/corpus.txt" --out "$T/abl" --extra "--seed 3"
expect_err "ablate unknown train option" "unknown training option 'batchsize'" "$F" ablate --presets fp32 --data "$T/corpus.txt" --out "$T/abl" --extra "--batchsize 8"
expect_err "ablate unknown model" "--model 'huge'" "$F" ablate --presets fp32 --data "$T/corpus.txt" --out "$T/abl" --model huge
expect_err "ablate missing data: the reason" "cannot read it: No such file or directory" "$F" ablate --presets fp32 \
    --data "$T/nope.txt" --out "$T/abl"
expect_rc "ablate: nothing written on bad input" 1 test -e "$T/abl"
ABL=("$F" ablate --presets fp32,bf16-amp --seeds 1 --model tiny --steps 4 --data "$T/corpus.txt" --out "$T/abl" --threads 1 --no-plots)
expect_has "ablate tiny grid" "report: $T/abl/report.md" "${ABL[@]}"
expect_has "ablate report row" "| bf16-amp | 1/1 |" cat "$T/abl/report.md"
expect_has "ablate keeps the run's log" '"step":4' cat "$T/abl/runs/bf16-amp/seed-1/log.jsonl"
expect_has "ablate again skips finished runs" "already done" "${ABL[@]}"
# post-training quantization of the grid's checkpoints (issue 14): a ptq.jsonl per run, a table in
# the report, evaluated again only when the list grows; a bad policy refused before any run
expect_err "ablate --ptq unknown policy" "--ptq 'nosuch'" "$F" ablate --presets fp32 --model tiny --steps 4 \
    --data "$T/corpus.txt" --out "$T/abl-bad" --ptq w8a8-fp8,nosuch
expect_has "ablate --ptq evaluates the finished runs" "ptq: bf16-amp seed 1: evaluated" "${ABL[@]}" --ptq w8a8-fp8,w4-mxfp4
expect_has "ablate --ptq: the run's fp32 row" '"policy":"fp32","site":null' cat "$T/abl/runs/bf16-amp/seed-1/ptq.jsonl"
expect_has "ablate --ptq: the report's table" "| trained with | w8a8-fp8 | w4-mxfp4 |" cat "$T/abl/report.md"
expect_eq "ablate --ptq again: nothing to evaluate" 0 "$("${ABL[@]}" --ptq w4-mxfp4 2>&1 | grep -c '^ptq:')"
expect_err "eval --out onto its checkpoint" "same file as --ckpt" "$F" eval --ckpt "$T/abl/runs/fp32/seed-1/ckpt.bin" \
    --out "$T/abl/runs/fp32/seed-1/ckpt.bin"
expect_err "ablate other settings, same --out" "made with --steps 4 (now 5)" \
    "$F" ablate --presets fp32 --model tiny --steps 5 --data "$T/corpus.txt" --out "$T/abl" --no-plots
expect_has "report rewrites the report" "2 completed" "$F" report "$T/abl" --no-plots

# --- train, sample, export, policy: help, bad input (exit 2), and a tiny run end to end
expect_has "train --help" "--resume CKPT" "$F" train --help
expect_err "train without --data" "--data" "$F" train --model tiny
expect_err "train unknown model" "'gpt5'" "$F" train --model gpt5 --data "$T/corpus.txt"
expect_err "train missing data" "no-such.txt" "$F" train --model tiny --data "$T/no-such.txt"
expect_err "train bad policy" "nosuch" "$F" train --model tiny --data "$T/corpus.txt" --policy nosuch
expect_has "train tiny, stopped" "stopped at step 3 of 6" "$F" train --model tiny --data "$T/corpus.txt" --steps 6 --stop-at 3 \
    --ckpt-dir "$T/run" --progress 0
expect_err "resume refuses a changed option" "--lr cannot change with --resume" "$F" train --resume "$T/run/ckpt.bin" --lr 0.1
expect_has "train resumes" "done: 6 steps" "$F" train --resume "$T/run/ckpt.bin"
expect_eq "resume appends the run's own log" 2 "$(grep -c '"event":"start"' "$T/run/log.jsonl")"
expect_has "resume advanced the checkpoint" '"step":6,' cat "$T/run/log.jsonl"
expect_has "report of one run's directory" "report: $T/run/report.md: 1 runs of 1 presets" "$F" report "$T/run" --no-plots
expect_has "a fresh run validates its initial weights (the report's step 0)" '{"event":"val","at_step":0,"val_loss":' \
    cat "$T/run/log.jsonl"
# A finished run says so on resume (it printed "0 tokens/s"); --steps extends it (issue 24) with the
# schedule recomputed over the new total and an "extend" event in the log; it never shortens it.
cp -r "$T/run" "$T/ext"
expect_has "resume of a finished run: done already" "done already: the checkpoint holds all 6 steps" \
    "$F" train --resume "$T/ext/ckpt.bin"
expect_err "resume --steps smaller: refused" "--steps can only extend it" "$F" train --resume "$T/ext/ckpt.bin" --steps 4
expect_has "resume --steps 9 extends the run" "done: 9 steps" "$F" train --resume "$T/ext/ckpt.bin" --steps 9 --progress 0
expect_has "the log records the extension" '"event":"extend","step":6,"steps_before":6,"steps":9' cat "$T/ext/log.jsonl"
expect_has "the extended run resumes as a 9-step run" "holds all 9 steps" "$F" train --resume "$T/ext/ckpt.bin"
expect_err "fresh run into a run's directory" "already holds a run" \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 2 --ckpt-dir "$T/run"
expect_err "log that is the data" "same file as --data" "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --log "$T/corpus.txt"
ln -s "$T/corpus.txt" "$T/corpus.link"
expect_err "log that links to the data" "same file as --data" \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --log "$T/corpus.link"
expect_eq "the corpus survived" 4000 "$(wc -c <"$T/corpus.txt")"
# One run per --ckpt-dir (issue 20): a second training there, even one told to --overwrite, is
# refused while the first runs; the next run in a directory removes the half-written checkpoints
# of a killed one (ckpt.bin.tmp.XXXXXX) and nothing else.
"$F" train --model tiny --data "$T/corpus.txt" --steps 1000000 --ckpt-dir "$T/busy" --progress 0 >/dev/null 2>&1 &
busy=$!
for _ in $(seq 300); do [[ -s $T/busy/ckpt.bin.lock ]] && break; sleep 0.1; done
expect_err "a second run in a busy --ckpt-dir" "--ckpt-dir '$T/busy' is in use by another training (pid $busy," \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --ckpt-dir "$T/busy" --overwrite 1
# without --overwrite its files are in the way too; the message still names the run at work
for _ in $(seq 300); do [[ -s $T/busy/log.jsonl ]] && break; sleep 0.1; done
expect_err "a second run where the busy run's log exists" "--ckpt-dir '$T/busy' is in use by another training (pid $busy," \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --ckpt-dir "$T/busy"
kill "$busy"; wait "$busy" 2>/dev/null
expect_has "the dir is free once its run ends" "done: 1 steps" \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --ckpt-dir "$T/busy" --overwrite 1 --progress 0
touch "$T/ext/ckpt.bin.tmp.Ab12Cd" "$T/ext/ckpt.bin.tmp.x9Y8z7" "$T/ext/ckpt.bin.tmp.notours"
expect_has "a resume removes a killed run's temporary checkpoints" "removed 2 temporary checkpoint files" \
    "$F" train --resume "$T/ext/ckpt.bin" --steps 10 --progress 0
expect_eq "only those" "ckpt.bin.tmp.notours" "$(cd "$T/ext" && ls ckpt.bin.tmp.* 2>&1)"
expect_err "train --threads 100000" "--threads 100000: expected 0..4096" "$F" train --model tiny --data "$T/corpus.txt" --threads 100000
# An option error names the option that is wrong, not a group of them (issue 24).
for o in "--batch 0" "--accum 0" "--steps 0" "--eval-batches 0" "--warmup -1" "--beta2 1" "--grad-clip -1"; do
    out=$("$F" train --model tiny --data "$T/corpus.txt" $o 2>&1)
    [[ $out == *"${o}: expected"* && $(grep -o -- '--[a-z0-9-]* -\?[0-9]' <<<"$out" | wc -l) == 1 ]] && ok ||
        bad "train $o: the message names only $o" "$out"
done
expect_rc "a diverging run stops with status 1" 1 "$F" train --model tiny --data "$T/corpus.txt" --steps 20 --lr 1e30 \
    --warmup 0 --progress 0
expect_has "train --help has examples" "examples:" "$F" train --help
expect_has "sample" "fplab sample" "$F" sample --ckpt "$T/run/ckpt.bin" --tokens 5 --seed 1
expect_err "sample missing ckpt" "no-such.bin" "$F" sample --ckpt "$T/no-such.bin"
expect_has "sample --policy" "policy w8a8-fp8" "$F" sample --ckpt "$T/run/ckpt.bin" --tokens 5 --policy w8a8-fp8
expect_err "sample unknown policy" "'nosuch'" "$F" sample --ckpt "$T/run/ckpt.bin" --policy nosuch
expect_has "eval: fp32 is the run's validation loss" "bitwise the same" "$F" eval --ckpt "$T/run/ckpt.bin" --policy fp32,w4-nvfp4
expect_has "eval --format json: telemetry" '"site":"mlp.down.w"' "$F" eval --ckpt "$T/run/ckpt.bin" --policy w4-mxfp4 --per-site 1 --format json
expect_has "eval --progress 1: a progress line per evaluation" "eval w4-nvfp4: batch 2/2" \
    "$F" eval --ckpt "$T/run/ckpt.bin" --policy w4-nvfp4 --batches 2 --progress 1
expect_eq "eval --progress 0: none" "" "$("$F" eval --ckpt "$T/run/ckpt.bin" --batches 2 --progress 0 2>&1 | grep 'batch 2/2')"
expect_err "eval without --ckpt" "--ckpt FILE is required" "$F" eval --policy fp32
expect_err "eval missing ckpt" "no-such.bin" "$F" eval --ckpt "$T/no-such.bin"
expect_err "eval not a checkpoint" "corpus.txt" "$F" eval --ckpt "$T/corpus.txt"
expect_err "eval unknown policy" "'nosuch'" "$F" eval --ckpt "$T/run/ckpt.bin" --policy fp32,nosuch
expect_err "eval missing --data" "no-such.txt" "$F" eval --ckpt "$T/run/ckpt.bin" --data "$T/no-such.txt"
expect_has "export" "" "$F" export --ckpt "$T/run/ckpt.bin" --llama2c "$T/m.bin" --tokenizer "$T/t.bin"
expect_err "export onto its ckpt" "same file as --ckpt" "$F" export --ckpt "$T/run/ckpt.bin" --llama2c "$T/run/ckpt.bin"
ln -sf ckpt.bin "$T/run/link.bin"
expect_err "export onto a link to its ckpt" "same file as --ckpt" "$F" export --ckpt "$T/run/ckpt.bin" --llama2c "$T/run/link.bin"
expect_err "export tokenizer onto model" "name the same file" "$F" export --ckpt "$T/run/ckpt.bin" --llama2c "$T/m.bin" --tokenizer "$T/./m.bin"
expect_has "the checkpoint survived" "holds all 6 steps" "$F" train --resume "$T/run/ckpt.bin"
# An emulated accumulator per matmul (issue 14): trains, stops and resumes bitwise (the
# emulating kernel is deterministic), and eval takes the policy.
printf 'name acc13\nsite *.in e4m3 tensor\nsite *.w e4m3 mx\nsite *.grad e5m2 tensor\n%s\n%s\n' \
    'accumulator m13:promote=16 *.fprop' 'accumulator m10 mlp.down.wgrad' >"$T/acc13.policy"
ACC=(train --model tiny --data "$T/corpus.txt" --steps 4 --policy "$T/acc13.policy" --progress 0 --threads 1)
expect_has "train, emulated accumulators" "done: 4 steps" "$F" "${ACC[@]}" --ckpt-dir "$T/acc_a"
expect_has "train, emulated accumulators, stopped" "stopped at step 2" "$F" "${ACC[@]}" --ckpt-dir "$T/acc_b" --stop-at 2
expect_has "train, emulated accumulators, resumed" "done: 4 steps" "$F" train --resume "$T/acc_b/ckpt.bin"
step_losses() { grep -o '"step":[0-9]*,"loss":[^,]*' "$1"; }
expect_eq "emulated accumulators: resumed run = uninterrupted" "$(step_losses "$T/acc_a/log.jsonl")" \
    "$(step_losses "$T/acc_b/log.jsonl")"
expect_has "eval, emulated accumulators" "acc13" "$F" eval --ckpt "$T/run/ckpt.bin" --policy "fp32,$T/acc13.policy"
expect_has "policy --list" "pure-bf16-sr" "$F" policy --list
expect_has "policy --show" "site *.grad e2m1 nvfp4 sr" "$F" policy --show nvfp4
expect_err "policy --show unknown" "'nosuch' is not a preset" "$F" policy --show nosuch
printf 'name bad\nsite attn.nope bf16\n' >"$T/bad.policy"
expect_err "policy --check bad site" "attn.nope" "$F" policy --check "$T/bad.policy"

# --- quantize --codes/--scales (issue 12): element codes and tile scales as .npy, NumPy's headers
# npy_head DICT: the 128 header bytes NumPy writes for DICT, as od -tx1 prints them.
npy_head() { { printf '\x93NUMPY\x01\x00\x76\x00'; printf '%-117s\n' "$1"; } | od -An -tx1; }
bytes_at() { od -An -tx1 -j128 -v "$1" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }
# [500, 1 x 31] in e4m3 under mx: amax 500 -> scale 2^(8 - 8) = 1 (e8m0 code 127 = 0x7f);
# 500 saturates to 448 (0x7e), 1 is 0x38.
expect_rc "quantize --codes --scales mx" 0 "$F" quantize "$T/b500.npy" "$T/b.npy" --to e4m3 --scale mx --codes "$T/bc.npy" --scales "$T/bs.npy"
expect_eq "quantize --codes: NumPy's uint8 header" "$(npy_head "{'descr': '|u1', 'fortran_order': False, 'shape': (32,), }")" "$(head -c 128 "$T/bc.npy" | od -An -tx1)"
expect_eq "quantize --codes: 448 then 1 x 31" "7e$(printf ' 38%.0s' {1..31})" "$(bytes_at "$T/bc.npy")"
expect_eq "quantize --scales: 1-D mx grid" "$(npy_head "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }")" "$(head -c 128 "$T/bs.npy" | od -An -tx1)"
expect_eq "quantize --scales: e8m0 2^0" "7f" "$(bytes_at "$T/bs.npy")"
# 2-D (2, 32): row 0 as above, row 1 all 2 -> scale 2^(1 - 8) (e8m0 0x78), 2 / 2^-7 = 256 (e4m3 0x78)
twos32=$(for i in {1..32}; do printf '%s' '\x00\x00\x00\x40'; done)
npy_f4 "$T/b2.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 32), }" '\x00\x00\xfa\x43'"$ones31$twos32"
expect_rc "quantize --codes --scales mx 2-D" 0 "$F" quantize "$T/b2.npy" "$T/b.npy" --to e4m3 --scale mx --codes "$T/bc.npy" --scales "$T/bs.npy"
expect_eq "quantize --codes 2-D header" "$(npy_head "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 32), }")" "$(head -c 128 "$T/bc.npy" | od -An -tx1)"
expect_eq "quantize --codes 2-D" "7e$(printf ' 38%.0s' {1..31})$(printf ' 78%.0s' {1..32})" "$(bytes_at "$T/bc.npy")"
expect_eq "quantize --scales 2-D header" "$(npy_head "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 1), }")" "$(head -c 128 "$T/bs.npy" | od -An -tx1)"
expect_eq "quantize --scales 2-D" "7f 78" "$(bytes_at "$T/bs.npy")"
# nvfp4 on [6, 1 x 15]: s_enc = 448 * 6 / 6, block scale 448 (e4m3 0x7e), tensor_scale 1/448; 6 -> 0x7, 1 -> 0x2
ones15=$(for i in {1..15}; do printf '%s' '\x00\x00\x80\x3f'; done)
npy_f4 "$T/b6.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (16,), }" '\x00\x00\xc0\x40'"$ones15"
out=$("$F" quantize "$T/b6.npy" "$T/b.npy" --to e2m1 --scale nvfp4 --codes "$T/bc.npy" --scales "$T/bs.npy" --stats 2>/dev/null)
expect_eq "quantize nvfp4 --stats tensor_scale" "tensor_scale: 0.0022321429569274187" "$(grep '^tensor_scale:' <<<"$out")"
expect_eq "quantize nvfp4 --codes" "07$(printf ' 02%.0s' {1..15})" "$(bytes_at "$T/bc.npy")"
expect_eq "quantize nvfp4 --scales" "7e" "$(bytes_at "$T/bs.npy")"
# 16-bit codes: '<u2', little-endian; bf16 of 1, 464, 500, 0.1f
expect_rc "quantize bf16 --codes" 0 "$F" quantize "$T/in.npy" "$T/b.npy" --to bf16 --codes "$T/bc.npy"
expect_eq "quantize --codes: NumPy's uint16 header" "$(npy_head "{'descr': '<u2', 'fortran_order': False, 'shape': (4,), }")" "$(head -c 128 "$T/bc.npy" | od -An -tx1)"
expect_eq "quantize bf16 --codes" "80 3f e8 43 fa 43 cd 3d" "$(bytes_at "$T/bc.npy")"
# every output distinct and none of them IN; --scales needs a recipe with scales; nothing written then
cp "$T/b.npy" "$T/b_keep.npy"
expect_err "quantize --codes onto IN" "--codes '$T/in.npy' is the same file as IN" "$F" quantize "$T/in.npy" "$T/b.npy" --to e4m3 --codes "$T/in.npy"
expect_err "quantize --scales onto a link to IN" "same file as IN" "$F" quantize "$T/in.npy" "$T/b.npy" --to e4m3 --scale mx --scales "$T/in_link.npy"
expect_err "quantize --codes onto OUT" "same file as OUT" "$F" quantize "$T/in.npy" "$T/b.npy" --to e4m3 --codes "$T/b.npy"
expect_err "quantize --scales onto --codes" "same file as --codes" "$F" quantize "$T/in.npy" "$T/b.npy" --to e4m3 --scale mx --codes "$T/new_c.npy" --scales "$T/./new_c.npy"
expect_err "quantize --scales without a recipe" "has no scales" "$F" quantize "$T/in.npy" "$T/b.npy" --to e4m3 --scales "$T/new_s.npy"
expect_eq "quantize: a refused call writes nothing" "$(cat "$T/b_keep.npy" | od -An -tx1)" "$(cat "$T/b.npy" | od -An -tx1)"
expect_eq "quantize: a refused call creates no file" "" "$(ls "$T" | grep -e '^new_' -e '\.tmp\.')"
expect_eq "quantize: the input survived" "$(words "$T/in_keep.npy")" "$(words "$T/in.npy")"
expect_has "quantize --help: --codes" "--codes FILE" "$F" quantize --help

# --- issue 20: outputs never replace what is not a regular file, never an input (those a
# checkpoint names included), strings in logs are escaped, all outputs of a command or none
# Item 1: a symlink stays a link (its file gets the output); a FIFO and a character device are
# written through (a device node made in $T, never /dev/null itself: a regression must not
# break the machine).
cp "$T/b_keep.npy" "$T/lt.npy"; ln -sf lt.npy "$T/l.npy"
expect_rc "quantize OUT a symlink" 0 "$F" quantize "$T/in.npy" "$T/l.npy" --to bf16
expect_rc "quantize OUT a symlink: still a link" 0 test -L "$T/l.npy"
expect_eq "quantize OUT a symlink: its file written" "$(words "$T/l.npy")" "$(words "$T/lt.npy")"
mkfifo "$T/fifo.npy"
{ timeout 60 cat "$T/fifo.npy" >"$T/fifo_got.npy" & } 2>/dev/null  # a writer that never opens it must not hang the test
expect_rc "quantize OUT a FIFO" 0 "$F" quantize "$T/in.npy" "$T/fifo.npy" --to bf16
wait
expect_rc "quantize OUT a FIFO: still a FIFO" 0 test -p "$T/fifo.npy"
expect_eq "quantize OUT a FIFO: the reader got the array" "$(words "$T/lt.npy")" "$(words "$T/fifo_got.npy")"
expect_err "quantize OUT a directory" "is a directory" "$F" quantize "$T/in.npy" "$T" --to bf16
if mknod "$T/null" c 1 3 2>/dev/null; then
    expect_rc "quantize OUT a device (--stats)" 0 "$F" quantize "$T/in.npy" "$T/null" --to bf16 --stats
    expect_rc "eval --out a device" 0 "$F" eval --ckpt "$T/run/ckpt.bin" --out "$T/null" --batches 1
    expect_rc "export --llama2c a device" 0 "$F" export --ckpt "$T/run/ckpt.bin" --llama2c "$T/null"
    expect_rc "the device node is still a character device" 0 test -c "$T/null"
else
    echo "note: mknod not permitted; device-node outputs not checked"
fi
# Item 2: eval --out onto the corpus the checkpoint names (no --data given), a policy file, the
# validation data; ablate --data inside --out.
expect_err "eval --out onto the checkpoint's corpus" "same file as --data" "$F" eval --ckpt "$T/run/ckpt.bin" --out "$T/corpus.txt"
expect_err "eval --out onto a policy file" "same file as --policy" "$F" eval --ckpt "$T/run/ckpt.bin" \
    --policy "fp32,$T/acc13.policy" --out "$T/acc13.policy"
expect_eq "the corpus survived eval" 4000 "$(wc -c <"$T/corpus.txt")"
cp "$T/abl/report.md" "$T/report_keep.md"
expect_err "ablate --data inside --out" "lies inside --out" "$F" ablate --presets fp32 --model tiny --steps 4 \
    --data "$T/abl/report.md" --out "$T/abl" --no-plots
expect_rc "ablate --data inside --out: the file survived" 0 cmp "$T/abl/report.md" "$T/report_keep.md"
# Item 3: a policy name with quotes and backslashes, or one that would inject members, stays one
# JSON string in the log.
printf 'name a"b\\c\nsite *.in bf16\n' >"$T/q1.policy"
printf 'name evil","seed":999,"x":"\nsite *.in bf16\n' >"$T/q2.policy"
for q in q1 q2; do
    expect_has "train, policy $q" "done: 2 steps" "$F" train --model tiny --data "$T/corpus.txt" --steps 2 \
        --policy "$T/$q.policy" --ckpt-dir "$T/run_$q" --progress 0
done
expect_eq "no injected member" 0 "$(grep -c '"seed":999' "$T/run_q2/log.jsonl")"
if command -v python3 >/dev/null; then
    expect_rc "log with quoted policy names is JSON" 0 python3 -c "
import json, sys
a = [json.loads(l) for l in open('$T/run_q1/log.jsonl')]
b = [json.loads(l) for l in open('$T/run_q2/log.jsonl')]
sys.exit(not (a[0]['policy'] == 'a\"b\\\\c' and b[0]['policy'] == 'evil\",\"seed\":999,\"x\":\"' and b[0]['seed'] == 1337))"
fi
# Item 5: an output that cannot be written leaves every output as it was.
cp "$T/lt.npy" "$T/lt_keep.npy"
expect_err "quantize --codes in a missing directory" "nonexistent" "$F" quantize "$T/in.npy" "$T/lt.npy" --to e4m3 \
    --codes "$T/nonexistent/c.npy"
expect_rc "quantize: OUT untouched when --codes fails" 0 cmp "$T/lt.npy" "$T/lt_keep.npy"
expect_eq "quantize: no temporary file left" "" "$(ls "$T" | grep '\.tmp\.')"

# Item 6: values that silently became defaults or wrapped are refused; a directory given as a
# checkpoint or a policy is named as one.
expect_err "train --norm-eps -1" "--norm-eps -1: expected a positive" "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --norm-eps -1
expect_err "train --rope-theta nan" "--rope-theta nan: expected a positive" "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --rope-theta nan
expect_err "train --seed -1" "non-negative integer" "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --seed -1
expect_err "train --comm e8m0" "no sign and no zero" "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --comm e8m0
expect_err "eval --ckpt a directory" "is a directory" "$F" eval --ckpt "$T/run"
expect_err "train --policy a directory" "is a directory" "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --policy "$T/run"

cp "$T/corpus.txt" "$T/c_ed.txt"
expect_has "train, stopped (corpus to be edited)" "stopped at step 2" "$F" train --model tiny --data "$T/c_ed.txt" --steps 4 \
    --stop-at 2 --ckpt-dir "$T/run_ed" --progress 0
head -c 100 "$T/corpus.txt" >>"$T/c_ed.txt"  # an edit within the vocabulary (a new character is refused anyway)
expect_err "resume refuses an edited corpus" "another corpus" "$F" train --resume "$T/run_ed/ckpt.bin"

# --- issue 34: fplab.torch (torch dtype names)
expect_err "cast --to torch.float8_e4m3 (no such torch dtype)" "did you mean 'torch.float8_e4m3fn'" "$F" cast 1 --to torch.float8_e4m3
expect_eq "finfo torch.float == fp32" "$("$F" finfo fp32 --format csv)" "$("$F" finfo torch.float --format csv)"

# --- issue 34: report
# Two separate trainings compared from their logs (3.3), titled a comparison; --out needed there.
for n in scaled noscale; do
    pol=fp16-amp; [[ $n == noscale ]] && pol=fp16-amp-noscale
    "$F" train --model tiny --data "$T/corpus.txt" --steps 4 --policy $pol --log "$T/$n.jsonl" --progress 0 >/dev/null 2>&1
done
expect_err "report of two logs without --out" "give --out DIR" "$F" report "$T/scaled.jsonl" "$T/noscale.jsonl"
expect_has "report of two logs" "report: $T/cmp/report.md: 2 runs of 2 presets (2 completed" \
    "$F" report "$T/scaled.jsonl" "$T/noscale.jsonl" --out "$T/cmp" --no-plots
expect_has "two logs: titled a comparison" "# Comparison of 2 runs" cat "$T/cmp/report.md"
expect_has "two logs: one row each" "| fp16-amp-noscale | 1/1 |" cat "$T/cmp/report.md"
# A run of 6 steps resumed and extended to 9, then 10 (above; 3.5): the report takes the last start
# line's target (it said 6 steps and "10/6").
expect_has "report of an extended run: its final target" "| 1337 | ok | 10/10 |" \
    sh -c "'$F' report '$T/ext' --no-plots >/dev/null 2>&1; cat '$T/ext/report.md'"
# A link planted at report.md (2.6) is replaced, not followed: the file outside is untouched.
echo precious >"$T/outside.txt"
ln -sf "$T/outside.txt" "$T/ext/report.md"
expect_rc "report with a planted report.md link" 0 "$F" report "$T/ext" --no-plots
expect_eq "the planted link's file is untouched" precious "$(cat "$T/outside.txt")"
expect_rc "report.md is the report's own file now" 1 test -L "$T/ext/report.md"

# --- issue 34: engines
# 1.7: an accumulator whose promote=N is not a multiple of the instruction's k is refused by
# every reader (policy --check, train, eval), with the k; it never becomes a NaN.
"$F" policy --show fp8-delayed >"$T/acc33.policy"
echo "accumulator hopper:wgmma:promote=33" >>"$T/acc33.policy"
expect_err "policy --check: promote=33 on hopper:wgmma" "not a multiple" "$F" policy --check "$T/acc33.policy"
"$F" policy --show bf16-amp >"$T/acc12.policy"
echo "accumulator ampere:mma:promote=12" >>"$T/acc12.policy"
expect_err "policy --check: promote=12 on ampere:mma bf16 (k 16)" "k = 16" "$F" policy --check "$T/acc12.policy"
expect_err "train: promote=12 refused before the first step" "k = 16" "$F" train --model tiny \
    --data "$T/corpus.txt" --steps 1 --policy "$T/acc12.policy" --progress 0
expect_err "eval: promote=33 refused, not val_loss nan" "not a multiple" "$F" eval --ckpt "$T/run/ckpt.bin" \
    --policy "$T/acc33.policy"
expect_err "matmul-check --acc cdna1:mfma:k3" "4, 2, 1" "$F" matmul-check --m 4 --n 4 --k 8 --a fp32 --b fp32 \
    --acc cdna1:mfma:k3
# 3.7: a mistyped engine or option gets the list and a did-you-mean, in the user's words.
expect_err "--acc hopper:wgma" "did you mean 'hopper:wgmma'" "$F" matmul-check --m 4 --n 4 --k 32 --a e4m3 --b e4m3 \
    --acc hopper:wgma
expect_err "--acc m13:promot=128" "did you mean 'promote=128'" "$F" matmul-check --m 4 --n 4 --k 32 --a e4m3 \
    --b e4m3 --acc m13:promot=128
out=$("$F" matmul-check --m 4 --n 4 --k 32 --a e4m3 --b e4m3 --acc m13:promot=128 2>&1)
expect_eq "--acc m13:promot=128 echoes no internal name" "" "$(grep -o 'e8m13:promot' <<<"$out")"
expect_err "engines hopper:wgma" "did you mean 'hopper:wgmma'" "$F" engines hopper:wgma
# 3.8: the engines table fits in 100 columns; the detail is in csv/json.
expect_eq "engines: no line over 100 columns" "0" "$("$F" engines | awk 'length > 100' | wc -l)"
expect_has "engines --format csv keeps the detail" "subnormals,specials,note" "$F" engines --format csv

# --- issue 34: files (locks, the log, train.err)
mkdir -p "$T/i34"
# 2.2: a lock file that is a hard link is refused before anything is written; its file keeps its bytes
mkdir -p "$T/i34/hl" && echo "the only copy" >"$T/i34/precious" && ln "$T/i34/precious" "$T/i34/hl/ckpt.bin.lock"
expect_err "a hard-linked ckpt.bin.lock is refused" "hard link" \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --ckpt-dir "$T/i34/hl" --progress 0
expect_eq "the linked file keeps its bytes" "the only copy" "$(cat "$T/i34/precious")"
# 2.3: the log cannot be the checkpoint (or be named as a checkpoint's file)
expect_err "--log DIR/ckpt.bin with --ckpt-dir DIR" "the checkpoint would replace the log" \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --ckpt-dir "$T/i34/c" --log "$T/i34/c/ckpt.bin"
expect_err "--log named ckpt.bin elsewhere" "a checkpoint's files" \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --log "$T/i34/ckpt.bin"
# 2.4: a live run's log cannot be cut by another run, --overwrite or not
"$F" train --model tiny --data "$T/corpus.txt" --steps 1000000 --ckpt-dir "$T/i34/live" --progress 0 >/dev/null 2>&1 &
live=$!
for _ in $(seq 300); do [[ -s $T/i34/live/log.jsonl ]] && break; sleep 0.1; done
expect_err "another run's --log onto a live log" "is in use by another training" \
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --log "$T/i34/live/log.jsonl" --overwrite 1
kill "$live"; wait "$live" 2>/dev/null
expect_eq "the live log has no NUL byte" 0 "$(tr -cd '\0' <"$T/i34/live/log.jsonl" | wc -c)"
expect_eq "the live log starts with its run" '{"event":"start"' "$(head -c 16 "$T/i34/live/log.jsonl")"
# 2.5: a log that cannot be written stops the run (exit 1), also when the disk fills mid-run
expect_rc "--log /dev/full: exit 1" 1 "$F" train --model tiny --data "$T/corpus.txt" --steps 2 --log /dev/full --progress 0
out=$("$F" train --model tiny --data "$T/corpus.txt" --steps 2 --log /dev/full --progress 0 2>&1)
[[ $out == *"--log '/dev/full': write failed at step 0: No space left on device"* && $out != *"done:"* ]] && ok ||
    bad "--log /dev/full says why and not done" "$out"
out=$(trap '' XFSZ; ulimit -f 2; "$F" train --model tiny --data "$T/corpus.txt" --steps 40 --log "$T/i34/cut.jsonl" \
    --progress 0 2>&1; echo "rc=$?")
[[ $out == *"write failed at step "*"File too large"*"rc=1" ]] && ok || bad "a log that fills mid-run stops the run" "$out"
# 3.5: a resume with nothing to do says so and appends nothing
"$F" train --model tiny --data "$T/corpus.txt" --steps 2 --ckpt-dir "$T/i34/idle" --progress 0 >/dev/null 2>&1
sum=$(cksum <"$T/i34/idle/log.jsonl")
expect_has "a finished run resumed: done already" "done already" "$F" train --resume "$T/i34/idle/ckpt.bin" --progress 0
expect_eq "and its log is as it was" "$sum" "$(cksum <"$T/i34/idle/log.jsonl")"
# 3.8: runs leave no lock file; ablate's completed runs keep their output as train.out
expect_eq "no lock file after the runs" "ckpt.bin log.jsonl" "$(echo $(ls -A "$T/i34/idle"))"
expect_rc "a one-run ablation" 0 "$F" ablate --presets fp32 --data "$T/corpus.txt" --out "$T/i34/abl" --steps 2 \
    --eval-every 1 --model tiny
expect_eq "ablate leaves no .lock" "" "$(ls -A "$T/i34/abl" | grep lock)"
expect_eq "a completed run: no train.err, no lock" "ckpt.bin log.jsonl train.out" "$(echo $(ls -A "$T/i34/abl/runs/fp32/seed-1"))"

# --- issue 34: verify (matmul-check): an empty K, --errors onto an input, nonsense scales and u,
# a stated memory limit, an engine's own bound
d80="{'descr': '<f4', 'fortran_order': False, 'shape': (8, 0), }"
d04="{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }"
d84="{'descr': '<f4', 'fortran_order': False, 'shape': (8, 4), }"
npy_f4 "$T/a80.npy" "$d80" ''
npy_f4 "$T/b04.npy" "$d04" ''
npy_f4 "$T/c84.npy" "$d84" "$(for i in {1..32}; do printf '%s' '\x00\x00\x00\x00'; done)"
for sc in none row tensor mx; do
    expect_err "matmul-check K = 0, --scale $sc" "expected at least one row and one column" \
        "$F" matmul-check --a e4m3 --b e4m3 --scale $sc --a-values "$T/a80.npy" --b-values "$T/b04.npy" --result "$T/c84.npy"
done
cp "$T/xc.npy" "$T/xc_keep.npy"
cp "$T/xa.npy" "$T/xa_keep.npy"
expect_err "matmul-check --errors onto --result" "is the same file as --result" "${XC[@]}" --result "$T/xc.npy" --errors "$T/xc.npy"
expect_err "matmul-check --errors onto --a-values (another name)" "refusing to overwrite an input" \
    "${XC[@]}" --result "$T/xc.npy" --errors "$T/./xa.npy"
expect_rc "matmul-check: --result untouched" 0 cmp "$T/xc.npy" "$T/xc_keep.npy"
expect_rc "matmul-check: --a-values untouched" 0 cmp "$T/xa.npy" "$T/xa_keep.npy"
npy_f4 "$T/zero11.npy" "$d11" '\x00\x00\x00\x00'
npy_f4 "$T/neg11.npy" "$d11" '\x00\x00\x00\xc0'
expect_err "matmul-check --a-tensor-scale -2" "--a-tensor-scale -2: expected a finite scale > 0" "${XC[@]}" --result "$T/xc.npy" --a-tensor-scale -2
expect_err "matmul-check --b-tensor-scale nan" "--b-tensor-scale nan" "${XC[@]}" --result "$T/xc.npy" --b-tensor-scale nan
expect_err "matmul-check --scale tensor with a scale of 0" "--a-scales '$T/zero11.npy': the one scale of the recipe 'tensor' is 0" \
    "${XC[@]}" --result "$T/xc.npy" --scale tensor --a-scales "$T/zero11.npy" --b-scales "$T/two.npy"
expect_err "matmul-check --scale tensor with a scale of -2" "is -2; expected a finite scale > 0" \
    "${XC[@]}" --result "$T/xc.npy" --scale tensor --a-scales "$T/two.npy" --b-scales "$T/neg11.npy"
npy_f4 "$T/c12345.npy" "$d22" "$(for i in {1..4}; do printf '%s' '\x00\xe4\x40\x46'; done)"
expect_err "matmul-check --u 1/(K+2)" "unit roundoff u = 0.166667: expected 0 < u < 1/(2(K+2))" \
    "${XC[@]}" --result "$T/c12345.npy" --u 0.16666666666666666
expect_rc "matmul-check C = 12345 fails at the largest u" 1 "${XC[@]}" --result "$T/c12345.npy" --u 0.083
expect_err "matmul-check --u with --engine" "--u and --engine name two bounds" "${XC[@]}" --result "$T/xc.npy" --u 1e-6 --engine hopper:wgmma
expect_err "matmul-check --engine not an engine" "engine 'm13'" "${XC[@]}" --result "$T/xc.npy" --engine m13
expect_has "matmul-check --engine: a correct C passes" "PASS: 0 of 4 results outside the error bound of hopper:wgmma's arithmetic" \
    "${XC[@]}" --result "$T/xc.npy" --engine hopper:wgmma
expect_rc "matmul-check --engine: a wrong C fails" 1 "${XC[@]}" --result "$T/xcbad.npy" --engine hopper:wgmma
expect_err "matmul-check: a stated memory limit before allocating" "the limit is 4 GiB" \
    "$F" matmul-check --m 16 --n 16 --k 16777216 --a bf16 --b bf16

# --- issue 34: formats (names, finfo, wide casts, MX scales)
# P = 1 wide formats: a tie goes to the even code (to odd: the odd one), as in the 8-bit twin.
expect_eq "cast 0.75 3 to binary16p1se: 1 4 (binary8p1se: 1 4)" "1 4" \
    "$("$F" cast 0.75 3 --to binary16p1se --format csv 2>/dev/null | tail -2 | cut -d, -f4 | tr '\n' ' ' | sed 's/ $//')"
expect_eq "cast 3 12 0.75 to binary16p1se --round rto: 2 8 0.5" "2 8 0.5" \
    "$("$F" cast 3 12 0.75 --to binary16p1se --round rto --format csv 2>/dev/null | tail -3 | cut -d, -f4 | tr '\n' ' ' | sed 's/ $//')"
# A wide cast's error is a double even where its value is not (2^1024 - DBL_MAX = 2^971).
expect_eq "cast DBL_MAX to binary16p3ue rup: abs_err 2^971, err_ulp 2^-51" "1.99584030953472e+292 4.440892098500626e-16" \
    "$("$F" cast 1.7976931348623157e308 --to binary16p3ue --round rup --format csv 2>/dev/null | tail -1 | cut -d, -f5,7 | tr ',' ' ')"
expect_eq "cast inf to binary16p1sf saturate: abs_err inf, err_ulp -inf (as e4m3's)" "inf -inf" \
    "$("$F" cast inf --to binary16p1sf --overflow saturate --format csv 2>/dev/null | tail -1 | cut -d, -f5,7 | tr ',' ' ')"
# finfo's min is the smallest value: 0 in an unsigned format with a zero, e8m0's 2^-127.
expect_eq "finfo min: binary8p3ue 0, e4m3:unsigned 0, e8m0 2^-127, binary16p1ue 0" \
    "0 0 5.877471754111438e-39 0x0p+0" \
    "$("$F" finfo binary8p3ue e4m3:unsigned e8m0 binary16p1ue --format csv 2>/dev/null | tail -4 | cut -d, -f7 | tr '\n' ' ' | sed 's/ $//')"
# finfo: a dynamic range column; the power-of-two columns always as 2^k (e2m1's tiny is 2^0).
expect_eq "finfo e2m1 and e8m0: 2^k columns, range in binades" "2^0 2^-1 3.58 2^-127 2^-127 254.00" \
    "$("$F" finfo e2m1 e8m0 | tail -2 | awk '{printf "%s%s %s %s", (NR > 1 ? " " : ""), $7, $8, $10}')"
expect_has "finfo binary16p1se: range 32765 binades" "32765.00" "$F" finfo binary16p1se
# Names: one nearest-name rule (completions, whole fields, ties named, P3109 names).
expect_err "cast --to float6_e3m2" "did you mean 'float6_e3m2fn'?" "$F" cast 1 --to float6_e3m2
expect_err "cast --to float8_e8m0" "did you mean 'float8_e8m0fnu'?" "$F" cast 1 --to float8_e8m0
expect_err "cast --to binary8p3s" "did you mean 'binary8p3se' or 'binary8p3sf'?" "$F" cast 1 --to binary8p3s
expect_err "cast --to bfloat" "did you mean 'bfloat16'?" "$F" cast 1 --to bfloat
expect_eq "NumPy's half single double" "fp16 fp32 fp64" \
    "$("$F" finfo half single np.double --format csv | tail -3 | cut -d, -f1 | tr '\n' ' ' | sed 's/ $//')"
expect_err "policy preset did you mean" "did you mean 'bf16-amp'?" "$F" policy --check bf16amp
expect_err "--round did you mean" "did you mean 'rne'" "$F" cast 1 --to e4m3 --round rnee
expect_eq "cast --round sr:b is --round sr --sr-variant b" \
    "$("$F" cast 0.3 0.7 --to e2m1 --round sr --sr-variant b --sr-bits 3 --seed 5 --format csv)" \
    "$("$F" cast 0.3 0.7 --to e2m1 --round sr:b --sr-bits 3 --seed 5 --format csv)"
expect_err "cast --round sr:b --sr-variant c disagree" "disagree" "$F" cast 1 --to e4m3 --round sr:b --sr-variant c
expect_eq "values --codes 010:012 is decimal 10..12" "0x0a 0x0b 0x0c" \
    "$("$F" values e4m3 --codes 010:012 --format csv | tail -3 | cut -d, -f1 | tr '\n' ' ' | sed 's/ $//')"
expect_eq "values --codes 0x10:0x11 is hex" "0x10 0x11" \
    "$("$F" values e4m3 --codes 0x10:0x11 --format csv | tail -2 | cut -d, -f1 | tr '\n' ' ' | sed 's/ $//')"
# P3109 names in finfo --aliases and --help.
expect_has "finfo --aliases lists P3109 names" "binary8p3se binary8p3sf" "$F" finfo --aliases
expect_has "finfo --aliases marks wide P3109 names" "binary16p1se*" "$F" finfo --aliases
expect_has "finfo --help names P3109" "binaryKpP{s|u}{e|f}" "$F" finfo --help
expect_has "top --help names P3109" "IEEE P3109" "$F" --help

# --- issue 38: reproducible mode (every float32 matmul summed in one fixed order)
# OpenBLAS's Haswell (AVX2) and Prescott (SSE3) sgemm kernels sum in different orders; with
# --reproducible 1 neither runs, and the logs agree bit for bit (the timings, and the start
# event that names the core type, aside). Without it they may differ (not asserted: tiny shapes
# may happen to agree).
strip_log() { sed -E 's/"tokens_per_s":[^,]*,"elapsed_s":[^,]*,//' "$1" | grep -v '"event":"start"'; }
for mode in 0 1; do
    for core in Haswell Prescott; do
        OPENBLAS_CORETYPE=$core "$F" train --model tiny --data "$T/corpus.txt" --steps 6 --eval-every 3 \
            --reproducible $mode --threads 1 --ckpt-dir '' --log "$T/repro_${mode}_$core.jsonl" --progress 0 \
            >"$T/repro.out" 2>&1 || bad "train --reproducible $mode under $core" "$(tail -3 "$T/repro.out")"
    done
done
expect_eq "--reproducible 1: the same bits under two sgemm kernels" "" \
    "$(diff <(strip_log "$T/repro_1_Haswell.jsonl") <(strip_log "$T/repro_1_Prescott.jsonl") 2>&1)"
expect_eq "--reproducible 1: a log of 6 steps" 6 "$(strip_log "$T/repro_1_Haswell.jsonl" | grep -c '^{"step":')"
diff -q <(strip_log "$T/repro_0_Haswell.jsonl") <(strip_log "$T/repro_0_Prescott.jsonl") >/dev/null &&
    echo "note: --reproducible 0 gave the same bits under both kernels here"
expect_has "start event records the mode, machine and build" '"reproducible":1,"commit":' head -1 "$T/repro_1_Haswell.jsonl"
expect_has "start event records OPENBLAS_CORETYPE" '"openblas_coretype":"Prescott"' head -1 "$T/repro_1_Prescott.jsonl"
expect_err "train --reproducible 2" "--reproducible 2: expected 0 or 1" "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --reproducible 2
expect_has "ablate passes --reproducible 1" "--reproducible 1" "$F" ablate --presets fp32 --model tiny --data "$T/corpus.txt" \
    --steps 2 --out "$T/abl_repro" --dry-run
expect_eq "ablate: --extra's --reproducible is the only one" 1 "$("$F" ablate --presets fp32 --model tiny \
    --data "$T/corpus.txt" --steps 2 --out "$T/abl_repro" --dry-run --extra "--reproducible 0" 2>&1 | grep -o -- '--reproducible [01]' | wc -l)"

# --- issue 35/36: verify (matmul-check's modes on kernels/mm_check.h): the library names the
# input whose scales do not fit the recipe's grid or format, and the element off its format
d21="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }"
d12="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }"
npy_f4 "$T/s21_3.npy" "$d21" '\x00\x00\x40\x40\x00\x00\x80\x3f'  # [[3] [1]]: 3 is no e8m0 value
npy_f4 "$T/s21_1.npy" "$d21" '\x00\x00\x80\x3f\x00\x00\x80\x3f'
npy_f4 "$T/s12_1.npy" "$d12" '\x00\x00\x80\x3f\x00\x00\x80\x3f'
expect_err "matmul-check: a scale count off the recipe's grid" \
    "--a-scales '$T/xa.npy' has 8 scales; the recipe tensor on a 2 x 4 A makes 1 (1 x 1)" \
    "${XC[@]}" --result "$T/xc.npy" --scale tensor --a-scales "$T/xa.npy" --b-scales "$T/two.npy"
expect_err "matmul-check: scales without a recipe" "--a-scales '$T/two.npy' given but the recipe is none" \
    "${XC[@]}" --result "$T/xc.npy" --a-scales "$T/two.npy"
expect_err "matmul-check: a scale off the scale format" \
    "--a-scales '$T/s21_3.npy': element [0, 0] = 3 is not a value of e8m0" \
    "${XC[@]}" --result "$T/xc.npy" --scale block:4:e8m0 --a-scales "$T/s21_3.npy" --b-scales "$T/s12_1.npy"
expect_rc "matmul-check: unit block scales pass" 0 \
    "${XC[@]}" --result "$T/xc.npy" --scale block:4:e8m0 --a-scales "$T/s21_1.npy" --b-scales "$T/s12_1.npy"
expect_err "matmul-check: an element off its format, with its nearest value" \
    "--a-values '$T/xa11.npy': element [0, 0] = 1.10000002 is not a value of e4m3 (nearest 1.125)" \
    "$F" matmul-check --a e4m3 --b e4m3 --a-values "$T/xa11.npy" --b-values "$T/xb.npy" --result "$T/xc.npy"

# --- issue 35/36: formats (the recipe parser has autocast's "+tensor": quantize takes it too)
expect_rc "quantize block:16:e4m3+tensor" 0 "$F" quantize "$T/b500.npy" "$T/bt.npy" --to e2m1 --scale block:16:e4m3+tensor
expect_rc "quantize nvfp4" 0 "$F" quantize "$T/b500.npy" "$T/bn.npy" --to e2m1 --scale nvfp4
expect_eq "block:16:e4m3+tensor is nvfp4, bit for bit" "" "$(cmp "$T/bt.npy" "$T/bn.npy" 2>&1)"
expect_has "block:16:e4m3+tensor is spelled nvfp4" "scale=nvfp4" "$F" quantize "$T/b500.npy" "$T/bt.npy" --to e2m1 \
    --scale block:16:e4m3+tensor
expect_has "tile:16x16:e4m3+tensor spelled so it parses back" "scale=tile:16x16:e4m3:rne+tensor" "$F" quantize \
    "$T/b500.npy" "$T/bt.npy" --to e2m1 --scale tile:16x16:e4m3+tensor
expect_err "quantize +tensor on one tile" "+tensor puts tile scales under a tensor scale" "$F" quantize "$T/b500.npy" \
    "$T/bt.npy" --to e2m1 --scale tensor+tensor

# --- issue 36/37: entry points (the kernel mm_cpu ran is in matmul-check's json: the fast engine
# kernel for the NVIDIA fused kinds, every output of normal operands done in vectors)
for kc in "hopper:wgmma e4m3" "ampere:mma bf16" "hopper:wgmma:f16 e4m3" "ampere:mma:f16 fp16"; do
    set -- $kc
    expect_has "matmul-check json: $1 on $2 names engine-fast, no output left to the model" \
        '"kernel": "engine-fast", "model_outputs": 0,' "$F" matmul-check --a "$2" --b "$2" --acc "$1" --m 24 --n 40 \
        --k 96 --format json
done
expect_has "matmul-check json: tf32 operands run the engine's scalar model" '"kernel": "engine-model", "model_outputs": 64,' \
    "$F" matmul-check --a fp32 --b fp32 --acc hopper:wgmma --m 8 --n 8 --k 16 --format json
expect_has "matmul-check json: m13:rtz names the float32-lane kernel" '"kernel": "emu-f32"' \
    "$F" matmul-check --a e4m3 --b e4m3 --acc m13:rtz --m 8 --n 8 --k 16 --format json

# The trainer's log names the kernels of the policy's engine products (its mm_paths event).
for kc in "hopper:wgmma e4m3 tensor" "ampere:mma bf16 none"; do
    set -- $kc
    printf 'name eng\nsite *.in %s %s\nsite *.w %s %s\nsite *.grad %s %s\naccumulator %s\n' "$2" "$3" "$2" "$3" \
        "$2" "$3" "$1" >"$T/eng.policy"
    rm -f "$T/eng.jsonl"
    "$F" train --model tiny --data "$T/corpus.txt" --steps 1 --policy "$T/eng.policy" --ckpt-dir '' \
        --log "$T/eng.jsonl" --progress 0 >/dev/null 2>&1
    expect_has "train log: $1 on $2 takes the fast engine kernel" \
        '{"event":"mm_paths","step":1,"paths":[{"kernel":"engine-fast","products":' cat "$T/eng.jsonl"
    expect_eq "train log: $1 on $2 runs no product on the scalar model alone" "" \
        "$(grep -o '"kernel":"engine-model"' "$T/eng.jsonl")"
done
# --- issue 38: an ablation cut short resumes its unfinished run from the last checkpoint
# (--ckpt-every), bit for bit: the run is stopped at step 6 of 12 (the child's own command plus
# --stop-at 6), then the same ablate command resumes it; its last step equals a whole run's.
ARS=(ablate --presets bf16-amp --model tiny --steps 12 --eval-every 6 --threads 1 --ckpt-every 3 --data "$T/corpus.txt"
     --no-report)
"$F" "${ARS[@]}" --out "$T/ars-whole" >/dev/null 2>&1
child=$("$F" "${ARS[@]}" --out "$T/ars-cut" --dry-run 2>&1 | sed -n 's/^  fplab train /train /p')
eval "\"\$F\" $child --stop-at 6" >/dev/null 2>&1
expect_has "ablate --ckpt-every: a cut run stops at step 6" '"step":6,' cat "$T/ars-cut/runs/bf16-amp/seed-1/log.jsonl"
expect_has "ablate --ckpt-every: the cut run resumes" "first run: fplab train --resume" "$F" "${ARS[@]}" --out "$T/ars-cut"
expect_has "ablate --ckpt-every: the resumed run reaches step 12" '"step":12,' \
    cat "$T/ars-cut/runs/bf16-amp/seed-1/log.jsonl"
expect_eq "ablate --ckpt-every: the resumed run's last step is the whole run's" \
    "$(grep '"step":12,' "$T/ars-whole/runs/bf16-amp/seed-1/log.jsonl" | sed 's/"tokens_per_s":[^,]*,"elapsed_s":[^,]*,//')" \
    "$(grep '"step":12,' "$T/ars-cut/runs/bf16-amp/seed-1/log.jsonl" | sed 's/"tokens_per_s":[^,]*,"elapsed_s":[^,]*,//')"
expect_err "ablate: --ckpt-every is ablate's own" "is set by ablate" "$F" ablate --presets fp32 --data "$T/corpus.txt" \
    --out "$T/ars-x" --extra "--ckpt-every 5"

# --- issue 36/37: f8f6f4 without scales (both Blackwells' fp8/fp6/fp4 kind runs on the block
# kernel with unit scales: engine-block, no output of finite operands left to the scalar model)
for kc in "blackwell:tcgen05 e4m3 e4m3" "blackwell:tcgen05:f16 e4m3 e5m2" "rtx-blackwell:mma e2m1 e3m2"; do
    set -- $kc
    expect_has "matmul-check json: $1 on $2 x $3, tensor scales, names engine-block, no output left to the model" \
        '"kernel": "engine-block", "model_outputs": 0,' "$F" matmul-check --a "$2" --b "$3" --scale tensor --acc "$1" \
        --m 24 --n 40 --k 96 --format json
done
printf 'name eng\nsite *.in e4m3 tensor\nsite *.w e4m3 tensor\nsite *.grad e4m3 tensor\naccumulator blackwell:tcgen05\n' \
    >"$T/engb.policy"
rm -f "$T/engb.jsonl"
"$F" train --model tiny --data "$T/corpus.txt" --steps 1 --policy "$T/engb.policy" --ckpt-dir '' --log "$T/engb.jsonl" \
    --progress 0 >/dev/null 2>&1
expect_has "train log: blackwell:tcgen05 on e4m3 takes the block kernel" \
    '{"event":"mm_paths","step":1,"paths":[{"kernel":"engine-block","products":' cat "$T/engb.jsonl"
expect_eq "train log: blackwell:tcgen05 on e4m3 runs no product on the scalar model alone" "" \
    "$(grep -o '"kernel":"engine-model"' "$T/engb.jsonl")"

echo "$pass passed, $fail failed"
[[ $fail == 0 ]]
