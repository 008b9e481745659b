// ferry-topo --topo-file FILE [--rails [--json]] [--dump]
#include <cstdio>
#include <cstring>
#include <string>

#include "topology/graph.h"
#include "topology/paths.h"
#include "topology/rails.h"

namespace {

int usage() {
  std::fprintf(stderr, "usage: ferry-topo --topo-file FILE [--rails [--json]] [--dump]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  bool rails = false, json = false, dump = false, paths = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--topo-file") && i + 1 < argc) file = argv[++i];
    else if (!std::strcmp(argv[i], "--rails")) rails = true;
    else if (!std::strcmp(argv[i], "--json")) json = true;
    else if (!std::strcmp(argv[i], "--dump")) dump = true;
    else if (!std::strcmp(argv[i], "--paths")) paths = true;
    else return usage();
  }
  // Discovery is not implemented yet, so a file is required.
  if (file.empty()) return usage();
  auto g = ferry::topo::Graph::fromFile(file);
  if (!g.isOk()) {
    std::fprintf(stderr, "ferry-topo: %s\n", g.status().message().c_str());
    return 1;
  }
  if (dump) {
    std::fputs(g.value().toXml().c_str(), stdout);
  } else if (paths) {
    auto m = ferry::topo::PathMatrix::compute(g.value());
    std::fputs(json ? (m.json() + "\n").c_str() : m.table().c_str(), stdout);
  } else if (rails) {
    auto r = ferry::topo::assignRails(g.value());
    if (json) {
      std::printf("%s\n", ferry::topo::railsJson(r).c_str());
    } else {
      std::printf("%-16s %-20s %s\n", "GPU", "NIC", "PATH");
      for (const auto& x : r) std::printf("%-16s %-20s %s\n", x.gpu.c_str(), x.nic.c_str(), ferry::topo::pathName(x.path));
    }
  } else {
    std::fputs(g.value().tree().c_str(), stdout);
  }
  return 0;
}
