/*
 * ferry.h: Ferry's own extensions to the NCCL API.
 *
 * Everything here is C-callable and exported from libferry.so / libnccl.so.2
 * under a ferry* name, so a program can tell at run time that Ferry (and not
 * NVIDIA's NCCL) was loaded, e.g. with dlsym(RTLD_DEFAULT, "ferryVersionString").
 */
#ifndef FERRY_FERRY_H_
#define FERRY_FERRY_H_

#include <nccl.h>

/* Marks the symbol for export when the library is built with hidden default
 * visibility; harmless for applications. */
#if defined(__GNUC__) || defined(__clang__)
#define FERRY_API __attribute__((visibility("default")))
#else
#define FERRY_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Ferry's own release number (not the NCCL version it mimics; that is what
 * ncclGetVersion reports). */
FERRY_API ncclResult_t ferryGetVersion(int* major, int* minor, int* patch);

/* Human-readable build description, e.g. "Ferry 0.1.0 (NCCL 2.28.9 ABI)".
 * Static storage; never NULL. */
FERRY_API const char* ferryVersionString(void);

/* AlltoAllv: rank r sends sendcounts[p] elements starting at element
 * sdispls[p] of sendbuff to every peer p, and receives recvcounts[p]
 * elements from p at element rdispls[p] of recvbuff. Counts and
 * displacements are in elements of datatype, each array has one entry per
 * rank (as RCCL's ncclAllToAllv). It may be called inside
 * ncclGroupStart/ncclGroupEnd. It runs as one group of ncclSend/ncclRecv,
 * unless NCCL_ALGO="AlltoAll:rail" on a communicator of >= 2 hosts with the
 * same number (>= 2) of ranks each: then it runs rail-local
 * (docs/tuning.md), every rank must call it (a rank forwards its host's
 * data for its rail), and counts that disagree fail it with
 * ncclInvalidArgument naming the pair.
 * ncclInvalidArgument (with a WARN naming the argument) for a NULL array,
 * a NULL buffer with a nonzero count, or send and receive ranges that
 * overlap (in place is not supported). */
FERRY_API ncclResult_t ferryAlltoAllv(const void* sendbuff, const size_t sendcounts[],
                                      const size_t sdispls[], void* recvbuff,
                                      const size_t recvcounts[], const size_t rdispls[],
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FERRY_FERRY_H_ */
