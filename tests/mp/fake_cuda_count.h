// How often the stand-in CUDA driver (tests/support/fake_cuda) saw an entry
// point in this process: 0 when it is not loaded. For the tests built with
// FERRY_FAKECUDA (the driver's path).
#pragma once

#include <dlfcn.h>

namespace ferry::mp {

inline long fakeCudaCount(const char* name) {
  void* lib = dlopen(FERRY_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return 0;
  auto f = reinterpret_cast<long (*)(const char*)>(dlsym(lib, "fakeCudaCount"));
  long n = f ? f(name) : 0;
  dlclose(lib);
  return n;
}

}  // namespace ferry::mp
