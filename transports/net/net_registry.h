// Which NCCL network a communicator uses.
//
// Candidates, in order: external plugins named by NCCL_NET_PLUGIN (loaded
// by plugins/net, any ABI version adapted to v11), then Ferry's built-in
// networks from the explicit list in net_registry.cc (Socket, then UCX when
// it was built). NCCL_NET restricts the choice to the network with that
// name (case-insensitive). The first candidate whose init succeeds and that
// reports at least one device is used, as in NCCL.
#pragma once

#include <nccl_net.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace ferry::net {

struct NetCandidate {
  const ncclNet_v11_t* net = nullptr;
  std::string origin;  // "built-in" or the plugin library
  // Its test() notes the sockets a request waits on (core/readiness.h): the
  // built-in Socket network only.
  bool notesReadiness = false;
};

std::vector<NetCandidate> netCandidates();

// NCCL_NET names a network no candidate offers: an invalid-usage error
// listing the names that exist (checked at communicator creation).
Status checkNetName();

// A network chosen and initialised for one communicator.
struct ActiveNet {
  const ncclNet_v11_t* net = nullptr;
  void* ctx = nullptr;
  int ndev = 0;
  std::string origin;
  bool notesReadiness = false;  // as NetCandidate's
};

Result<ActiveNet> openNet(uint64_t commId);

}  // namespace ferry::net
