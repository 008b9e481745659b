// Where ranks sit on the rings, from which host each rank is on.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry {

// Ring position -> rank with each host's ranks contiguous (hosts in order of
// their lowest rank, ranks ascending within a host): a ring crosses every
// host boundary once whatever the rank placement.
std::vector<int> hostContiguousOrder(const std::vector<uint64_t>& hostOf);

// The second ring of a multi-host communicator: hosts in the same order,
// each host's ranks reversed, so it leaves every host from another local
// rank than `first` does (another rail). Empty when it is not worth it or
// not allowed: one host, one rank per host, or a neighbour in either
// direction shared with `first` (two rings must not share a connection
// direction, they run on separate lanes).
std::vector<int> secondRingOrder(const std::vector<int>& first, const std::vector<uint64_t>& hostOf);

}  // namespace ferry
