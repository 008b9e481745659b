// Rail assignment: which NIC each GPU should use, and the PCI path type
// between them (NCCL's PIX/PXB/PHB/SYS, see nccl-internals §5.3).
#pragma once

#include <string>
#include <vector>

#include "topology/graph.h"
#include "topology/paths.h"

namespace ferry::topo {

struct Rail {
  std::string gpu;   // bus id as written in the file
  std::string nic;   // <net name>, or the NIC's bus id when the file has no <net>
  PathType path = PathType::kSys;
  // Every NIC this GPU should use, `nic` first: NCCL's AUTO policy,
  // ceil(best NICs / GPUs sharing them) (p5: 4 EFAs per GPU; OCI H100: both
  // ports of its NIC; two GPUs on one NIC: just that NIC).
  std::vector<std::string> nics;
};

// One entry per GPU in document order. Order of preference for each GPU:
// 1. path type (PIX < PXB < PHB < SYS), then fewer PCI bridges crossed;
// 2. NICs slower than the fastest known NIC speed are never rails
//    (unknown speed counts as fast);
// 3. NUMA distance |numaid(gpu) - numaid(nic)|;
// 4. tie-break: the NIC with the fewest GPUs already assigned, then the NIC
//    that comes first in the file. GPUs are taken in file order, so two GPUs
//    and two NICs on one switch pair up in file order.
//
// Only eligible NICs compete: virtual interfaces never, and NCCL_IB_HCA
// (opt.ibHca) decides among named ones (nicfilter.h). A NIC without a <net>
// (hint files) has no name to match, so the list does not apply to it.
struct RailOptions {
  std::string ibHca;  // NCCL_IB_HCA syntax
};
std::vector<Rail> assignRails(const Graph& g, const RailOptions& opt = {});

std::string railsJson(const std::vector<Rail>& rails);

}  // namespace ferry::topo
