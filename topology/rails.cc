#include "topology/rails.h"

#include <cstdlib>
#include <tuple>

#include "topology/nicfilter.h"

namespace ferry::topo {

namespace {

struct NicEnd {
  std::string name;
  int device = -1;  // PCI device node, or the <nic> itself when it has no own PCI function
  long long speed = -1;
  int load = 0;
};

std::vector<NicEnd> findNics(const Graph& g, const HcaFilter& hca) {
  std::vector<NicEnd> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    int id = static_cast<int>(i);
    const Node& n = g.node(id);
    if (n.kind == Kind::kNic) {
      int dev = (n.parent >= 0 && g.isNicPci(n.parent)) ? n.parent : id;
      for (int c : n.children) {
        const Node& net = g.node(c);
        if (net.kind != Kind::kNet) continue;
        std::string name = net.attr("name"), port = net.attr("port");
        if (net.attr("virtual") == "1" || isVirtualNetName(name)) continue;
        if (!hca.accepts(name, port.empty() ? -1 : std::atoi(port.c_str()))) continue;
        std::string sp = net.attr("speed");
        out.push_back({name, dev, sp.empty() ? -1 : std::atoll(sp.c_str()), 0});
      }
    } else if (g.isNicPci(id)) {
      bool hasNic = false;
      for (int c : n.children) hasNic |= g.node(c).kind == Kind::kNic;
      if (!hasNic) out.push_back({n.attr("busid"), id, -1, 0});
    }
  }
  return out;
}

std::vector<int> chain(const Graph& g, int dev) {
  std::vector<int> up;
  for (int i = dev; i >= 0 && g.node(i).kind != Kind::kSystem; i = g.node(i).parent) up.push_back(i);
  return up;
}

int numaOf(const Graph& g, int i) {
  int c = g.cpuOf(i);
  return c < 0 ? 0 : std::atoi(g.node(c).attr("numaid").c_str());
}

// Returns (path type, PCI bridges crossed).
std::pair<PathType, int> classify(const Graph& g, int gpu, int nicDev) {
  std::vector<int> a = chain(g, gpu), b = chain(g, nicDev);
  for (size_t i = 1; i < a.size(); ++i) {
    for (size_t j = 1; j < b.size(); ++j) {
      if (a[i] != b[j]) continue;
      if (g.node(a[i]).kind != Kind::kPci) return {PathType::kPhb, 0};
      int bridges = static_cast<int>(i + j) - 1;
      return {bridges <= 1 ? PathType::kPix : PathType::kPxb, bridges};
    }
  }
  return {PathType::kSys, 0};
}

}  // namespace

std::vector<Rail> assignRails(const Graph& g, const RailOptions& opt) {
  std::vector<NicEnd> nics = findNics(g, HcaFilter::parse(opt.ibHca));
  long long fastest = -1;
  for (const auto& n : nics) fastest = std::max(fastest, n.speed);
  std::vector<Rail> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    int gpu = static_cast<int>(i);
    if (!g.isGpuPci(gpu)) continue;
    int best = -1;
    std::tuple<int, int, int, int, size_t> bestKey;
    PathType bestPath = PathType::kSys;
    for (size_t k = 0; k < nics.size(); ++k) {
      if (nics[k].speed >= 0 && nics[k].speed < fastest) continue;
      auto [path, bridges] = classify(g, gpu, nics[k].device);
      int dist = std::abs(numaOf(g, gpu) - numaOf(g, nics[k].device));
      auto key = std::make_tuple(static_cast<int>(path), bridges, dist, nics[k].load, k);
      if (best < 0 || key < bestKey) { best = static_cast<int>(k); bestKey = key; bestPath = path; }
    }
    if (best < 0) continue;
    nics[static_cast<size_t>(best)].load++;
    out.push_back({g.node(gpu).attr("busid"), nics[static_cast<size_t>(best)].name, bestPath});
  }
  return out;
}

namespace {
std::string jsonStr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o + "\"";
}
}  // namespace

std::string railsJson(const std::vector<Rail>& rails) {
  std::string o = "{\"rails\": [";
  for (size_t i = 0; i < rails.size(); ++i) {
    if (i) o += ", ";
    o += "{\"gpu\": " + jsonStr(rails[i].gpu) + ", \"nic\": " + jsonStr(rails[i].nic) +
         ", \"path\": \"" + pathName(rails[i].path) + "\"}";
  }
  return o + "]}";
}

}  // namespace ferry::topo
