// A v11 net plugin ("FailInit") for the rule "finalize only after a
// successful init". It counts init and finalize calls and, like real
// plugins, complains when finalize comes without a live init. The mode
// (ferrytestFailInitMode) picks what init does:
//   0  set *ctx, then fail (ncclSystemError)
//   1  succeed, and devices() reports no device (so the network is skipped)
#include <nccl_net.h>

#include <cstdio>

namespace {
int gMode = 0;
int gInits = 0;
int gFinalizes = 0;
int gLive = 0;  // successful inits not finalized yet
int gCtx;

ncclResult_t init(void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
                  ncclProfilerCallback_t) {
  gInits++;
  *ctx = &gCtx;  // a context is handed out even though init then fails
  if (gMode == 0) return ncclSystemError;
  gLive++;
  return ncclSuccess;
}
ncclResult_t devices(int* n) {
  *n = 0;
  return ncclSuccess;
}
ncclResult_t finalize(void*) {
  gFinalizes++;
  if (gLive == 0) {
    fprintf(stderr, "FailInit: Finalizing already finalized plugin\n");
    return ncclInternalError;
  }
  gLive--;
  return ncclSuccess;
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "FailInit", .init = init, .devices = devices, .finalize = finalize};
__attribute__((visibility("default"))) void ferrytestFailInitMode(int mode) { gMode = mode; }
__attribute__((visibility("default"))) int ferrytestFailInitInits() { return gInits; }
__attribute__((visibility("default"))) int ferrytestFailInitFinalizes() { return gFinalizes; }
}
