// UCP entry points, resolved with dlopen on first use.
//
// libferry is a drop-in libnccl.so.2: linking UCX would load libucs into
// every application, and libucs installs SIGSEGV/SIGBUS handlers (and memory
// hooks) as it loads. Loading it only when the UCX network is initialized
// keeps applications that never use it untouched, and lets a Ferry built
// with UCX run where UCX is not installed (the network is then skipped).
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace ferry::ucx {

#define FERRY_UCP_FUNCTIONS(X) \
  X(ucp_config_read)           \
  X(ucp_config_release)        \
  X(ucp_init_version)          \
  X(ucp_cleanup)               \
  X(ucp_worker_create)         \
  X(ucp_worker_destroy)        \
  X(ucp_worker_get_address)    \
  X(ucp_worker_release_address) \
  X(ucp_worker_progress)       \
  X(ucp_ep_create)             \
  X(ucp_ep_close_nbx)          \
  X(ucp_tag_send_nbx)          \
  X(ucp_tag_send_sync_nbx)     \
  X(ucp_tag_recv_nbx)          \
  X(ucp_request_check_status)  \
  X(ucp_request_cancel)        \
  X(ucp_request_free)          \
  X(ucs_status_string)

struct UcpApi {
#define FERRY_UCP_MEMBER(fn) decltype(&::fn) fn = nullptr;
  FERRY_UCP_FUNCTIONS(FERRY_UCP_MEMBER)
#undef FERRY_UCP_MEMBER
};

// Load libucp once (thread-safe); false with the reason in *err on failure.
bool loadUcp(std::string* err);
// The table; valid once loadUcp() succeeded (every context is made after).
const UcpApi& ucp();

}  // namespace ferry::ucx
