// Packing the bootstrap handle into ncclUniqueId (internal to bootstrap).
#pragma once

#include <cstdint>

#include <nccl.h>

#include "net/sock_addr.h"

namespace ferry::bootstrap {

// Magic used when the root address comes from NCCL_COMM_ID (NCCL's value).
constexpr uint64_t kCommIdMagic = 0x0280028002800280ULL;
constexpr size_t kIdAddrOffset = 8;

struct IdContents {
  uint64_t secret = 0;
  SockAddr root;
};

void encodeId(const IdContents& in, ncclUniqueId* out);
IdContents decodeId(const ncclUniqueId& id);

// A random 64-bit secret (never 0 and never kCommIdMagic).
uint64_t randomSecret();

}  // namespace ferry::bootstrap
