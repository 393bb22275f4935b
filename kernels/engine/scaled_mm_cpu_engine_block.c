// placeholder
#include "kernels/scaled_mm_internal.h"
bool mm__engine_block_covers(const mm__engine_plan *p, const mm_opts *o) { (void)p, (void)o; return false; }
int mm__engine_block_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                         size_t K, const mm_opts *o) {
    (void)C, (void)ldc, (void)A, (void)B, (void)M, (void)N, (void)K, (void)o;
    return MM_EUNSUPPORTED;
}
