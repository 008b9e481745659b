/* Prints every layout fact and constant of nccl.h that an application binary
 * depends on. Built twice: against NVIDIA's header and against Ferry's; the
 * abi.layout test requires the two outputs to be identical. */
#include <nccl.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(t) printf("sizeof(%s) = %zu align %zu\n", #t, sizeof(t), (size_t)_Alignof(t))
#define FIELD(t, f) \
  printf("  %s.%s @ %zu size %zu\n", #t, #f, offsetof(t, f), sizeof(((t*)0)->f))
/* Value and size: the size tells e.g. -1.0f from -1.0 and int from long. */
#define VAL(e) printf("%s = %lld (size %zu)\n", #e, (long long)(e), sizeof(e))
#define VALU(e) printf("%s = %llu (size %zu)\n", #e, (unsigned long long)(e), sizeof(e))

static void types(void) {
  SIZE(ncclUniqueId);
  SIZE(ncclComm_t);
  SIZE(ncclWindow_t);
  SIZE(cudaStream_t);
  SIZE(ncclResult_t);
  SIZE(ncclRedOp_t);
  SIZE(ncclRedOp_dummy_t);
  SIZE(ncclDataType_t);
  SIZE(ncclScalarResidence_t);
  SIZE(ncclConfig_t);
  SIZE(struct ncclConfig_v22800);
  FIELD(ncclConfig_t, size);
  FIELD(ncclConfig_t, magic);
  FIELD(ncclConfig_t, version);
  FIELD(ncclConfig_t, blocking);
  FIELD(ncclConfig_t, cgaClusterSize);
  FIELD(ncclConfig_t, minCTAs);
  FIELD(ncclConfig_t, maxCTAs);
  FIELD(ncclConfig_t, netName);
  FIELD(ncclConfig_t, splitShare);
  FIELD(ncclConfig_t, trafficClass);
  FIELD(ncclConfig_t, commName);
  FIELD(ncclConfig_t, collnetEnable);
  FIELD(ncclConfig_t, CTAPolicy);
  FIELD(ncclConfig_t, shrinkShare);
  FIELD(ncclConfig_t, nvlsCTAs);
  FIELD(ncclConfig_t, nChannelsPerNetPeer);
  FIELD(ncclConfig_t, nvlinkCentricSched);
  SIZE(ncclSimInfo_t);
  SIZE(struct ncclSimInfo_v22200);
  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);
  FIELD(ncclUniqueId, internal);
}

static void enums(void) {
  VAL(ncclSuccess);
  VAL(ncclUnhandledCudaError);
  VAL(ncclSystemError);
  VAL(ncclInternalError);
  VAL(ncclInvalidArgument);
  VAL(ncclInvalidUsage);
  VAL(ncclRemoteError);
  VAL(ncclInProgress);
  VAL(ncclNumResults);
  VAL(ncclSum);
  VAL(ncclProd);
  VAL(ncclMax);
  VAL(ncclMin);
  VAL(ncclAvg);
  VAL(ncclNumOps);
  VAL(ncclMaxRedOp);
  VAL(ncclNumOps_dummy);
  VAL(ncclInt8);
  VAL(ncclChar);
  VAL(ncclUint8);
  VAL(ncclInt32);
  VAL(ncclInt);
  VAL(ncclUint32);
  VAL(ncclInt64);
  VAL(ncclUint64);
  VAL(ncclFloat16);
  VAL(ncclHalf);
  VAL(ncclFloat32);
  VAL(ncclFloat);
  VAL(ncclFloat64);
  VAL(ncclDouble);
  VAL(ncclBfloat16);
  VAL(ncclFloat8e4m3);
  VAL(ncclFloat8e5m2);
  VAL(ncclNumTypes);
  VAL(ncclScalarDevice);
  VAL(ncclScalarHostImmediate);
}

static void macros(void) {
  VAL(NCCL_MAJOR);
  VAL(NCCL_MINOR);
  VAL(NCCL_PATCH);
  printf("NCCL_SUFFIX = \"%s\" (size %zu)\n", NCCL_SUFFIX, sizeof(NCCL_SUFFIX));
  VAL(NCCL_VERSION_CODE);
  /* Both encodings and the boundary between them. */
  VAL(NCCL_VERSION(1, 9, 9));
  VAL(NCCL_VERSION(2, 7, 8));
  VAL(NCCL_VERSION(2, 8, 4));
  VAL(NCCL_VERSION(2, 9, 6));
  VAL(NCCL_VERSION(2, 28, 9));
  VAL(NCCL_VERSION(3, 0, 0));
  VAL(NCCL_VERSION(3, 1, 2));
  VAL(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0) && NCCL_VERSION(2, 8, 0) == 2800
  printf("version macros usable in #if\n");
#endif
  VAL(NCCL_UNIQUE_ID_BYTES);
  VAL(NCCL_CONFIG_UNDEF_INT);
  printf("NCCL_CONFIG_UNDEF_PTR = %p\n", (void*)NCCL_CONFIG_UNDEF_PTR);
  printf("NCCL_COMM_NULL = %p\n", (void*)NCCL_COMM_NULL);
  VAL(NCCL_SPLIT_NOCOLOR);
  printf("NCCL_UNDEF_FLOAT = %a (size %zu)\n", (double)NCCL_UNDEF_FLOAT, sizeof(NCCL_UNDEF_FLOAT));
  VAL(NCCL_WIN_DEFAULT);
  VAL(NCCL_WIN_COLL_SYMMETRIC);
  VAL(NCCL_WIN_REQUIRED_ALIGNMENT);
  VAL(NCCL_CTA_POLICY_DEFAULT);
  VAL(NCCL_CTA_POLICY_EFFICIENCY);
  VAL(NCCL_CTA_POLICY_ZERO);
  VAL(NCCL_SHRINK_DEFAULT);
  VAL(NCCL_SHRINK_ABORT);
  VAL(NCCL_REVOKE_DEFAULT);
}

static void initializers(void) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  printf("config init: size %zu magic 0x%x version %u\n", c.size, c.magic, c.version);
  printf("  ints %d %d %d %d %d %d %d %d %d %d %d %d\n", c.blocking, c.cgaClusterSize,
         c.minCTAs, c.maxCTAs, c.splitShare, c.trafficClass, c.collnetEnable, c.CTAPolicy,
         c.shrinkShare, c.nvlsCTAs, c.nChannelsPerNetPeer, c.nvlinkCentricSched);
  printf("  ptrs %p %p\n", (const void*)c.netName, (const void*)c.commName);
  printf("siminfo init: size %zu magic 0x%x version %u time %a\n", s.size, s.magic, s.version,
         (double)s.estimatedTime);
}

int main(void) {
  types();
  enums();
  macros();
  initializers();
  return 0;
}
