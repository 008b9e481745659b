// ferry-topo: tree (default), --rails, --paths, --dump, --dot, --comm,
// --calibrate; see usage().
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/topo/topo_comm.h"
#include "tools/topo/topo_dot.h"
#include "topology/detect.h"
#include "topology/paths.h"
#include "topology/rails.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: ferry-topo [--topo-file FILE] [--rails | --paths | --dump | --dot FILE | --png FILE] [--json]\n"
               "  without --topo-file the topology is detected (discovery; NCCL_TOPO_FILE is honoured)\n"
               "  (default) tree   --rails GPU-to-NIC rails   --paths path matrix   --dump NCCL XML\n"
               "  --dot FILE Graphviz DOT   --png FILE picture (needs Graphviz 'dot')   --json for --rails/--paths\n"
               "       ferry-topo --comm [--nranks N] [--json]\n"
               "  creates a communicator and prints rank 0's view of it (hosts, local ranks, rails, per-level\n"
               "  latency/bandwidth, rings, calibration source; --json: ferryCommViewJson's object).\n"
               "  --nranks N forks N local ranks (default 2); without it, under a launcher that sets RANK/\n"
               "  WORLD_SIZE (or FERRY_CLUSTER_RANK/_NRANKS, SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_*,\n"
               "  PMI_RANK/PMI_SIZE) and NCCL_COMM_ID, each process is one rank, e.g.\n"
               "  tests/cluster/ferry-cluster --hosts 2 --ranks-per-host 2 -- build/bin/ferry-topo --comm\n"
               "       ferry-topo --calibrate\n"
               "  measures this host (memcpy, reduction, a two-process ping-pong), rewrites the calibration\n"
               "  file (FERRY_CALIBRATION_FILE) and prints it\n");
  return 2;
}

struct Args {
  std::string file, dot, png;
  bool rails = false, paths = false, dump = false, json = false, comm = false, calibrate = false;
  int nranks = 0;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    bool more = i + 1 < argc;
    if (s == "--topo-file" && more) a.file = argv[++i];
    else if (s == "--dot" && more) a.dot = argv[++i];
    else if (s == "--png" && more) a.png = argv[++i];
    else if (s == "--rails") a.rails = true;
    else if (s == "--paths") a.paths = true;
    else if (s == "--dump") a.dump = true;
    else if (s == "--json") a.json = true;
    else if (s == "--comm") a.comm = true;
    else if (s == "--calibrate") a.calibrate = true;
    else if (s == "--nranks" && more) a.nranks = std::atoi(argv[++i]);
    else return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ferry::topo;
  Args a;
  if (!parse(argc, argv, a)) return usage();
  if (a.nranks < 0 || a.nranks > 1024 || (a.nranks && !a.comm)) return usage();
  if (a.calibrate) return a.comm ? usage() : ferry::topo::runCalibrate();
  if (a.comm) return ferry::topo::runComm(a.nranks, a.json);
  auto g = a.file.empty() ? detect() : Graph::fromFile(a.file);
  if (!g.isOk()) {
    std::fprintf(stderr, "ferry-topo: %s\n", g.status().message().c_str());
    return 1;
  }
  if (!a.dot.empty() || !a.png.empty()) return drawGraph(g.value(), a.dot, a.png);
  if (a.dump) {
    std::fputs(g.value().toXml().c_str(), stdout);
  } else if (a.paths) {
    auto m = PathMatrix::compute(g.value());
    std::fputs(a.json ? (m.json() + "\n").c_str() : m.table().c_str(), stdout);
  } else if (a.rails) {
    auto r = assignRails(g.value(), railOptionsFromConfig());
    if (a.json) {
      std::printf("%s\n", railsJson(r).c_str());
    } else {
      std::printf("%-16s %-20s %-5s %s\n", "GPU", "NIC", "PATH", "ALL NICS");
      for (const auto& x : r) {
        std::string all;
        for (const auto& n : x.nics) all += (all.empty() ? "" : ",") + n;
        std::printf("%-16s %-20s %-5s %s\n", x.gpu.c_str(), x.nic.c_str(), pathName(x.path), all.c_str());
      }
    }
  } else {
    std::fputs(g.value().tree().c_str(), stdout);
  }
  return 0;
}
