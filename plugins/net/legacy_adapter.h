// v11 views of v6..v10 net plugin tables (internal to plugins/net and its
// tests). Each view lives in one of kMaxExternal slots; its functions are
// template trampolines bound to the slot, so forwarding needs no allocation
// and the plugin's table is read at call time.
#pragma once

#include <nccl_net.h>

namespace ferry::netplugin {

constexpr int kMaxExternal = 14;

// Bind `table` (the plugin's exported ncclNet_v<version>_t) to `slot` and
// return its v11 view, or nullptr if the version is not 6..10 or the slot is
// out of range. The slot must be free (never bound, or released).
const ncclNet_v11_t* adaptLegacy(int slot, int version, void* table);

// Forget the slot's table and init state (before the library is dlclosed).
void releaseLegacy(int slot);

}  // namespace ferry::netplugin
