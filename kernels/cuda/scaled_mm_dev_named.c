// scaled_mm_dev_named.c: mm_cuda_dev_named (kernels/scaled_mm_cuda_dev.h), the same with or without
// nvcc: formats, accumulator and output rounding by name, for bindings (ctypes) that hold no
// descriptors. Constraints: no CUDA headers; names are parsed by the library's own parsers.
#include <stdio.h>
#include <string.h>

#include "kernels/scaled_mm_cuda_dev.h"

static int named_fail(char *msg, size_t len, const char *what, const char *name) {
    if (msg && len) snprintf(msg, len, "mm_cuda_dev_named: %s %s%s%s is not known", what, name ? "'" : "",
                             name ? name : "(NULL)", name ? "'" : "");
    return MM_EINVAL;
}

int mm_cuda_dev_named(float *C, size_t ldc, const float *a, size_t lda, int trans_a, const char *fmt_a,
                      const float *sa, int block_a, float ta, const float *ta_dev, const float *b, size_t ldb,
                      int trans_b, const char *fmt_b, const float *sb, int block_b, float tb, const float *tb_dev,
                      size_t M, size_t N, size_t K,
                      const char *acc, const char *out_fmt, const char *out_mode, float alpha, float beta,
                      uint64_t seed, uint64_t stream_id, uint64_t offset, void *stream, char *msg, size_t msg_len) {
    mm_operand A = {.x = a, .ld = lda, .trans = trans_a != 0, .scales = sa, .block_k = block_a, .tensor_scale = ta};
    mm_operand B = {.x = b, .ld = ldb, .trans = trans_b != 0, .scales = sb, .block_k = block_b, .tensor_scale = tb};
    if (!fmt_a || fmt_from_name(&A.fmt, fmt_a) != FMT_OK) return named_fail(msg, msg_len, "format", fmt_a);
    if (!fmt_b || fmt_from_name(&B.fmt, fmt_b) != FMT_OK) return named_fail(msg, msg_len, "format", fmt_b);
    mm_opts o;
    mm_opts_default(&o);
    o.alpha = alpha, o.beta = beta;
    char why[256] = "";
    if (!acc || mm_acc_from_name(&o.acc, acc, why, sizeof why) != MM_OK) {
        if (msg && msg_len) snprintf(msg, msg_len, "mm_cuda_dev_named: accumulator %s: %s", acc ? acc : "(NULL)", why);
        return MM_EINVAL;
    }
    if (out_fmt && out_fmt[0] && fmt_from_name(&o.out_fmt, out_fmt) != FMT_OK)
        return named_fail(msg, msg_len, "output format", out_fmt);
    if (out_mode && out_mode[0] && fmt_mode_spec_from_name(&o.out_round, out_mode) != FMT_OK)
        return named_fail(msg, msg_len, "output rounding mode", out_mode);
    o.out_round.seed = seed, o.out_round.stream = stream_id, o.out_round.offset = offset;
    return mm_cuda_dev_tscales(C, ldc, &A, &B, M, N, K, &o, ta_dev, tb_dev, stream, msg, msg_len);
}
