// The "Socket" ncclNet_v11_t table: devices from the NCCL_SOCKET_IFNAME /
// NCCL_SOCKET_FAMILY rules, per-communicator contexts, and the C edge that
// turns Status into ncclResult_t (with a WARN naming what failed).
#include "transports/netsocket/socket_net.h"

#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include "core/log.h"
#include "net/interfaces.h"
#include "net/net_device.h"
#include "transports/netsocket/net_setup.h"

namespace ferry {
namespace netsocket {
namespace {

struct Device {
  std::string name;
  SockAddr addr;
  std::string pciPath;  // empty: virtual
  int speed = 0;
};

struct Context {
  uint64_t commId = 0;
  int trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  ConnectingSet connecting;  // freed with the context (finalize)
};

std::mutex gMu;
// Lists are never freed: getProperties hands out pointers into them, so
// reloadDevices() swaps in a new one and keeps the old ones here.
std::vector<std::unique_ptr<std::vector<Device>>>* gLists = nullptr;
std::vector<Device>* gDevs = nullptr;  // the current list

Status loadDevicesLocked() {
  if (gDevs) return Status::ok();
  FERRY_ASSIGN(std::vector<NetIf> ifs, findInterfaces(kMaxNetDevices));
  if (!gLists) gLists = new std::vector<std::unique_ptr<std::vector<Device>>>();
  gLists->push_back(std::make_unique<std::vector<Device>>());
  std::vector<Device>* devs = gLists->back().get();
  std::string list;
  for (const NetIf& nif : ifs) {
    Device d{nif.name, nif.addr, interfacePciPath(nif.name), interfaceSpeedMbps(nif.name)};
    list += " [" + std::to_string(devs->size()) + "]" + d.name + ":" + d.addr.host();
    devs->push_back(std::move(d));
  }
  gDevs = devs;
  FERRY_INFO(log::kNet | log::kInit, "NET/Socket : Using%s", list.c_str());
  return Status::ok();
}

Status loadDevices() {
  std::lock_guard<std::mutex> lock(gMu);
  return loadDevicesLocked();
}

ncclResult_t toResult(const Status& st, bool warn = true) {
  if (st.isOk()) return ncclSuccess;
  if (warn) {
    const std::string& m = st.message();
    FERRY_WARN("%s%s", m.rfind("NET/Socket", 0) == 0 ? "" : "NET/Socket: ", m.c_str());
  }
  switch (st.code()) {
    case Code::kSystem: return ncclSystemError;
    case Code::kInvalidArgument: return ncclInvalidArgument;
    case Code::kInvalidUsage: return ncclInvalidUsage;
    case Code::kRemote:
    case Code::kTimeout: return ncclRemoteError;
    default: return ncclInternalError;
  }
}

ncclResult_t netInit(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                     ncclDebugLogger_t, ncclProfilerCallback_t) {
  if (!ctx) return ncclInternalError;
  *ctx = nullptr;
  ncclResult_t rc = toResult(loadDevices());
  if (rc != ncclSuccess) return rc;
  auto* c = new Context;
  c->commId = commId;
  if (config) c->trafficClass = config->trafficClass;
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t netFinalize(void* ctx) {
  delete static_cast<Context*>(ctx);
  return ncclSuccess;
}

ncclResult_t netDevices(int* ndev) {
  std::lock_guard<std::mutex> lock(gMu);
  ncclResult_t rc = toResult(loadDevicesLocked());
  *ndev = rc == ncclSuccess ? static_cast<int>(gDevs->size()) : 0;
  return rc;
}

ncclResult_t netGetProperties(int dev, ncclNetProperties_v11_t* props) {
  std::lock_guard<std::mutex> lock(gMu);
  if (!loadDevicesLocked().isOk()) return ncclSystemError;
  if (dev < 0 || dev >= static_cast<int>(gDevs->size()) || !props) return ncclInvalidArgument;
  const Device& d = (*gDevs)[dev];
  hostNetProperties(dev, d.name, d.pciPath, d.speed, props);
  return ncclSuccess;
}

ncclResult_t netListen(void* ctx, int dev, void* handle, void** listenComm) {
  if (!handle || !listenComm) return ncclInternalError;
  auto l = listenOn(dev, handle);
  if (!l.isOk()) return toResult(l.status());
  *listenComm = l.take().release();
  return ncclSuccess;
}

ncclResult_t netConnect(void* ctx, int dev, void* handle, void** sendComm,
                        ncclNetDeviceHandle_v11_t** sendDevComm) {
  if (sendDevComm) *sendDevComm = nullptr;
  Comm* c = nullptr;
  ConnectingSet* live = ctx ? &static_cast<Context*>(ctx)->connecting : nullptr;
  ncclResult_t rc = toResult(connectStep(dev, handle, &c, live));
  *sendComm = c;
  return rc;
}

ncclResult_t netAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** recvDevComm) {
  if (recvDevComm) *recvDevComm = nullptr;
  Comm* c = nullptr;
  ncclResult_t rc = toResult(acceptStep(static_cast<ListenComm*>(listenComm), &c));
  *recvComm = c;
  return rc;
}

int gMrToken;  // regMr's handle: registration is a no-op for host memory

ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (type != NCCL_PTR_HOST) {
    FERRY_WARN("NET/Socket: regMr: only host memory is supported (type %d)", type);
    return ncclInternalError;
  }
  *mhandle = &gMrToken;
  return ncclSuccess;
}

ncclResult_t netDeregMr(void* comm, void* mhandle) { return ncclSuccess; }

ncclResult_t netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                      void* phandle, void** request) {
  Request* r = nullptr;
  auto* c = static_cast<Comm*>(sendComm);
  Status st = c->post(data, size, &r);
  ncclResult_t rc = toResult(st, st.isOk() || c->firstReport());
  *request = r;
  return rc;
}

ncclResult_t netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                      void** mhandles, void** phandles, void** request) {
  if (n != 1) {
    FERRY_WARN("NET/Socket: irecv of %d buffers, at most 1 is supported", n);
    return ncclInternalError;
  }
  Request* r = nullptr;
  auto* c = static_cast<Comm*>(recvComm);
  Status st = c->post(data[0], sizes[0], &r);
  ncclResult_t rc = toResult(st, st.isOk() || c->firstReport());
  *request = r;
  return rc;
}

ncclResult_t netIflush(void*, int, void**, int*, void**, void** request) {
  // Host memory only: received bytes are visible as soon as recv() returns.
  FERRY_WARN("NET/Socket: iflush called, but only host memory is supported");
  return ncclInternalError;
}

ncclResult_t netTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  bool fin = false;
  size_t size = 0;
  Status st = r->comm->test(r, &fin, &size);
  ncclResult_t rc = toResult(st, st.isOk() || r->comm->firstReport());
  *done = fin ? 1 : 0;
  if (fin && sizes) *sizes = static_cast<int>(size);
  return rc;
}

ncclResult_t netCloseComm(void* comm) {
  delete static_cast<Comm*>(comm);
  return ncclSuccess;
}

ncclResult_t netCloseListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return ncclSuccess;
}

ncclResult_t netSetNetAttr(void*, ncclNetAttr_v11_t*) { return ncclSuccess; }

const ncclNet_v11_t kSocketNet = {
    "Socket",       netInit,       netDevices,    netGetProperties, netListen,
    netConnect,     netAccept,     netRegMr,      nullptr,          netDeregMr,
    netIsend,       netIrecv,      netIflush,     netTest,          netCloseComm,
    netCloseComm,   netCloseListen, nullptr,      nullptr,          nullptr,
    netFinalize,    netSetNetAttr,
};

}  // namespace

Result<SockAddr> deviceAddr(int dev) {
  std::lock_guard<std::mutex> lock(gMu);
  FERRY_TRY(loadDevicesLocked());
  if (dev < 0 || dev >= static_cast<int>(gDevs->size())) {
    return invalidArgument("NET/Socket: no device " + std::to_string(dev) + " (" +
                           std::to_string(gDevs->size()) + " devices)");
  }
  return (*gDevs)[dev].addr;
}

std::vector<SockAddr> deviceAddrs() {
  std::lock_guard<std::mutex> lock(gMu);
  std::vector<SockAddr> v;
  if (!loadDevicesLocked().isOk()) return v;
  for (const Device& d : *gDevs) v.push_back(d.addr);
  return v;
}

std::string deviceNameOf(const SockAddr& a) {
  std::lock_guard<std::mutex> lock(gMu);
  if (!loadDevicesLocked().isOk()) return "";
  for (const Device& d : *gDevs)
    if (d.addr.host() == a.host()) return d.name;
  return "";
}

void reloadDevices() {
  std::lock_guard<std::mutex> lock(gMu);
  gDevs = nullptr;  // the old list stays in gLists: props may still point into it
  Status st = loadDevicesLocked();
  if (!st.isOk()) FERRY_WARN("%s", st.message().c_str());
}

}  // namespace netsocket

const ncclNet_v11_t* socketNet() { return &netsocket::kSocketNet; }

}  // namespace ferry
