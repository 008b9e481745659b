// The net transport's pair hello (see net_transport.h): the 24 bytes a rank
// sends first on a new send comm so the accepting peer learns who it is.
// checkHello is pure (no network): the fuzz target calls it directly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace ferry::net {

constexpr uint32_t kHelloMagic = 0x46524e48;  // "FRNH"

struct Hello {
  uint64_t commHash = 0;
  int32_t rank = -1;
  uint32_t magic = 0;
  uint64_t secret = 0;  // CommContext::secret
};
static_assert(sizeof(Hello) == 24, "the hello is part of the wire format");

// What the accepting rank expects of a hello.
struct HelloExpect {
  uint64_t commHash = 0;
  uint64_t secret = 0;
  int rank = -1;    // the accepting rank (a rank does not connect to itself)
  int nranks = 0;
};

// Decodes `size` bytes received as a hello into *out (zeroed first; filled
// whenever size is right) and checks them: an error names what is wrong.
Status checkHello(const void* data, size_t size, const HelloExpect& expect, Hello* out);

}  // namespace ferry::net
