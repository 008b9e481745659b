// Probe -> NCCL topology XML (see probe.h).
#include <map>

#include "topology/probe.h"

namespace ferry::topo {

namespace {

XmlElement* child(XmlElement* parent, const std::string& name) {
  auto e = std::make_unique<XmlElement>();
  e->name = name;
  parent->children.push_back(std::move(e));
  return parent->children.back().get();
}

class Builder {
 public:
  explicit Builder(const Probe& p) : p_(p) {}

  std::unique_ptr<XmlElement> build() {
    auto sys = std::make_unique<XmlElement>();
    sys->name = "system";
    sys->setAttr("version", "1");
    for (const ProbedCpu& c : p_.cpus) {
      XmlElement* cpu = child(sys.get(), "cpu");
      cpu->setAttr("numaid", std::to_string(c.numa));
      if (!c.affinity.empty()) cpu->setAttr("affinity", c.affinity);
      if (!p_.arch.empty()) cpu->setAttr("arch", p_.arch);
      if (!p_.vendor.empty()) cpu->setAttr("vendor", p_.vendor);
      if (p_.family >= 0) cpu->setAttr("familyid", std::to_string(p_.family));
      if (p_.model >= 0) cpu->setAttr("modelid", std::to_string(p_.model));
      cpus_[c.numa] = cpu;
      if (!first_) first_ = cpu;
    }
    for (const ProbedGpu& g : p_.gpus) addGpu(g);
    XmlElement* loose = nullptr;  // nets without a PCI function share one <nic> under the first CPU
    int dev = 0;
    for (const ProbedNet& n : p_.nets) {
      XmlElement* nic = nullptr;
      if (!n.pci.empty() && p_.pci.count(n.pci)) {
        XmlElement* pci = place(n.pci);
        for (auto& c : pci->children)
          if (c->name == "nic") nic = c.get();
        if (!nic) nic = child(pci, "nic");
      } else {
        if (!loose && first_) loose = child(first_, "nic");
        nic = loose;
      }
      if (nic) addNet(nic, n, dev++);
    }
    return sys;
  }

 private:
  XmlElement* cpuFor(int numa) {
    auto it = cpus_.find(numa);
    return it != cpus_.end() ? it->second : first_;
  }

  // The <pci> element of a bus id, creating its bridges first.
  XmlElement* place(const std::string& busid) {
    if (auto it = made_.find(busid); it != made_.end()) return it->second;
    const ProbedPci& d = p_.pci.at(busid);
    XmlElement* parent = d.parent.empty() || !p_.pci.count(d.parent) ? cpuFor(d.numa) : place(d.parent);
    XmlElement* e = child(parent, "pci");
    e->setAttr("busid", busid);
    for (const auto& [k, v] : d.attrs) e->setAttr(k, v);
    made_[busid] = e;
    return e;
  }

  void addGpu(const ProbedGpu& g) {
    if (!p_.pci.count(g.busid)) return;
    XmlElement* pci = place(g.busid);
    if (g.dev < 0) return;  // no NVML: the PCI class alone marks it, as in hint files
    XmlElement* gpu = child(pci, "gpu");
    gpu->setAttr("dev", std::to_string(g.dev));
    gpu->setAttr("sm", std::to_string(g.sm));
    for (const ProbedLink& l : g.nvlinks) {
      XmlElement* nv = child(gpu, "nvlink");
      nv->setAttr("target", l.target);
      nv->setAttr("count", std::to_string(l.count));
      nv->setAttr("tclass", l.tclass);
    }
  }

  static void addNet(XmlElement* nic, const ProbedNet& n, int dev) {
    XmlElement* net = child(nic, "net");
    net->setAttr("name", n.name);
    net->setAttr("dev", std::to_string(dev));
    if (n.speed > 0) net->setAttr("speed", std::to_string(n.speed));
    if (n.port >= 0) net->setAttr("port", std::to_string(n.port));
    if (!n.guid.empty()) net->setAttr("guid", n.guid);
    if (n.isVirtual) net->setAttr("virtual", "1");
  }

  const Probe& p_;
  std::map<int, XmlElement*> cpus_;
  XmlElement* first_ = nullptr;
  std::map<std::string, XmlElement*> made_;
};

}  // namespace

std::unique_ptr<XmlElement> probeToXml(const Probe& p) { return Builder(p).build(); }

}  // namespace ferry::topo
