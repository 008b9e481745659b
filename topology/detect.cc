#include "topology/detect.h"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/config.h"
#include "core/log.h"
#include "topology/merge.h"
#include "topology/probe.h"

namespace ferry::topo {

DetectOptions detectOptionsFromConfig() {
  DetectOptions o;
  o.topoFile = config::getString(config::Param::kTopoFile);
  o.fileOnly = config::getBool(config::Param::kTopoFileOnly);
  o.dumpFile = config::getString(config::Param::kTopoDumpFile);
  return o;
}

RailOptions railOptionsFromConfig() { return {config::getString(config::Param::kIbHca)}; }

std::string localHostHash() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string text = std::string(host) + readLine("/proc/sys/kernel/random/boot_id");
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, h);
  return buf;
}

std::unique_ptr<XmlElement> discoverXml(const DetectOptions& opt) {
  Probe p;
  p.sysRoot = opt.sysRoot;
  probeSysCpus(p);
  if (opt.useNvml) probeNvml(p);
  probeSysGpus(p);
  probeSysNets(p);
  if (opt.useHwloc) probeHwloc(p);
  std::string used;
  for (const auto& s : p.sources) used += (used.empty() ? "" : "+") + s;
  FERRY_INFO(log::kGraph, "topology: discovered %zu NUMA node(s), %zu GPU(s), %zu net device(s) via %s", p.cpus.size(),
             p.gpus.size(), p.nets.size(), used.c_str());
  return probeToXml(p);
}

Result<Graph> discover(const DetectOptions& opt) { return Graph::fromElement(*discoverXml(opt)); }

namespace {

Result<std::unique_ptr<XmlElement>> loadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return systemError("NCCL_TOPO_FILE " + path + ": cannot open: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  auto doc = parseXml(ss.str());
  if (!doc.isOk()) return Status(doc.status().code(), "NCCL_TOPO_FILE " + path + ": " + doc.status().message());
  return doc;
}

Status writeDump(const std::string& path, const std::string& xml) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return systemError("NCCL_TOPO_DUMP_FILE " + path + ": cannot open for writing: " + std::strerror(errno));
  out << xml;
  out.close();
  if (!out) return systemError("NCCL_TOPO_DUMP_FILE " + path + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

}  // namespace

Result<Graph> detect(const DetectOptions& opt) {
  std::unique_ptr<XmlElement> root;
  if (!opt.topoFile.empty()) {
    FERRY_ASSIGN(root, loadFile(opt.topoFile));
    if (!opt.fileOnly) mergeTopology(*root, *discoverXml(opt));
  } else {
    root = discoverXml(opt);
  }
  if (opt.topoFile.empty() || !opt.fileOnly) {
    std::string hash = localHostHash();
    for (auto& c : root->children)
      if (c->name == "cpu") c->setAttr("host_hash", hash);
  }
  auto g = Graph::fromElement(*root);
  if (!g.isOk()) {
    std::string what = opt.topoFile.empty() ? "discovered topology" : "NCCL_TOPO_FILE " + opt.topoFile;
    return Status(g.status().code(), what + ": " + g.status().message());
  }
  if (!opt.dumpFile.empty()) {
    FERRY_TRY(writeDump(opt.dumpFile, g.value().toXml()));
    FERRY_INFO(log::kGraph, "topology: wrote NCCL_TOPO_DUMP_FILE %s", opt.dumpFile.c_str());
  }
  return g;
}

Result<Graph> detect() { return detect(detectOptionsFromConfig()); }

}  // namespace ferry::topo
