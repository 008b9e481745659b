// The CUDA driver API entry points Ferry uses, resolved at run time.
//
// libferry.so must load on machines without CUDA, so nothing links
// libcuda: CudaDriver::load dlopens it (FERRY_CUDA_LIBRARY, default
// libcuda.so.1) and resolves each entry point by its versioned name. The
// types are the driver's ABI, declared here so no CUDA header is needed to
// build: handles are pointers, device addresses 64-bit integers, results
// ints (0: success).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace ferry::accel {

namespace cu {
using Result = int;
using DevicePtr = unsigned long long;
using Context = void*;
using Stream = void*;
using HostFn = void (*)(void*);
using Module = void*;
using Function = void*;
constexpr Result kSuccess = 0;
constexpr Result kNotReady = 600;
constexpr int kPointerAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeDevice = 2;       // CU_MEMORYTYPE_DEVICE
constexpr unsigned kStreamNonBlocking = 1;      // CU_STREAM_NON_BLOCKING
constexpr unsigned kWaitValueGeq = 0;           // CU_STREAM_WAIT_VALUE_GEQ
constexpr int kCaptureStatusNone = 0;           // CU_STREAM_CAPTURE_STATUS_NONE
constexpr unsigned kHostRegisterPortable = 1;   // CU_MEMHOSTREGISTER_PORTABLE
constexpr unsigned kHostRegisterDeviceMap = 2;  // CU_MEMHOSTREGISTER_DEVICEMAP
constexpr unsigned kIpcLazyPeerAccess = 1;      // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
struct IpcMemHandle {                           // CUipcMemHandle, passed by value
  char reserved[64];
};
}  // namespace cu

struct CudaDriver {
  cu::Result (*init)(unsigned flags);
  cu::Result (*deviceGetCount)(int* count);
  cu::Result (*deviceGet)(int* device, int ordinal);
  cu::Result (*primaryCtxRetain)(cu::Context* ctx, int device);
  cu::Result (*primaryCtxGetState)(int device, unsigned* flags, int* active);
  cu::Result (*ctxGetCurrent)(cu::Context* ctx);
  cu::Result (*ctxSetCurrent)(cu::Context ctx);
  cu::Result (*pointerGetAttribute)(void* data, int attribute, cu::DevicePtr p);
  cu::Result (*memAlloc)(cu::DevicePtr* p, size_t bytes);
  cu::Result (*memFree)(cu::DevicePtr p);
  cu::Result (*streamCreate)(cu::Stream* s, unsigned flags);
  cu::Result (*streamDestroy)(cu::Stream s);
  cu::Result (*memcpyAsync)(cu::DevicePtr dst, cu::DevicePtr src, size_t bytes, cu::Stream s);
  cu::Result (*launchHostFunc)(cu::Stream s, cu::HostFn fn, void* data);
  cu::Result (*streamWaitValue32)(cu::Stream s, cu::DevicePtr addr, uint32_t value, unsigned flags);
  cu::Result (*streamWriteValue32)(cu::Stream s, cu::DevicePtr addr, uint32_t value, unsigned flags);
  cu::Result (*memHostRegister)(void* p, size_t bytes, unsigned flags);
  cu::Result (*memHostUnregister)(void* p);
  cu::Result (*memHostGetDevicePointer)(cu::DevicePtr* d, void* p, unsigned flags);
  cu::Result (*streamSynchronize)(cu::Stream s);
  cu::Result (*streamQuery)(cu::Stream s);
  cu::Result (*streamIsCapturing)(cu::Stream s, int* status);  // CUstreamCaptureStatus
  cu::Result (*getErrorString)(cu::Result r, const char** s);
  cu::Result (*memGetAddressRange)(cu::DevicePtr* base, size_t* size, cu::DevicePtr p);
  cu::Result (*ipcGetMemHandle)(cu::IpcMemHandle* h, cu::DevicePtr p);
  cu::Result (*ipcOpenMemHandle)(cu::DevicePtr* p, cu::IpcMemHandle h, unsigned flags);
  cu::Result (*ipcCloseMemHandle)(cu::DevicePtr p);
  cu::Result (*moduleLoadData)(cu::Module* m, const void* image);
  cu::Result (*moduleGetFunction)(cu::Function* f, cu::Module m, const char* name);
  cu::Result (*launchKernel)(cu::Function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned sharedBytes, cu::Stream s,
                             void** params, void** extra);

  // The library at `path`, every entry point resolved; an error naming what
  // is missing. Never unloaded (its threads may outlive us at exit).
  static Result<std::unique_ptr<CudaDriver>> load(const std::string& path);
  // "what: <driver's message> (code)" for a failed call.
  Status error(cu::Result r, const char* what) const;
};

}  // namespace ferry::accel
