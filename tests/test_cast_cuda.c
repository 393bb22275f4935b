// test_cast_cuda.c: the CUDA casts on a real device: the tests of test_cast_cuda_shim.c run on
// device memory through mm_cuda_round_f32 and mm_cuda_quantize_f32 (make test-gpu). Without a
// GPU every test skips (a failure under FPLAB_REQUIRE_GPU=1), as test_mm_cuda does.
#define CAST_ON_DEVICE 1
#include "test_cast_cuda_shim.c"
