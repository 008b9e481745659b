// Prints the exact C++ type of every function libnccl.so.2 exports, as the
// declarations in nccl.h (and the device-API host headers) give it. Built
// twice, against NVIDIA's headers and against Ferry's; the abi.signatures
// test requires identical output. typedefs resolve to the underlying types,
// so a parameter that changed from int to size_t, or a pointer that lost a
// const, shows up as a difference. Only decltype is used: nothing is called
// or linked.
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <typeinfo>

#include <nccl.h>
#ifdef ABI_REAL_HEADERS
#include <nccl_device/core.h>
#include <nccl_device/gin_barrier.h>
#include <nccl_device/ll_a2a.h>
#include <nccl_device/lsa_barrier.h>
#else
#include "ferry/nccl_device_host.h"
#endif

#include <cstddef>

namespace {

void show(const char* name, const std::type_info& t) {
  int status = 0;
  char* text = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::printf("%s : %s\n", name, status == 0 ? text : t.name());
  std::free(text);
}

}  // namespace

#define SIG(f) show(#f, typeid(decltype(&f)))
#define PAIR(f) \
  SIG(f);       \
  SIG(p##f)
// NVIDIA's C++ device headers overload these names with inline device-side
// versions; the cast picks the extern "C" host function and fails to compile
// unless one with exactly this type is declared.
#define HOSTFN(f, type) show(#f, typeid(decltype(static_cast<type>(&f))))

int main() {
  PAIR(ncclMemAlloc);
  PAIR(ncclMemFree);
  PAIR(ncclGetVersion);
  PAIR(ncclGetUniqueId);
  PAIR(ncclGetErrorString);
  PAIR(ncclGetLastError);
  PAIR(ncclResetDebugInit);
  PAIR(ncclCommInitRankConfig);
  PAIR(ncclCommInitRank);
  PAIR(ncclCommInitAll);
  PAIR(ncclCommInitRankScalable);
  PAIR(ncclCommFinalize);
  PAIR(ncclCommDestroy);
  PAIR(ncclCommAbort);
  PAIR(ncclCommRevoke);
  PAIR(ncclCommSplit);
  PAIR(ncclCommShrink);
  PAIR(ncclCommGetAsyncError);
  PAIR(ncclCommCount);
  PAIR(ncclCommCuDevice);
  PAIR(ncclCommUserRank);
  PAIR(ncclCommRegister);
  PAIR(ncclCommDeregister);
  PAIR(ncclCommWindowRegister);
  PAIR(ncclCommWindowDeregister);
  PAIR(ncclRedOpCreatePreMulSum);
  PAIR(ncclRedOpDestroy);
  PAIR(ncclReduce);
  PAIR(ncclBcast);
  PAIR(ncclBroadcast);
  PAIR(ncclAllReduce);
  PAIR(ncclReduceScatter);
  PAIR(ncclAllGather);
  PAIR(ncclAlltoAll);
  PAIR(ncclGather);
  PAIR(ncclScatter);
  PAIR(ncclSend);
  PAIR(ncclRecv);
  PAIR(ncclGroupStart);
  PAIR(ncclGroupEnd);
  PAIR(ncclGroupSimulateEnd);

  // Device-API host functions (NVIDIA's headers declare no p-twins).
  SIG(ncclDevCommCreate);
  SIG(ncclDevCommDestroy);
  SIG(ncclGinBarrierCreateRequirement);
  SIG(ncclLLA2ACalcSlots);
  SIG(ncclLLA2ACreateRequirement);
  SIG(ncclLsaBarrierCreateRequirement);
  HOSTFN(ncclTeamWorld, ncclTeam_t (*)(ncclComm_t));
  HOSTFN(ncclTeamLsa, ncclTeam_t (*)(ncclComm_t));
  HOSTFN(ncclTeamRail, ncclTeam_t (*)(ncclComm_t));
  HOSTFN(ncclTeamRankToWorld, int (*)(ncclComm_t, ncclTeam_t, int));
  HOSTFN(ncclTeamRankToLsa, int (*)(ncclComm_t, ncclTeam_t, int));

  // ncclTeam is returned and passed by value, so its layout is ABI.
  std::printf("sizeof(ncclTeam_t) = %zu align %zu\n", sizeof(ncclTeam_t), alignof(ncclTeam_t));
  std::printf("  nRanks @ %zu, rank @ %zu, stride @ %zu\n", offsetof(ncclTeam_t, nRanks),
              offsetof(ncclTeam_t, rank), offsetof(ncclTeam_t, stride));
  return 0;
}
