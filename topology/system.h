// The node/link view of a topology, as NCCL builds it from the XML
// (nccl-internals §5.3-5.4): GPU, PCI switch, NVSwitch, CPU, NIC and NET
// nodes joined by typed links carrying a bandwidth in GB/s. Paths are
// computed on this view (paths.h); the XML tree (graph.h) stays the source.
#pragma once

#include <string>
#include <vector>

#include "topology/graph.h"

namespace ferry::topo {

enum class NodeType { kGpu, kPci, kNvs, kCpu, kNic, kNet };
// Values equal the path type each link yields, as in NCCL.
enum class LinkType { kLoc = 0, kNvl = 1, kC2c = 3, kPci = 4, kSys = 9, kNet = 10 };

// Bandwidth constants (GB/s), nccl-internals §5.4.
inline constexpr double kLocBw = 5000.0;

struct SysLink {
  int to = -1;
  LinkType type = LinkType::kPci;
  double bw = 0;
};

struct SysNode {
  NodeType type = NodeType::kPci;
  std::string name;  // GPU/NIC/PCI: bus id; NET: net name; CPU: "CPU/<numaid>"; NVS: "NVS"
  int xml = -1;      // the Graph node this came from (-1 for the NVSwitch)
  int host = 0;      // index of the CPU's host_hash (nodes of one host share it)
  int cpu = -1;      // the local CPU node
  std::vector<SysLink> links;
};

class System {
 public:
  static System build(const Graph& g);

  const std::vector<SysNode>& nodes() const { return nodes_; }
  const SysNode& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  // A link from a to b, or nullptr.
  const SysLink* link(int a, int b, LinkType t) const;

 private:
  int addNode(NodeType t, std::string name, int xml, int cpu);
  void addLink(int a, int b, LinkType t, double bw);  // accumulates like NCCL
  void addBoth(int a, int b, LinkType t, double bw);
  void addCpu(const Graph& g, int xmlCpu, int host);
  void addUnder(const Graph& g, int xmlNode, int parent, int cpu);
  void addNic(const Graph& g, int xmlNic, int nicNode, int cpu);
  void addGpuLinks(const Graph& g, int gpuNode);
  void connectCpus(const Graph& g);
  void completeReverse();

  std::vector<SysNode> nodes_;
  int nvs_ = -1;
};

// PCI link bandwidth: width x per-lane rate / 80, missing width = 16, unknown
// or missing speed = Gen3 rate.
double pciBw(const std::string& linkSpeed, const std::string& linkWidth);
// NVLink per-link bandwidth by compute capability x 10.
double nvlinkBw(int sm);
// Inter-socket (SYS) bandwidth by CPU arch/vendor/family/model.
double interCpuBw(const Node& cpu);

}  // namespace ferry::topo
