// Random 64-bit values for secrets, nonces and keys: the kernel's entropy
// (getrandom), or std::random_device where that call fails.
#pragma once

#include <cstdint>

namespace ferry {

uint64_t random64();

}  // namespace ferry
