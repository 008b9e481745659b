// Connection setup of the Socket network: listen, non-blocking connect and
// accept (hello exchange with the listener's nonce).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "transports/netsocket/net_hub.h"

namespace ferry::netsocket {

// The address of device `dev` (socket_net.cc owns the device list).
Result<SockAddr> deviceAddr(int dev);
// Every device's address, by device index.
std::vector<SockAddr> deviceAddrs();
// The name of the device with address `a` (port ignored), "" if none.
std::string deviceNameOf(const SockAddr& a);

struct ListenComm {
  std::shared_ptr<Hub> hub;
  ~ListenComm();  // new connections are refused; resumes still arrive (retry on)
};

// A non-blocking connect of every socket of one connection, each sending its
// hello: connect()'s progress (Handle::pending points at it) and a sender's
// reconnect (net_retry.cc).
struct Connecting {
  struct Conn {
    Socket sock;
    int stage = 0;  // 0 start, 1 connecting, 2 writing hello, 3 done
    size_t sent = 0;
    Hello hello{};
  };
  SockAddr to;
  // The sending device's address (port 0): bound before connect() so the
  // packets leave from that NIC's address; on a rail-optimised fabric the
  // source address decides the rail (docs/cluster.md, "The spine"). Invalid:
  // no bind, the kernel picks.
  SockAddr from;
  std::vector<SockAddr> alts;  // the listener's other addresses (Handle::altIp)
  Config cfg;
  int64_t deadlineMs = 0;
  int lastErr = 0;  // the last retryable connect error (the socket is retried)
  std::vector<Conn> conns;
};

std::unique_ptr<Connecting> newConnecting(const SockAddr& to, const SockAddr& from, const Config& cfg,
                                          uint64_t nonce, uint64_t connId, uint32_t epoch,
                                          int64_t deadlineMs);
// One pass over every socket; *done when all hellos are written.
Status stepConnecting(Connecting& c, bool* done);

// The connect()s in progress of one network context. NCCL's net API has no
// call that cancels a connect (its progress lives behind the caller's
// handle): a caller that gives up (its own deadline, a dead peer) just stops
// calling. The context keeps them, so finalize frees those (and closes their
// sockets) instead of leaking them.
class ConnectingSet {
 public:
  ConnectingSet() = default;
  ~ConnectingSet();  // frees every connect still in progress
  ConnectingSet(const ConnectingSet&) = delete;
  ConnectingSet& operator=(const ConnectingSet&) = delete;

  void add(Connecting* c);
  bool contains(Connecting* c);
  void remove(Connecting* c);

 private:
  std::mutex mu_;
  std::set<Connecting*> live_;
};

Result<std::unique_ptr<ListenComm>> listenOn(int dev, void* handle);
// Ok with *out == nullptr: not connected yet, call again with the same handle.
// live (the network context's, may be null) owns the progress meanwhile.
Status connectStep(int dev, void* handle, Comm** out, ConnectingSet* live = nullptr);
Status acceptStep(ListenComm* l, Comm** out);

}  // namespace ferry::netsocket
