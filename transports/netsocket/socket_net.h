// The built-in "Socket" network: NCCL's net plugin ABI (ncclNet_v11_t) over
// TCP, with a control socket plus data sockets moved by helper threads per
// connection (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD).
//
// Contract details a caller relies on (the same as NCCL's own socket net):
//  - connect() keeps its progress in the 128-byte handle it is given, so the
//    caller must retry with the same handle buffer until *sendComm != NULL;
//  - sends and receives of one connection match in posting order, at most
//    NCCL_NET_MAX_REQUESTS outstanding per comm (*request = NULL beyond);
//  - calls on one comm come from one thread at a time (test() may move data);
//  - with FERRY_NET_RETRY_MS > 0 (net_retry.h) receives complete in posting
//    order, and a send of FERRY_NET_SOCKET_INLINE_BYTES or 128 KiB or more
//    completes only once the receiver holds it (smaller ones once written and
//    copied aside, as without retry).
#pragma once

#include <nccl_net.h>

namespace ferry {

const ncclNet_v11_t* socketNet();

namespace netsocket {
// Re-read the interface list (NCCL_SOCKET_IFNAME/FAMILY); for tests that
// change those variables within one process.
void reloadDevices();
}  // namespace netsocket

}  // namespace ferry
