#!/bin/bash
# check_symbols.sh LIB...: every symbol that a library file of fplab exports carries one of the
# prefixes listed once in mk/libfplab.ver (fmt_, mm_, ac_, ...). Run by `make check-symbols`
# (part of make test) on build/libfplab.a and build/libfplab.so, and by check_install.sh on the
# installed ones.
# - shared library: its dynamic symbols; internal helpers (prefix plus a second underscore,
#   fmt__x) must be hidden too, and, when an archive is given as well, every public function of
#   the archive must be exported (the version script lost nothing).
# - archive: the global definitions of its objects. Internal prefix__ helpers are allowed (an
#   archive cannot hide what its own files share), and so is what a compiler emits by itself:
#   C++ entities of std:: or of an anonymous namespace, DW.ref.__gxx_personality_v0, and
#   OpenMP's named-critical locks (.gomp_critical_user_NAME: reported when NAME has no prefix,
#   not failed, since a clash only shares a lock). A C++ class or function at global scope
#   (e.g. `struct DevBuf` in a .cu file outside an anonymous namespace) fails: its inline
#   members are weak symbols that a user's class of the same name would silently replace.
# - archive: no object of formats/, kernels/ or autocast/ calls exit, exec*, fork, system or
#   setenv/putenv/unsetenv (the library layers return status codes; the process is the
#   program's).
# Exit status: 0 all good, 1 a symbol without a prefix (listed), 2 usage.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 LIB.a|LIB.so ..." >&2; exit 2; }
prefixes=$(grep -o '[a-z0-9]*_\[!_\]\*' "$here/mk/libfplab.ver" | sed 's/\[!_\]\*//')
[ -n "$prefixes" ] || { echo "check_symbols: no prefixes found in mk/libfplab.ver" >&2; exit 2; }

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

fail=0
declare -A archive_public=()
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
            _Z*) cxx_ok "$sym" || bad+=("$sym") ;;
            *)
                if has_prefix "$sym" internal; then
                    [[ $type == T ]] && has_prefix "$sym" && archive_public[$sym]=1
                else
                    bad+=("$sym")
                fi ;;
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
        echo "check_symbols: $lib: ${#bad[@]} exported symbols without a known prefix (mk/libfplab.ver):"
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

# The library layers (formats/, kernels/, autocast/: CONVENTIONS.md, "Errors") return status
# codes: none of their objects may end, replace or fork the process or change its environment
# (OpenBLAS tuning offers a decision, mm_blas_env_wanted; the re-exec is the program's).
for lib in "$@"; do
    [[ $lib == *.a ]] || continue
    while read -r member sym; do
        o=${member%:}  # "lib.a:name.o:"
        o=${o##*:}
        o=${o%.o}
        for d in formats kernels autocast; do
            if [ -f "$here/$d/$o.c" ] || [ -f "$here/$d/$o.cu" ]; then
                echo "check_symbols: $lib: $d/$o calls $sym: a library layer must return a status instead"
                fail=1
            fi
        done
    done < <(nm -A "$lib" 2>/dev/null | awk '$(NF-1) == "U" && $NF ~ /^(exit|_exit|_Exit|exec[lvpe]*|fork|vfork|system|setenv|putenv|unsetenv)$/ {print $1, $NF}')
done

if [ -n "$so_file" ] && [ ${#archive_public[@]} -gt 0 ]; then
    exported=$(nm -D --defined-only "$so_file" | awk 'NF == 3 {print $3}')
    missing=()
    for s in "${!archive_public[@]}"; do
        grep -qx "$s" <<< "$exported" || missing+=("$s")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        fail=1
        echo "check_symbols: $so_file does not export ${#missing[@]} public functions of the archive:"
        printf '  %s\n' "${missing[@]}" | sort
    fi
fi
exit $fail
