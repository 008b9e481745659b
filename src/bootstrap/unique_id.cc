// ncclUniqueId layout and createUniqueId (see bootstrap.h / unique_id.h).
#include "bootstrap/unique_id.h"


#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "core/config.h"
#include "core/log.h"
#include "core/random.h"

namespace ferry {
namespace bootstrap {

static_assert(kIdAddrOffset + SockAddr::kPackedBytes <= NCCL_UNIQUE_ID_BYTES);

void encodeId(const IdContents& in, ncclUniqueId* out) {
  std::memset(out->internal, 0, sizeof(out->internal));
  std::memcpy(out->internal, &in.secret, sizeof(in.secret));
  in.root.pack(out->internal + kIdAddrOffset);
}

IdContents decodeId(const ncclUniqueId& id) {
  IdContents c;
  std::memcpy(&c.secret, id.internal, sizeof(c.secret));
  c.root = SockAddr::unpack(id.internal + kIdAddrOffset, SockAddr::kPackedBytes);
  return c;
}

uint64_t randomSecret() {
  uint64_t v = 0;
  while (v == 0 || v == kCommIdMagic) v = random64();
  return v;
}

}  // namespace bootstrap

Status createUniqueId(ncclUniqueId* out) {
  using namespace bootstrap;
  if (!out) return invalidArgument("createUniqueId: null output");
  std::string commId = config::getString(config::Param::kCommId);
  if (!commId.empty()) {
    // Rank 0 starts the root at this address in Bootstrap::create.
    FERRY_ASSIGN(SockAddr root, SockAddr::parse(commId));
    encodeId({kCommIdMagic, root}, out);
    FERRY_INFO(log::kBootstrap, "Bootstrap: root at NCCL_COMM_ID %s", root.toString().c_str());
    return Status::ok();
  }
  return createFreshUniqueId(out);
}

Status createFreshUniqueId(ncclUniqueId* out) {
  using namespace bootstrap;
  FERRY_ASSIGN(std::vector<NetIf> ifs, findInterfaces(1));
  FERRY_ASSIGN(Socket listener, listenSocket(ifs[0].addr));
  IdContents c{randomSecret(), listener.peer()};
  FERRY_INFO(log::kBootstrap, "Bootstrap: Using %s:%s", ifs[0].name.c_str(),
             ifs[0].addr.toString().c_str());
  FERRY_TRY(startRoot(std::move(listener), c.secret,
                      config::getInt(config::Param::kInitTimeoutMs)));
  encodeId(c, out);
  return Status::ok();
}

}  // namespace ferry
