// The loopback transport: a rank talking to itself.
#pragma once

#include "transports/transport.h"

namespace ferry {

class SelfTransport : public Transport {
 public:
  const char* name() const override { return "self"; }
  Status setup(const CommContext&, PeerInfo*) override { return Status::ok(); }
  bool canConnect(const CommContext& ctx, const PeerInfo& self, const PeerInfo& peer) const override;
  Result<std::unique_ptr<Connection>> connect(const CommContext& ctx, int peer) override;
};

}  // namespace ferry
