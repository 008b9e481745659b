#include "plugins/plugin_lib.h"

#include <dlfcn.h>

#include "core/log.h"

namespace ferry::plugins {
namespace {

bool isLibSo(const std::string& n) {
  return n.size() >= 6 && n.compare(0, 3, "lib") == 0 && n.compare(n.size() - 3, 3, ".so") == 0;
}

}  // namespace

void* tryOpenLib(const std::string& lib, const char* tag, uint64_t subsys) {
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = dlerror();
    FERRY_INFO(subsys, "%s/Plugin: Could not find: %s (%s)", tag, lib.c_str(),
               err ? err : "unknown error");
  }
  return h;
}

void* openPluginLib(const std::string& name, const char* prefix, const char* tag, uint64_t subsys,
                    std::string* lib) {
  if (name == kStaticPlugin) {
    *lib = kStaticPlugin;
    void* h = dlopen(nullptr, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr)
      FERRY_INFO(subsys, "%s/Plugin: Could not open the main program: %s", tag, dlerror());
    return h;
  }
  *lib = name;
  if (void* h = tryOpenLib(name, tag, subsys)) return h;
  if (name.find('/') != std::string::npos || isLibSo(name)) return nullptr;
  *lib = std::string(prefix) + "-" + name + ".so";
  return tryOpenLib(*lib, tag, subsys);
}

}  // namespace ferry::plugins
