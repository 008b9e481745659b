// External NCCL tuner plugins (libnccl-tuner-*.so), loaded the way NCCL loads
// them and presented through one interface whatever ABI version they export.
//
// NCCL_TUNER_PLUGIN selects the library (one name, not a list):
//   unset or empty  -> "libnccl-tuner.so"
//   "none"          -> no tuner (the net plugin libraries are not searched)
//   a name N        -> N verbatim (a path or a library name), then, if N has
//                      no '/' and is not already lib*.so, libnccl-tuner-N.so
//   "STATIC_PLUGIN" -> symbols of the main program (dlopen(NULL))
// If no library opens, the libraries of the loaded external net plugins are
// searched for a tuner symbol, as NCCL does (the first one that has one wins;
// NCCL uses the net plugin its communicator picked). A library that opens but
// exports no tuner symbol means no tuner (NCCL does not go on either).
// Symbols are probed newest first: ncclTunerPlugin_v6, _v5, _v4, _v3, _v2.
//
// The library is loaded once per process; each communicator opens its own
// Tuner (the plugin's init, with its own context) and destroys it (finalize).
#pragma once

#include <nccl_tuner.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace ferry::tunerplugin {

constexpr int kNumAlgorithms = NCCL_NUM_ALGORITHMS;  // rows: NCCL_ALGO_*
constexpr int kNumProtocols = NCCL_NUM_PROTOCOLS;    // columns: NCCL_PROTO_*
constexpr float kIgnore = static_cast<float>(NCCL_ALGO_PROTO_IGNORE);

// Predicted time per (algorithm, protocol) in microseconds; kIgnore (any
// negative value) marks a combination that is not a candidate.
using CostTable = float[kNumAlgorithms][kNumProtocols];

// The process's tuner library, as found by the rules above.
struct LoadedTuner {
  std::string library;  // the name dlopen accepted (a net plugin's library when fromNetPlugin)
  std::string name;     // the plugin's own name field
  int version;          // N of the ncclTunerPlugin_v<N> symbol used (2..6)
  const void* table;    // the exported ncclTuner_v<N>_t
  bool fromNetPlugin;
};

// Loaded on first call (thread-safe) and cached; nullptr when there is no
// tuner. Never fails: every problem is a log line (subsystems INIT, TUNING).
const LoadedTuner* loadedTuner();

// Test hook: forget the cache and dlclose the library so a test can change
// NCCL_TUNER_PLUGIN (call config::reload() too). No Tuner may be alive.
void resetForTest();

// NCCL 2.28's default model constants (§6.2 of the NCCL notes): what a v5/v6
// plugin's init sees unless the caller passes its own.
ncclTunerConstants_v5_t defaultConstants();

struct TunerInit {
  uint64_t commId = 0;
  size_t nRanks = 1;
  size_t nNodes = 1;
  // v5+: given to the plugin as is. Ferry has no NVLink; callers describe
  // each host as one domain.
  ncclNvlDomainInfo_v5_t nvlDomains = {1, 1, 1};
};

// One communicator's tuner: the plugin's context behind one interface for
// every version. Calls on one Tuner must not overlap (NCCL calls a
// communicator's tuner from one thread at a time and plugins rely on it).
class Tuner {
 public:
  // Calls the plugin's init. nullptr when there is no tuner plugin, or when
  // init fails (a WARN; the plugin is then not used by this communicator and
  // its finalize is not called). v5/v6 plugins may rewrite *constants in
  // place (nullptr: they get a scratch copy of defaultConstants()); older
  // versions never see them.
  static std::unique_ptr<Tuner> open(const TunerInit& args, ncclTunerConstants_v5_t* constants);

  ~Tuner();  // finalize() if not called yet (a failure is a WARN)
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Let the plugin rewrite `table` for one collective. *nChannels (may be
  // nullptr) gets the plugin's channel count, 0 meaning "no opinion". The
  // caller then takes the smallest non-negative entry. On error the table may
  // be half-written: the caller should WARN and fall back to its own choice.
  // v2 plugins name one (algorithm, protocol) instead: that entry is set to
  // 0 if it is a candidate; a choice of a non-candidate, or an algorithm
  // without a protocol (or the reverse), leaves the table unchanged.
  // numPipeOps: operations aggregated in the group (>= 1). regBuff: user
  // buffers are registered (v4+ only).
  Status adjust(ncclFunc_t coll, size_t nBytes, int numPipeOps, bool regBuff, CostTable& table,
                int* nChannels);

  // v6 plugins with a getChunkSize: may change *chunkSize (the caller clamps
  // it to its buffers). Otherwise *chunkSize is left as is.
  bool hasChunkSize() const;
  Status chunkSize(ncclFunc_t coll, size_t nBytes, int algo, int proto, int nChannels,
                   size_t* chunkSize);

  // The plugin's finalize (destroy for v2..v4), at most once.
  Status finalize();

  const std::string& name() const { return plugin_->name; }
  int version() const { return plugin_->version; }

 private:
  Tuner(const LoadedTuner* plugin, void* ctx) : plugin_(plugin), ctx_(ctx) {}
  Status adjustV2(ncclFunc_t coll, size_t nBytes, int numPipeOps, CostTable& table, int* channels);
  Status pluginError(ncclResult_t r, const char* call, ncclFunc_t coll, size_t nBytes) const;

  const LoadedTuner* plugin_;
  void* ctx_;
  bool finalized_ = false;
};

// Names for log lines ("AllReduce", "ncclInternalError").
const char* funcName(ncclFunc_t f);
const char* resultName(ncclResult_t r);

}  // namespace ferry::tunerplugin
