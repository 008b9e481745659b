// v6..v10 -> v11 device properties (see legacy_props.h).
#include "plugins/net/legacy_props.h"

#include <cstring>
#include <string>

namespace ferry::netplugin {
namespace {

// A plugin written in C may leave any int in an enum field; loading one that
// is not an enumerator through the C++ enum type is undefined (UBSan found it
// with tests/fuzz/fuzz_plugin_props), so the field is read as its bytes.
template <class E>
int rawEnum(const E& field) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &field, sizeof(v));
  return v;
}

// Fields the old version lacks get the values NCCL assumes for it.
template <class P>
void convertProps(const P& o, int dev, ncclNetProperties_v11_t* p) {
  *p = ncclNetProperties_v11_t{};
  p->name = o.name;
  p->pciPath = o.pciPath;
  p->guid = o.guid;
  p->ptrSupport = o.ptrSupport;
  p->speed = o.speed;
  p->port = o.port;
  p->latency = o.latency;
  p->maxComms = o.maxComms;
  p->maxRecvs = o.maxRecvs;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = MAX_NET_SIZE;
  p->maxCollBytes = MAX_COLLNET_SIZE;
  p->maxMultiRequestSize = 1;
  if constexpr (requires { o.netDeviceType; }) {
    std::memcpy(&p->netDeviceType, &o.netDeviceType, sizeof(p->netDeviceType));
    p->netDeviceVersion = o.netDeviceVersion;
  }
  if constexpr (requires { o.regIsGlobal; }) p->regIsGlobal = o.regIsGlobal;
  if constexpr (requires { o.maxP2pBytes; }) {
    p->forceFlush = o.forceFlush;
    if (o.vProps.ndevs > 0) p->vProps = o.vProps;
    if (o.maxP2pBytes > 0) p->maxP2pBytes = o.maxP2pBytes;
    if (o.maxCollBytes > 0) p->maxCollBytes = o.maxCollBytes;
  }
}

template <class P>
Status convertAs(const void* old, int dev, ncclNetProperties_v11_t* out) {
  convertProps(*static_cast<const P*>(old), dev, out);
  return checkNetProps(*out);
}

}  // namespace

Status convertLegacyProps(int version, const void* old, int dev, ncclNetProperties_v11_t* out) {
  switch (version) {
    case 6: return convertAs<ncclNetProperties_v6_t>(old, dev, out);
    case 7: return convertAs<ncclNetProperties_v7_t>(old, dev, out);
    case 8: return convertAs<ncclNetProperties_v8_t>(old, dev, out);
    case 9: return convertAs<ncclNetProperties_v9_t>(old, dev, out);
    case 10: return convertAs<ncclNetProperties_v10_t>(old, dev, out);
    default:
      *out = ncclNetProperties_v11_t{};
      return invalidArgument("net plugin properties of version " + std::to_string(version) +
                             ": only 6..10 are converted");
  }
}

Status checkNetProps(const ncclNetProperties_v11_t& p) {
  int type = rawEnum(p.netDeviceType);
  if (type < NCCL_NET_DEVICE_HOST || type > NCCL_NET_DEVICE_GIN_GDAKI) {
    return invalidArgument("netDeviceType is " + std::to_string(type) + ", not one NCCL defines");
  }
  if (p.vProps.ndevs < 0 || p.vProps.ndevs > NCCL_NET_MAX_DEVS_PER_NIC) {
    return invalidArgument("vProps.ndevs is " + std::to_string(p.vProps.ndevs) + " (at most " +
                           std::to_string(NCCL_NET_MAX_DEVS_PER_NIC) + " devices per NIC)");
  }
  for (int i = 0; i < p.vProps.ndevs; ++i) {
    if (p.vProps.devs[i] < 0) {
      return invalidArgument("vProps.devs[" + std::to_string(i) + "] is " +
                             std::to_string(p.vProps.devs[i]));
    }
  }
  return Status::ok();
}

}  // namespace ferry::netplugin
