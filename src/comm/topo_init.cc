// The machine's topology (topology/detect.h), loaded for every communicator:
// discovery runs once per process and configuration (a few milliseconds of
// sysfs and hwloc reads) and every later communicator reuses the result, so
// creation stays cheap. NCCL_TOPO_FILE given: a bad file fails creation, as in
// NCCL; discovery trouble otherwise is a WARN and an empty rail table.
// NCCL_TOPO_DUMP_FILE is written by rank NCCL_TOPO_DUMP_FILE_RANK only (it
// runs its own detection, which writes the file).
#include <map>
#include <mutex>

#include "comm/comm.h"
#include "core/config.h"
#include "core/log.h"
#include "topology/detect.h"

namespace ferry {
namespace {

struct LoadedTopology {
  Status status;
  size_t nodes = 0;
  std::vector<topo::Rail> rails;
};

LoadedTopology detectOnce(const topo::DetectOptions& opt) {
  LoadedTopology t;
  Result<topo::Graph> g = topo::detect(opt);
  if (!g.isOk()) {
    t.status = g.status();
    return t;
  }
  t.nodes = g.value().nodes().size();
  t.rails = topo::assignRails(g.value(), topo::railOptionsFromConfig());
  return t;
}

const LoadedTopology& cachedTopology(const topo::DetectOptions& opt) {
  static std::mutex mu;
  static std::map<std::string, LoadedTopology> cache;
  std::string key = opt.topoFile + '\n' + (opt.fileOnly ? "1" : "0") + '\n' +
                    config::getString(config::Param::kIbHca);
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, detectOnce(opt)).first;
  return it->second;
}

}  // namespace

Status Comm::loadTopology() {
  topo::DetectOptions opt = topo::detectOptionsFromConfig();
  bool dumps = !opt.dumpFile.empty() && rank_ == config::getInt(config::Param::kTopoDumpFileRank);
  LoadedTopology dumped;
  if (dumps) dumped = detectOnce(opt);
  opt.dumpFile.clear();
  const LoadedTopology& t = dumps ? dumped : cachedTopology(opt);
  if (!t.status.isOk()) {
    if (!opt.topoFile.empty()) return t.status;
    FERRY_WARN("topology discovery failed: %s", t.status.message().c_str());
    return Status::ok();
  }
  rails_ = t.rails;
  std::string dumpFile = topo::detectOptionsFromConfig().dumpFile;
  FERRY_INFO(log::kGraph, "Topology: %zu nodes, %zu GPU rails%s%s", t.nodes, t.rails.size(),
             dumps ? ", written to " : "", dumps ? dumpFile.c_str() : "");
  for (const topo::Rail& r : t.rails)
    FERRY_INFO(log::kGraph, "Topology: GPU %s -> NIC %s (%s)", r.gpu.c_str(), r.nic.c_str(),
               topo::pathName(r.path));
  return Status::ok();
}

}  // namespace ferry
