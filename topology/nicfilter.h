// Which network devices may become rails.
//
// Virtual interfaces (loopback, tunnels, bridges, container and overlay
// links) never carry collective traffic, so they are never rails: a <net>
// with virtual="1" (written by discovery for /sys/devices/virtual/net) or a
// name with a known virtual prefix.
//
// NCCL_IB_HCA selects devices as NCCL does: a comma list of name[:port];
// a leading '^' excludes the listed devices instead of keeping them, a
// leading '=' (after '^' if both) asks for exact names instead of prefixes;
// a port restricts the match to that port (a device without a known port
// matches any). Empty = every device.
#pragma once

#include <string>
#include <vector>

namespace ferry::topo {

bool isVirtualNetName(const std::string& name);

class HcaFilter {
 public:
  static HcaFilter parse(const std::string& spec);
  // port < 0 = unknown.
  bool accepts(const std::string& name, int port) const;
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::string name;
    int port = -1;
  };
  bool listed(const std::string& name, int port) const;

  bool exclude_ = false;
  bool exact_ = false;
  std::vector<Entry> entries_;
};

}  // namespace ferry::topo
