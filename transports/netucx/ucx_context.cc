// Per-communicator UCP context and worker; the side-channel socket helpers.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "transports/netucx/ucx_internal.h"

namespace ferry::ucx {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

ncclResult_t createWorker(Context* c) {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // Ferry drives one comm's connections from one thread at a time, and
  // Context::mu makes that a guarantee; SERIALIZED skips UCX's own locks.
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucs_status_t st = ucp().ucp_worker_create(c->context, &wp, &c->worker);
  if (st != UCS_OK) {
    UCX_WARN("ucp_worker_create failed: %s", ucp().ucs_status_string(st));
    return ncclSystemError;
  }
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp().ucp_worker_get_address(c->worker, &addr, &len);
  if (st != UCS_OK) {
    UCX_WARN("ucp_worker_get_address failed: %s", ucp().ucs_status_string(st));
    return ncclSystemError;
  }
  const uint8_t* p = reinterpret_cast<const uint8_t*>(addr);
  c->workerAddr.assign(p, p + len);
  ucp().ucp_worker_release_address(c->worker, addr);
  return ncclSuccess;
}

// Workers of contexts whose peer failed are kept, not destroyed (see
// Context::peerFailed): a process-wide list holds them for the life of the
// process, so the retention is deliberate and visible (LeakSanitizer sees
// them reachable) rather than a lost pointer. Never destroyed: exit-time
// destructors may run while another thread still finalizes.
void retainWorker(Context* c) {
  static std::mutex* mu = new std::mutex;
  static auto* kept = new std::vector<std::pair<ucp_context_h, ucp_worker_h>>;
  std::lock_guard<std::mutex> lock(*mu);
  kept->emplace_back(c->context, c->worker);
}

void destroyContext(Context* c) {
  if (c->worker) ucp().ucp_worker_destroy(c->worker);
  if (c->context) ucp().ucp_cleanup(c->context);
  delete c;
}

}  // namespace

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction) {
  setLogger(logFunction);
  *ctx = nullptr;
  int ndev = 0;
  if (numDevices(&ndev) != ncclSuccess) return ncclSystemError;
  std::string why;
  if (!loadUcp(&why)) {
    UCX_WARN("UCX is not available: %s", why.c_str());
    return ncclSystemError;
  }

  ucp_config_t* cfg = nullptr;
  ucs_status_t st = ucp().ucp_config_read(nullptr, nullptr, &cfg);  // UCX_* variables
  if (st != UCS_OK) {
    UCX_WARN("ucp_config_read failed: %s", ucp().ucs_status_string(st));
    return ncclSystemError;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE;
  params.features = UCP_FEATURE_TAG;
  params.request_size = 0;
  auto* c = new Context;
  c->commId = commId;
  st = ucp().ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, cfg, &c->context);
  ucp().ucp_config_release(cfg);
  if (st != UCS_OK) {
    UCX_WARN("ucp_init failed: %s", ucp().ucs_status_string(st));
    c->context = nullptr;
    destroyContext(c);
    return ncclSystemError;
  }
  if (createWorker(c) != ncclSuccess) {
    destroyContext(c);
    return ncclSystemError;
  }
  UCX_INFO("context for comm 0x%lx: %d devices, worker address %zu bytes",
           static_cast<unsigned long>(commId), ndev, c->workerAddr.size());
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
  auto* c = static_cast<Context*>(ctx);
  if (!c) return ncclSuccess;
  if (c->liveComms != 0) {
    // Their endpoints and requests belong to the worker: keep it.
    UCX_WARN("finalize with %d connections still open; leaving the UCP worker alive",
             c->liveComms);
    return ncclInternalError;
  }
  if (c->peerFailed) {
    UCX_INFO("finalize comm 0x%lx: a peer failed; the UCP worker is kept, not destroyed "
             "(UCX 1.13 may abort tearing it down)", static_cast<unsigned long>(c->commId));
    retainWorker(c);
    delete c;
    return ncclSuccess;
  }
  destroyContext(c);
  return ncclSuccess;
}

ncclResult_t setNetAttr(void* ctx, ncclNetAttr_v11_t* attr) {
  return ncclSuccess;  // a hint; UCX tunes itself
}

void progress(Context* ctx) {
  // Several rounds: a round may complete a fragment and start the next one.
  for (int i = 0; i < 8; i++) {
    if (ucp().ucp_worker_progress(ctx->worker) == 0) break;
  }
}

void dropComm(Comm* c) {
  if (!c) return;
  c->ch.close();
  delete c;
}

void Channel::close() {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

ncclResult_t Channel::flush(bool* done) {
  while (sent < out.size()) {
    ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    UCX_WARN("handshake send failed: %s", n < 0 ? strerror(errno) : "0 bytes");
    return ncclRemoteError;
  }
  *done = sent == out.size();
  return ncclSuccess;
}

ncclResult_t Channel::readHello(bool* done) {
  *done = false;
  while (true) {
    size_t want = sizeof(Hello);
    if (in.size() >= sizeof(Hello)) {
      Hello h;
      std::memcpy(&h, in.data(), sizeof(h));
      if (h.magic != kMagic || h.version != kVersion || h.addrLen > (1u << 20)) {
        UCX_WARN("handshake: bad hello (magic 0x%x version %u): peer is not Ferry's UCX net",
                 h.magic, h.version);
        return ncclRemoteError;
      }
      want += h.addrLen;
    }
    if (in.size() >= sizeof(Hello) && in.size() == want) {
      *done = true;
      return ncclSuccess;
    }
    size_t old = in.size();
    in.resize(want);
    ssize_t n = ::recv(fd, in.data() + old, want - old, MSG_DONTWAIT);
    if (n > 0) {
      in.resize(old + static_cast<size_t>(n));
      continue;
    }
    in.resize(old);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    UCX_WARN("handshake: peer closed the connection (%s)", n == 0 ? "EOF" : strerror(errno));
    return ncclRemoteError;
  }
}

bool Channel::peerClosed() {
  char b;
  ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
  return false;
}

void putHello(Channel* ch, uint64_t tag, const std::vector<uint8_t>& addr) {
  Hello h{kMagic, kVersion, tag, static_cast<uint32_t>(addr.size()), 0};
  ch->out.resize(sizeof(h) + addr.size());
  std::memcpy(ch->out.data(), &h, sizeof(h));
  // An empty addr's data() may be null, which memcpy must not get even for
  // 0 bytes (UBSan: nonnull argument).
  if (!addr.empty()) std::memcpy(ch->out.data() + sizeof(h), addr.data(), addr.size());
  ch->sent = 0;
}

ncclResult_t parseHello(const Channel& ch, uint64_t* tag, std::vector<uint8_t>* addr) {
  Hello h;
  if (ch.in.size() < sizeof(h)) return ncclInternalError;
  std::memcpy(&h, ch.in.data(), sizeof(h));
  if (ch.in.size() != sizeof(h) + h.addrLen) return ncclInternalError;
  *tag = h.tag;
  addr->assign(ch.in.begin() + sizeof(h), ch.in.end());
  return ncclSuccess;
}

}  // namespace ferry::ucx
