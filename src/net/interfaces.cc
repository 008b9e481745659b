// Interface discovery and selection (see interfaces.h).
#include "net/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>

#include "core/config.h"

namespace ferry {
namespace {

int prefixLength(const sockaddr* mask) {
  if (!mask) return 0;
  const uint8_t* p = nullptr;
  size_t n = 0;
  if (mask->sa_family == AF_INET) {
    p = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    p = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  }
  int bits = 0;
  for (size_t i = 0; i < n; i++) bits += __builtin_popcount(p[i]);
  return bits;
}

struct IfFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  static IfFilter parse(const std::string& text) {
    IfFilter f;
    size_t pos = 0;
    if (pos < text.size() && text[pos] == '^') f.exclude = true, pos++;
    if (pos < text.size() && text[pos] == '=') f.exact = true, pos++;
    while (pos <= text.size()) {
      size_t comma = text.find(',', pos);
      if (comma == std::string::npos) comma = text.size();
      if (comma > pos) f.names.push_back(text.substr(pos, comma - pos));
      pos = comma + 1;
    }
    return f;
  }

  bool listed(const std::string& ifname) const {
    for (const auto& n : names) {
      if (exact ? ifname == n : ifname.compare(0, n.size(), n) == 0) return true;
    }
    return false;
  }
  bool accepts(const std::string& ifname) const { return listed(ifname) != exclude; }
};

// Appends the interfaces `filter` accepts, one address per name, IPv4 first.
void collect(const std::vector<NetIf>& all, const IfFilter& filter, int family, int max,
             std::vector<NetIf>* out) {
  for (int pass = 0; pass < 2; pass++) {
    int want = pass == 0 ? AF_INET : AF_INET6;
    if (family != AF_UNSPEC && family != want) continue;
    for (const auto& nif : all) {
      if (static_cast<int>(out->size()) >= max) return;
      if (nif.addr.family() != want || !filter.accepts(nif.name)) continue;
      bool seen = false;
      for (const auto& o : *out) seen = seen || o.name == nif.name;
      if (!seen) out->push_back(nif);
    }
  }
}

}  // namespace

Result<std::vector<NetIf>> listInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return systemError(std::string("getifaddrs failed: ") + std::strerror(errno));
  }
  std::vector<NetIf> out;
  for (ifaddrs* p = list; p; p = p->ifa_next) {
    if (!p->ifa_addr || !(p->ifa_flags & IFF_UP)) continue;
    int fam = p->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    NetIf nif;
    nif.name = p->ifa_name;
    nif.addr = SockAddr::fromSockaddr(p->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in)
                                                                  : sizeof(sockaddr_in6));
    // Link-local v6 needs a scope id everywhere it is used; NCCL skips it too.
    if (!nif.addr.valid() || nif.addr.isLinkLocalV6()) continue;
    nif.addr.setPort(0);
    nif.prefixLen = prefixLength(p->ifa_netmask);
    out.push_back(std::move(nif));
  }
  freeifaddrs(list);
  return out;
}

std::vector<NetIf> selectInterfaces(const std::vector<NetIf>& all, const std::string& ifname,
                                    int family, int max) {
  std::vector<NetIf> out;
  if (max <= 0) return out;
  if (!ifname.empty()) {
    collect(all, IfFilter::parse(ifname), family, max, &out);
    return out;
  }
  // NCCL's default: the first class that has any interface wins, IPoIB
  // first, then other real interfaces, then docker bridges, then loopback
  // (single-node runs), then libvirt bridges. Never a mix: a network device
  // list of {eth0, lo} would send some ranks' traffic to 127.0.0.1.
  for (const char* cls : {"ib", "^ib,docker,lo,virbr", "docker", "lo", "virbr"}) {
    collect(all, IfFilter::parse(cls), family, max, &out);
    if (!out.empty()) break;
  }
  return out;
}

Result<int> parseFamily(const std::string& text) {
  if (text.empty()) return AF_UNSPEC;
  if (text == "AF_INET" || text == "4") return AF_INET;
  if (text == "AF_INET6" || text == "6") return AF_INET6;
  return invalidArgument("NCCL_SOCKET_FAMILY='" + text + "': expected AF_INET or AF_INET6");
}

Result<std::vector<NetIf>> findInterfaces(int max) {
  using config::Param;
  std::string ifname = config::getString(Param::kSocketIfname);
  FERRY_ASSIGN(int family, parseFamily(config::getString(Param::kSocketFamily)));
  FERRY_ASSIGN(std::vector<NetIf> all, listInterfaces());
  std::vector<NetIf> out = selectInterfaces(all, ifname, family, max);
  if (out.empty()) {
    return systemError("no usable network interface (NCCL_SOCKET_IFNAME='" + ifname +
                       "', NCCL_SOCKET_FAMILY='" +
                       config::getString(Param::kSocketFamily) + "')");
  }
  return out;
}

bool inSubnet(const NetIf& nif, const SockAddr& addr) {
  if (nif.addr.family() != addr.family()) return false;
  const uint8_t* a = nullptr;
  const uint8_t* b = nullptr;
  if (addr.family() == AF_INET) {
    a = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&nif.addr.storage)->sin_addr);
    b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_addr);
  } else if (addr.family() == AF_INET6) {
    a = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(&nif.addr.storage)->sin6_addr);
    b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(&addr.storage)->sin6_addr);
  } else {
    return false;
  }
  int bits = nif.prefixLen;
  for (int i = 0; bits > 0; i++, bits -= 8) {
    uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((a[i] & mask) != (b[i] & mask)) return false;
  }
  return true;
}

Result<NetIf> findInterfaceFor(const SockAddr& remote) {
  using config::Param;
  if (config::getString(Param::kSocketIfname).empty()) {
    FERRY_ASSIGN(int family, parseFamily(config::getString(Param::kSocketFamily)));
    FERRY_ASSIGN(std::vector<NetIf> all, listInterfaces());
    for (const auto& nif : all) {
      if (family != AF_UNSPEC && nif.addr.family() != family) continue;
      if (inSubnet(nif, remote)) return nif;
    }
  }
  FERRY_ASSIGN(std::vector<NetIf> found, findInterfaces(1));
  return found[0];
}

}  // namespace ferry
