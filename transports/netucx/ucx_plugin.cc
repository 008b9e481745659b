// Entry symbol of the standalone plugin libnccl-net-ferryucx.so (not part of
// libferry, whose export map would otherwise publish it as nccl*).
#include "transports/netucx/ucx_net.h"

extern "C" __attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 =
    *ferry::ucxNet();
