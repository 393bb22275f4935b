// test_mm_dev_cuda.c: the device-pointer GEMM on a real device: the tests of
// test_mm_dev_cuda_shim.c run on device memory through mm_cuda_dev (make test-gpu). Without a GPU
// every test skips (a failure under FPLAB_REQUIRE_GPU=1), as test_cast_cuda does.
#define MM_DEV_ON_DEVICE 1
#include "test_mm_dev_cuda_shim.c"
