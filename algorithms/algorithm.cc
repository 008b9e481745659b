#include "algorithms/algorithm.h"

#include <strings.h>

#include <sstream>

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

// Any rank count and size (large messages run in chunks). Listed after ring,
// which supports every AllReduce, so it runs only when NCCL_ALGO picks it.
bool isRecDblColl(const CollArgs& a) { return a.kind == CollKind::kAllReduce; }

bool listed(const std::string& filter, const char* name) {
  std::string f = filter;
  bool exclude = !f.empty() && f[0] == '^';
  if (exclude) f.erase(0, 1);
  std::stringstream ss(f);
  std::string item;
  bool found = false;
  while (std::getline(ss, item, ','))
    if (strcasecmp(item.c_str(), name) == 0) found = true;
  return exclude ? !found : found;
}

}  // namespace

const std::vector<Algorithm>& algorithmRegistry() {
  static const std::vector<Algorithm> kList = {
      {"direct", isDirectColl, directSchedule},
      {"ring", isRingColl, ringSchedule},
      {"recdbl", isRecDblColl, recursiveDoublingSchedule},
  };
  return kList;
}

Result<Schedule> selectSchedule(const CollArgs& a, const std::string& filter) {
  const Algorithm* fallback = nullptr;
  for (const Algorithm& alg : algorithmRegistry()) {
    if (!alg.supports(a)) continue;
    if (filter.empty() || listed(filter, alg.name)) return alg.build(a);
    if (!fallback) fallback = &alg;
  }
  // NCCL falls back to what works when NCCL_ALGO excludes everything.
  if (fallback) return fallback->build(a);
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
