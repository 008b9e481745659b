// Entry points libnccl.so.2 exports that this Ferry release does not
// implement: the host side of NCCL's device API (which only makes sense with GPU kernels).
// They exist so that applications and frameworks that merely link against
// them still load; calling one logs a warning and fails cleanly.
#include <nccl.h>

#include "api/exports.h"
#include "core/log.h"
#include "ferry/nccl_device_host.h"

namespace {

ncclResult_t unsupported(const char* name) {
  FERRY_WARN("%s is not supported by Ferry yet", name);
  return ncclInvalidUsage;
}

}  // namespace

FERRY_EXPORT(ncclResult_t, ncclDevCommCreate,
             (ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm)) {
  return unsupported("ncclDevCommCreate");
}

FERRY_EXPORT(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, ncclDevComm_t const* devComm)) {
  return unsupported("ncclDevCommDestroy");
}

FERRY_EXPORT(ncclResult_t, ncclLsaBarrierCreateRequirement,
             (ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
              ncclDevResourceRequirements_t* outReq)) {
  return unsupported("ncclLsaBarrierCreateRequirement");
}

FERRY_EXPORT(ncclResult_t, ncclGinBarrierCreateRequirement,
             (ncclComm_t comm, ncclTeam_t team, int nBarriers, ncclGinBarrierHandle_t* outHandle,
              ncclDevResourceRequirements_t* outReq)) {
  return unsupported("ncclGinBarrierCreateRequirement");
}

FERRY_EXPORT(ncclResult_t, ncclLLA2ACreateRequirement,
             (int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
              ncclDevResourceRequirements_t* outReq)) {
  return unsupported("ncclLLA2ACreateRequirement");
}

// The functions below cannot report an error code. They return a value that
// a caller cannot mistake for a usable answer: 0 slots, rank -1, and a team
// with no members.

FERRY_EXPORT(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize)) {
  unsupported("ncclLLA2ACalcSlots");
  return 0;
}

FERRY_EXPORT(int, ncclTeamRankToWorld, (ncclComm_t comm, ncclTeam_t team, int rank)) {
  unsupported("ncclTeamRankToWorld");
  return -1;
}

FERRY_EXPORT(int, ncclTeamRankToLsa, (ncclComm_t comm, ncclTeam_t team, int rank)) {
  unsupported("ncclTeamRankToLsa");
  return -1;
}

FERRY_EXPORT(ncclTeam_t, ncclTeamWorld, (ncclComm_t comm)) {
  unsupported("ncclTeamWorld");
  return ncclTeam_t{0, 0, 0};
}

FERRY_EXPORT(ncclTeam_t, ncclTeamLsa, (ncclComm_t comm)) {
  unsupported("ncclTeamLsa");
  return ncclTeam_t{0, 0, 0};
}

FERRY_EXPORT(ncclTeam_t, ncclTeamRail, (ncclComm_t comm)) {
  unsupported("ncclTeamRail");
  return ncclTeam_t{0, 0, 0};
}
