// Test library exporting two net plugin versions (v9 and v11) under distinct
// names, so a test can see which one the loader's probe order picks. Only
// init and devices do anything.
#include <nccl_net.h>

namespace {
ncclResult_t initV9(ncclDebugLogger_t) { return ncclSuccess; }
ncclResult_t initV11(void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
                     ncclProfilerCallback_t) {
  *ctx = nullptr;
  return ncclSuccess;
}
ncclResult_t devices(int* n) {
  *n = 1;
  return ncclSuccess;
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "multi-v9", .init = initV9, .devices = devices};
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "multi-v11", .init = initV11, .devices = devices};
}
