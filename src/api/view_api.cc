// ferryCommViewJson: the communicator's CommView as JSON (include/ferry/view.h),
// written by the same viewJson that `ferry-topo --comm` and tests use.
#include <ferry/view.h>

#include <cstring>
#include <string>

#include "algorithms/comm_view.h"
#include "api/edge.h"
#include "comm/calibration.h"

namespace ferry::api {
namespace {

Status viewJsonInto(ncclComm_t comm, char* buf, size_t* len) {
  FERRY_ASSIGN(Comm * c, liveComm(comm));
  FERRY_TRY(checkPtr(len, "len"));
  FERRY_TRY(c->usable());
  std::string json = viewJson(c->view(), hostCalibration().source);
  size_t need = json.size() + 1;
  size_t have = *len;
  *len = need;
  FERRY_TRY(checkPtr(buf, "buf"));
  if (have < need)
    return invalidArgument("buf holds " + std::to_string(have) + " bytes, the view needs " +
                           std::to_string(need) + " (written to *len)");
  std::memcpy(buf, json.c_str(), need);
  return Status::ok();
}

}  // namespace
}  // namespace ferry::api

extern "C" FERRY_API ncclResult_t ferryCommViewJson(ncclComm_t comm, char* buf, size_t* len) {
  return ferry::api::guard("ferryCommViewJson", [&] { return ferry::api::viewJsonInto(comm, buf, len); });
}
