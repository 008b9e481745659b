// External NCCL net plugins (libnccl-net-*.so), loaded the way NCCL loads them
// and presented as ncclNet_v11_t tables, whatever version they export.
//
// NCCL_NET_PLUGIN selects the libraries:
//   unset or empty  -> "libnccl-net.so"
//   "none"          -> no external plugins
//   "a,b,..."       -> each name in order; a name is tried verbatim (a path or
//                      a library name), then, if it has no '/' and is not
//                      already lib*.so, as libnccl-net-<name>.so
//   "STATIC_PLUGIN" -> symbols of the main program (dlopen(NULL))
// At most 14 external plugins are kept (NCCL's 16 minus the 2 internal ones).
// Each library is probed for ncclNetPlugin_v11, _v10 ... _v6, newest first.
//
// A v11 plugin's own table is returned as is. For v6..v10 `net` is an adapter
// whose functions forward to the plugin's table at call time (plugins may
// rewrite their table in init). Adapter specifics:
//  - init calls the plugin's process-global init once per process and returns
//    a small per-call context (needed to hand v10 its per-connection config);
//    finalize frees that context and never finalizes the plugin.
//  - properties missing in the old version get defaults: no global
//    registration, no forced flush, host device type, one physical device,
//    maxP2pBytes = MAX_NET_SIZE (v6..v8) and maxMultiRequestSize = 1.
//  - v6..v8 take int sizes: a size above INT_MAX is refused with
//    ncclInvalidUsage and a WARN, the plugin is not called.
//  - profiler handles are dropped below v10; setNetAttr is a no-op.
#pragma once

#include <nccl_net.h>

#include <string>
#include <vector>

namespace ferry::netplugin {

struct ExternalNet {
  std::string library;       // the name that dlopen accepted (or "STATIC_PLUGIN")
  int version;               // the ncclNetPlugin_v<N> symbol found
  const ncclNet_v11_t* net;  // v11 view; valid until resetForTest()
};

// Loaded once per process on first call (thread-safe) and cached. Never fails:
// libraries that cannot be loaded or export no known symbol are logged and
// skipped.
const std::vector<ExternalNet>& externalNets();

// Test hook: forget the cache and dlclose the libraries so a test can change
// NCCL_NET_PLUGIN (call config::reload() too). No plugin object may be in use.
void resetForTest();

// A logger with NCCL's ncclDebugLogger_t signature that prints through
// Ferry's log (same levels and subsystem bits), for plugins' init.
ncclDebugLogger_t pluginLogger();

}  // namespace ferry::netplugin
