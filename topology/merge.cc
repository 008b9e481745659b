#include "topology/merge.h"

#include <map>
#include <set>

#include "topology/graph.h"

namespace ferry::topo {

namespace {

std::unique_ptr<XmlElement> clone(const XmlElement& e) {
  auto c = std::make_unique<XmlElement>();
  c->name = e.name;
  c->attrs = e.attrs;
  c->line = e.line;
  for (const auto& k : e.children) c->children.push_back(clone(*k));
  return c;
}

void fillAttrs(XmlElement& dst, const XmlElement& src) {
  for (const auto& [k, v] : src.attrs)
    if (!dst.attr(k)) dst.setAttr(k, v);
}

std::string busOf(const XmlElement& e) {
  const std::string* b = e.attr("busid");
  return b ? lowerHex(*b) : "";
}

XmlElement* childNamed(XmlElement& parent, const std::string& name) {
  for (auto& c : parent.children)
    if (c->name == name) return c.get();
  return nullptr;
}

XmlElement* append(XmlElement& parent, std::unique_ptr<XmlElement> e) {
  parent.children.push_back(std::move(e));
  return parent.children.back().get();
}

class Merger {
 public:
  explicit Merger(XmlElement& base) : base_(base) { index(base); }

  void mergeCpu(const XmlElement& f) {
    XmlElement* cpu = nullptr;
    for (auto& c : base_.children)
      if (c->name == "cpu" && c->attr("numaid") && f.attr("numaid") && *c->attr("numaid") == *f.attr("numaid")) cpu = c.get();
    if (!cpu) {
      auto fresh = std::make_unique<XmlElement>();
      fresh->name = "cpu";
      cpu = append(base_, std::move(fresh));
    }
    fillAttrs(*cpu, f);
    for (const auto& c : f.children) place(*c, *cpu);
  }

 private:
  void index(XmlElement& e) {
    if (e.name == "pci" && !busOf(e).empty()) pci_[busOf(e)] = &e;
    if (e.name == "net" && e.attr("name")) nets_.insert(*e.attr("name"));
    for (auto& c : e.children) index(*c);
  }

  bool anyKnown(const XmlElement& e) const {
    if (e.name == "pci" && pci_.count(busOf(e))) return true;
    for (const auto& c : e.children)
      if (anyKnown(*c)) return true;
    return false;
  }

  void place(const XmlElement& f, XmlElement& parent) {
    if (f.name == "pci") {
      if (auto it = pci_.find(busOf(f)); it != pci_.end()) {
        fillAttrs(*it->second, f);
        for (const auto& c : f.children) place(*c, *it->second);
      } else if (!anyKnown(f)) {
        index(*append(parent, clone(f)));
      } else {
        for (const auto& c : f.children) place(*c, parent);
      }
    } else if (f.name == "gpu") {
      mergeGpu(f, parent);
    } else if (f.name == "nic") {
      for (const auto& n : f.children) {
        if (n->name != "net" || !n->attr("name") || nets_.count(*n->attr("name"))) continue;
        XmlElement* nic = childNamed(parent, "nic");
        if (!nic) {
          auto fresh = std::make_unique<XmlElement>();
          fresh->name = "nic";
          nic = append(parent, std::move(fresh));
        }
        index(*append(*nic, clone(*n)));
      }
    }
  }

  void mergeGpu(const XmlElement& f, XmlElement& parent) {
    XmlElement* gpu = childNamed(parent, "gpu");
    if (!gpu) {
      append(parent, clone(f));
      return;
    }
    fillAttrs(*gpu, f);
    for (const auto& l : f.children) {
      bool listed = false;
      for (const auto& have : gpu->children)
        listed |= have->name == l->name && have->attr("target") && l->attr("target") &&
                  lowerHex(*have->attr("target")) == lowerHex(*l->attr("target"));
      if (!listed) append(*gpu, clone(*l));
    }
  }

  XmlElement& base_;
  std::map<std::string, XmlElement*> pci_;
  std::set<std::string> nets_;
};

}  // namespace

void mergeTopology(XmlElement& base, const XmlElement& found) {
  Merger m(base);
  for (const auto& c : found.children)
    if (c->name == "cpu") m.mergeCpu(*c);
}

}  // namespace ferry::topo
