#include "algorithms/algorithm.h"

#include <nccl_tuner.h>
#include <strings.h>

#include "algorithms/builders.h"

namespace ferry {

// Registry order breaks cost ties (the first listed wins) and is the order
// NCCL_ALGO names and cost tables are printed in.
const std::vector<Algorithm>& algorithmRegistry() {
  static const std::vector<Algorithm> kList = {
      {"direct", directSupports, directSchedule, directCost, NCCL_ALGO_RING, NCCL_PROTO_LL},
      {"ring", ringSupports, ringSchedule, ringCost, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE},
      {"recdbl", recursiveDoublingSupports, recursiveDoublingSchedule, recursiveDoublingCost,
       NCCL_ALGO_TREE, NCCL_PROTO_LL},
      {"twoshot", twoShotSupports, twoShotSchedule, twoShotCost, NCCL_ALGO_RING, NCCL_PROTO_LL128},
      {"tree", treeSupports, treeSchedule, treeCost, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE},
      // Ferry's mapping for tuner plugins: bintree takes TREE/LL, which
      // recdbl also uses, but only for Broadcast/Reduce where recdbl never
      // runs, so a plugin's pick in that slot stays unambiguous.
      {"bintree", binomialTreeSupports, binomialTreeSchedule, binomialTreeCost, NCCL_ALGO_TREE,
       NCCL_PROTO_LL},
      // A tuner plugin sees rabenseifner in Tree/LL128 (log-depth like a tree,
      // bandwidth-lean like a ring) and bruck in Tree/LL (log-depth, for
      // small AllGather/ReduceScatter; recdbl's slot, but recdbl is AllReduce
      // only, so the two never compete in one table).
      {"rabenseifner", rabenseifnerSupports, rabenseifnerSchedule, rabenseifnerCost, NCCL_ALGO_TREE,
       NCCL_PROTO_LL128},
      {"bruck", bruckSupports, bruckSchedule, bruckCost, NCCL_ALGO_TREE, NCCL_PROTO_LL},
      // NVLSTree is NCCL's intra-node + inter-node two-level algorithm: the
      // closest slot for a tuner plugin to see hier's cost in.
      {"hier", hierSupports, hierSchedule, hierCost, NCCL_ALGO_NVLS_TREE, NCCL_PROTO_SIMPLE},
      {"pat", patSupports, patSchedule, patCost, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE},
      // AlltoAll has no slot in NCCL's tuner tables; PAT/LL is free (pat is
      // AllGather/ReduceScatter only).
      {"rail", railSupports, railSchedule, railCost, NCCL_ALGO_PAT, NCCL_PROTO_LL},
      // NVLS is NCCL's load/store algorithm on memory every GPU maps: the
      // slot where a tuner plugin sees symmetric.
      {"symmetric", symmetricSupports, symmetricSchedule, symmetricCost, NCCL_ALGO_NVLS,
       NCCL_PROTO_SIMPLE},
  };
  return kList;
}

const Algorithm* findAlgorithm(const std::string& name) {
  for (const Algorithm& a : algorithmRegistry())
    if (strcasecmp(a.name, name.c_str()) == 0) return &a;
  return nullptr;
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
    case CollKind::kAllToAllv: return "AlltoAllv";
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
    case StepKind::kBarrier: return "barrier";
  }
  return "?";
}

}  // namespace ferry
