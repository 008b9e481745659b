// The topology of the machine this process runs on: what the communicator
// calls (topology::detect), plus discovery alone for tools and tests.
//
// detect() follows NCCL: with NCCL_TOPO_FILE set, the file is loaded and
// discovery is merged on top of it (file wins, discovery fills the rest; see
// merge.h), or, with FERRY_TOPO_FILE_ONLY=1, the file is used as it is.
// Without it, discovery alone. Every <cpu> then gets this host's host_hash
// (NCCL rewrites it too; not in file-only mode). With NCCL_TOPO_DUMP_FILE
// set, the result is written there in the same format (every caller writes:
// a communicator should clear dumpFile on ranks other than the dumping one).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "topology/graph.h"
#include "topology/rails.h"
#include "topology/xml.h"

namespace ferry::topo {

struct DetectOptions {
  std::string topoFile;   // NCCL_TOPO_FILE
  bool fileOnly = false;  // FERRY_TOPO_FILE_ONLY
  std::string dumpFile;   // NCCL_TOPO_DUMP_FILE
  std::string sysRoot;    // "" = this machine; tests point it at a fake sysfs tree
  bool useHwloc = true;
  bool useNvml = true;
};

DetectOptions detectOptionsFromConfig();
RailOptions railOptionsFromConfig();  // NCCL_IB_HCA

// Discovery only (hwloc + sysfs + NVML), as NCCL XML / as a graph.
std::unique_ptr<XmlElement> discoverXml(const DetectOptions& opt);
Result<Graph> discover(const DetectOptions& opt = {});

Result<Graph> detect(const DetectOptions& opt);
Result<Graph> detect();  // options from the configuration

// NCCL-style host identity: hash of the host name and the kernel boot id.
std::string localHostHash();

}  // namespace ferry::topo

namespace ferry::topology {
using ferry::topo::detect;
}  // namespace ferry::topology
