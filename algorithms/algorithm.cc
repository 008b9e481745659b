#include "algorithms/algorithm.h"

#include <atomic>

#include "core/log.h"

namespace ferry {
namespace {

bool isRingColl(const CollArgs& a) {
  switch (a.kind) {
    case CollKind::kAllReduce: case CollKind::kBroadcast: case CollKind::kReduce:
    case CollKind::kAllGather: case CollKind::kReduceScatter:
      return true;
    default:
      return false;
  }
}

bool isDirectColl(const CollArgs& a) {
  if (a.kind == CollKind::kAllReduce)
    return a.nranks > 1 && (a.count * a.elemSize <= a.directMaxBytes || a.allLocal);
  return a.kind == CollKind::kAllToAll || a.kind == CollKind::kGather ||
         a.kind == CollKind::kScatter;
}

// Collective kinds whose fallback was logged (bit = CollKind), so a
// filter that excludes everything costs one INFO line, not one per call.
std::atomic<uint32_t> gFallbackLogged{0};

// Any rank count and size (large messages run in chunks). Listed after ring,
// which supports every AllReduce, so it runs only when NCCL_ALGO picks it.
bool isRecDblColl(const CollArgs& a) { return a.kind == CollKind::kAllReduce; }

}  // namespace

const std::vector<Algorithm>& algorithmRegistry() {
  static const std::vector<Algorithm> kList = {
      {"direct", isDirectColl, directSchedule},
      {"ring", isRingColl, ringSchedule},
      {"recdbl", isRecDblColl, recursiveDoublingSchedule},
  };
  return kList;
}

Result<Schedule> selectSchedule(const CollArgs& a, const CollFilter& filter) {
  const Algorithm* fallback = nullptr;
  for (const Algorithm& alg : algorithmRegistry()) {
    if (!alg.supports(a)) continue;
    if (filter.allows(a.kind, alg.name)) return alg.build(a);
    if (!fallback) fallback = &alg;
  }
  if (fallback) {
    uint32_t bit = uint32_t(1) << static_cast<int>(a.kind);
    if (!(gFallbackLogged.fetch_or(bit) & bit))
      FERRY_INFO(log::kTuning, "NCCL_ALGO allows no algorithm Ferry can run for this %s; using %s",
                 collName(a.kind), fallback->name);
    return fallback->build(a);
  }
  return internalError(std::string("no algorithm supports ") + collName(a.kind));
}

const char* collName(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return "AllReduce";
    case CollKind::kBroadcast: return "Broadcast";
    case CollKind::kReduce: return "Reduce";
    case CollKind::kAllGather: return "AllGather";
    case CollKind::kReduceScatter: return "ReduceScatter";
    case CollKind::kAllToAll: return "AlltoAll";
    case CollKind::kGather: return "Gather";
    case CollKind::kScatter: return "Scatter";
    case CollKind::kSendRecv: return "SendRecv";
  }
  return "?";
}

const char* stepName(StepKind k) {
  switch (k) {
    case StepKind::kCopy: return "copy";
    case StepKind::kSend: return "send";
    case StepKind::kRecv: return "recv";
    case StepKind::kRecvReduceSend: return "recvReduceSend";
    case StepKind::kRecvReduceCopy: return "recvReduceCopy";
    case StepKind::kRecvReduceCopySend: return "recvReduceCopySend";
    case StepKind::kRecvCopySend: return "recvCopySend";
    case StepKind::kLocalReduce: return "localReduce";
  }
  return "?";
}

}  // namespace ferry
