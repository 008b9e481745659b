#include "accel/cuda_driver.h"

#include <dlfcn.h>

namespace ferry::accel {
namespace {

template <typename F>
bool resolve(void* lib, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!*fn) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *fn != nullptr;
}

}  // namespace

Result<std::unique_ptr<CudaDriver>> CudaDriver::load(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return systemError("cannot load " + path + ": " + dlerror());
  auto d = std::make_unique<CudaDriver>();
  std::string missing;
  resolve(lib, "cuInit", &d->init, &missing);
  resolve(lib, "cuDeviceGetCount", &d->deviceGetCount, &missing);
  resolve(lib, "cuDeviceGet", &d->deviceGet, &missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", &d->primaryCtxRetain, &missing);
  resolve(lib, "cuDevicePrimaryCtxGetState", &d->primaryCtxGetState, &missing);
  resolve(lib, "cuCtxGetCurrent", &d->ctxGetCurrent, &missing);
  resolve(lib, "cuCtxSetCurrent", &d->ctxSetCurrent, &missing);
  resolve(lib, "cuPointerGetAttribute", &d->pointerGetAttribute, &missing);
  resolve(lib, "cuMemAlloc_v2", &d->memAlloc, &missing);
  resolve(lib, "cuMemFree_v2", &d->memFree, &missing);
  resolve(lib, "cuStreamCreate", &d->streamCreate, &missing);
  resolve(lib, "cuStreamDestroy_v2", &d->streamDestroy, &missing);
  resolve(lib, "cuMemcpyAsync", &d->memcpyAsync, &missing);
  resolve(lib, "cuLaunchHostFunc", &d->launchHostFunc, &missing);
  resolve(lib, "cuStreamWaitValue32_v2", &d->streamWaitValue32, &missing);
  resolve(lib, "cuStreamWriteValue32_v2", &d->streamWriteValue32, &missing);
  resolve(lib, "cuMemHostRegister_v2", &d->memHostRegister, &missing);
  resolve(lib, "cuMemHostUnregister", &d->memHostUnregister, &missing);
  resolve(lib, "cuMemHostGetDevicePointer_v2", &d->memHostGetDevicePointer, &missing);
  resolve(lib, "cuStreamSynchronize", &d->streamSynchronize, &missing);
  resolve(lib, "cuStreamQuery", &d->streamQuery, &missing);
  resolve(lib, "cuStreamIsCapturing", &d->streamIsCapturing, &missing);
  resolve(lib, "cuGetErrorString", &d->getErrorString, &missing);
  resolve(lib, "cuMemGetAddressRange_v2", &d->memGetAddressRange, &missing);
  resolve(lib, "cuIpcGetMemHandle", &d->ipcGetMemHandle, &missing);
  resolve(lib, "cuIpcOpenMemHandle_v2", &d->ipcOpenMemHandle, &missing);
  resolve(lib, "cuIpcCloseMemHandle", &d->ipcCloseMemHandle, &missing);
  resolve(lib, "cuModuleLoadData", &d->moduleLoadData, &missing);
  resolve(lib, "cuModuleGetFunction", &d->moduleGetFunction, &missing);
  resolve(lib, "cuLaunchKernel", &d->launchKernel, &missing);
  if (!missing.empty()) return systemError(path + " lacks " + missing);
  return d;
}

Status CudaDriver::error(cu::Result r, const char* what) const {
  const char* s = nullptr;
  if (getErrorString(r, &s) != cu::kSuccess || !s) s = "unknown error";
  return systemError(std::string(what) + ": " + s + " (" + std::to_string(r) + ")");
}

}  // namespace ferry::accel
