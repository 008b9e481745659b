// One communicator's tuner: adapters from every plugin version (v2..v6) to
// the Tuner interface. Function pointers other than init are read from the
// plugin's table at call time, because some plugins fill their table in init.
#include <cinttypes>
#include <type_traits>

#include "core/log.h"
#include "plugins/net/net_plugins.h"
#include "plugins/tuner/tuner_plugin.h"

namespace ferry::tunerplugin {
namespace {

constexpr uint64_t kSubsys = log::kInit | log::kTuning;

template <typename T>
const T* as(const LoadedTuner* p) {
  return static_cast<const T*>(p->table);
}

// ncclResult_t keeps its meaning as a Status code; anything unknown (CUDA
// errors included) is the plugin's internal failure.
Code codeOf(ncclResult_t r) {
  switch (r) {
    case ncclSystemError: return Code::kSystem;
    case ncclInvalidArgument: return Code::kInvalidArgument;
    case ncclInvalidUsage: return Code::kInvalidUsage;
    case ncclRemoteError: return Code::kRemote;
    case ncclInProgress: return Code::kInProgress;
    default: return Code::kInternal;
  }
}

// v2..v4 share init(nRanks, nNodes, logger, &ctx); v5/v6 take the context
// first plus commId, NVL domains and the constants.
template <typename T>
ncclResult_t initOld(const LoadedTuner* p, const TunerInit& a, void** ctx) {
  const T* t = as<T>(p);
  if (t->init == nullptr) return ncclInvalidUsage;
  return t->init(a.nRanks, a.nNodes, netplugin::pluginLogger(), ctx);
}
template <typename T>
ncclResult_t initNew(const LoadedTuner* p, const TunerInit& a, ncclTunerConstants_v5_t* c,
                     void** ctx) {
  const T* t = as<T>(p);
  if (t->init == nullptr) return ncclInvalidUsage;
  ncclNvlDomainInfo_v5_t nvl = a.nvlDomains;  // the ABI wants a mutable pointer
  return t->init(ctx, a.commId, a.nRanks, a.nNodes, netplugin::pluginLogger(), &nvl, c);
}

}  // namespace

std::unique_ptr<Tuner> Tuner::open(const TunerInit& args, ncclTunerConstants_v5_t* constants) {
  const LoadedTuner* p = loadedTuner();
  if (p == nullptr) return nullptr;
  ncclTunerConstants_v5_t scratch;
  if (constants == nullptr) {
    scratch = defaultConstants();
    constants = &scratch;
  }
  void* ctx = nullptr;
  ncclResult_t r = ncclInternalError;
  switch (p->version) {
    case 2: r = initOld<ncclTuner_v2_t>(p, args, &ctx); break;
    case 3: r = initOld<ncclTuner_v3_t>(p, args, &ctx); break;
    case 4: r = initOld<ncclTuner_v4_t>(p, args, &ctx); break;
    case 5: r = initNew<ncclTuner_v5_t>(p, args, constants, &ctx); break;
    case 6: r = initNew<ncclTuner_v6_t>(p, args, constants, &ctx); break;
  }
  if (r != ncclSuccess) {
    FERRY_WARN("TUNER/Plugin: %s (v%d) init failed: %s; this communicator uses no tuner",
               p->name.c_str(), p->version, resultName(r));
    return nullptr;
  }
  FERRY_INFO(kSubsys, "TUNER/Plugin: %s (v%d) initialised: commId 0x%" PRIx64 ", %zu ranks, %zu nodes",
             p->name.c_str(), p->version, args.commId, args.nRanks, args.nNodes);
  return std::unique_ptr<Tuner>(new Tuner(p, ctx));
}

Tuner::~Tuner() {
  if (finalized_) return;
  Status st = finalize();
  if (!st.isOk()) FERRY_WARN("%s", st.message().c_str());
}

Status Tuner::pluginError(ncclResult_t r, const char* call, ncclFunc_t coll, size_t nBytes) const {
  return Status(codeOf(r), "TUNER/Plugin: " + name() + " " + call + "(" + funcName(coll) + ", " +
                               std::to_string(nBytes) + " bytes) returned " + resultName(r));
}

// The cost-table versions all take the table as a float** that really
// points at the contiguous [algo][proto] array.
Status Tuner::adjust(ncclFunc_t coll, size_t nBytes, int numPipeOps, bool regBuff,
                     CostTable& table, int* nChannels) {
  if (finalized_) return invalidUsage("TUNER/Plugin: " + name() + " used after finalize");
  int channels = 0;
  float** t = reinterpret_cast<float**>(&table[0][0]);
  int reg = regBuff ? 1 : 0;
  if (version() == 2) {
    FERRY_TRY(adjustV2(coll, nBytes, numPipeOps, table, &channels));
  } else {
    // v3..v6 share getCollInfo's shape; v3 lacks regBuff.
    bool missing = false;
    auto call = [&](const auto* plugin) -> ncclResult_t {
      auto fn = plugin->getCollInfo;
      missing = fn == nullptr;
      if (missing) return ncclSuccess;
      if constexpr (std::is_same_v<decltype(plugin), const ncclTuner_v3_t*>) {
        return fn(ctx_, coll, nBytes, numPipeOps, t, kNumAlgorithms, kNumProtocols, &channels);
      } else {
        return fn(ctx_, coll, nBytes, numPipeOps, t, kNumAlgorithms, kNumProtocols, reg, &channels);
      }
    };
    ncclResult_t r = ncclSuccess;
    switch (version()) {
      case 3: r = call(as<ncclTuner_v3_t>(plugin_)); break;
      case 4: r = call(as<ncclTuner_v4_t>(plugin_)); break;
      case 5: r = call(as<ncclTuner_v5_t>(plugin_)); break;
      case 6: r = call(as<ncclTuner_v6_t>(plugin_)); break;
    }
    if (missing) return pluginError(ncclInvalidUsage, "getCollInfo (NULL)", coll, nBytes);
    if (r != ncclSuccess) return pluginError(r, "getCollInfo", coll, nBytes);
  }
  if (nChannels != nullptr) *nChannels = channels < 0 ? 0 : channels;
  return Status::ok();
}

// v2 predates the cost table. Its two support flags are derived from the
// table the way NCCL's own v2 adapter does: NVLS is possible when the NVLS or
// NVLSTree Simple entry is a candidate, CollNet when the CollNetChain one is.
// Its choice becomes a 0 in the table (so it wins unless the caller's own
// rules rule it out), and only if that entry is a candidate: a v2 plugin
// cannot enable what the caller disabled.
Status Tuner::adjustV2(ncclFunc_t coll, size_t nBytes, int numPipeOps, CostTable& table,
                       int* channels) {
  auto fn = as<ncclTuner_v2_t>(plugin_)->getCollInfo;
  if (fn == nullptr) return pluginError(ncclInvalidUsage, "getCollInfo (NULL)", coll, nBytes);
  int nvls = (table[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] >= 0 ||
              table[NCCL_ALGO_NVLS_TREE][NCCL_PROTO_SIMPLE] >= 0) ? 1 : 0;
  int collNet = table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] >= 0 ? 1 : 0;
  int algo = NCCL_ALGO_UNDEF;
  int proto = NCCL_PROTO_UNDEF;
  ncclResult_t r = fn(ctx_, coll, nBytes, collNet, nvls, numPipeOps, &algo, &proto, channels);
  if (r != ncclSuccess) return pluginError(r, "getCollInfo", coll, nBytes);
  if (algo >= 0 && algo < kNumAlgorithms && proto >= 0 && proto < kNumProtocols &&
      table[algo][proto] >= 0) {
    table[algo][proto] = 0.0f;
  }
  return Status::ok();
}

bool Tuner::hasChunkSize() const {
  return !finalized_ && version() == 6 && as<ncclTuner_v6_t>(plugin_)->getChunkSize != nullptr;
}

Status Tuner::chunkSize(ncclFunc_t coll, size_t nBytes, int algo, int proto, int nChannels,
                        size_t* chunk) {
  if (!hasChunkSize()) return Status::ok();
  ncclResult_t r =
      as<ncclTuner_v6_t>(plugin_)->getChunkSize(ctx_, coll, nBytes, algo, proto, nChannels, chunk);
  if (r != ncclSuccess) return pluginError(r, "getChunkSize", coll, nBytes);
  return Status::ok();
}

Status Tuner::finalize() {
  if (finalized_) return Status::ok();
  finalized_ = true;
  // v2..v4 call it destroy; it sits where v5/v6 have finalize.
  ncclResult_t (*fn)(void*) = nullptr;
  switch (version()) {
    case 2: fn = as<ncclTuner_v2_t>(plugin_)->destroy; break;
    case 3: fn = as<ncclTuner_v3_t>(plugin_)->destroy; break;
    case 4: fn = as<ncclTuner_v4_t>(plugin_)->destroy; break;
    case 5: fn = as<ncclTuner_v5_t>(plugin_)->finalize; break;
    case 6: fn = as<ncclTuner_v6_t>(plugin_)->finalize; break;
  }
  if (fn == nullptr) return Status::ok();
  ncclResult_t r = fn(ctx_);
  if (r != ncclSuccess) {
    return Status(codeOf(r), "TUNER/Plugin: " + name() + " finalize returned " + resultName(r));
  }
  return Status::ok();
}

}  // namespace ferry::tunerplugin
