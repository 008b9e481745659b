// A network interface seen as an NCCL net device for host memory: the sysfs
// facts and the property block that Ferry's built-in networks (Socket, UCX)
// report alike.
#pragma once

#include <nccl_net.h>

#include <string>

namespace ferry {

// NCCL's limit on interfaces per network (MAX_IFS).
constexpr int kMaxNetDevices = 16;

// The realpath of /sys/class/net/<ifname>/device; "" for virtual interfaces
// (lo, bridges, veths), which have none.
std::string interfacePciPath(const std::string& ifname);

// /sys/class/net/<ifname>/speed in Mbps; 10000 when unknown (virtual
// interfaces report -1 or nothing, links that are down too), like NCCL.
int interfaceSpeedMbps(const std::string& ifname);

// The properties of host-memory device `dev` named `name`. `name` and
// `pciPath` must outlive every use of *props (they are not copied); an
// empty pciPath is reported as NULL.
void hostNetProperties(int dev, const std::string& name, const std::string& pciPath,
                       int speedMbps, ncclNetProperties_v11_t* props);

}  // namespace ferry
