// rng.c: key derivation for the counter-based generator (see rng.h).
#include "rng.h"

static uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

fmt_rng_key fmt_rng_make_key(uint64_t seed, uint64_t stream) {
    uint64_t a = splitmix64(seed), b = splitmix64(a ^ splitmix64(stream + 0x632be59bd9b4e019ULL));
    return (fmt_rng_key){(uint32_t)a, (uint32_t)b, (uint32_t)(b >> 32) ^ (uint32_t)(a >> 32)};
}
