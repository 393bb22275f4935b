// format.h: the one descriptor type for every floating-point format fplab knows, the table of
// named formats, custom eXmY formats, and every property derived from a descriptor.
// Constraints: no MPFR, no global state; every constant is computed from (bits, e, m, bias,
// signedness, special), never typed in.
#ifndef FPLAB_FORMAT_H
#define FPLAB_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Status codes shared by every library call of formats/ (0 is success).
enum {
    FMT_OK = 0,
    FMT_EINVAL = 1,    // an argument is out of range (message from fmt_validate_* says which)
    FMT_EUNKNOWN = 2,  // a name that is not a known format, mode or recipe
    FMT_ENOMEM = 3,
};
const char *fmt_strerror(int status);

// How the top of the encoding space is used.
typedef enum {
    FMT_IEEE,    // all-ones exponent: inf (mantissa 0) and NaN (mantissa != 0)
    FMT_FN,      // no inf; only all-ones exponent with all-ones mantissa is NaN (OCP e4m3)
    FMT_FNUZ,    // no inf, no -0; the code 100...0 is the only NaN
    FMT_FINITE,  // every code is finite: no inf, no NaN (OCP fp6/fp4)
    FMT_E8M0,    // exponent-only scale style: no zero, no subnormals, all-ones code is NaN
    FMT_EXTENDED,  // IEEE P3109 extended: one NaN (the -0 code if signed, the all-ones code if
                   // unsigned), +-inf on the largest codes below it, no -0
} fmt_special;

typedef struct fmt {
    char name[40];
    int bits;          // total bits of a code
    int ebits, mbits;  // exponent and explicit mantissa (fraction) bits
    int bias;
    bool is_signed;
    fmt_special special;
    // --- derived by fmt_make(), never set by hand
    int emin;              // exponent of the smallest normal value
    int emax;              // exponent of the largest finite value
    double max;            // largest finite value
    double min_normal;     // smallest positive normal value
    double min_subnormal;  // smallest positive value (== min_normal when there are no subnormals)
    bool has_inf, has_nan, has_zero, has_negzero, has_subnormals;
} fmt_t;

// Builds a descriptor and derives its properties. Checks that the format fits in fp64
// (ebits <= 11, mbits <= 52), that bits == sign + ebits + mbits and that the special
// encoding is possible (e.g. IEEE NaN needs mbits >= 1). Returns FMT_OK or FMT_EINVAL.
int fmt_make(fmt_t *out, const char *name, int bits, int ebits, int mbits, int bias, bool is_signed,
             fmt_special special);

// Looks a format up by name: a table name (fp8_e4m3, bf16, ...), an alias people already use
// (float8_e4m3fn, bfloat16, float16, ...), or a custom spec "eXmY[:FLAG...]" with flags
// ieee|fn|fnuz|finite|e8m0, unsigned, bias=N (default: IEEE, signed, bias 2^(X-1)-1).
// Returns FMT_OK or FMT_EUNKNOWN/FMT_EINVAL.
int fmt_from_name(fmt_t *out, const char *name);

// Peers' names are accepted as they are spelled, case-insensitive, with or without a module
// prefix (torch., jnp., jax.numpy., ml_dtypes., numpy., np.): ml_dtypes' and PyTorch's names of
// the table's formats are its aliases, and the ml_dtypes formats that the table has no row for
// (float8_e4m3, float8_e3m4, float8_e4m3b11fnuz) are built from a custom spec and keep the
// peer's name. Names that mean more than one format (fp8, fp6, float8, float6) are FMT_EUNKNOWN:
// fmt_name_message gives the choices. IEEE P3109 names binaryKpP{s|u}f (finite; K = 3..16
// where the exponent fits float64: K - P <= 11 signed, K - P + 1 <= 11 unsigned) build their
// descriptor (signed: fnuz with bias 2^(K-P-1); unsigned: fn without sign, bias 2^(K-P));
// binaryKpP{s|u}e (extended, with infinities) the same fields with FMT_EXTENDED.

// IEEE P3109 formats with more exponent bits than float64 (K - P > 11 signed, K - P + 1 > 11
// unsigned: binary16p1se, binary13p1uf, ...; 50 of the draft's formats) have a *wide* descriptor:
// the six fields, emin, emax and the has_* flags as for any format, but the double fields max,
// min_normal and min_subnormal are 0, since their values reach 2^-32768 .. 2^32767. fmt_from_name
// refuses them (FMT_EINVAL; fmt_name_message says why), so nothing that computes in doubles ever
// sees one; fmt_from_name_wide accepts every name fmt_from_name accepts and these. What works on
// a wide descriptor: fmt_is_wide, fmt_get_info (its extremes NaN), fmt_nan_codes, fmt_kind, and
// formats/wide.h (exact values of codes, rounding a double to a code).
int fmt_from_name_wide(fmt_t *out, const char *name);
bool fmt_is_wide(const fmt_t *f);
// The magnitude code of the largest finite value (sign bit clear); where the format has inf,
// that is this code plus one.
uint64_t fmt_max_code(const fmt_t *f);

// Formats that only peers name (not table rows): the peer's name, the custom spec that builds
// it and which peer has it (for finfo --aliases and the docs). NULL beyond the last.
size_t fmt_peer_count(void);
const char *fmt_peer_get(size_t i, const char **spec, const char **peer);

// Why fmt_from_name(name) returned status, as one line for a user that the caller prefixes with
// the name: an ambiguous name with its choices, an invalid custom spec, or an unknown name with
// the nearest known names (formats/names.h's rule over table names, aliases, peers' names and
// IEEE P3109 names: "did you mean") and the list of names.
void fmt_name_message(const char *name, int status, char *msg, size_t len);

// True when a and b have the same layout: the six fields that define a format (bits, ebits,
// mbits, bias, signedness, special), so the same values and the same codes; the name and the
// derived fields are not compared. The one test of "the same format" (fp32, float and e8m23
// are one layout under three names).
bool fmt_same_layout(const fmt_t *a, const fmt_t *b);

// "table" when f has the fields of a table row, "peer" of a peer-only format, "p3109" for an
// IEEE P3109 name (binary8p3sf, ...), else "custom".
const char *fmt_kind(const fmt_t *f);

// The table of named formats, in the order finfo prints them.
size_t fmt_table_count(void);
const fmt_t *fmt_table_get(size_t i);
// Aliases of table entry i, as a NULL-terminated list (for --help and docs).
const char *const *fmt_table_aliases(size_t i);

// --- properties (finfo)
typedef struct {
    double max, min;          // min is the smallest finite value: -max if signed, else 0 (or,
                              // without a zero as in e8m0, the smallest positive value)
    double smallest_normal;   // "tiny" in NumPy's finfo
    double smallest_subnormal;
    double eps;               // 2^-mbits: distance from 1 to the next larger value
    double resolution;        // NumPy's definition: 10^-floor(-log10(eps))
    uint64_t finite_values;   // distinct finite real values (+0 and -0 count once)
    uint64_t nan_codes;       // number of codes that decode to NaN
    double epsneg;            // 1 minus the largest value below 1 (NumPy's epsneg)
    int maxexp, minexp;       // NumPy's: emax + 1 (the first power of two that overflows), emin
    int precision;            // NumPy's: floor(-log10(eps)) decimal digits
} fmt_info;
void fmt_get_info(const fmt_t *f, fmt_info *out);

// The NaN codes of f in increasing order: writes at most cap of them to codes and returns how
// many there are in all.
size_t fmt_nan_codes(const fmt_t *f, uint64_t *codes, size_t cap);

// The unit in the last place of f at x: 2^(max(floor(log2|x|), emin) - mbits) (subnormals share
// the ulp of the smallest normal binade; x = 0, inf or NaN give the ulp at emin). The unit of
// every error "in ulps of the format" (cast, matmul-check, Python's scaled_matmul).
double fmt_ulp(const fmt_t *f, double x);

// True when every float32 value is exactly a value of f (fp32 and wider): rounding is a copy.
bool fmt_contains_f32(const fmt_t *f);
// True when every value of f is a float32 value (all formats of 32 bits or fewer that fplab
// names; custom ones only if they fit).
bool fmt_embeds_in_f32(const fmt_t *f);

#endif
