// Choosing the network interface(s) for bootstrap and the socket transport,
// with NCCL's rules (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "net/sock_addr.h"

namespace ferry {

struct NetIf {
  std::string name;  // e.g. "eth0"
  SockAddr addr;     // port 0
  int prefixLen = 0; // netmask length, for "same subnet" checks
};

// Every up interface with an IPv4 or (non-link-local) IPv6 address, one entry
// per (interface, address), in the kernel's order.
Result<std::vector<NetIf>> listInterfaces();

// The selection rules, separated from the environment so they can be tested.
//  ifname: NCCL_SOCKET_IFNAME syntax: comma list of name prefixes; a leading
//          '^' turns it into an exclusion list; then a leading '=' makes the
//          names exact. Empty: NCCL's default, the first class with any
//          interface: ib*, then anything but ib/docker/lo/virbr, then
//          docker*, then lo*, then virbr*.
//  family: AF_INET, AF_INET6 or AF_UNSPEC.
// One address per interface (IPv4 preferred), at most `max` entries.
std::vector<NetIf> selectInterfaces(const std::vector<NetIf>& all, const std::string& ifname,
                                    int family, int max);

// Parse NCCL_SOCKET_FAMILY ("AF_INET", "AF_INET6", "" → AF_UNSPEC).
Result<int> parseFamily(const std::string& text);

// selectInterfaces over listInterfaces() with the configured
// NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY; an error if nothing matches.
Result<std::vector<NetIf>> findInterfaces(int max);

// The interface to reach `remote` from: without NCCL_SOCKET_IFNAME, one whose
// subnet contains `remote` if there is one (NCCL does this for NCCL_COMM_ID);
// otherwise the first of findInterfaces().
Result<NetIf> findInterfaceFor(const SockAddr& remote);

bool inSubnet(const NetIf& nif, const SockAddr& addr);

}  // namespace ferry
