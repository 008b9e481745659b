// Logging, the device list and device properties of the UCX network.
#include <limits.h>
#include <stdlib.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <mutex>

#include "core/log.h"
#include "net/interfaces.h"
#include "net/net_device.h"
#include "transports/netucx/ucx_internal.h"

namespace ferry::ucx {

namespace {

std::atomic<ncclDebugLogger_t> gLogger{nullptr};

void logV(log::Level level, const char* file, int line, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  ncclDebugLogger_t logger = gLogger.load();
  if (logger) {
    logger(static_cast<ncclDebugLogLevel>(level), NCCL_NET, file, line, "NET/UCX : %s", buf);
  } else if (log::enabled(level, log::kNet)) {
    log::write(level, log::kNet, file, line, "ucx", "NET/UCX : %s", buf);
  }
}

}  // namespace

void setLogger(ncclDebugLogger_t logger) {
  if (logger) gLogger.store(logger);
}

void logWarn(const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  logV(log::Level::kWarn, file, line, fmt, ap);
  va_end(ap);
}

void logInfo(const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  logV(log::Level::kInfo, file, line, fmt, ap);
  va_end(ap);
}

const std::vector<Device>& devices(std::string* err) {
  static std::once_flag once;
  static std::vector<Device> devs;
  static std::string error;
  std::call_once(once, [] {
    auto found = findInterfaces(kMaxNetDevices);
    if (!found.isOk()) {
      error = found.status().message();
      return;
    }
    for (const NetIf& nif : found.value()) {
      Device d;
      d.name = nif.name;
      d.addr.resize(SockAddr::kPackedBytes);
      nif.addr.pack(d.addr.data());
      d.pciPath = interfacePciPath(nif.name);
      d.speedMbps = interfaceSpeedMbps(nif.name);
      UCX_INFO("device %zu: %s %s speed %d", devs.size(), d.name.c_str(),
               nif.addr.toString().c_str(), d.speedMbps);
      devs.push_back(std::move(d));
    }
  });
  if (err) *err = error;
  return devs;
}

ncclResult_t numDevices(int* ndev) {
  std::string err;
  *ndev = static_cast<int>(devices(&err).size());
  if (*ndev == 0) {
    UCX_WARN("no network device: %s", err.c_str());
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
  const std::vector<Device>& devs = devices(nullptr);
  if (dev < 0 || dev >= static_cast<int>(devs.size())) {
    UCX_WARN("getProperties: device %d out of range (%zu devices)", dev, devs.size());
    return ncclInvalidArgument;
  }
  const Device& d = devs[dev];
  // The strings live as long as the process-wide device list.
  hostNetProperties(dev, d.name, d.pciPath, d.speedMbps, props);
  return ncclSuccess;
}

}  // namespace ferry::ucx
