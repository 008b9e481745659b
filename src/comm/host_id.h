// Node identity: ranks with equal host hashes share a machine (and memory).
#pragma once

#include <cstdint>
#include <string>

namespace ferry {

// NCCL_HOSTID if set, else hostname + kernel boot id. Tests set NCCL_HOSTID
// per rank to make several "nodes" on one machine.
std::string hostIdString();
uint64_t hostHash();
// The running kernel (boot id): ranks with equal values share the CPUs even
// when NCCL_HOSTID or network namespaces make them different "hosts".
uint64_t machineHash();
uint64_t hash64(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ULL);
uint64_t randomNonce();

}  // namespace ferry
