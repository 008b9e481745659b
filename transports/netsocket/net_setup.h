// Connection setup of the Socket network: listen, non-blocking connect and
// accept (hello exchange with the listener's nonce).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "transports/netsocket/net_comm.h"

namespace ferry::netsocket {

// The address of device `dev` (socket_net.cc owns the device list).
Result<SockAddr> deviceAddr(int dev);

struct ListenComm {
  struct Pending {
    Socket sock;
    Hello hello{};
    size_t got = 0;
  };
  struct Group {
    std::vector<Socket> socks;  // by hello index
    int have = 0;
  };
  Socket listener;
  uint64_t nonce = 0;
  Config cfg;
  std::vector<Pending> pending;
  std::map<uint64_t, Group> groups;  // by connId
};

struct Connecting;

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
Status connectStep(void* handle, Comm** out, ConnectingSet* live = nullptr);
Status acceptStep(ListenComm* l, Comm** out);

}  // namespace ferry::netsocket
