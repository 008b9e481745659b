#include "api/config_parse.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/config.h"

namespace ferry::api {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

bool undef(int v) { return v == NCCL_CONFIG_UNDEF_INT; }

Status checkFlag(int v, const char* field) {
  if (undef(v) || v == 0 || v == 1) return Status::ok();
  return invalidArgument(std::string("config.") + field + " must be 0 or 1, got " + std::to_string(v));
}

// Fields that did not exist in the caller's NCCL version go back to UNDEF.
void resetForVersion(ncclConfig_t* c) {
  unsigned v = c->version;
  if (v < NCCL_VERSION(2, 14, 0)) c->blocking = NCCL_CONFIG_UNDEF_INT;
  if (v < NCCL_VERSION(2, 17, 0)) {
    c->cgaClusterSize = c->minCTAs = c->maxCTAs = NCCL_CONFIG_UNDEF_INT;
    c->netName = nullptr;
  }
  if (v < NCCL_VERSION(2, 25, 0)) c->trafficClass = NCCL_CONFIG_UNDEF_INT;
  if (v < NCCL_VERSION(2, 27, 0)) {
    c->collnetEnable = c->CTAPolicy = c->shrinkShare = c->nvlsCTAs = NCCL_CONFIG_UNDEF_INT;
  }
  if (v < NCCL_VERSION(2, 28, 0)) c->nChannelsPerNetPeer = c->nvlinkCentricSched = NCCL_CONFIG_UNDEF_INT;
}

Status validate(const ncclConfig_t& c) {
  FERRY_TRY(checkFlag(c.blocking, "blocking"));
  FERRY_TRY(checkFlag(c.splitShare, "splitShare"));
  FERRY_TRY(checkFlag(c.collnetEnable, "collnetEnable"));
  FERRY_TRY(checkFlag(c.shrinkShare, "shrinkShare"));
  FERRY_TRY(checkFlag(c.nvlinkCentricSched, "nvlinkCentricSched"));
  if (!undef(c.cgaClusterSize) && c.cgaClusterSize < 0)
    return invalidArgument("config.cgaClusterSize must be >= 0");
  if ((!undef(c.minCTAs) && c.minCTAs <= 0) || (!undef(c.maxCTAs) && c.maxCTAs <= 0))
    return invalidArgument("config.minCTAs and maxCTAs must be > 0");
  if (!undef(c.minCTAs) && !undef(c.maxCTAs) && c.minCTAs > c.maxCTAs)
    return invalidArgument("config.minCTAs must not exceed maxCTAs");
  if (!undef(c.CTAPolicy) && (c.CTAPolicy < 0 || c.CTAPolicy > 2))
    return invalidArgument("config.CTAPolicy must be 0, 1 or 2");
  if (!undef(c.nvlsCTAs) && c.nvlsCTAs <= 0) return invalidArgument("config.nvlsCTAs must be > 0");
  if (!undef(c.nChannelsPerNetPeer) && (c.nChannelsPerNetPeer < 1 || c.nChannelsPerNetPeer > 64))
    return invalidArgument("config.nChannelsPerNetPeer must be in 1..64");
  return Status::ok();
}

}  // namespace

Result<CommConfig> parseConfig(const ncclConfig_t* user) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  if (user) {
    size_t size = 0;
    std::memcpy(&size, user, sizeof(size));
    std::memcpy(&c, user, std::min(size, sizeof(c)));
    if (c.magic != kConfigMagic)
      return invalidArgument("config was not initialized with NCCL_CONFIG_INITIALIZER (bad magic)");
    if (size < offsetof(ncclConfig_t, blocking))
      return invalidArgument("config.size " + std::to_string(size) + " is too small");
    resetForVersion(&c);
    FERRY_TRY(validate(c));
  }
  CommConfig out;
  if (!undef(c.blocking)) {
    out.blocking = c.blocking == 1;
  } else if (config::isSet(config::Param::kCommBlocking)) {
    out.blocking = config::getInt(config::Param::kCommBlocking) != 0;
  }
  if (c.netName) out.netName = c.netName;
  if (out.netName.empty()) out.netName = config::getString(config::Param::kNet);
  if (c.commName) out.commName = c.commName;
  out.splitShare = undef(c.splitShare) ? 0 : c.splitShare;
  return out;
}

}  // namespace ferry::api
