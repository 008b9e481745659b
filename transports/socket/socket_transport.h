// The "socket" transport: one TCP connection per peer pair, for peers on
// other nodes (or any peer, when shared memory is disabled).
//
// setup() listens on the selected interface and publishes the address in
// PeerInfo::sockAddr. For each pair the lower rank connects to the higher
// one and says hello {secret, commHash, rank} (without waiting for an
// answer, so a dial never depends on the peer's progress); the higher rank accepts,
// refuses hellos of other communicators or intruders, and parks connections
// from other peers that arrive early until their own connect() call.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "net/socket.h"
#include "transports/transport.h"

namespace ferry::socket {

class SocketTransport : public Transport {
 public:
  const char* name() const override { return "socket"; }
  Status setup(const CommContext& ctx, PeerInfo* self) override;
  bool canConnect(const CommContext& ctx, const PeerInfo& self,
                  const PeerInfo& peer) const override {
    return true;
  }
  Result<std::unique_ptr<Connection>> connect(const CommContext& ctx, int peer) override;

  const SockAddr& listenAddr() const { return listener_.peer(); }

 private:
  Result<Socket> dial(const CommContext& ctx, const SockAddr& addr, const Until& u);
  Result<Socket> acceptFrom(const CommContext& ctx, int peer, const Until& u);
  // Read and check one hello; the peer's rank, or -1 if the connection was refused.
  Result<int> readHello(const CommContext& ctx, const Socket& s, const Until& u);

  Socket listener_;
  std::string ifName_;
  std::mutex mu_;                  // guards the accept path and pending_
  std::map<int, Socket> pending_;  // accepted early, by peer rank
};

std::unique_ptr<Transport> createSocketTransport();

}  // namespace ferry::socket
