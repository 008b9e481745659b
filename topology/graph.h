// The machine graph loaded from (or dumped to) NCCL's topology XML.
//
// It is a typed tree (system > cpu > pci... > gpu/nic > net/nvlink), because
// that is how NCCL writes it; NVLink/xGMI links are edges carried as
// <nvlink>/<xgmi> children of a GPU, with their target bus id. Every attribute
// is kept verbatim, in file order, so a dump reproduces what was read.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "topology/xml.h"

namespace ferry::topo {

enum class Kind { kSystem, kCpu, kPci, kGpu, kNic, kNet, kLink, kOther };

struct Node {
  Kind kind = Kind::kOther;
  std::string tag;
  std::vector<std::pair<std::string, std::string>> attrs;
  int parent = -1;
  std::vector<int> children;
  int line = 0;

  std::string attr(const std::string& key) const;  // "" when absent
  bool has(const std::string& key) const;
};

class Graph {
 public:
  // Builds and validates a graph from XML text; the Status names the element
  // at fault (tag, bus id and line) when the file is malformed.
  static Result<Graph> fromXml(const std::string& text);
  static Result<Graph> fromFile(const std::string& path);
  static Result<Graph> fromElement(const XmlElement& root);

  std::string toXml() const;
  // One line per node, attributes sorted: equal strings mean equal graphs.
  std::string canonical() const;
  // Indented human-readable tree.
  std::string tree() const;

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  int root() const { return nodes_.empty() ? -1 : 0; }
  // Nearest <cpu> ancestor (or self), -1 if none.
  int cpuOf(int i) const;
  // Is this a PCI device node that is a GPU / NIC (by class or by child)?
  bool isGpuPci(int i) const;
  bool isNicPci(int i) const;
  bool isBridge(int i) const;

 private:
  int add(const XmlElement& e, int parent);
  Status validate() const;
  Status checkBusIds() const;
  Status checkLinks() const;
  void canonicalRec(int i, int depth, std::string& out) const;
  void treeRec(int i, int depth, std::string& out) const;
  std::unique_ptr<XmlElement> toElement(int i) const;

  std::vector<Node> nodes_;
};

std::string lowerHex(std::string s);

}  // namespace ferry::topo
