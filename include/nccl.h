/*
 * nccl.h: Ferry's public C interface.
 *
 * Ferry is a drop-in replacement for libnccl.so.2. This header is written for
 * Ferry and is ABI-identical to NCCL 2.28.9's nccl.h: the same enum values,
 * the same struct layouts (ncclConfig_t is 80 bytes on LP64), the same macros
 * and the same function signatures. Programs built against either header run
 * against either library.
 *
 * Differences from NVIDIA's header, all deliberate:
 *  - No CUDA header is required. cudaStream_t is declared here with CUDA's
 *    own definition, so <cuda_runtime.h> may be included before or after this
 *    file (repeating an identical typedef is valid C11 and C++; for strict
 *    C99, include the CUDA header first and this file skips its typedef).
 *  - The half/bfloat16/fp8 CUDA headers are not pulled in; code that used them
 *    through nccl.h must include them itself.
 *  - Parameterless functions are declared (void) so C sees a prototype.
 *
 * Every function has a p-prefixed twin (pncclAllReduce, ...) at the same
 * address, for PMPI-style profiling tools that define their own ncclX.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22809
/* Releases up to 2.8 used MAJOR*1000 + MINOR*100 + PATCH; later ones use
 * MAJOR*10000 + MINOR*100 + PATCH, so that minor numbers above 9 fit. */
#define NCCL_VERSION(X, Y, Z)                                                        \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

/* CUDA's driver_types.h guards itself with __DRIVER_TYPES_H__; if it was seen
 * first, its (identical) typedef is already in scope. */
#if !defined(__DRIVER_TYPES_H__)
typedef struct CUstream_st* cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Handles. Both point to structs the application never sees. */
typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* Opaque bootstrap token; rank 0 creates it and hands it to every rank. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* "Not set" markers used by NCCL_CONFIG_INITIALIZER and friends. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister winFlags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink shrinkFlags: ABORT first stops the parent's in-flight work. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke revokeFlags: only 0 is accepted. */
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator options. The first three fields let the library accept structs
 * from applications built against older or newer headers: it copies at most
 * `size` bytes and ignores fields newer than `version`. Always start from
 * NCCL_CONFIG_INITIALIZER; fields left at UNDEF get the library's defaults. */
typedef struct ncclConfig_v22800 {
  size_t size;           /* sizeof(ncclConfig_t) in the application */
  unsigned int magic;    /* 0xcafebeef */
  unsigned int version;  /* NCCL_VERSION() of the application's header */
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                      \
  {                                                                                  \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT,     /* blocking */                                    \
        NCCL_CONFIG_UNDEF_INT,     /* cgaClusterSize */                              \
        NCCL_CONFIG_UNDEF_INT,     /* minCTAs */                                     \
        NCCL_CONFIG_UNDEF_INT,     /* maxCTAs */                                     \
        NCCL_CONFIG_UNDEF_PTR,     /* netName */                                     \
        NCCL_CONFIG_UNDEF_INT,     /* splitShare */                                  \
        NCCL_CONFIG_UNDEF_INT,     /* trafficClass */                                \
        NCCL_CONFIG_UNDEF_PTR,     /* commName */                                    \
        NCCL_CONFIG_UNDEF_INT,     /* collnetEnable */                               \
        NCCL_CONFIG_UNDEF_INT,     /* CTAPolicy */                                   \
        NCCL_CONFIG_UNDEF_INT,     /* shrinkShare */                                 \
        NCCL_CONFIG_UNDEF_INT,     /* nvlsCTAs */                                    \
        NCCL_CONFIG_UNDEF_INT,     /* nChannelsPerNetPeer */                         \
        NCCL_CONFIG_UNDEF_INT      /* nvlinkCentricSched */                          \
  }

/* Output of ncclGroupSimulateEnd; same size/magic/version protocol. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;  /* 0x74685283 */
  unsigned int version;
  float estimatedTime; /* microseconds, filled by the library */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                                    \
  {                                                                                  \
    sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_UNDEF_FLOAT                                                             \
  }

/* Built-in reductions. Values from ncclNumOps up to ncclMaxRedOp are handles
 * returned by ncclRedOpCreatePreMulSum. ncclMaxRedOp is INT_MAX so the enum
 * stays exactly 4 bytes. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives: Device = read while the
 * collective runs; HostImmediate = read before the create call returns. */
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

#if defined(__GNUC__) || defined(__clang__)
#define NCCL_DEPRECATED_(msg) __attribute__((deprecated(msg)))
#else
#define NCCL_DEPRECATED_(msg)
#endif

/* ---- Memory ---------------------------------------------------------------- */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ---- Version, ids, errors ---------------------------------------------------- */
/* Writes the library's NCCL_VERSION_CODE (not the header's). */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);
/* Text of the most recent warning in this process; comm is unused. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);
NCCL_DEPRECATED_("ncclResetDebugInit is not part of the supported NCCL API")
void ncclResetDebugInit(void);
NCCL_DEPRECATED_("pncclResetDebugInit is not part of the supported NCCL API")
void pncclResetDebugInit(void);

/* ---- Communicator lifecycle ------------------------------------------------- */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
/* ndev communicators in one process; devlist NULL means 0..ndev-1. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
/* Like InitRankConfig with nId roots sharing the bootstrap load; every rank
 * passes the same ids in the same order. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);
/* Collective over comm; NCCL_SPLIT_NOCOLOR yields *newcomm == NULL. A NULL
 * config inherits the parent's. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/* ---- Communicator queries ----------------------------------------------------- */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Buffer registration and windows ------------------------------------------ */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- Custom reductions ----------------------------------------------------------- */
/* out = sum over ranks of (*scalar * in); valid only on comm and datatype. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives -------------------------------------------------------------------
 * Counts are in elements of datatype. sendbuff == recvbuff (or the rank's slot
 * of the larger buffer, for AllGather/ReduceScatter/Gather/Scatter) runs in
 * place. Each rank calls from its own thread/process, or inside a group. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);
/* In-place broadcast, kept for old code; prefer ncclBroadcast. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);
/* recvbuff of rank i gets block i (recvcount elements) of the reduction. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);
/* Rank i's sendcount elements land at recvbuff + i*sendcount on every rank. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
/* Block j of sendbuff goes to rank j; block i of recvbuff comes from rank i. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream);

/* ---- Point to point ----------------------------------------------------------------
 * The peer must post the matching call with the same count and datatype.
 * Sends and receives that must progress together go in one group. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* ---- Groups ----------------------------------------------------------------------
 * Calls between GroupStart and the outermost GroupEnd are queued and issued
 * together at GroupEnd. Groups nest. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);
/* Plans the queued group without running it and reports the estimated time. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* NCCL_H_ */
