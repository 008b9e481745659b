// hwloc probe (see probe.h): NUMA nodes with their CPU sets, the CPU's
// vendor/family/model, and which NUMA node each probed PCI function is local
// to when sysfs did not say (numa_node = -1, common in VMs).
#include "topology/probe.h"

#ifdef FERRY_HAVE_HWLOC
#include <hwloc.h>

#include <cstdio>
#include <cstdlib>

#include "core/log.h"
#endif

namespace ferry::topo {

#ifdef FERRY_HAVE_HWLOC

namespace {

void readCpus(hwloc_topology_t topo, Probe& p) {
  std::vector<ProbedCpu> cpus;
  int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    std::vector<int> ids;
    unsigned id;
    hwloc_bitmap_foreach_begin(id, o->cpuset) ids.push_back(static_cast<int>(id));
    hwloc_bitmap_foreach_end();
    cpus.push_back({static_cast<int>(o->os_index), cpusToMask(ids)});
  }
  if (!cpus.empty()) p.cpus = cpus;
  hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
  if (!pkg) return;
  if (const char* v = hwloc_obj_get_info_by_name(pkg, "CPUVendor")) p.vendor = v;
  if (const char* f = hwloc_obj_get_info_by_name(pkg, "CPUFamilyNumber")) p.family = std::atoi(f);
  if (const char* m = hwloc_obj_get_info_by_name(pkg, "CPUModelNumber")) p.model = std::atoi(m);
}

void readLocality(hwloc_topology_t topo, Probe& p) {
  for (auto& [bus, d] : p.pci) {
    if (d.numa >= 0) continue;
    unsigned dom, b, dev, fn;
    if (std::sscanf(bus.c_str(), "%x:%x:%x.%x", &dom, &b, &dev, &fn) != 4) continue;
    hwloc_obj_t o = hwloc_get_pcidev_by_busid(topo, dom, b, dev, fn);
    if (!o) continue;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, o);
    // Local to one NUMA node only when its nearest CPU-side ancestor spans one.
    if (anc && anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1) d.numa = hwloc_bitmap_first(anc->nodeset);
  }
}

}  // namespace

bool probeHwloc(Probe& p) {
  if (!p.sysRoot.empty()) return false;  // hwloc sees the real machine only
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    FERRY_WARN("topology: hwloc_topology_init failed; using sysfs only");
    return false;
  }
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(topo) != 0) {
    FERRY_WARN("topology: hwloc_topology_load failed; using sysfs only");
    hwloc_topology_destroy(topo);
    return false;
  }
  readCpus(topo, p);
  readLocality(topo, p);
  hwloc_topology_destroy(topo);
  p.sources.push_back("hwloc");
  return true;
}

#else

bool probeHwloc(Probe&) { return false; }

#endif

}  // namespace ferry::topo
