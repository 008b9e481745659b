// SocketTransport (see socket_transport.h).
#include "transports/socket/socket_transport.h"

#include <algorithm>
#include <cstring>

#include "core/config.h"
#include "core/log.h"
#include "transports/socket/socket_connection.h"

namespace ferry::socket {
namespace {

constexpr uint32_t kHelloType = 3;  // NCCL's NetSocket socket type
// A genuine peer sends its hello right after connecting; a silent
// connection is dropped after this long so it cannot block us.
constexpr int64_t kHelloTimeoutMs = 2000;

struct __attribute__((packed)) Hello {
  uint64_t secret;
  uint32_t type;
  int32_t rank;
  uint64_t commHash;
};

std::string rankName(int rank) { return "rank " + std::to_string(rank); }

}  // namespace

Status SocketTransport::setup(const CommContext& ctx, PeerInfo* self) {
  FERRY_ASSIGN(std::vector<NetIf> ifs, findInterfaces(1));
  FERRY_ASSIGN(listener_, listenSocket(ifs[0].addr));
  ifName_ = ifs[0].name;
  static_assert(sizeof(self->sockAddr) >= SockAddr::kPackedBytes);
  std::memset(self->sockAddr, 0, sizeof(self->sockAddr));
  listener_.peer().pack(self->sockAddr);
  FERRY_INFO(log::kNet | log::kInit, "NET/Socket: rank %d listening on %s:%s", ctx.rank,
             ifName_.c_str(), listener_.peer().toString().c_str());
  return Status::ok();
}

Result<std::unique_ptr<Connection>> SocketTransport::connect(const CommContext& ctx, int peer) {
  if (!ctx.peers || peer < 0 || peer >= static_cast<int>(ctx.peers->size()) || peer == ctx.rank) {
    return invalidArgument("socket: cannot connect rank " + std::to_string(ctx.rank) + " to " +
                           rankName(peer));
  }
  if (!listener_.valid()) return invalidUsage("socket: connect before setup");
  SockAddr addr = SockAddr::unpack((*ctx.peers)[peer].sockAddr, SockAddr::kPackedBytes);
  if (!addr.valid()) return invalidArgument("socket: " + rankName(peer) + " published no address");
  Until u = Until::after(ctx.timeoutMs, ctx.abortFlag);
  Result<Socket> s = ctx.rank < peer ? dial(ctx, addr, u) : acceptFrom(ctx, peer, u);
  if (!s.isOk()) {
    return Status(s.status().code(), "socket: connecting rank " + std::to_string(ctx.rank) +
                                          " to " + rankName(peer) + " (" + addr.toString() +
                                          "): " + s.status().message());
  }
  int slots = static_cast<int>(
      std::clamp<int64_t>(config::getInt(config::Param::kSocketSlots), 1, 1024));
  size_t slotBytes = static_cast<size_t>(
      std::clamp<int64_t>(config::getInt(config::Param::kSocketSlotBytes), 64, int64_t(1) << 30));
  FERRY_INFO(log::kNet, "NET/Socket: rank %d connected to rank %d via %s (%d x %zu byte slots)",
             ctx.rank, peer, addr.toString().c_str(), slots, slotBytes);
  return std::unique_ptr<Connection>(
      new SocketConnection(s.take(), peer, addr, slots, slotBytes));
}

Result<Socket> SocketTransport::dial(const CommContext& ctx, const SockAddr& addr,
                                     const Until& u) {
  FERRY_ASSIGN(Socket s, connectSocket(addr, u));
  // No answer is awaited: the kernel completes the connection from the
  // peer's backlog, so dialing never waits for the peer to reach connect()
  // (a refused hello shows up as a closed connection on first use).
  Hello h{ctx.secret, kHelloType, ctx.rank, ctx.commHash};
  FERRY_TRY(sendAll(s, &h, sizeof(h), u));
  return s;
}

Result<int> SocketTransport::readHello(const CommContext& ctx, const Socket& s, const Until& u) {
  Until hu = Until::after(std::min(u.remainingMs(), kHelloTimeoutMs), ctx.abortFlag);
  Hello h{};
  Status st = recvAll(s, &h, sizeof(h), hu);
  const std::string from = s.peer().toString();
  if (!st.isOk()) {
    if (u.expired()) return u.check("reading a hello");
    FERRY_WARN("socket: dropped connection from %s: %s", from.c_str(), st.message().c_str());
    return -1;
  }
  const char* why = nullptr;
  if (h.secret != ctx.secret) why = "wrong secret";
  else if (h.type != kHelloType) why = "wrong type";
  else if (h.commHash != ctx.commHash) why = "wrong communicator";
  else if (h.rank < 0 || h.rank >= ctx.rank) why = "unexpected rank";
  if (why) {
    FERRY_WARN("socket: rank %d refused connection from %s: %s", ctx.rank, from.c_str(), why);
    return -1;
  }
  return static_cast<int>(h.rank);
}

Result<Socket> SocketTransport::acceptFrom(const CommContext& ctx, int peer, const Until& u) {
  std::lock_guard<std::mutex> lk(mu_);
  while (true) {
    auto it = pending_.find(peer);
    if (it != pending_.end()) {
      Socket s = std::move(it->second);
      pending_.erase(it);
      return s;
    }
    FERRY_ASSIGN(Socket s, acceptSocket(listener_, u));
    FERRY_ASSIGN(int rank, readHello(ctx, s, u));
    if (rank < 0) continue;
    if (rank == peer) return s;
    if (pending_.count(rank)) {
      FERRY_WARN("socket: rank %d got a second connection from rank %d; keeping the newer one",
                 ctx.rank, rank);
    }
    pending_[rank] = std::move(s);
  }
}

std::unique_ptr<Transport> createSocketTransport() { return std::make_unique<SocketTransport>(); }

}  // namespace ferry::socket
