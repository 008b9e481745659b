// Finding an external plugin library by NCCL's name rules, shared by every
// plugin kind (net, tuner): STATIC_PLUGIN means the main program; a name is
// tried verbatim, then, unless it is a path or already libX.so, as
// lib<prefix>-<name>.so. Failures are INFO lines ("<TAG>/Plugin: Could not
// find: ..."), never errors: a missing plugin only means the built-in path.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::plugins {

constexpr const char* kStaticPlugin = "STATIC_PLUGIN";

// dlopen(RTLD_NOW | RTLD_LOCAL) of `name` by the rules above; *lib gets the
// name dlopen was given last. `prefix` e.g. "libnccl-net", `tag` e.g. "NET".
void* openPluginLib(const std::string& name, const char* prefix, const char* tag, uint64_t subsys,
                    std::string* lib);
// dlopen of exactly `lib`, logging a failure.
void* tryOpenLib(const std::string& lib, const char* tag, uint64_t subsys);

}  // namespace ferry::plugins
