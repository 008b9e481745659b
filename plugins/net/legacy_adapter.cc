// v6..v10 -> v11 adapters. One trampoline set per (version, slot): a
// trampoline finds its plugin table through its slot, so no state travels
// with requests or comms, and the plugin's function pointers are read at call
// time (some plugins rewrite their whole exported table inside init).
#include "plugins/net/legacy_adapter.h"

#include <array>
#include <atomic>
#include <climits>
#include <mutex>
#include <new>
#include <utility>

#include "core/log.h"
#include "plugins/net/legacy_props.h"
#include "plugins/net/net_plugins.h"

namespace ferry::netplugin {
namespace {

struct Slot {
  void* table = nullptr;
  std::mutex mu;
  std::atomic<bool> initDone{false};
  ncclResult_t initResult = ncclSuccess;
  ncclNet_v11_t view{};
};
Slot gSlots[kMaxExternal];

// What the v11 init returns for an old plugin. Old plugins have no context;
// this keeps the comm's config because v10 wants it on every connect.
struct LegacyCtx {
  ncclNetCommConfig_v11_t config;
};
ncclNetCommConfig_v11_t gNoConfig = {NCCL_NET_TRAFFIC_CLASS_UNDEF};

// Largest multi-receive we convert on the stack (NCCL uses at most 8).
constexpr int kMaxRecvs = 64;

template <class T> struct Traits;
template <> struct Traits<ncclNet_v6_t> { static constexpr int kV = 6; using Props = ncclNetProperties_v6_t; };
template <> struct Traits<ncclNet_v7_t> { static constexpr int kV = 7; using Props = ncclNetProperties_v7_t; };
template <> struct Traits<ncclNet_v8_t> { static constexpr int kV = 8; using Props = ncclNetProperties_v8_t; };
template <> struct Traits<ncclNet_v9_t> { static constexpr int kV = 9; using Props = ncclNetProperties_v9_t; };
template <> struct Traits<ncclNet_v10_t> { static constexpr int kV = 10; using Props = ncclNetProperties_v10_t; };

bool fitsInt(size_t size, const char* what, const char* name, int version) {
  if (size <= static_cast<size_t>(INT_MAX)) return true;
  FERRY_WARN("NET/Plugin: %s (v%d) takes int sizes: %s of %zu bytes exceeds INT_MAX", name, version,
             what, size);
  return false;
}

template <class T, int S>
struct Tramp {
  static constexpr int V = Traits<T>::kV;
  static T* t() { return static_cast<T*>(gSlots[S].table); }
  static const char* name() { return t()->name ? t()->name : "(unnamed)"; }

  static ncclResult_t missing(const char* fn) {
    FERRY_WARN("NET/Plugin: %s (v%d) does not provide %s", name(), V, fn);
    return ncclInternalError;
  }

  // Optional entries are NULL in the view when the plugin lacks them; read
  // again after init, which may have filled in the table.
  static void refreshOptional(ncclNet_v11_t& v) {
    T* o = t();
    if (o->name) v.name = o->name;
    v.regMrDmaBuf = o->regMrDmaBuf ? &regMrDmaBuf : nullptr;
    if constexpr (V >= 7) {
      v.getDeviceMr = o->getDeviceMr ? &getDeviceMr : nullptr;
      v.irecvConsumed = o->irecvConsumed ? &irecvConsumed : nullptr;
    }
    if constexpr (V >= 9) v.makeVDevice = o->makeVDevice ? &makeVDevice : nullptr;
  }

  // Old plugins' init is process-global: call it once and remember the result.
  static ncclResult_t initOnce(ncclDebugLogger_t logFn, ncclProfilerCallback_t profFn) {
    Slot& s = gSlots[S];
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.initDone.load(std::memory_order_relaxed)) return s.initResult;
    if (t()->init == nullptr) {
      s.initResult = missing("init");
    } else if constexpr (V >= 10) {
      s.initResult = t()->init(logFn, profFn);
    } else {
      s.initResult = t()->init(logFn);
    }
    if (s.initResult == ncclSuccess) refreshOptional(s.view);
    else FERRY_INFO(log::kInit | log::kNet, "NET/Plugin: %s (v%d) init failed: %d", name(), V, s.initResult);
    s.initDone.store(true, std::memory_order_release);
    return s.initResult;
  }

  static ncclResult_t init(void** ctx, uint64_t /*commId*/, ncclNetCommConfig_v11_t* config,
                           ncclDebugLogger_t logFn, ncclProfilerCallback_t profFn) {
    if (ctx == nullptr) return ncclInvalidArgument;
    ncclResult_t r = initOnce(logFn ? logFn : pluginLogger(), profFn);
    if (r != ncclSuccess) return r;
    auto* c = new (std::nothrow) LegacyCtx{config ? *config : gNoConfig};
    if (c == nullptr) return ncclSystemError;
    *ctx = c;
    return ncclSuccess;
  }

  static ncclResult_t finalize(void* ctx) {
    delete static_cast<LegacyCtx*>(ctx);
    return ncclSuccess;
  }

  static ncclResult_t devices(int* ndev) {
    if (!gSlots[S].initDone.load(std::memory_order_acquire)) {
      FERRY_WARN("NET/Plugin: %s (v%d): devices() called before init()", name(), V);
      return ncclInvalidUsage;
    }
    return t()->devices(ndev);
  }

  static ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
    typename Traits<T>::Props old{};
    ncclResult_t r = t()->getProperties(dev, &old);
    if (r != ncclSuccess) return r;
    Status st = convertLegacyProps(V, &old, dev, props);
    if (!st.isOk()) {
      FERRY_WARN("NET/Plugin: %s (v%d): getProperties(%d): %s", name(), V, dev, st.message().c_str());
      return ncclInternalError;
    }
    return ncclSuccess;
  }

  static ncclResult_t listen(void* /*ctx*/, int dev, void* handle, void** listenComm) {
    return t()->listen(dev, handle, listenComm);
  }

  static ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                              ncclNetDeviceHandle_v11_t** sendDevComm) {
    if constexpr (V == 6) {
      return t()->connect(dev, handle, sendComm);
    } else if constexpr (V < 10) {
      return t()->connect(dev, handle, sendComm, sendDevComm);
    } else {
      ncclNetCommConfig_v10_t* cfg = ctx ? &static_cast<LegacyCtx*>(ctx)->config : &gNoConfig;
      return t()->connect(dev, cfg, handle, sendComm, sendDevComm);
    }
  }

  static ncclResult_t accept(void* listenComm, void** recvComm,
                             ncclNetDeviceHandle_v11_t** recvDevComm) {
    if constexpr (V == 6) return t()->accept(listenComm, recvComm);
    else return t()->accept(listenComm, recvComm, recvDevComm);
  }

  static ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
    if constexpr (V <= 7) {
      if (!fitsInt(size, "regMr", name(), V)) return ncclInvalidUsage;
      return t()->regMr(comm, data, static_cast<int>(size), type, mhandle);
    } else {
      return t()->regMr(comm, data, size, type, mhandle);
    }
  }

  static ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                                  int fd, void** mhandle) {
    if (t()->regMrDmaBuf == nullptr) return missing("regMrDmaBuf");
    return t()->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  }

  static ncclResult_t deregMr(void* comm, void* mhandle) { return t()->deregMr(comm, mhandle); }

  static ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                            void* phandle, void** request) {
    if constexpr (V <= 8) {
      if (!fitsInt(size, "isend", name(), V)) return ncclInvalidUsage;
      return t()->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    } else if constexpr (V == 9) {
      return t()->isend(sendComm, data, size, tag, mhandle, request);
    } else {
      return t()->isend(sendComm, data, size, tag, mhandle, phandle, request);
    }
  }

  static ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                            void** mhandles, void** phandles, void** request) {
    if constexpr (V <= 8) {
      if (n < 0 || n > kMaxRecvs) {
        FERRY_WARN("NET/Plugin: %s (v%d): irecv of %d buffers (at most %d)", name(), V, n, kMaxRecvs);
        return ncclInvalidUsage;
      }
      int isizes[kMaxRecvs];
      for (int i = 0; i < n; i++) {
        if (!fitsInt(sizes[i], "irecv", name(), V)) return ncclInvalidUsage;
        isizes[i] = static_cast<int>(sizes[i]);
      }
      return t()->irecv(recvComm, n, data, isizes, tags, mhandles, request);
    } else if constexpr (V == 9) {
      return t()->irecv(recvComm, n, data, sizes, tags, mhandles, request);
    } else {
      return t()->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
    }
  }

  static ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                             void** request) {
    return t()->iflush(recvComm, n, data, sizes, mhandles, request);
  }
  static ncclResult_t test(void* request, int* done, int* sizes) {
    return t()->test(request, done, sizes);
  }
  static ncclResult_t closeSend(void* c) { return t()->closeSend(c); }
  static ncclResult_t closeRecv(void* c) { return t()->closeRecv(c); }
  static ncclResult_t closeListen(void* c) { return t()->closeListen(c); }

  static ncclResult_t getDeviceMr(void* comm, void* mhandle, void** dptr) {
    if constexpr (V >= 7) {
      if (t()->getDeviceMr) return t()->getDeviceMr(comm, mhandle, dptr);
    }
    return missing("getDeviceMr");
  }
  static ncclResult_t irecvConsumed(void* recvComm, int n, void* request) {
    if constexpr (V >= 7) {
      if (t()->irecvConsumed) return t()->irecvConsumed(recvComm, n, request);
    }
    return missing("irecvConsumed");
  }
  static ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
    if constexpr (V >= 9) {
      if (t()->makeVDevice) return t()->makeVDevice(d, props);
    }
    return missing("makeVDevice");
  }
  // Old plugins take no traffic hints.
  static ncclResult_t setNetAttr(void* /*ctx*/, ncclNetAttr_v11_t* /*attr*/) { return ncclSuccess; }

  static ncclNet_v11_t build() {
    ncclNet_v11_t v{};
    v.name = name();
    v.init = &init;
    v.devices = &devices;
    v.getProperties = &getProperties;
    v.listen = &listen;
    v.connect = &connect;
    v.accept = &accept;
    v.regMr = &regMr;
    v.deregMr = &deregMr;
    v.isend = &isend;
    v.irecv = &irecv;
    v.iflush = &iflush;
    v.test = &test;
    v.closeSend = &closeSend;
    v.closeRecv = &closeRecv;
    v.closeListen = &closeListen;
    v.finalize = &finalize;
    v.setNetAttr = &setNetAttr;
    refreshOptional(v);
    return v;
  }
};

using Builder = ncclNet_v11_t (*)();

template <class T, size_t... S>
constexpr std::array<Builder, sizeof...(S)> makeBuilders(std::index_sequence<S...>) {
  return {&Tramp<T, static_cast<int>(S)>::build...};
}
template <class T>
constexpr std::array<Builder, kMaxExternal> kBuilders =
    makeBuilders<T>(std::make_index_sequence<kMaxExternal>());

Builder builderFor(int version, int slot) {
  switch (version) {
    case 6: return kBuilders<ncclNet_v6_t>[slot];
    case 7: return kBuilders<ncclNet_v7_t>[slot];
    case 8: return kBuilders<ncclNet_v8_t>[slot];
    case 9: return kBuilders<ncclNet_v9_t>[slot];
    case 10: return kBuilders<ncclNet_v10_t>[slot];
    default: return nullptr;
  }
}

}  // namespace

const ncclNet_v11_t* adaptLegacy(int slot, int version, void* table) {
  if (slot < 0 || slot >= kMaxExternal || table == nullptr) return nullptr;
  Builder build = builderFor(version, slot);
  if (build == nullptr) return nullptr;
  Slot& s = gSlots[slot];
  std::lock_guard<std::mutex> lk(s.mu);
  s.table = table;
  s.initDone.store(false, std::memory_order_relaxed);
  s.initResult = ncclSuccess;
  s.view = build();
  return &s.view;
}

void releaseLegacy(int slot) {
  if (slot < 0 || slot >= kMaxExternal) return;
  Slot& s = gSlots[slot];
  std::lock_guard<std::mutex> lk(s.mu);
  s.table = nullptr;
  s.initDone.store(false, std::memory_order_relaxed);
  s.initResult = ncclSuccess;
  s.view = ncclNet_v11_t{};
}

}  // namespace ferry::netplugin
