// The built-in transports, in priority order: the first one that can reach
// a peer carries that pair's traffic (loopback, then shared memory within a
// node, then sockets). NCCL_SHM_DISABLE is honoured inside ShmTransport.
#include "transports/self/self.h"
#include "transports/shm/shm.h"
#include "transports/socket/socket_transport.h"
#include "transports/transport.h"

namespace ferry {

std::vector<std::unique_ptr<Transport>> createTransports() {
  std::vector<std::unique_ptr<Transport>> list;
  list.push_back(std::make_unique<SelfTransport>());
  list.push_back(std::make_unique<shm::ShmTransport>());
  list.push_back(std::make_unique<socket::SocketTransport>());
  return list;
}

}  // namespace ferry
