// The UCX network: an ncclNet_v11_t ("UCX") over the UCP tag API.
//
// Built only when UCX is found (FERRY_HAVE_UCX). The same sources also make
// the standalone plugin libnccl-net-ferryucx.so (symbol ncclNetPlugin_v11),
// which loads into any process, NVIDIA's NCCL included.
//
// Devices are the interfaces Ferry's socket code selects (NCCL_SOCKET_IFNAME /
// NCCL_SOCKET_FAMILY rules, same default order). A device decides where the
// connection handshake listens; the data path is whatever UCX picks for the
// two workers (UCX_TLS, UCX_NET_DEVICES are honoured by UCX itself), so two
// processes on one host talk over shared memory unless told otherwise.
#pragma once

#ifdef FERRY_HAVE_UCX
#include <nccl_net.h>

namespace ferry {

const ncclNet_v11_t* ucxNet();

}  // namespace ferry
#endif
