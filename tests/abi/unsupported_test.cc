// The entry points Ferry does not implement yet fail cleanly: documented
// return value, outputs cleared, one WARN naming the function. Also checks
// that FERRY_EXPORT made ncclX and pncclX the same function.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdint>
#include <string>

#include "core/log.h"
#include "ferry/nccl_device_host.h"

namespace {

std::string expectedWarning(const char* fn) {
  return std::string(fn) + " is not supported by Ferry yet";
}

// A non-null handle that must never be dereferenced.
ncclComm_t fakeComm() { return reinterpret_cast<ncclComm_t>(uintptr_t{0x1000}); }

TEST(AbiUnsupported, DeviceApiReturningResults) {
  EXPECT_EQ(ncclDevCommCreate(fakeComm(), nullptr, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclDevCommCreate"));
  EXPECT_EQ(ncclDevCommDestroy(fakeComm(), nullptr), ncclInvalidUsage);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclDevCommDestroy"));
  ncclTeam_t team{4, 1, 1};
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(team, 2, nullptr, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclLsaBarrierCreateRequirement"));
  EXPECT_EQ(ncclGinBarrierCreateRequirement(fakeComm(), team, 2, nullptr, nullptr),
            ncclInvalidUsage);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclGinBarrierCreateRequirement"));
  EXPECT_EQ(ncclLLA2ACreateRequirement(1, 8, nullptr, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclLLA2ACreateRequirement"));
}

TEST(AbiUnsupported, DeviceApiNeutralValues) {
  EXPECT_EQ(ncclLLA2ACalcSlots(1024, 8), 0);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclLLA2ACalcSlots"));
  ncclTeam_t team{4, 1, 1};
  EXPECT_EQ(ncclTeamRankToWorld(fakeComm(), team, 2), -1);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclTeamRankToWorld"));
  EXPECT_EQ(ncclTeamRankToLsa(fakeComm(), team, 2), -1);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclTeamRankToLsa"));
  const struct {
    ncclTeam_t (*fn)(ncclComm_t);
    const char* name;
  } teams[] = {{ncclTeamWorld, "ncclTeamWorld"}, {ncclTeamLsa, "ncclTeamLsa"},
               {ncclTeamRail, "ncclTeamRail"}};
  for (const auto& t : teams) {
    ncclTeam_t got = t.fn(fakeComm());
    EXPECT_EQ(got.nRanks, 0) << t.name;
    EXPECT_EQ(got.rank, 0) << t.name;
    EXPECT_EQ(got.stride, 0) << t.name;
    EXPECT_EQ(ferry::log::lastError(), expectedWarning(t.name));
  }
}

TEST(AbiUnsupported, ProfilingTwinsAreTheSameFunction) {
  EXPECT_EQ(reinterpret_cast<void*>(&ncclDevCommCreate), reinterpret_cast<void*>(&pncclDevCommCreate));
  EXPECT_EQ(reinterpret_cast<void*>(&ncclTeamWorld), reinterpret_cast<void*>(&pncclTeamWorld));
  // Calling the p-name behaves identically.
  EXPECT_EQ(pncclDevCommDestroy(fakeComm(), nullptr), ncclInvalidUsage);
  EXPECT_EQ(ferry::log::lastError(), expectedWarning("ncclDevCommDestroy"));
}

}  // namespace
