// blas_tune.c: OPENBLAS_CORETYPE for CPUs that Debian's OpenBLAS does not recognise, and
// GOMP_SPINCOUNT: the decision only (see blas_tune.h); nothing here sets or re-executes.
#include "kernels/blas_tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FPLAB_HAVE_BLAS
char *openblas_get_corename(void);
void openblas_set_num_threads(int n);
#endif

#if defined(FPLAB_HAVE_BLAS) && (defined(__x86_64__) || defined(__i386__))
// OpenBLAS core families that predate AVX2 / AVX-512 kernels.
static bool name_in(const char *name, const char *const *list) {
    for (; *list; list++)
        if (!strcasecmp(name, *list)) return true;
    return false;
}
#endif

bool mm_blas_better_coretype(char *want, size_t len) {
#if defined(FPLAB_HAVE_BLAS) && (defined(__x86_64__) || defined(__i386__))
    if (getenv("OPENBLAS_CORETYPE")) return false;
    const char *core = openblas_get_corename();
    if (!core) return false;
    static const char *const pre_avx2[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                           "Sandybridge", "Atom", "Bulldozer", "Piledriver",
                                           "Steamroller", "Excavator", "Barcelona", "Opteron", NULL};
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    __builtin_cpu_init();
    const char *pick = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && !name_in(core, avx512))
        pick = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && name_in(core, pre_avx2))
        pick = "Haswell";
    if (!pick) return false;
    snprintf(want, len, "%s", pick);
    return true;
#else
    (void)want, (void)len;
    return false;
#endif
}

int mm_blas_env_wanted(mm_env_var vars[MM_BLAS_ENV_MAX]) {
    int n = 0;
    char want[sizeof vars[0].value];
    if (mm_blas_better_coretype(want, sizeof want)) {
        snprintf(vars[n].name, sizeof vars[n].name, "OPENBLAS_CORETYPE");
        snprintf(vars[n].value, sizeof vars[n].value, "%s", want);
        n++;
    }
    // libgomp's idle threads spin for 300000 iterations before they sleep. With another process
    // on one of the cores, the spinning thread takes that core's time slices from the working
    // one; a spin count of 1000 gives most of them back and costs nothing on an idle machine
    // (docs/benchmarks.md, "Measurements that were comments in kernels/").
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
        snprintf(vars[n].name, sizeof vars[n].name, "GOMP_SPINCOUNT");
        snprintf(vars[n].value, sizeof vars[n].value, "1000");
        n++;
    }
    return n;
}

void mm_blas_env_read(mm_blas_env *e) {
    snprintf(e->cpu, sizeof e->cpu, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            const char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) || !colon) continue;
            colon += 1 + strspn(colon + 1, " \t");
            snprintf(e->cpu, sizeof e->cpu, "%.*s", (int)strcspn(colon, "\n"), colon);
            break;
        }
        fclose(f);
    }
    const char *ct = getenv("OPENBLAS_CORETYPE");
    snprintf(e->coretype, sizeof e->coretype, "%s", ct ? ct : "");
#ifdef FPLAB_HAVE_BLAS
    const char *core = openblas_get_corename();
    snprintf(e->blas_core, sizeof e->blas_core, "%s", core ? core : "unknown");
#else
    snprintf(e->blas_core, sizeof e->blas_core, "none");
#endif
    snprintf(e->isa, sizeof e->isa, "sse2");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) snprintf(e->isa, sizeof e->isa, "avx512");
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) snprintf(e->isa, sizeof e->isa, "avx2");
#else
    snprintf(e->isa, sizeof e->isa, "other");
#endif
}

void mm_blas_set_threads(int n) {
#ifdef FPLAB_HAVE_BLAS
    if (n > 0) openblas_set_num_threads(n);
#else
    (void)n;
#endif
}
