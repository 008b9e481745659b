// Finding and opening external net plugins, following NCCL's rules (see
// net_plugins.h). Loading never fails the caller: every problem is a log line
// and the library is skipped, so the built-in networks stay available.
#include <dlfcn.h>
#include <strings.h>

#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/log.h"
#include "plugins/plugin_lib.h"
#include "plugins/net/legacy_adapter.h"
#include "plugins/net/net_plugins.h"

namespace ferry::netplugin {
namespace {

constexpr uint64_t kSubsys = log::kInit | log::kNet;
constexpr const char* kDefaultLib = "libnccl-net.so";

struct Loaded {
  void* handle;
  int slot;  // adapter slot, -1 for a v11 plugin used directly
};

std::mutex gMu;
bool gDone = false;
std::vector<ExternalNet> gNets;
std::vector<Loaded> gLoaded;

std::vector<std::string> requestedNames() {
  std::string value = config::getString(config::Param::kNetPlugin);
  if (value.empty()) return {kDefaultLib};
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string name = value.substr(start, comma - start);
    if (!name.empty() && strcasecmp(name.c_str(), "none") != 0) names.push_back(name);
    start = comma + 1;
  }
  return names;
}

bool isNone(const std::string& value) { return strcasecmp(value.c_str(), "none") == 0; }

// NCCL's name rules (plugins/plugin_lib.h).
void* openPlugin(const std::string& name, std::string* lib) {
  return plugins::openPluginLib(name, "libnccl-net", "NET", kSubsys, lib);
}

struct Symbol {
  int version;
  const char* name;
};
constexpr Symbol kSymbols[] = {{11, "ncclNetPlugin_v11"}, {10, "ncclNetPlugin_v10"},
                               {9, "ncclNetPlugin_v9"},   {8, "ncclNetPlugin_v8"},
                               {7, "ncclNetPlugin_v7"},   {6, "ncclNetPlugin_v6"}};

// The plugin's name is read before its init: the loader notes allow a table
// holding only name and init at this point, so nothing else is touched.
const char* tableName(void* table) {
  const char* n = *static_cast<const char* const*>(table);
  return n ? n : "(unnamed)";
}

bool alreadyLoaded(void* handle) {
  for (const Loaded& l : gLoaded)
    if (l.handle == handle) return true;
  return false;
}

// Probe one opened library; on success append to gNets/gLoaded.
void probe(void* handle, const std::string& lib) {
  int slot = static_cast<int>(gNets.size());
  for (const Symbol& sym : kSymbols) {
    void* table = dlsym(handle, sym.name);
    if (table == nullptr) continue;
    const ncclNet_v11_t* net = nullptr;
    if (sym.version == 11) {
      net = static_cast<const ncclNet_v11_t*>(table);
      slot = -1;
    } else {
      net = adaptLegacy(slot, sym.version, table);
    }
    if (net == nullptr) break;
    FERRY_INFO(kSubsys, "NET/Plugin: Loaded net plugin %s (v%d) from %s", tableName(table),
               sym.version, lib.c_str());
    gNets.push_back({lib, sym.version, net});
    gLoaded.push_back({handle, slot});
    return;
  }
  FERRY_WARN("NET/Plugin: %s loaded but exports no net plugin symbol (ncclNetPlugin_v11 .. _v6); "
             "skipped", lib.c_str());
  dlclose(handle);
}

void loadAll() {
  std::string value = config::getString(config::Param::kNetPlugin);
  if (isNone(value)) {
    FERRY_INFO(kSubsys, "NET/Plugin: NCCL_NET_PLUGIN=none, external net plugins disabled");
    return;
  }
  for (const std::string& name : requestedNames()) {
    if (static_cast<int>(gNets.size()) >= kMaxExternal) {
      FERRY_WARN("NET/Plugin: at most %d external net plugins; ignoring %s and the rest",
                 kMaxExternal, name.c_str());
      break;
    }
    std::string lib;
    void* handle = openPlugin(name, &lib);
    if (handle == nullptr) continue;
    if (alreadyLoaded(handle)) {
      FERRY_INFO(kSubsys, "NET/Plugin: %s is already loaded; skipped", lib.c_str());
      dlclose(handle);
      continue;
    }
    probe(handle, lib);
  }
}

}  // namespace

const std::vector<ExternalNet>& externalNets() {
  std::lock_guard<std::mutex> lk(gMu);
  if (!gDone) {
    loadAll();
    gDone = true;
  }
  return gNets;
}

void resetForTest() {
  std::lock_guard<std::mutex> lk(gMu);
  for (const Loaded& l : gLoaded) {
    if (l.slot >= 0) releaseLegacy(l.slot);
    dlclose(l.handle);
  }
  gLoaded.clear();
  gNets.clear();
  gDone = false;
}

}  // namespace ferry::netplugin
