// dlopen of libucp (see ucx_api.h).
#include "transports/netucx/ucx_api.h"

#include <dlfcn.h>

#include <mutex>

namespace ferry::ucx {

namespace {

UcpApi gApi;
bool gLoaded = false;
std::string gError;

void load() {
  // The SONAME: the development symlink libucp.so may not be installed.
  void* h = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    gError = std::string("dlopen libucp.so.0 failed: ") + (e ? e : "unknown error");
    return;
  }
  // dlsym on the handle also searches libucp's dependencies (libucs).
#define FERRY_UCP_RESOLVE(fn)                                                  \
  gApi.fn = reinterpret_cast<decltype(gApi.fn)>(dlsym(h, #fn));                \
  if (!gApi.fn) {                                                              \
    gError = "libucp.so.0 lacks " #fn;                                         \
    return;                                                                    \
  }
  FERRY_UCP_FUNCTIONS(FERRY_UCP_RESOLVE)
#undef FERRY_UCP_RESOLVE
  // Never dlclose: UCX keeps threads and hooks alive until the process ends.
  gLoaded = true;
}

}  // namespace

bool loadUcp(std::string* err) {
  static std::once_flag once;
  std::call_once(once, load);
  if (!gLoaded && err) *err = gError;
  return gLoaded;
}

const UcpApi& ucp() { return gApi; }

}  // namespace ferry::ucx
