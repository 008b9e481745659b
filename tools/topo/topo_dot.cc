#include "tools/topo/topo_dot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <vector>

namespace ferry::topo {

namespace {

std::string id(int i) { return "n" + std::to_string(i); }

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

std::string netsOf(const Graph& g, int nic) {
  std::string s;
  for (int c : g.node(nic).children) {
    const Node& n = g.node(c);
    if (n.kind != Kind::kNet) continue;
    s += "\\n" + esc(n.attr("name"));
    if (n.has("speed")) s += " " + esc(n.attr("speed")) + " Mb/s";
    if (n.attr("virtual") == "1") s += " (virtual)";
  }
  return s;
}

std::string nodeLine(const Graph& g, int i) {
  const Node& n = g.node(i);
  if (n.kind == Kind::kCpu) {
    std::string l = "CPU/" + esc(n.attr("numaid"));
    if (n.has("vendor")) l += "\\n" + esc(n.attr("vendor"));
    return id(i) + " [shape=box, style=rounded, label=\"" + l + "\"];";
  }
  if (n.kind == Kind::kNic) return id(i) + " [shape=box, style=filled, fillcolor=lightblue, label=\"NIC" + netsOf(g, i) + "\"];";
  std::string bus = esc(n.attr("busid"));
  if (g.isGpuPci(i)) return id(i) + " [shape=box, style=filled, fillcolor=palegreen, label=\"GPU " + bus + "\"];";
  if (g.isNicPci(i)) {
    std::string nets;
    for (int c : n.children)
      if (g.node(c).kind == Kind::kNic) nets += netsOf(g, c);
    return id(i) + " [shape=box, style=filled, fillcolor=lightblue, label=\"NIC " + bus + nets + "\"];";
  }
  return id(i) + " [shape=ellipse, label=\"PCI " + bus + "\"];";
}

bool drawn(const Graph& g, int i) {
  const Node& n = g.node(i);
  if (n.kind == Kind::kCpu || n.kind == Kind::kPci) return true;
  return n.kind == Kind::kNic && !(n.parent >= 0 && g.isNicPci(n.parent));
}

std::string edgeLabel(const Node& n) {
  std::string w = n.attr("link_width"), s = n.attr("link_speed");
  if (w.empty() || w == "0" || s.empty()) return "";
  return " [label=\"x" + esc(w) + " " + esc(s.substr(0, s.find(' '))) + " GT/s\"]";
}

}  // namespace

std::string toDot(const Graph& g) {
  std::string o = "graph topology {\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::map<std::string, int> bus;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.node(static_cast<int>(i)).kind == Kind::kPci) bus[lowerHex(g.node(static_cast<int>(i)).attr("busid"))] = static_cast<int>(i);
  std::string edges;
  std::set<std::pair<int, int>> links;
  bool nvs = false;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    int i = static_cast<int>(k);
    const Node& n = g.node(i);
    if (drawn(g, i)) {
      o += "  " + nodeLine(g, i) + "\n";
      if (n.parent >= 0 && g.node(n.parent).kind != Kind::kSystem) edges += "  " + id(n.parent) + " -- " + id(i) + edgeLabel(n) + ";\n";
    }
    if (n.kind != Kind::kLink || n.tag == "c2c") continue;
    int from = g.node(n.parent).parent;  // link > gpu > pci
    std::string t = lowerHex(n.attr("target"));
    std::string label = " [style=bold, color=darkgreen, label=\"" + esc(n.tag) + " x" + esc(n.attr("count")) + "\"]";
    if (lowerHex(n.attr("tclass")) == "0x068000" || t.rfind("fffffff:", 0) == 0) {
      nvs = true;
      edges += "  " + id(from) + " -- nvs" + label + ";\n";
    } else if (auto it = bus.find(t); it != bus.end() && it->second != from &&
                                      links.insert({std::min(from, it->second), std::max(from, it->second)}).second) {
      edges += "  " + id(from) + " -- " + id(it->second) + label + ";\n";
    }
  }
  if (nvs) o += "  nvs [shape=octagon, label=\"NVSwitch\"];\n";
  // The inter-socket links NCCL assumes between every two CPUs of a host.
  std::vector<int> cpus;
  for (size_t k = 0; k < g.nodes().size(); ++k)
    if (g.node(static_cast<int>(k)).kind == Kind::kCpu) cpus.push_back(static_cast<int>(k));
  for (size_t a = 0; a < cpus.size(); ++a)
    for (size_t b = a + 1; b < cpus.size(); ++b)
      if (g.node(cpus[a]).attr("host_hash") == g.node(cpus[b]).attr("host_hash"))
        edges += "  " + id(cpus[a]) + " -- " + id(cpus[b]) + " [style=dashed, label=\"SYS\"];\n";
  return o + edges + "}\n";
}

int drawGraph(const Graph& g, const std::string& dotFile, const std::string& pngFile) {
  std::string dot = toDot(g);
  std::string path = dotFile;
  if (path.empty()) {
    char tmpl[] = "/tmp/ferry-topo-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) { std::perror("ferry-topo: mkstemp"); return 1; }
    close(fd);
    path = tmpl;
  }
  {
    std::ofstream out(path, std::ios::trunc);
    if (!(out << dot)) { std::fprintf(stderr, "ferry-topo: cannot write %s\n", path.c_str()); return 1; }
  }
  int rc = 0;
  if (!pngFile.empty()) {
    if (std::system("command -v dot >/dev/null 2>&1") != 0) {
      std::fprintf(stderr, "ferry-topo: --png needs Graphviz 'dot', which is not installed (apt-get install graphviz); "
                           "--dot FILE writes the DOT source to render elsewhere\n");
      rc = 3;
    } else {
      auto quote = [](const std::string& s) {
        std::string q = "'";
        for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return q + "'";
      };
      int st = std::system(("timeout 120 dot -Tpng -o " + quote(pngFile) + " " + quote(path)).c_str());
      if (st != 0) { std::fprintf(stderr, "ferry-topo: dot failed (status %d)\n", WEXITSTATUS(st)); rc = 1; }
    }
  }
  if (dotFile.empty()) unlink(path.c_str());
  return rc;
}

}  // namespace ferry::topo
