/* Compiled (not run) as strict C99 and C++11 by the abi.header_* tests:
 * Ferry's public headers need no CUDA header and no compiler extension. */
#include <nccl.h>
#include <ferry/ferry.h>
#include <ferry/nccl_device_host.h>
#include <ferry/view.h>

ncclResult_t useHeaders(ncclComm_t comm, cudaStream_t stream);

ncclResult_t useHeaders(ncclComm_t comm, cudaStream_t stream) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclUniqueId id;
  ncclTeam_t team = ncclTeamWorld(comm);
  float x = 1.0f;
  (void)sim;
  (void)team;
  if (ncclGetUniqueId(&id) != ncclSuccess) return ncclInternalError;
  if (ncclCommInitRankConfig(&comm, 1, id, 0, &config) != ncclSuccess) return ncclInvalidUsage;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  if (ncclGroupStart() != ncclSuccess) return ncclInvalidUsage;
  (void)ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, stream);
  (void)ncclGroupEnd();
#endif
  {
    char view[4096];
    size_t len = sizeof(view);
    (void)ferryCommViewJson(comm, view, &len);
  }
  return ncclCommDestroy(comm);
}
