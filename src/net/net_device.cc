#include "net/net_device.h"

#include <climits>
#include <cstdlib>
#include <fstream>

namespace ferry {

std::string interfacePciPath(const std::string& ifname) {
  std::string link = "/sys/class/net/" + ifname + "/device";
  char real[PATH_MAX];
  if (!realpath(link.c_str(), real)) return "";
  return real;
}

int interfaceSpeedMbps(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  long v = -1;
  if (!(f >> v) || v <= 0 || v > INT_MAX) return 10000;
  return static_cast<int>(v);
}

void hostNetProperties(int dev, const std::string& name, const std::string& pciPath,
                       int speedMbps, ncclNetProperties_v11_t* props) {
  *props = {};
  props->name = const_cast<char*>(name.c_str());
  props->pciPath = pciPath.empty() ? nullptr : const_cast<char*>(pciPath.c_str());
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = NCCL_PTR_HOST;
  props->speed = speedMbps;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = MAX_NET_SIZE;
  props->maxCollBytes = MAX_NET_SIZE;
  props->maxMultiRequestSize = 1;
}

}  // namespace ferry
