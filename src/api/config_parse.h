// ncclConfig_t -> CommConfig, with NCCL's size/magic/version handshake:
// never read past the caller's `size`, reject a config that did not come
// from NCCL_CONFIG_INITIALIZER, reset fields the caller's header did not
// have, validate ranges, then apply defaults and environment overrides.
#pragma once

#include <nccl.h>

#include "comm/comm.h"
#include "core/status.h"

namespace ferry::api {

Result<CommConfig> parseConfig(const ncclConfig_t* user);

}  // namespace ferry::api
