#!/bin/bash
# check_symbols.sh LIB...: what fplab's library files export. Run by `make check-symbols` (part of
# make test) on build/libfplab.a and build/libfplab.so, and by check_install.sh on the installed ones.
#   check_symbols.sh --print-ver: the version script the API calls for (to review and commit as
#   mk/libfplab.ver when a public header or the Python binding changed).
#
# The policy (docs/design.md, "The library's surface"):
# - libfplab.so exports exactly the names listed in mk/libfplab.ver, and that list is the API:
#   every function declared in a public header of formats/, kernels/, autocast/, trainer/ and
#   experiments/ (every .h there but *_internal.h), plus what the Python extension
#   (python/fplab/*.c) calls beyond them. A list that misses a public function, or names one that
#   no public header declares and the binding does not need (util/'s fio_, jx_, xp_, a report
#   internal), fails, as does a .so that exports anything else or lacks a listed name.
# - every exported symbol carries a prefix of its layer (the "prefixes:" line of
#   mk/libfplab.ver) and none is an internal prefix__ helper (fmt__x, mm__x);
# - the Python binding's fplab symbols all resolve in the .so (its objects, compiled here against
#   Python's headers, are read with nm -u; skipped with a note when Python.h is missing).
# - archive: every global definition carries a prefix (internal prefix__ and util/'s helpers
#   allowed: libfplab.a keeps everything, for the fplab command and the tests), and so is what a
#   compiler emits by itself: C++ entities of std:: or of an anonymous namespace,
#   DW.ref.__gxx_personality_v0, and OpenMP's named-critical locks (.gomp_critical_user_NAME:
#   reported when NAME has no prefix, not failed, since a clash only shares a lock). A C++ class
#   or function at global scope (e.g. `struct DevBuf` in a .cu file outside an anonymous
#   namespace) fails: its inline members are weak symbols that a user's class of the same name
#   would silently replace.
# - archive: no object of formats/, kernels/ or autocast/ calls exit, exec*, fork, system or
#   setenv/putenv/unsetenv (the library layers return status codes; the process is the
#   program's).
# Exit status: 0 all good, 1 a rule broken (what and why listed), 2 usage.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
ver=$here/mk/libfplab.ver
[ $# -ge 1 ] || { echo "usage: $0 LIB.a|LIB.so ... | --print-ver" >&2; exit 2; }
prefixes=$(sed -n 's/^ *prefixes: *//p' "$ver")
[ -n "$prefixes" ] || { echo "check_symbols: no 'prefixes:' line in mk/libfplab.ver" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

has_prefix() {  # NAME [internal-ok]
    local p
    for p in $prefixes; do
        if [[ $1 == "$p"* ]]; then
            [[ ${1:${#p}:1} == _ && -z ${2:-} ]] && return 1
            return 0
        fi
    done
    return 1
}

# A mangled C++ name's first component: ok when std::, an anonymous namespace or prefixed.
cxx_ok() {
    local s=${1#_Z}
    s=${s#T[VIST]}  # vtable, typeinfo (name) of a type
    s=${s#N}
    while [[ $s == [rVK]* ]]; do s=${s:1}; done
    [[ $s == St* || $s == Sa* || $s == Sb* || $s == Ss* || $s == Si* || $s == So* || $s == Sd* ]] && return 0
    if [[ $s =~ ^([0-9]+)(.*)$ ]]; then
        local name=${BASH_REMATCH[2]:0:${BASH_REMATCH[1]}}
        [[ $name == _GLOBAL__N* ]] && return 0
        has_prefix "$name" internal && return 0
        [[ $name == fplab ]] && return 0
    fi
    return 1
}

# "HEADER NAME" for each function declared in a public header (gcc -aux-info lists every
# prototype of a translation unit with the file that declares it; static inline ones are not
# library symbols).
public_api() {
    local h
    for h in "$here"/{formats,kernels,autocast,trainer,experiments}/*.h; do
        h=${h#"$here"/}
        [[ $h == *_internal.h ]] || echo "#include \"$h\""
    done > "$tmp/api.c"
    (cd "$here" && gcc -std=c11 -D_GNU_SOURCE -I. -Wno-psabi -aux-info "$tmp/api.aux" -S -o /dev/null "$tmp/api.c") ||
        return 1
    perl -ne 'print "$1 $2\n" if m{^/\* (?:\./)?((?:formats|kernels|autocast|trainer|experiments)/[^:]+):\d+:\w+ \*/ extern .*?([A-Za-z_]\w*) \(}' \
        "$tmp/api.aux" | grep -v '_internal\.h ' | sort -u
}

# "FILE NAME" for each prefixed symbol the Python extension calls (its undefined symbols).
python_needs() {
    local inc f
    inc=$(python3-config --includes 2>/dev/null) || return 1
    for f in "$here"/python/fplab/*.c; do
        cc -std=gnu11 -c $inc -I"$here" -DFPLAB_VERSION='"check"' "$f" -o "$tmp/py.o" 2>/dev/null || return 1
        nm -u "$tmp/py.o" | awk '{print $NF}' | while read -r s; do
            has_prefix "$s" internal && echo "python/fplab/${f##*/} $s"
        done
    done | sort -u
}

# The names mk/libfplab.ver exports (between "global:" and "local:", comments removed).
listed() { sed 's|/\*.*\*/||g' "$ver" | sed -n '/global:/,/local:/p' | grep -o '[A-Za-z_][A-Za-z0-9_]*;' | tr -d ';' | sort; }

if [ "$1" = --print-ver ]; then
    public_api > "$tmp/api" || { echo "check_symbols: gcc -aux-info failed on the public headers" >&2; exit 2; }
    python_needs > "$tmp/py" || { echo "check_symbols: cannot compile python/fplab/*.c (python3-config, Python.h)" >&2; exit 2; }
    sed -n '1,/^{/p' "$ver" | sed '$d'
    echo "{"
    echo "  global:"
    { cat "$tmp/api"; awk 'NR == FNR {api[$2] = 1; next} !($2 in api)' "$tmp/api" "$tmp/py" |
        sed 's/^\(python\/fplab\/[^ ]*\)/\1:beyond-the-public-headers/'; } |
        awk '$1 != last { if (line) print line; print "    /* " $1 " */"; line = "   "; last = $1 }
             { if (length(line) + length($2) + 2 > 100) { print line; line = "   " } line = line " " $2 ";" }
             END { if (line) print line }' | sed 's|:beyond-the-public-headers \*/| (beyond the public headers) */|'
    echo "  local: *;"
    echo "};"
    exit 0
fi

fail=0
so_file=""
for lib in "$@"; do
    [ -f "$lib" ] || { echo "check_symbols: $lib: no such file" >&2; exit 2; }
    bad=()
    warn=()
    n=0
    case "$lib" in
    *.a)
        while read -r _ type sym; do
            n=$((n + 1))
            case "$sym" in
            .gomp_critical_user_*)
                name=${sym#.gomp_critical_user_}
                has_prefix "$name" internal || [[ $name == fplab_* ]] || warn+=("$sym") ;;
            DW.ref.__gxx_personality_v0) ;;
            # AddressSanitizer's one-definition-rule marker of a global: judged by its global
            __odr_asan.*) has_prefix "${sym#__odr_asan.}" internal || bad+=("$sym") ;;
            _Z*) cxx_ok "$sym" || bad+=("$sym") ;;
            *) has_prefix "$sym" internal || bad+=("$sym") ;;
            esac
        done < <(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3')
        ;;
    *.so | *.so.*)
        so_file=$lib
        while read -r _ type sym; do
            n=$((n + 1))
            has_prefix "$sym" || bad+=("$sym")
        done < <(nm -D --defined-only "$lib" | awk 'NF == 3')
        ;;
    *) echo "check_symbols: $lib: expected a .a or .so file" >&2; exit 2 ;;
    esac
    for w in "${warn[@]}"; do echo "check_symbols: $lib: note: OpenMP critical section without a prefix: $w"; done
    if [ ${#bad[@]} -gt 0 ]; then
        fail=1
        echo "check_symbols: $lib: ${#bad[@]} exported symbols without a known prefix (mk/libfplab.ver)" \
             "or internal (prefix__):"
        printf '  %s\n' "${bad[@]}" | sort -u | while read -r s; do
            d=$(echo "$s" | c++filt 2>/dev/null)
            [ "$d" != "$s" ] && echo "  $s  ($d)" || echo "  $s"
        done
        echo "  expected: a prefix of its layer (fmt_, mm_, ...) on every exported function and object;"
        echo "  static (or an anonymous namespace) for what one file keeps to itself; prefix__ for what"
        echo "  the library's files share (hidden in the .so)"
    else
        echo "check_symbols: $lib: $n exported symbols, all prefixed"
    fi
done

# The shared library's surface: exactly the list, and the list exactly the API.
if [ -n "$so_file" ]; then
    nm -D --defined-only "$so_file" | awk 'NF == 3 {print $3}' | sort -u > "$tmp/exported"
    listed > "$tmp/listed"
    extra=$(comm -13 "$tmp/listed" "$tmp/exported") missing=$(comm -23 "$tmp/listed" "$tmp/exported")
    if [ -n "$extra$missing" ]; then
        fail=1
        [ -n "$extra" ] && echo "check_symbols: $so_file exports what mk/libfplab.ver does not list:" &&
            printf '  %s\n' $extra
        [ -n "$missing" ] && echo "check_symbols: $so_file lacks what mk/libfplab.ver lists (not defined in the library?):" &&
            printf '  %s\n' $missing
    else
        echo "check_symbols: $so_file: exports exactly the $(wc -l < "$tmp/listed") names of mk/libfplab.ver"
    fi
    if ! command -v gcc >/dev/null || ! public_api > "$tmp/api"; then
        echo "[SKIP] check_symbols: the API list against the public headers: gcc -aux-info unavailable or failed"
    else
        if python_needs > "$tmp/py"; then
            comm -23 <(awk '{print $2}' "$tmp/py" | sort -u) "$tmp/exported" > "$tmp/py_missing"
            if [ -s "$tmp/py_missing" ]; then
                fail=1
                echo "check_symbols: the Python binding calls what $so_file does not export:"
                grep -wFf "$tmp/py_missing" "$tmp/py" | sed 's/^/  /'
            else
                echo "check_symbols: the Python binding's $(wc -l < "$tmp/py") fplab symbols all resolve in $so_file"
            fi
        else
            echo "[SKIP] check_symbols: the Python binding's symbols: python/fplab/*.c did not compile (python3-config, Python.h)"
            : > "$tmp/py"
        fi
        awk '{print $2}' "$tmp/api" "$tmp/py" | sort -u > "$tmp/want"
        unlisted=$(comm -23 "$tmp/want" "$tmp/listed") unwanted=$(comm -13 "$tmp/want" "$tmp/listed")
        if [ -n "$unlisted" ]; then
            fail=1
            echo "check_symbols: public functions missing from mk/libfplab.ver (bash tests/check_symbols.sh --print-ver):"
            for s in $unlisted; do grep -w "$s\$" "$tmp/api" "$tmp/py" -h | head -1 | sed 's/^\(.*\) \(.*\)/  \2  (\1)/'; done
        fi
        if [ -n "$unwanted" ]; then
            fail=1
            echo "check_symbols: mk/libfplab.ver lists what no public header declares and the Python binding does not call"
            echo "  (internal: util/'s helpers, *_internal.h, functions without a declaration; keep them out of the .so):"
            printf '  %s\n' $unwanted
        fi
        [ -z "$unlisted$unwanted" ] &&
            echo "check_symbols: mk/libfplab.ver is the API: the public headers' $(wc -l < "$tmp/api") functions and the binding's needs"
    fi
fi

# The library layers (formats/, kernels/, autocast/: CONVENTIONS.md, "Errors") return status
# codes: none of their objects may end (abort included), replace or fork the process or change
# its environment (OpenBLAS tuning offers a decision, mm_blas_env_wanted; the re-exec is the
# program's).
for lib in "$@"; do
    [[ $lib == *.a ]] || continue
    while read -r member sym; do
        o=${member%:}  # "lib.a:name.o:"
        o=${o##*:}
        o=${o%.o}
        for d in formats kernels autocast; do
            if compgen -G "$here/$d/$o.c" >/dev/null || compgen -G "$here/$d/$o.cu" >/dev/null ||
               compgen -G "$here/$d/*/$o.c" >/dev/null || compgen -G "$here/$d/*/$o.cu" >/dev/null; then
                echo "check_symbols: $lib: $d/$o calls $sym: a library layer must return a status instead"
                fail=1
            fi
        done
    done < <(nm -A "$lib" 2>/dev/null | awk '$(NF-1) == "U" && $NF ~ /^(exit|_exit|_Exit|abort|exec[lvpe]*|fork|vfork|system|setenv|putenv|unsetenv)$/ {print $1, $NF}')
done
exit $fail
