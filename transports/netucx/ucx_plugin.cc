// Entry symbols of the standalone plugin libnccl-net-ferryucx.so (not part of
// libferry, whose export map would otherwise publish them as nccl*).
//
// v11 is the native table. v10 and v9 (NCCL 2.19-2.27) have no per-comm
// context: they share one process-wide context, created by the first init.
#include <cstring>
#include <mutex>

#include "transports/netucx/ucx_internal.h"
#include "transports/netucx/ucx_net.h"

namespace ferry::ucx {
namespace {

std::mutex gLegacyMu;
void* gLegacyCtx = nullptr;

ncclResult_t legacyInit(ncclDebugLogger_t logger) {
  std::lock_guard<std::mutex> lock(gLegacyMu);
  if (gLegacyCtx) return ncclSuccess;
  ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  return init(&gLegacyCtx, 0, &cfg, logger, nullptr);
}
ncclResult_t initV9(ncclDebugLogger_t logger) { return legacyInit(logger); }
ncclResult_t initV10(ncclDebugLogger_t logger, ncclProfilerCallback_t) { return legacyInit(logger); }

ncclResult_t propsV9(int dev, ncclNetProperties_v9_t* props) {
  ncclNetProperties_v11_t p;
  ncclResult_t r = getProperties(dev, &p);
  if (r != ncclSuccess) return r;
  // v9/v10 properties are the v11 ones without the trailing field.
  static_assert(sizeof(ncclNetProperties_v9_t) <= sizeof(ncclNetProperties_v11_t));
  std::memcpy(props, &p, sizeof(*props));
  return ncclSuccess;
}

ncclResult_t listenLegacy(int dev, void* handle, void** listenComm) {
  return listen(gLegacyCtx, dev, handle, listenComm);
}
ncclResult_t connectV9(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t** dc) {
  return connect(gLegacyCtx, dev, handle, sendComm, dc);
}
ncclResult_t connectV10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** sendComm,
                        ncclNetDeviceHandle_v11_t** dc) {
  return connect(gLegacyCtx, dev, handle, sendComm, dc);
}
ncclResult_t isendV9(void* c, void* data, size_t size, int tag, void* mh, void** req) {
  return isend(c, data, size, tag, mh, nullptr, req);
}
ncclResult_t irecvV9(void* c, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) {
  return irecv(c, n, data, sizes, tags, mhs, nullptr, req);
}

}  // namespace
}  // namespace ferry::ucx

using namespace ferry::ucx;

extern "C" {

extern __attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = *ferry::ucxNet();

extern __attribute__((visibility("default"))) const ncclNet_v10_t ncclNetPlugin_v10 = {
    "UCX",   initV10,    numDevices, propsV9, listenLegacy, connectV10, accept,
    regMr,   nullptr,    deregMr,    isend,   irecv,        iflush,     test,
    closeSend, closeRecv, closeListen, nullptr, nullptr,    nullptr,
};

extern __attribute__((visibility("default"))) const ncclNet_v9_t ncclNetPlugin_v9 = {
    "UCX",   initV9,     numDevices, propsV9, listenLegacy, connectV9, accept,
    regMr,   nullptr,    deregMr,    isendV9, irecvV9,      iflush,    test,
    closeSend, closeRecv, closeListen, nullptr, nullptr,    nullptr,
};

}  // extern "C"
