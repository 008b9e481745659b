// The built-in transports, in priority order: the first one that can reach
// a peer carries that pair's traffic (loopback, then shared memory within a
// node, then the network: an NCCL net plugin, built-in or external, see
// transports/net). NCCL_SHM_DISABLE is honoured inside ShmTransport.
#include "transports/net/net_transport.h"
#include "transports/self/self.h"
#include "transports/shm/shm.h"
#include "transports/transport.h"

namespace ferry {

std::vector<std::unique_ptr<Transport>> createTransports() {
  std::vector<std::unique_ptr<Transport>> list;
  list.push_back(std::make_unique<SelfTransport>());
  list.push_back(std::make_unique<shm::ShmTransport>());
  list.push_back(net::createNetTransport());
  return list;
}

}  // namespace ferry
