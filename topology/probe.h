// What discovery found on this machine, before it becomes NCCL XML.
//
// Sources, each optional: sysfs (PCI chain and attributes, NUMA nodes, net
// devices with speed, InfiniBand HCAs and ports, /proc/cpuinfo), hwloc when
// built with it (NUMA nodes, CPU vendor/family/model, PCI locality), NVML
// when libnvidia-ml.so.1 loads at run time (GPU index, compute capability,
// NVLinks). The sysfs root is a parameter so tests can use a fake tree.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "topology/xml.h"

namespace ferry::topo {

struct ProbedCpu {
  int numa = 0;
  std::string affinity;  // sysfs cpumap format: 32-bit hex groups, comma separated
};

struct ProbedPci {
  std::string busid;
  std::string parent;  // bus id of the upstream bridge, "" at a root port
  int numa = -1;
  std::vector<std::pair<std::string, std::string>> attrs;  // class, vendor, ... link_width
};

struct ProbedNet {
  std::string name;
  std::string pci;  // bus id of its PCI function, "" when it has none
  long long speed = -1;  // Mb/s, -1 unknown
  int port = -1;         // InfiniBand port
  std::string guid;
  bool isVirtual = false;
};

struct ProbedLink {
  std::string target;  // bus id
  std::string tclass;
  int count = 0;
};

struct ProbedGpu {
  std::string busid;
  int dev = -1;  // NVML index; -1 when NVML did not report it
  int sm = 0;
  std::vector<ProbedLink> nvlinks;
};

struct Probe {
  std::string sysRoot;  // "" = the real machine
  std::string arch, vendor;
  int family = -1, model = -1;
  std::vector<ProbedCpu> cpus;
  std::map<std::string, ProbedPci> pci;
  std::vector<ProbedNet> nets;
  std::vector<ProbedGpu> gpus;
  std::vector<std::string> sources;  // which probes contributed, for the log
};

// sysfs / procfs.
void probeSysCpus(Probe& p);
void probeSysNets(Probe& p);
void probeSysGpus(Probe& p);  // NVIDIA/AMD display/3D/accelerator functions
void probeSysPci(Probe& p, const std::string& busid);  // the function and its bridges
// hwloc: refines CPUs and PCI locality; false when not built in or it failed.
bool probeHwloc(Probe& p);
// NVML: fills GPU details; false when the library is absent.
bool probeNvml(Probe& p);

// The NCCL-format <system> tree of a probe. host_hash is set by detect().
std::unique_ptr<XmlElement> probeToXml(const Probe& p);

// Reads a small sysfs/procfs file (first line, trimmed); "" if unreadable.
std::string readLine(const std::string& path);
std::string cpusToMask(const std::vector<int>& cpus);

}  // namespace ferry::topo
