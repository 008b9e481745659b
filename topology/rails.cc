#include "topology/rails.h"

#include <cstdlib>
#include <algorithm>
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

namespace {

using Key = std::tuple<int, int, int>;  // path type, bridges crossed, NUMA distance

struct GpuChoice {
  int gpu = -1;
  std::vector<Key> keys;     // per NIC; NICs slower than the fastest are left out
  std::vector<size_t> local;  // NICs with the best key, in file order
};

GpuChoice rank(const Graph& g, int gpu, const std::vector<NicEnd>& nics, long long fastest) {
  GpuChoice c;
  c.gpu = gpu;
  for (size_t k = 0; k < nics.size(); ++k) {
    auto [path, bridges] = classify(g, gpu, nics[k].device);
    int dist = std::abs(numaOf(g, gpu) - numaOf(g, nics[k].device));
    c.keys.emplace_back(static_cast<int>(path), bridges, dist);
    if (nics[k].speed >= 0 && nics[k].speed < fastest) continue;
    if (!c.local.empty() && c.keys[k] > c.keys[c.local[0]]) continue;
    if (!c.local.empty() && c.keys[k] < c.keys[c.local[0]]) c.local.clear();
    c.local.push_back(k);
  }
  return c;
}

bool overlap(const std::vector<size_t>& a, const std::vector<size_t>& b) {
  for (size_t x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

}  // namespace

std::vector<Rail> assignRails(const Graph& g, const RailOptions& opt) {
  std::vector<NicEnd> nics = findNics(g, HcaFilter::parse(opt.ibHca));
  long long fastest = -1;
  for (const auto& n : nics) fastest = std::max(fastest, n.speed);
  std::vector<GpuChoice> gpus;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.isGpuPci(static_cast<int>(i))) gpus.push_back(rank(g, static_cast<int>(i), nics, fastest));
  std::vector<Rail> out;
  for (const GpuChoice& c : gpus) {
    if (c.local.empty()) continue;
    // Among the best NICs, the least loaded, then the first in the file.
    size_t best = c.local[0];
    for (size_t k : c.local)
      if (nics[k].load < nics[best].load) best = k;
    nics[best].load++;
    Rail r{g.node(c.gpu).attr("busid"), nics[best].name, static_cast<PathType>(std::get<0>(c.keys[best])), {}};
    // NCCL's AUTO policy: ceil(local NICs / GPUs sharing them), own rail first.
    size_t sharers = 0;
    for (const GpuChoice& o : gpus) sharers += overlap(o.local, c.local);
    size_t want = (c.local.size() + sharers - 1) / sharers;
    r.nics.push_back(r.nic);
    for (size_t k : c.local)
      if (r.nics.size() < want && k != best) r.nics.push_back(nics[k].name);
    out.push_back(std::move(r));
  }
  return out;
}


std::string railsJson(const std::vector<Rail>& rails) {
  std::string o = "{\"rails\": [";
  for (size_t i = 0; i < rails.size(); ++i) {
    if (i) o += ", ";
    o += "{\"gpu\": " + jsonQuote(rails[i].gpu) + ", \"nic\": " + jsonQuote(rails[i].nic) +
         ", \"path\": \"" + pathName(rails[i].path) + "\"}";
  }
  return o + "]}";
}

}  // namespace ferry::topo
