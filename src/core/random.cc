#include "core/random.h"

#include <sys/random.h>

#include <random>

namespace ferry {

uint64_t random64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
    std::random_device rd;
    v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  return v;
}

}  // namespace ferry
