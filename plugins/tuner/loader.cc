// Finding and opening the tuner plugin library, following NCCL's rules (see
// tuner_plugin.h). Loading never fails the caller: without a tuner the
// library's own model decides, so every problem is only a log line.
#include <dlfcn.h>
#include <strings.h>

#include <mutex>
#include <string>

#include "core/config.h"
#include "core/log.h"
#include "plugins/plugin_lib.h"
#include "plugins/net/net_plugins.h"
#include "plugins/tuner/tuner_plugin.h"

namespace ferry::tunerplugin {
namespace {

constexpr uint64_t kSubsys = log::kInit | log::kTuning;
constexpr const char* kDefaultLib = "libnccl-tuner.so";
constexpr const char* kStatic = plugins::kStaticPlugin;

std::mutex gMu;
bool gDone = false;
LoadedTuner gTuner;
void* gHandle = nullptr;  // the library gTuner came from; null: no tuner

// Name resolution for the requested name ("" = unset); *lib gets the name
// dlopen accepted.
void* openTunerLib(const std::string& name, std::string* lib) {
  if (name.empty()) {
    *lib = kDefaultLib;
    return plugins::tryOpenLib(*lib, "TUNER", kSubsys);
  }
  return plugins::openPluginLib(name, "libnccl-tuner", "TUNER", kSubsys, lib);
}

struct Symbol {
  int version;
  const char* name;
};
constexpr Symbol kSymbols[] = {{6, "ncclTunerPlugin_v6"},
                               {5, "ncclTunerPlugin_v5"},
                               {4, "ncclTunerPlugin_v4"},
                               {3, "ncclTunerPlugin_v3"},
                               {2, "ncclTunerPlugin_v2"}};

// Every version starts with `const char* name`; it is read before init (a
// plugin may fill the rest of its table only in init, never the name).
const char* tableName(const void* table) {
  const char* n = *static_cast<const char* const*>(table);
  return n ? n : "(unnamed)";
}

// Probe one opened library, newest symbol first; true when one was found.
bool probe(void* handle, const std::string& lib, bool fromNet) {
  for (const Symbol& sym : kSymbols) {
    const void* table = dlsym(handle, sym.name);
    if (table == nullptr) continue;
    gTuner = LoadedTuner{lib, tableName(table), sym.version, table, fromNet};
    gHandle = handle;
    FERRY_INFO(kSubsys, "TUNER/Plugin: Using %s (v%d) from %s%s", gTuner.name.c_str(), sym.version,
               fromNet ? "net plugin library " : "", lib.c_str());
    return true;
  }
  return false;
}

// NCCL's fallback: a net plugin may carry the tuner. The net loader keeps
// its libraries open; RTLD_NOLOAD takes a reference to the same handle
// without loading anything new.
void probeNetPlugins() {
  for (const netplugin::ExternalNet& net : netplugin::externalNets()) {
    void* h = net.library == kStatic
                  ? dlopen(nullptr, RTLD_NOW | RTLD_LOCAL)
                  : dlopen(net.library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr) continue;
    if (probe(h, net.library, true)) return;
    dlclose(h);
  }
  FERRY_INFO(kSubsys, "TUNER/Plugin: no tuner plugin found; the internal model decides");
}

void load() {
  std::string value = config::getString(config::Param::kTunerPlugin);
  if (strcasecmp(value.c_str(), "none") == 0) {
    FERRY_INFO(kSubsys, "TUNER/Plugin: NCCL_TUNER_PLUGIN=none, tuner plugin disabled");
    return;
  }
  std::string lib;
  void* handle = openTunerLib(value, &lib);
  if (handle == nullptr) {
    probeNetPlugins();
    return;
  }
  if (probe(handle, lib, false)) return;
  // Asked for by name: the user expects a tuner, so say so loudly.
  if (!value.empty()) {
    FERRY_WARN("TUNER/Plugin: %s exports no tuner plugin symbol (ncclTunerPlugin_v6 .. _v2); "
               "no tuner", lib.c_str());
  } else {
    FERRY_INFO(kSubsys, "TUNER/Plugin: %s exports no tuner plugin symbol; no tuner", lib.c_str());
  }
  dlclose(handle);
}

}  // namespace

const LoadedTuner* loadedTuner() {
  std::lock_guard<std::mutex> lk(gMu);
  if (!gDone) {
    load();
    gDone = true;
  }
  return gHandle ? &gTuner : nullptr;
}

void resetForTest() {
  std::lock_guard<std::mutex> lk(gMu);
  if (gHandle != nullptr) dlclose(gHandle);
  gHandle = nullptr;
  gTuner = LoadedTuner{};
  gDone = false;
}

}  // namespace ferry::tunerplugin
