#!/bin/bash
# check_install.sh ROOT LIBDIR VERSION [DEV_PC [ARCH]]: what `make install DESTDIR=ROOT` left is
# what a distribution would accept. Run by `make check-install` (part of make test) on a
# portable build without CUDA, as a machine without CUDA would have it.
# - libfplab.so.VERSION with SONAME libfplab.so.MAJOR, the two links, no RPATH; libfplab.a;
# - fplab.pc: `pkg-config --libs fplab` is -L... -lfplab and nothing else (the .so names its
#   own dependencies); --static brings MPFR, OpenBLAS and OpenMP;
# - a C program that rounds a number builds with nothing but pkg-config's flags, shared and
#   static, and prints the right values; every installed header compiles on its own (-std=c11);
# - the command answers --version with VERSION;
# - no AVX/AVX-512 instruction in the library when ARCH is portable (x86-64, x86-64-v2, empty),
#   except in the variants chosen at run time by the CPU (functions named *avx2* / *avx512*,
#   compiled with a target attribute and called only after __builtin_cpu_supports);
# - the exported symbols (tests/check_symbols.sh);
# - DEV_PC (the dev build's fplab.pc, CUDA included where nvcc was found) keeps CUDA, MPFR and
#   OpenBLAS out of a shared link as well.
set -u
[ $# -ge 3 ] || { echo "usage: $0 ROOT LIBDIR VERSION [DEV_PC [ARCH]]" >&2; exit 2; }
root=$1 libdir=$2 version=$3 dev_pc=${4:-} arch=${5-x86-64-v2}
here=$(cd "$(dirname "$0")/.." && pwd)
lib=$root$libdir
major=${version%%.*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { echo "  ok: $*"; pass=$((pass + 1)); }
bad() { echo "  FAIL: $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

echo "check_install: $root (libdir $libdir, version $version)"
# --- files and links
check "libfplab.a installed" test -f "$lib/libfplab.a"
check "libfplab.so.$version is a file" test -f "$lib/libfplab.so.$version" -a ! -L "$lib/libfplab.so.$version"
check "libfplab.so.$major -> libfplab.so.$version" test "$(readlink "$lib/libfplab.so.$major")" = "libfplab.so.$version"
check "libfplab.so -> libfplab.so.$major" test "$(readlink "$lib/libfplab.so")" = "libfplab.so.$major"
soname=$(readelf -d "$lib/libfplab.so.$version" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
check "SONAME is libfplab.so.$major (got '$soname')" test "$soname" = "libfplab.so.$major"
check "no RPATH/RUNPATH in the library" bash -c "! readelf -d '$lib/libfplab.so.$version' | grep -q -E 'RPATH|RUNPATH'"
prefix_dir=$(sed -n 's/^prefix=//p' "$lib/pkgconfig/fplab.pc")
check "fplab --version starts with 'fplab $version'" test "$("$root$prefix_dir/bin/fplab" --version | head -1 | cut -d" " -f1-2)" = "fplab $version"

# --- pkg-config, relocated to ROOT (the file itself says prefix=$prefix_dir)
mkdir -p "$tmp/pc"
sed "s|^prefix=.*|prefix=$root$prefix_dir|" "$lib/pkgconfig/fplab.pc" > "$tmp/pc/fplab.pc"
export PKG_CONFIG_PATH=$tmp/pc
check "pkg-config --modversion fplab is $version" test "$(pkg-config --modversion fplab)" = "$version"
libs=$(pkg-config --libs fplab) static_libs=$(pkg-config --static --libs fplab) cflags=$(pkg-config --cflags fplab)
echo "  pkg-config --libs: $libs"
echo "  pkg-config --static --libs: $static_libs"
check "shared link flags are -L... -lfplab only" test "$(echo $libs | tr ' ' '\n' | grep -v -e '^-L' -e '^-lfplab$' | wc -l)" = 0
check "--static adds MPFR" grep -q -e '-lmpfr' <<< "$static_libs"
if grep -q 'openblas' "$lib/pkgconfig/fplab.pc"; then check "--static adds OpenBLAS" grep -q -e '-lopenblas' <<< "$static_libs"; fi
check "no CUDA in a NO_CUDA build's fplab.pc" bash -c "! grep -q -i cuda '$lib/pkgconfig/fplab.pc'"

# --- a C program that rounds numbers, through pkg-config only
cat > "$tmp/round.c" <<'EOF'
#include <stdio.h>
#include "formats/codec.h"
int main(void) {
    fmt_t f;
    if (fmt_from_name(&f, "float8_e4m3fn") != FMT_OK) return 1;
    float x[4] = {0.1f, 300.0f, 464.0f, 500.0f};
    fmt_round_opts o = {0};  /* rne, IEEE overflow: 500 -> NaN in e4m3 (no inf) */
    if (fmt_round_f32(&f, x, 4, &o, NULL) != FMT_OK) return 1;
    printf("%g %g %g %g 0x%02x\n", x[0], x[1], x[2], x[3], (unsigned)fmt_encode1(&f, 0.1));
    return 0;
}
EOF
want="0.101562 288 448 nan 0x1d"
if cc -std=c11 -Wall -Wextra -Werror $cflags "$tmp/round.c" $libs -o "$tmp/round_shared" 2> "$tmp/err"; then
    ok "C program links with \$(pkg-config --cflags --libs fplab)"
    got=$(LD_LIBRARY_PATH=$lib "$tmp/round_shared")
    check "shared: prints '$want' (got '$got')" test "$got" = "$want"
    needed=$(readelf -d "$tmp/round_shared" | sed -n 's/.*Shared library: \[\(.*\)\].*/\1/p' | tr '\n' ' ')
    check "shared: the program needs libfplab.so.$major and no MPFR/BLAS/CUDA itself ($needed)" \
        bash -c "grep -q 'libfplab.so.$major' <<< '$needed' && ! grep -q -E 'mpfr|blas|cuda' <<< '$needed'"
else
    bad "C program links with \$(pkg-config --cflags --libs fplab): $(cat "$tmp/err")"
fi
# Static: the archive by its path (a plain -lfplab would take the .so), the rest from --static.
slibs=$(echo " $static_libs " | sed "s| -lfplab | $lib/libfplab.a |")
if cc -std=c11 $cflags "$tmp/round.c" $slibs -o "$tmp/round_static" 2> "$tmp/err"; then
    ok "C program links statically with \$(pkg-config --static --libs fplab)"
    got=$("$tmp/round_static")
    check "static: prints '$want' (got '$got')" test "$got" = "$want"
    check "static: no libfplab.so needed" bash -c "! readelf -d '$tmp/round_static' | grep -q libfplab"
else
    bad "C program links statically: $(cat "$tmp/err")"
fi

# --- every installed header on its own, strict C11
nh=0 hbad=()
for h in "$root$prefix_dir"/include/fplab/*/*.h; do
    rel=${h#"$root$prefix_dir"/include/fplab/}
    nh=$((nh + 1))
    echo "#include \"$rel\"" | cc -std=c11 -Wall -Wextra -Wno-psabi -Werror -fsyntax-only $cflags -x c - 2> "$tmp/err" ||
        hbad+=("$rel: $(head -3 "$tmp/err")")
done
if [ ${#hbad[@]} -eq 0 ]; then ok "$nh installed headers compile on their own (-std=c11 -Wall -Wextra -Werror)"
else bad "headers that do not compile on their own:"; printf '    %s\n' "${hbad[@]}"; fi

# --- portable code
case "$arch" in
"" | x86-64 | x86-64-v2)
    n=$(objdump -d --no-show-raw-insn "$lib/libfplab.so.$version" |
        awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 } /%[yz]mm[0-9]/ && fn !~ /avx(2|512)/ { n++ } END { print n + 0 }')
    check "no AVX/AVX-512 registers outside the run-time dispatched variants (ARCH=${arch:-default}; found $n instructions)" \
        test "$n" = 0 ;;
esac

# --- symbols
if bash "$here/tests/check_symbols.sh" "$lib/libfplab.a" "$lib/libfplab.so.$version" > "$tmp/sym" 2>&1; then
    ok "installed symbols: $(tail -1 "$tmp/sym" | sed 's/^check_symbols: //')"
else
    bad "installed symbols:"; sed 's/^/    /' "$tmp/sym"
fi

# --- the dev build's fplab.pc (CUDA where nvcc was found)
if [ -n "$dev_pc" ]; then
    dev_libs=$(PKG_CONFIG_PATH=$(dirname "$dev_pc") pkg-config --libs fplab)
    dev_static=$(PKG_CONFIG_PATH=$(dirname "$dev_pc") pkg-config --static --libs fplab)
    echo "  dev fplab.pc: --libs: $dev_libs; --static: $dev_static"
    check "dev fplab.pc: shared link flags are -L... -lfplab only" \
        test "$(echo $dev_libs | tr ' ' '\n' | grep -v -e '^-L' -e '^-lfplab$' | wc -l)" = 0
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
