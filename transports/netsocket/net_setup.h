// Connection setup of the Socket network: listen, non-blocking connect and
// accept (hello exchange with the listener's nonce).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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

Result<std::unique_ptr<ListenComm>> listenOn(int dev, void* handle);
// Ok with *out == nullptr: not connected yet, call again with the same handle.
Status connectStep(void* handle, Comm** out);
Status acceptStep(ListenComm* l, Comm** out);

}  // namespace ferry::netsocket
