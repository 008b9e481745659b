/*
 * ferry/device.h: device memory and streams through Ferry's accelerator seam.
 *
 * A C-callable Ferry extension (exported as ferry*, see ferry.h) for tools
 * and tests that handle device buffers without linking a device runtime.
 * The device is the backend FERRY_DEVICE names: today `testdev`, a stand-in
 * discrete device whose memory the host cannot load or store (every access
 * goes through these calls), with a worker thread per stream. With
 * FERRY_DEVICE set, ncclMemAlloc returns that device's memory too.
 *
 * Collectives and Send/Recv accept device memory and a stream
 * (docs/accelerators.md): the call returns once the operation is queued,
 * and work enqueued on the same stream afterwards sees its result.
 *
 * Every call returns ncclInvalidUsage (with a WARN) when FERRY_DEVICE names
 * no backend, ncclInvalidArgument for a bad pointer or stream.
 */
#ifndef FERRY_DEVICE_H_
#define FERRY_DEVICE_H_

#include <stddef.h>

#include <ferry/ferry.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The backend's name ("testdev"). */
FERRY_API ncclResult_t ferryDeviceName(const char** name);
FERRY_API ncclResult_t ferryDeviceAlloc(void** ptr, size_t bytes);
FERRY_API ncclResult_t ferryDeviceFree(void* ptr);
/* A new stream; NULL is the default stream and needs no creation. */
FERRY_API ncclResult_t ferryDeviceStreamCreate(void** stream);
/* Waits for the stream's work, then destroys it. */
FERRY_API ncclResult_t ferryDeviceStreamDestroy(void* stream);
/* Enqueued on stream: either side may be host or device memory. */
FERRY_API ncclResult_t ferryDeviceMemcpyAsync(void* dst, const void* src, size_t bytes,
                                              void* stream);
/* Until the stream's work so far has run; ncclRemoteError (Ferry's code
 * for a deadline) after FERRY_TIMEOUT_MS. */
FERRY_API ncclResult_t ferryDeviceStreamSynchronize(void* stream);
/* ncclSuccess when everything enqueued on stream so far has run,
 * ncclInProgress while some of it has not (cudaStreamQuery). */
FERRY_API ncclResult_t ferryDeviceStreamQuery(void* stream);
/* testdev only: every stream task first sleeps this long (tests of the
 * stream contract); ncclInvalidUsage for other backends. */
FERRY_API ncclResult_t ferryDeviceSetTaskDelayUs(long long us);
/* Bytes this rank of comm copied through host staging (the CPU-forward
 * bridge) since it was created: inputs in plus results out. */
FERRY_API ncclResult_t ferryCommStagedBytes(ncclComm_t comm, unsigned long long* bytes);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_DEVICE_H_ */
