// NVML probe (see probe.h). libnvidia-ml.so.1 is opened at run time, so one
// binary serves machines with and without NVIDIA GPUs; the few NVML types
// used are declared here with NVML's documented layouts.
#include <dlfcn.h>

#include <cctype>
#include <map>

#include "core/log.h"
#include "topology/probe.h"

namespace ferry::topo {

namespace {

using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr unsigned kMaxNvLinks = 18;

struct Nvml {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, NvmlDevice*) = nullptr;
  int (*pciInfo)(NvmlDevice, NvmlPciInfo*) = nullptr;
  int (*capability)(NvmlDevice, int*, int*) = nullptr;
  int (*linkState)(NvmlDevice, unsigned, int*) = nullptr;
  int (*remotePci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;

  bool load(void* lib) {
    auto sym = [lib](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name)); };
    sym(init, "nvmlInit_v2");
    sym(shutdown, "nvmlShutdown");
    sym(count, "nvmlDeviceGetCount_v2");
    sym(handle, "nvmlDeviceGetHandleByIndex_v2");
    sym(pciInfo, "nvmlDeviceGetPciInfo_v3");
    sym(capability, "nvmlDeviceGetCudaComputeCapability");
    sym(linkState, "nvmlDeviceGetNvLinkState");
    sym(remotePci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    return init && shutdown && count && handle && pciInfo;
  }
};

// NVML writes "00000000:07:00.0"; NCCL XML uses "0000:07:00.0", lower case.
std::string normBusId(const char* s) {
  std::string b = s;
  if (b.size() > 12) b = b.substr(b.size() - 12);
  for (char& c : b) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return b;
}

void readLinks(const Nvml& nv, NvmlDevice d, ProbedGpu& g) {
  if (!nv.linkState || !nv.remotePci) return;
  std::map<std::string, int> counts;
  for (unsigned l = 0; l < kMaxNvLinks; ++l) {
    int active = 0;
    NvmlPciInfo r{};
    if (nv.linkState(d, l, &active) != 0 || !active || nv.remotePci(d, l, &r) != 0) continue;
    counts[normBusId(r.busId)]++;
  }
  for (const auto& [target, n] : counts) g.nvlinks.push_back({target, "", n});
}

}  // namespace

bool probeNvml(Probe& p) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    FERRY_INFO(log::kGraph, "topology: NVML not available (%s); no GPU details", dlerror());
    return false;
  }
  Nvml nv;
  if (!nv.load(lib) || nv.init() != 0) {
    FERRY_WARN("topology: libnvidia-ml.so.1 loaded but NVML did not initialise; no GPU details");
    dlclose(lib);
    return false;
  }
  unsigned n = 0;
  if (nv.count(&n) != 0) n = 0;
  size_t first = p.gpus.size();
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice d = nullptr;
    NvmlPciInfo info{};
    if (nv.handle(i, &d) != 0 || nv.pciInfo(d, &info) != 0) continue;
    ProbedGpu g;
    g.busid = normBusId(info.busId);
    g.dev = static_cast<int>(i);
    int major = 0, minor = 0;
    if (nv.capability && nv.capability(d, &major, &minor) == 0) g.sm = major * 10 + minor;
    readLinks(nv, d, g);
    p.gpus.push_back(g);
  }
  // A link to another GPU is GPU-class; anything else NVML reports is an NVSwitch.
  for (size_t i = first; i < p.gpus.size(); ++i) {
    for (ProbedLink& l : p.gpus[i].nvlinks) {
      bool peer = false;
      for (size_t j = first; j < p.gpus.size(); ++j) peer |= p.gpus[j].busid == l.target;
      l.tclass = peer ? "0x030200" : "0x068000";
    }
    probeSysPci(p, p.gpus[i].busid);
  }
  nv.shutdown();
  dlclose(lib);
  p.sources.push_back("nvml");
  return true;
}

}  // namespace ferry::topo
