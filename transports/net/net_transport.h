// The "net" transport: Connections over an NCCL network (net_registry.h)
// for peers on other nodes, or any peer when shared memory is disabled.
//
// The network is chosen and initialised at the first connect (only
// communicators that span nodes pay for it). For each peer pair both ranks
// listen on their device, trade the 128-byte listen handles through the
// communicator's PeerExchange, then drive connect/accept until both
// directions are up (the ABI's calls never block; NULL means "again").
// A rank uses device localRank % ndev, so ranks with the same local rank on
// different hosts talk over the same rail.
#pragma once

#include <memory>
#include <mutex>

#include "transports/net/net_registry.h"
#include "transports/transport.h"

namespace ferry::net {

class NetTransport : public Transport {
 public:
  ~NetTransport() override;
  const char* name() const override { return "net"; }
  Status setup(const CommContext& ctx, PeerInfo* self) override;
  bool canConnect(const CommContext& ctx, const PeerInfo& self,
                  const PeerInfo& peer) const override {
    return true;
  }
  Result<std::unique_ptr<Connection>> connect(const CommContext& ctx, int peer) override;

 private:
  Status ensureOpen(const CommContext& ctx);
  Result<void*> listen(const CommContext& ctx, char* handle);

  std::mutex mu_;
  bool opened_ = false;
  ActiveNet net_;
  int dev_ = 0;
};

std::unique_ptr<Transport> createNetTransport();

}  // namespace ferry::net
