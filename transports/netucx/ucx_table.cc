// The ncclNet_v11_t table of the UCX network.
#include "transports/netucx/ucx_internal.h"
#include "transports/netucx/ucx_net.h"

namespace ferry {

namespace {

const ncclNet_v11_t kUcxNet = {
    "UCX",
    ucx::init,
    ucx::numDevices,
    ucx::getProperties,
    ucx::listen,
    ucx::connect,
    ucx::accept,
    ucx::regMr,
    nullptr,  // regMrDmaBuf: host memory only
    ucx::deregMr,
    ucx::isend,
    ucx::irecv,
    ucx::iflush,
    ucx::test,
    ucx::closeSend,
    ucx::closeRecv,
    ucx::closeListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed: no device offload
    nullptr,  // makeVDevice: no NIC fusion
    ucx::finalize,
    ucx::setNetAttr,
};

}  // namespace

const ncclNet_v11_t* ucxNet() { return &kUcxNet; }

}  // namespace ferry
