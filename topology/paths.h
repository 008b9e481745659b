// Path classification between endpoints (GPU, NIC/NET, CPU) with NCCL's
// path types and the bottleneck bandwidth, computed as NCCL does
// (nccl-internals §5.3): a breadth-first search from every node over the
// links of System, keeping per node the route with the fewest hops and, among
// equal hop counts, the highest bandwidth; a path's type is the worst hop.
// Then the post-processing that does not depend on a live GPU:
//   P2C  GPU -C2C-> CPU -PCI-> NIC.
//   PXN  GPU -NVLink-> peer GPU that is <= PXB (or P2C) to the NIC, when the
//        peer has more bandwidth to it or the direct path goes through a CPU.
//        GPU->NIC direction only, like NCCL.
//   NET  GPUs on different hosts (distinct host_hash): through the network;
//        bandwidth = the smaller of the two GPUs' best NIC path.
// Not modelled (they need a live system): rerouting of GPU pairs whose P2P
// is disabled, GDR checks, BCM switch flattening, NVB/PXN env switches other
// than the options below.
#pragma once

#include <string>
#include <vector>

#include "topology/graph.h"
#include "topology/system.h"

namespace ferry::topo {

enum class PathType { kLoc = 0, kNvl, kNvb, kC2c, kPix, kPxb, kP2c, kPxn, kPhb, kSys, kNet, kDis };
const char* pathName(PathType p);
// A JSON string literal (quotes, escapes) for the tool's outputs.
std::string jsonQuote(const std::string& s);

struct PathInfo {
  PathType type = PathType::kDis;
  double bw = 0;  // GB/s, bottleneck along the path
  int hops = 0;
};

struct PathOptions {
  bool nvb = true;     // !NCCL_NVB_DISABLE
  bool pxn = true;     // !NCCL_PXN_DISABLE
  bool pxnC2c = true;  // NCCL_PXN_C2C
};

struct Endpoint {
  std::string name;  // GPU: bus id; NET: net name (or NIC bus id when it has no <net>); CPU: CPU/<numaid>
  NodeType type = NodeType::kGpu;
  int node = -1;     // System node
};

class PathMatrix {
 public:
  static PathMatrix compute(const Graph& g, const PathOptions& opt = {});

  const System& system() const { return sys_; }
  // GPUs, then NICs (NET nodes, or NIC nodes without nets), then CPUs; each in file order.
  const std::vector<Endpoint>& endpoints() const { return ends_; }
  const PathInfo& path(int from, int to) const;  // endpoint indices
  int find(const std::string& name) const;       // first endpoint with that name, -1 if none
  // Convenience by name; kDis when either name is unknown.
  PathInfo path(const std::string& from, const std::string& to) const;

  // Fixed-width table "TYPE/bw" per pair, rows = from, columns = to.
  std::string table() const;
  // {"endpoints": [...], "paths": [{"from","to","type","bw"}...]}
  std::string json() const;

 private:
  void bfs(int base, bool nvb);
  void applyP2c();
  void applyPxn(bool pxnC2c);
  void applyNet();
  PathInfo& at(int fromNode, int toNode);

  System sys_;
  std::vector<Endpoint> ends_;
  std::vector<int> endOf_;             // System node -> endpoint index or -1
  std::vector<std::vector<PathInfo>> p_;  // [to endpoint][from System node]
};

}  // namespace ferry::topo
