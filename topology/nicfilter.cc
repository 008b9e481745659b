#include "topology/nicfilter.h"

#include <cstdlib>

namespace ferry::topo {

bool isVirtualNetName(const std::string& name) {
  // Loopback, IP tunnels, Linux/Docker bridges, veth pairs, Calico/Flannel/
  // Cilium/Weave/CNI overlays, VXLAN/GENEVE, ifb/dummy, tun/tap, libvirt,
  // WireGuard, ZeroTier and Tailscale.
  if (name == "lo") return true;
  static const char* kPrefixes[] = {"tunl",   "tun",      "tap",   "br-",   "docker", "veth",    "cali",
                                    "virbr",  "flannel", "cni",     "vxlan", "genev", "kube-",  "weave",   "cilium",
                                    "lxc",    "ifb",    "dummy",    "gre",   "gretap", "erspan", "ip6tnl", "ip6gre",
                                    "sit",    "ipip",   "wg",       "zt",    "tailscale", "vnet", "nodelocaldns"};
  for (const char* p : kPrefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

HcaFilter HcaFilter::parse(const std::string& spec) {
  HcaFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') f.exclude_ = true, ++pos;
  if (pos < spec.size() && spec[pos] == '=') f.exact_ = true, ++pos;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    Entry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (colon != std::string::npos) e.port = std::atoi(item.c_str() + colon + 1);
    f.entries_.push_back(e);
  }
  return f;
}

bool HcaFilter::listed(const std::string& name, int port) const {
  for (const Entry& e : entries_) {
    bool nameOk = exact_ ? name == e.name : name.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port < 0 || port < 0 || e.port == port)) return true;
  }
  return false;
}

bool HcaFilter::accepts(const std::string& name, int port) const {
  if (entries_.empty()) return true;
  return listed(name, port) != exclude_;
}

}  // namespace ferry::topo
