// The communicator's view of the machine (topology/detect.h), loaded at
// creation when someone asked for it: NCCL_TOPO_FILE given (a bad file
// fails creation, as in NCCL), NCCL_TOPO_DUMP_FILE to write (only rank
// NCCL_TOPO_DUMP_FILE_RANK writes), or GRAPH logging on. Discovery costs a
// few milliseconds of sysfs reads, so it is skipped otherwise until an
// algorithm needs it.
#include "core/config.h"
#include "core/log.h"
#include "comm/comm.h"
#include "topology/detect.h"

namespace ferry {

Status Comm::loadTopology() {
  topo::DetectOptions opt = topo::detectOptionsFromConfig();
  bool logGraph = log::enabled(log::Level::kInfo, log::kGraph);
  if (opt.topoFile.empty() && opt.dumpFile.empty() && !logGraph) return Status::ok();
  if (rank_ != config::getInt(config::Param::kTopoDumpFileRank)) opt.dumpFile.clear();
  Result<topo::Graph> g = topo::detect(opt);
  if (!g.isOk()) {
    if (!opt.topoFile.empty()) return g.status();
    FERRY_WARN("topology discovery failed: %s", g.status().message().c_str());
    return Status::ok();
  }
  std::vector<topo::Rail> rails = topo::assignRails(g.value(), topo::railOptionsFromConfig());
  FERRY_INFO(log::kGraph, "Topology: %zu nodes, %zu GPU rails%s%s", g.value().nodes().size(),
             rails.size(), opt.dumpFile.empty() ? "" : ", written to ",
             opt.dumpFile.c_str());
  for (const topo::Rail& r : rails)
    FERRY_INFO(log::kGraph, "Topology: GPU %s -> NIC %s (%s)", r.gpu.c_str(), r.nic.c_str(),
               topo::pathName(r.path));
  return Status::ok();
}

}  // namespace ferry
