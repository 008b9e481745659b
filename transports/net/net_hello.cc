// Checking a received pair hello (see net_hello.h).
#include "transports/net/net_hello.h"

#include <cstring>
#include <string>

namespace ferry::net {

Status checkHello(const void* data, size_t size, const HelloExpect& e, Hello* out) {
  *out = Hello{};
  if (data == nullptr || size != sizeof(Hello)) {
    return invalidUsage("hello of " + std::to_string(size) + " bytes, expected " +
                        std::to_string(sizeof(Hello)));
  }
  std::memcpy(out, data, sizeof(Hello));
  const Hello& h = *out;
  if (h.magic != kHelloMagic) return invalidUsage("wrong magic");
  if (h.commHash != e.commHash) return invalidUsage("another communicator's hash");
  if (h.secret != e.secret) return invalidUsage("wrong secret");
  if (h.rank < 0 || h.rank >= e.nranks) {
    return invalidUsage("rank " + std::to_string(h.rank) + " out of range (" +
                        std::to_string(e.nranks) + " ranks)");
  }
  if (h.rank == e.rank) return invalidUsage("names this rank itself");
  return Status::ok();
}

}  // namespace ferry::net
