#include "topology/system.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace ferry::topo {

namespace {

int intAttr(const Node& n, const char* key, int def) {
  std::string v = n.attr(key);
  if (v.empty()) return def;
  return static_cast<int>(std::strtol(v.c_str(), nullptr, 0));
}

bool contains(const std::string& hay, const char* needle) {
  return lowerHex(hay).find(needle) != std::string::npos;
}

}  // namespace

double pciBw(const std::string& linkSpeed, const std::string& linkWidth) {
  // Graph::validate accepts 0..32 lanes; anything else counts as unknown (x16).
  long width = linkWidth.empty() ? 0 : std::strtol(linkWidth.c_str(), nullptr, 10);
  if (width <= 0 || width > 32) width = 16;
  double gts = linkSpeed.empty() ? 0 : std::strtod(linkSpeed.c_str(), nullptr);
  // Per-lane rate in units of 100 Mb/s after encoding overhead, per PCIe gen.
  static const std::pair<double, int> kRates[] = {{2.5, 15}, {5, 30}, {8, 60}, {16, 120}, {32, 240}, {64, 480}};
  int rate = 60;
  for (const auto& [g, r] : kRates)
    if (gts == g) rate = r;
  return static_cast<double>(width) * rate / 80.0;
}

double nvlinkBw(int sm) {
  if (sm < 70) return 18.0;
  if (sm < 80) return 20.0;
  if (sm == 86) return 12.0;
  if (sm < 90) return 20.0;
  if (sm < 100) return 20.6;
  return 40.1;
}

double interCpuBw(const Node& cpu) {
  std::string arch = lowerHex(cpu.attr("arch"));
  std::string vendor = cpu.attr("vendor");
  if (arch.rfind("ppc64", 0) == 0) return 32.0;
  if (arch == "arm64" || arch == "aarch64") return 6.0;
  if (arch != "x86_64") return kLocBw;  // NCCL leaves unknown architectures at LOC bandwidth
  if (contains(vendor, "intel")) {
    int family = intAttr(cpu, "familyid", 0), model = intAttr(cpu, "modelid", 0);
    if (family == 6 && model >= 0xCF) return 40.0;  // Emerald Rapids
    if (family == 6 && model >= 0x8F) return 22.0;  // Sapphire Rapids
    if (family == 6 && model >= 0x55) return 10.0;  // Skylake
    return 6.0;                                     // Broadwell and older
  }
  if (contains(vendor, "amd")) return 16.0;
  if (contains(vendor, "centaur") || contains(vendor, "shanghai")) return 6.0;
  return kLocBw;
}

int System::addNode(NodeType t, std::string name, int xml, int cpu) {
  SysNode n;
  n.type = t;
  n.name = std::move(name);
  n.xml = xml;
  n.cpu = cpu;
  n.host = cpu >= 0 ? nodes_[static_cast<size_t>(cpu)].host : 0;
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

const SysLink* System::link(int a, int b, LinkType t) const {
  for (const SysLink& l : node(a).links)
    if (l.to == b && l.type == t) return &l;
  return nullptr;
}

// Several <nvlink> elements to one target add up, as NCCL's connect does.
void System::addLink(int a, int b, LinkType t, double bw) {
  for (SysLink& l : nodes_[static_cast<size_t>(a)].links) {
    if (l.to == b && l.type == t) { l.bw += bw; return; }
  }
  nodes_[static_cast<size_t>(a)].links.push_back({b, t, bw});
}

void System::addBoth(int a, int b, LinkType t, double bw) {
  addLink(a, b, t, bw);
  addLink(b, a, t, bw);
}

System System::build(const Graph& g) {
  System s;
  std::map<std::string, int> hosts;
  if (g.root() < 0) return s;
  for (int c : g.node(g.root()).children) {
    if (g.node(c).kind != Kind::kCpu) continue;
    auto it = hosts.emplace(g.node(c).attr("host_hash"), static_cast<int>(hosts.size())).first;
    s.addCpu(g, c, it->second);
  }
  size_t n = s.nodes_.size();
  for (size_t i = 0; i < n; ++i)
    if (s.nodes_[i].type == NodeType::kGpu) s.addGpuLinks(g, static_cast<int>(i));
  s.connectCpus(g);
  s.completeReverse();
  return s;
}

void System::addCpu(const Graph& g, int xmlCpu, int host) {
  SysNode n;
  n.type = NodeType::kCpu;
  n.name = "CPU/" + g.node(xmlCpu).attr("numaid");
  n.xml = xmlCpu;
  n.host = host;
  n.cpu = static_cast<int>(nodes_.size());
  nodes_.push_back(n);
  for (int c : g.node(xmlCpu).children) addUnder(g, c, n.cpu, n.cpu);
}

void System::addUnder(const Graph& g, int x, int parent, int cpu) {
  const Node& n = g.node(x);
  if (n.kind == Kind::kNic) {
    // A NIC with no PCI function of its own (socket NIC, NIC under a host
    // bridge): NCCL joins it to its parent at local bandwidth.
    std::string first;
    for (int c : n.children)
      if (first.empty() && g.node(c).kind == Kind::kNet) first = g.node(c).attr("name");
    int id = addNode(NodeType::kNic, "NIC/" + first, x, cpu);
    addBoth(id, parent, LinkType::kPci, kLocBw);
    addNic(g, x, id, cpu);
    return;
  }
  if (n.kind != Kind::kPci) return;
  double bw = pciBw(n.attr("link_speed"), n.attr("link_width"));
  NodeType t = g.isGpuPci(x) ? NodeType::kGpu : g.isNicPci(x) ? NodeType::kNic : NodeType::kPci;
  int id = addNode(t, n.attr("busid"), x, cpu);
  addBoth(id, parent, LinkType::kPci, bw);
  if (t == NodeType::kGpu) return;
  for (int c : n.children) {
    if (t == NodeType::kNic && g.node(c).kind == Kind::kNic) addNic(g, c, id, cpu);
    else if (t == NodeType::kPci) addUnder(g, c, id, cpu);
  }
}

void System::addNic(const Graph& g, int xmlNic, int nicNode, int cpu) {
  for (int c : g.node(xmlNic).children) {
    const Node& net = g.node(c);
    if (net.kind != Kind::kNet) continue;
    double speed = std::strtod(net.attr("speed").c_str(), nullptr);
    double bw = (speed <= 0 ? 10000.0 : speed) / 8000.0;  // Mb/s -> GB/s; unknown = 10 Gb/s as NCCL
    int id = addNode(NodeType::kNet, net.attr("name"), c, cpu);
    addBoth(nicNode, id, LinkType::kNet, bw);
  }
}

void System::addGpuLinks(const Graph& g, int gpuNode) {
  const SysNode self = node(gpuNode);
  std::map<std::string, int> gpus;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].type == NodeType::kGpu && nodes_[i].host == self.host) gpus[lowerHex(nodes_[i].name)] = static_cast<int>(i);
  for (int gx : g.node(self.xml).children) {
    const Node& gpu = g.node(gx);
    if (gpu.kind != Kind::kGpu) continue;
    int sm = intAttr(gpu, "sm", 0);
    for (int lx : gpu.children) {
      const Node& l = g.node(lx);
      int count = std::max(1, intAttr(l, "count", 1));
      if (l.tag == "c2c") {
        // NVML reports C2C bandwidth per link in MB/s.
        addLink(gpuNode, self.cpu, LinkType::kC2c, intAttr(l, "bw", 0) * count / 1000.0);
        continue;
      }
      std::string target = lowerHex(l.attr("target")), tclass = lowerHex(l.attr("tclass"));
      double bw = count * nvlinkBw(sm);  // xGMI is treated as NVLink, as RCCL does
      if (tclass == "0x068000" || target.rfind("fffffff:", 0) == 0) {
        if (nvs_ < 0) nvs_ = addNode(NodeType::kNvs, "NVS", -1, self.cpu);
        addBoth(gpuNode, nvs_, LinkType::kNvl, bw);
      } else if (tclass == "0x068001") {
        addLink(gpuNode, self.cpu, LinkType::kNvl, bw);
      } else if (auto it = gpus.find(target); it != gpus.end() && it->second != gpuNode) {
        addLink(gpuNode, it->second, LinkType::kNvl, bw);
      }
    }
  }
}

void System::connectCpus(const Graph& g) {
  for (size_t a = 0; a < nodes_.size(); ++a) {
    if (nodes_[a].type != NodeType::kCpu) continue;
    for (size_t b = 0; b < nodes_.size(); ++b) {
      if (a == b || nodes_[b].type != NodeType::kCpu || nodes_[a].host != nodes_[b].host) continue;
      addLink(static_cast<int>(a), static_cast<int>(b), LinkType::kSys, interCpuBw(g.node(nodes_[a].xml)));
    }
  }
}

// A GPU link listed on one side only (one-sided dumps, count mismatches keep
// their own side) gets a reverse of the same bandwidth: paths need both ways.
void System::completeReverse() {
  for (size_t a = 0; a < nodes_.size(); ++a) {
    for (size_t k = 0; k < nodes_[a].links.size(); ++k) {
      SysLink l = nodes_[a].links[k];
      if (!link(l.to, static_cast<int>(a), l.type)) nodes_[static_cast<size_t>(l.to)].links.push_back({static_cast<int>(a), l.type, l.bw});
    }
  }
}

}  // namespace ferry::topo
