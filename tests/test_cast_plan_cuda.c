// test_cast_plan_cuda.c: autocast's cast plans on a real device: the tests of
// test_cast_plan_cuda_shim.c run on device memory through ac_cast_plan_run(AC_EXEC_CUDA) (make
// test-gpu). Without a GPU every test but the refusals skips (a failure under
// FPLAB_REQUIRE_GPU=1), as test_cast_cuda does.
#define PLAN_ON_DEVICE 1
#include "test_cast_plan_cuda_shim.c"
