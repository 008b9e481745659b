// NetTransport (see net_transport.h).
#include "transports/net/net_transport.h"

#include <string>

#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"
#include "transports/net/net_connection.h"

namespace ferry::net {
namespace {

// Bootstrap tag of the listen-handle exchange ("NETH").
constexpr int kHandleTag = 0x4e455448;

int localRank(const CommContext& ctx) {
  const std::vector<PeerInfo>& peers = *ctx.peers;
  int local = 0;
  for (int r = 0; r < ctx.rank; ++r) local += peers[r].hostHash == peers[ctx.rank].hostHash;
  return local;
}

}  // namespace

NetTransport::~NetTransport() {
  if (opened_ && net_.ctx && net_.net->finalize) net_.net->finalize(net_.ctx);
}

Status NetTransport::setup(const CommContext& ctx, PeerInfo* self) {
  // A misspelt NCCL_NET fails communicator creation, not the first collective.
  return checkNetName();
}

Status NetTransport::ensureOpen(const CommContext& ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (opened_) return Status::ok();
  FERRY_ASSIGN(net_, openNet(ctx.commHash));
  opened_ = true;
  dev_ = localRank(ctx) % net_.ndev;
  return Status::ok();
}

Result<void*> NetTransport::listen(const CommContext& ctx, char* handle) {
  void* listenComm = nullptr;
  FERRY_TRY(pluginStatus(net_.net->listen(net_.ctx, dev_, handle, &listenComm), "listen",
                         std::string(net_.net->name) + " device " + std::to_string(dev_)));
  if (!listenComm) return internalError(std::string("network ") + net_.net->name + " listen returned no comm");
  return listenComm;
}

Result<std::unique_ptr<Connection>> NetTransport::connect(const CommContext& ctx, int peer) {
  if (!ctx.exchange) return internalError("net transport needs the communicator's PeerExchange");
  FERRY_TRY(ensureOpen(ctx));
  char mine[NCCL_NET_HANDLE_MAXSIZE] = {};
  char theirs[NCCL_NET_HANDLE_MAXSIZE] = {};
  FERRY_ASSIGN(void* listenComm, listen(ctx, mine));
  std::string where = std::string(net_.net->name) + " to rank " + std::to_string(peer);
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  auto cleanup = [&] {
    if (sendComm) net_.net->closeSend(sendComm);
    if (recvComm) net_.net->closeRecv(recvComm);
    net_.net->closeListen(listenComm);
  };
  Status st = ctx.exchange->send(peer, kHandleTag, mine, sizeof(mine));
  if (st.isOk()) st = ctx.exchange->recv(peer, kHandleTag, theirs, sizeof(theirs));
  Waiter w(ctx.abortFlag, ctx.timeoutMs, "network connection setup");
  while (st.isOk() && !(sendComm && recvComm)) {
    ncclNetDeviceHandle_v11_t* noOffload = nullptr;
    bool moved = false;
    if (!sendComm) {
      st = pluginStatus(net_.net->connect(net_.ctx, dev_, theirs, &sendComm, &noOffload), "connect", where);
      moved = sendComm != nullptr;
    }
    if (st.isOk() && !recvComm) {
      noOffload = nullptr;
      st = pluginStatus(net_.net->accept(listenComm, &recvComm, &noOffload), "accept", where);
      moved = moved || recvComm != nullptr;
    }
    if (!st.isOk() || (sendComm && recvComm)) break;
    if (moved) w.progressed(); else st = w.idle();
  }
  if (!st.isOk()) {
    cleanup();
    return Status(st.code(), "connecting to rank " + std::to_string(peer) + " over " +
                                 net_.net->name + ": " + st.message());
  }
  net_.net->closeListen(listenComm);
  int slots = static_cast<int>(std::max<int64_t>(2, config::getInt(config::Param::kSocketSlots)));
  size_t slotBytes = static_cast<size_t>(
      std::max<int64_t>(4096, config::getInt(config::Param::kSocketSlotBytes)));
  std::string desc = std::string(net_.net->name) + "/" + std::to_string(dev_) + " rank " +
                     std::to_string(peer) + " (" + (*ctx.peers)[peer].hostname + ")";
  auto conn = std::make_unique<NetConnection>(net_.net, sendComm, recvComm, peer, slots, slotBytes,
                                              desc);
  FERRY_TRY(conn->init());
  return std::unique_ptr<Connection>(std::move(conn));
}

std::unique_ptr<Transport> createNetTransport() { return std::make_unique<NetTransport>(); }

}  // namespace ferry::net
