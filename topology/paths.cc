#include "topology/paths.h"

#include <algorithm>
#include <cstdio>

namespace ferry::topo {

const char* pathName(PathType p) {
  static const char* kNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};
  return kNames[static_cast<int>(p)];
}

std::string jsonQuote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o + "\"";
}

namespace {

PathType worse(PathType a, PathType b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

// The type one hop adds, from the link type and the two ends (NCCL's rules):
// NET hops do not count (only the GPU<->NIC part matters), PCI between two
// switches is PXB, PCI touching a CPU is PHB, NVLink relayed by a GPU is NVB.
PathType hopType(const System& s, int from, const SysLink& l, const PathInfo& cur) {
  NodeType a = s.node(from).type, b = s.node(l.to).type;
  auto t = static_cast<PathType>(l.type == LinkType::kNet ? 0 : static_cast<int>(l.type));
  if (a == NodeType::kPci && b == NodeType::kPci) t = PathType::kPxb;
  if (l.type == LinkType::kPci && (a == NodeType::kCpu || b == NodeType::kCpu)) t = PathType::kPhb;
  if (a == NodeType::kGpu && cur.type == PathType::kNvl && t == PathType::kNvl && cur.hops + 1 > 1) t = PathType::kNvb;
  return t;
}

}  // namespace

PathMatrix PathMatrix::compute(const Graph& g, const PathOptions& opt) {
  PathMatrix m;
  m.sys_ = System::build(g);
  const auto& nodes = m.sys_.nodes();
  m.endOf_.assign(nodes.size(), -1);
  auto collect = [&](NodeType t) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].type != t) continue;
      bool hasNet = false;
      for (const SysLink& l : nodes[i].links) hasNet |= l.type == LinkType::kNet;
      if (t == NodeType::kNic && hasNet) continue;  // its NETs are the endpoints
      m.endOf_[i] = static_cast<int>(m.ends_.size());
      m.ends_.push_back({nodes[i].name, t, static_cast<int>(i)});
    }
  };
  collect(NodeType::kGpu);
  std::vector<Endpoint> nets;
  for (size_t i = 0; i < nodes.size(); ++i) {
    // NETs and net-less NICs interleaved in file order.
    if (nodes[i].type != NodeType::kNet && nodes[i].type != NodeType::kNic) continue;
    bool hasNet = false;
    for (const SysLink& l : nodes[i].links) hasNet |= l.type == LinkType::kNet;
    if (nodes[i].type == NodeType::kNic && hasNet) continue;
    m.endOf_[i] = static_cast<int>(m.ends_.size());
    m.ends_.push_back({nodes[i].name, nodes[i].type, static_cast<int>(i)});
  }
  collect(NodeType::kCpu);
  m.p_.assign(m.ends_.size(), std::vector<PathInfo>(nodes.size()));
  for (size_t e = 0; e < m.ends_.size(); ++e) m.bfs(static_cast<int>(e), opt.nvb);
  m.applyP2c();
  if (opt.pxn) m.applyPxn(opt.pxnC2c);
  m.applyNet();
  return m;
}

// Fills p_[base][n] = path from n to endpoint `base`, by levels from base.
void PathMatrix::bfs(int base, bool nvb) {
  std::vector<PathInfo>& p = p_[static_cast<size_t>(base)];
  int root = ends_[static_cast<size_t>(base)].node;
  p[static_cast<size_t>(root)] = {PathType::kLoc, kLocBw, 0};
  std::vector<int> frontier{root};
  while (!frontier.empty()) {
    std::vector<int> next;
    for (int n : frontier) {
      const PathInfo cur = p[static_cast<size_t>(n)];
      for (const SysLink& l : sys_.node(n).links) {
        // A GPU relays only one NVLink hop to another GPU, and only right next to the base.
        if (n != root && sys_.node(n).type == NodeType::kGpu &&
            (!nvb || l.type != LinkType::kNvl || sys_.node(l.to).type != NodeType::kGpu || cur.hops > 1))
          continue;
        // The path runs from l.to towards the base, so it uses that direction's link.
        const SysLink* back = sys_.link(l.to, n, l.type);
        double bw = std::min(cur.bw, back ? back->bw : l.bw);
        PathInfo& rem = p[static_cast<size_t>(l.to)];
        if ((rem.bw == 0 || rem.hops > cur.hops) && rem.bw < bw) {
          rem = {worse(cur.type, hopType(sys_, n, l, cur)), bw, cur.hops + 1};
          if (std::find(next.begin(), next.end(), l.to) == next.end()) next.push_back(l.to);
        }
      }
    }
    frontier = std::move(next);
  }
}

PathInfo& PathMatrix::at(int fromNode, int toNode) {
  return p_[static_cast<size_t>(endOf_[static_cast<size_t>(toNode)])][static_cast<size_t>(fromNode)];
}

const PathInfo& PathMatrix::path(int from, int to) const {
  return p_[static_cast<size_t>(to)][static_cast<size_t>(ends_[static_cast<size_t>(from)].node)];
}

int PathMatrix::find(const std::string& name) const {
  for (size_t i = 0; i < ends_.size(); ++i)
    if (ends_[i].name == name) return static_cast<int>(i);
  return -1;
}

PathInfo PathMatrix::path(const std::string& from, const std::string& to) const {
  int a = find(from), b = find(to);
  if (a < 0 || b < 0) return {};
  return path(a, b);
}

namespace {
bool isNicEnd(const Endpoint& e) { return e.type == NodeType::kNet || e.type == NodeType::kNic; }
}  // namespace

// A GPU joined to its CPU by C2C reaches a CPU-attached (PHB) NIC that way.
void PathMatrix::applyP2c() {
  for (const Endpoint& g : ends_) {
    if (g.type != NodeType::kGpu) continue;
    int cpu = sys_.node(g.node).cpu;
    if (cpu < 0 || at(g.node, cpu).type != PathType::kC2c) continue;
    for (const Endpoint& n : ends_) {
      if (!isNicEnd(n) || at(g.node, n.node).type != PathType::kPhb) continue;
      at(g.node, n.node).type = PathType::kP2c;
      at(n.node, g.node).type = PathType::kP2c;
    }
  }
}

void PathMatrix::applyPxn(bool pxnC2c) {
  for (const Endpoint& n : ends_) {
    if (!isNicEnd(n)) continue;
    // The NIC's local GPU: highest bandwidth, then best type, then first in file order.
    int local = -1;
    for (const Endpoint& g : ends_) {
      if (g.type != NodeType::kGpu) continue;
      const PathInfo& q = at(g.node, n.node);
      if (q.type == PathType::kDis) continue;
      if (local < 0 || q.bw > at(local, n.node).bw ||
          (q.bw == at(local, n.node).bw && q.type < at(local, n.node).type))
        local = g.node;
    }
    if (local < 0) continue;
    const PathInfo peerNet = at(local, n.node);
    bool close = peerNet.type <= PathType::kPxb || (pxnC2c && peerNet.type <= PathType::kP2c);
    if (!close) continue;
    for (const Endpoint& g : ends_) {
      if (g.type != NodeType::kGpu || g.node == local) continue;
      const PathInfo toPeer = at(g.node, local);
      PathInfo& direct = at(g.node, n.node);
      if (toPeer.type > PathType::kNvl || sys_.node(g.node).host != sys_.node(local).host) continue;
      if (!(peerNet.bw > direct.bw || direct.type > PathType::kPxn)) continue;
      direct = {PathType::kPxn, std::min(toPeer.bw, peerNet.bw), toPeer.hops + peerNet.hops};
    }
  }
}

// GPUs of different hosts talk through the network.
void PathMatrix::applyNet() {
  auto bestNet = [&](int gpu) {
    double best = 0;
    for (const Endpoint& n : ends_)
      if (isNicEnd(n) && at(gpu, n.node).type != PathType::kDis) best = std::max(best, at(gpu, n.node).bw);
    return best;
  };
  for (const Endpoint& a : ends_) {
    for (const Endpoint& b : ends_) {
      if (a.type != NodeType::kGpu || b.type != NodeType::kGpu) continue;
      if (sys_.node(a.node).host == sys_.node(b.node).host) continue;
      double bw = std::min(bestNet(a.node), bestNet(b.node));
      if (bw > 0) at(a.node, b.node) = {PathType::kNet, bw, 0};
    }
  }
}

namespace {

std::string fmtBw(double bw) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bw);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

const char* typeName(NodeType t) {
  switch (t) {
    case NodeType::kGpu: return "GPU";
    case NodeType::kNet: return "NET";
    case NodeType::kNic: return "NIC";
    case NodeType::kCpu: return "CPU";
    case NodeType::kPci: return "PCI";
    case NodeType::kNvs: return "NVS";
  }
  return "?";
}

}  // namespace

std::string PathMatrix::table() const {
  size_t w = 7;  // "from\to"
  for (const auto& e : ends_) w = std::max(w, e.name.size());
  size_t cell = 10;
  for (size_t a = 0; a < ends_.size(); ++a)
    for (size_t b = 0; b < ends_.size(); ++b)
      cell = std::max(cell, std::string(pathName(path(static_cast<int>(a), static_cast<int>(b)).type)).size() + 2 +
                                fmtBw(path(static_cast<int>(a), static_cast<int>(b)).bw).size());
  auto pad = [](std::string s, size_t n) { s.resize(std::max(n, s.size()), ' '); return s; };
  std::string out = pad("from\\to", w + 1);
  for (const auto& e : ends_) out += " " + pad(e.name, cell);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += "\n";
  for (size_t a = 0; a < ends_.size(); ++a) {
    std::string row = pad(ends_[a].name, w + 1);
    for (size_t b = 0; b < ends_.size(); ++b) {
      const PathInfo& q = path(static_cast<int>(a), static_cast<int>(b));
      row += " " + pad(std::string(pathName(q.type)) + "/" + fmtBw(q.bw), std::max(cell, ends_[b].name.size()));
    }
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += row + "\n";
  }
  return out;
}

std::string PathMatrix::json() const {
  std::string o = "{\"endpoints\": [";
  for (size_t i = 0; i < ends_.size(); ++i) {
    if (i) o += ", ";
    o += "{\"name\": " + jsonQuote(ends_[i].name) + ", \"type\": \"" + typeName(ends_[i].type) + "\"}";
  }
  o += "], \"paths\": [";
  bool first = true;
  for (size_t a = 0; a < ends_.size(); ++a) {
    for (size_t b = 0; b < ends_.size(); ++b) {
      const PathInfo& q = path(static_cast<int>(a), static_cast<int>(b));
      if (!first) o += ", ";
      first = false;
      o += "{\"from\": " + jsonQuote(ends_[a].name) + ", \"to\": " + jsonQuote(ends_[b].name) + ", \"type\": \"" +
           pathName(q.type) + "\", \"bw\": " + fmtBw(q.bw) + "}";
    }
  }
  return o + "]}";
}

}  // namespace ferry::topo
