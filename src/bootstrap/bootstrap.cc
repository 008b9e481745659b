// Bootstrap rendezvous and ring collectives (see bootstrap.h). The
// point-to-point messages are in p2p.cc.
#include "bootstrap/bootstrap.h"

#include <cstring>

#include "bootstrap/inbox.h"
#include "bootstrap/root.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/config.h"
#include "core/log.h"

namespace ferry {

using namespace bootstrap;

Bootstrap::Bootstrap(int rank, int nranks, uint64_t secret, const std::atomic<bool>* abortFlag,
                     int64_t timeoutMs)
    : rank_(rank), nranks_(nranks), secret_(secret), abortFlag_(abortFlag),
      timeoutMs_(timeoutMs) {}

Bootstrap::~Bootstrap() = default;

Result<std::unique_ptr<Bootstrap>> Bootstrap::create(const ncclUniqueId& id, int rank, int nranks,
                                                     const std::atomic<bool>* abortFlag,
                                                     int64_t timeoutMs) {
  if (nranks <= 0 || rank < 0 || rank >= nranks) {
    return invalidArgument("bootstrap: invalid rank " + std::to_string(rank) + " of " +
                           std::to_string(nranks));
  }
  IdContents idc = decodeId(id);
  if (!idc.root.valid()) return invalidArgument("bootstrap: unique id holds no root address");
  std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nranks, idc.secret, abortFlag, timeoutMs));
  Until u = b->until();

  if (rank == 0 && idc.secret == kCommIdMagic && config::isSet(config::Param::kCommId)) {
    // NCCL_COMM_ID: nobody ran a root; rank 0 hosts it at the agreed address.
    // (An id with a random secret already has its root, e.g. a split's.)
    FERRY_ASSIGN(Socket rootListener, listenSocket(idc.root));
    FERRY_INFO(log::kBootstrap, "Bootstrap: root listening at NCCL_COMM_ID %s",
               rootListener.peer().toString().c_str());
    FERRY_TRY(startRoot(std::move(rootListener), idc.secret, timeoutMs, nranks));
  } else if (rank == 0) {
    // A root in this process (the usual ncclGetUniqueId on rank 0) learns
    // nranks from us: check-ins that disagree are the bad ones.
    expectRanks(idc.secret, idc.root, nranks);
  }

  FERRY_ASSIGN(NetIf nif, findInterfaceFor(idc.root));
  FERRY_ASSIGN(b->listener_, listenSocket(nif.addr));
  b->inbox_ = std::make_unique<Inbox>(rank, nranks, idc.secret, b->listener_);
  FERRY_INFO(log::kBootstrap, "Bootstrap: Using %s:%s", nif.name.c_str(),
             nif.addr.toString().c_str());
  Status st = b->checkIn(idc.root, u);
  // The root may run in this process and still be answering the other ranks.
  waitForRootReplies(idc.secret, idc.root, 2000);
  FERRY_TRY(st);
  FERRY_TRY(b->connectRing(u));
  FERRY_TRACE(log::kBootstrap, "Bootstrap: rank %d of %d ready (listening at %s)", rank, nranks,
             b->listener_.peer().toString().c_str());
  return b;
}

Status Bootstrap::checkIn(const SockAddr& root, const Until& u) {
  FERRY_ASSIGN(Socket s, connectSocket(root, u));
  uint8_t msg[sizeof(ConnHeader) + sizeof(CheckIn)];
  ConnHeader h{secret_, kCheckIn};
  CheckIn ci{};
  ci.rank = rank_;
  ci.nranks = nranks_;
  listener_.peer().pack(ci.addr);
  std::memcpy(msg, &h, sizeof(h));
  std::memcpy(msg + sizeof(h), &ci, sizeof(ci));
  FERRY_TRY(sendAll(s, msg, sizeof(msg), u));

  uint8_t repBytes[sizeof(RootReply)];
  Status st = recvAll(s, repBytes, sizeof(repBytes), u);
  RootReply rep{};
  if (st.isOk()) st = decodeRootReply(repBytes, sizeof(repBytes), &rep);
  if (!st.isOk()) {
    return Status(st.code(), "bootstrap: rank " + std::to_string(rank_) +
                                 " waiting for the root at " + root.toString() + ": " +
                                 st.message());
  }
  if (rep.status != kReplyOk) {
    std::string text(replyTextBytes(rep), '\0');
    if (!recvAll(s, text.data(), text.size(), Until::after(1000)).isOk()) text = "(no reason)";
    std::string msg = "bootstrap: root " + root.toString() + " refused rank " +
                      std::to_string(rank_) + " of " + std::to_string(nranks_) + ": " + text;
    return replyStatus(rep.status, msg);
  }
  FERRY_TRY(checkTableBytes(rep.bytes, nranks_));
  std::vector<uint8_t> table(rep.bytes);
  FERRY_TRY(recvAll(s, table.data(), table.size(), u));
  FERRY_ASSIGN(peers_, decodeAddressTable(table.data(), table.size(), nranks_));
  return Status::ok();
}

Status Bootstrap::connectRing(const Until& u) {
  if (nranks_ == 1) return Status::ok();
  int next = (rank_ + 1) % nranks_;
  FERRY_ASSIGN(ringOut_, connectSocket(peers_[next], u));
  uint8_t msg[sizeof(ConnHeader) + sizeof(RingHello)];
  ConnHeader h{secret_, kRing};
  RingHello hello{rank_};
  std::memcpy(msg, &h, sizeof(h));
  std::memcpy(msg + sizeof(h), &hello, sizeof(hello));
  FERRY_TRY(sendAll(ringOut_, msg, sizeof(msg), u));
  std::lock_guard<std::mutex> lk(p2pMu_);
  return inbox_->acceptRing(&ringIn_, u);
}

Status Bootstrap::allGather(void* allData, size_t bytesPerRank) {
  if (nranks_ == 1 || bytesPerRank == 0) return Status::ok();
  std::lock_guard<std::mutex> lk(ringMu_);
  Until u = until();
  char* base = static_cast<char*>(allData);
  // Step s forwards the block that arrived in step s-1 (first our own).
  for (int s = 0; s < nranks_ - 1; s++) {
    int sendBlock = (rank_ - s + nranks_) % nranks_;
    int recvBlock = (rank_ - s - 1 + nranks_) % nranks_;
    Status st = sendRecvAll(ringOut_, base + size_t(sendBlock) * bytesPerRank, bytesPerRank,
                            ringIn_, base + size_t(recvBlock) * bytesPerRank, bytesPerRank, u);
    if (!st.isOk()) {
      return Status(st.code(), "bootstrap allGather (rank " + std::to_string(rank_) + ", step " +
                                   std::to_string(s) + "): " + st.message());
    }
  }
  return Status::ok();
}

Status Bootstrap::barrier() {
  // A ring allGather completes on a rank only after every rank entered it.
  std::vector<int32_t> tokens(nranks_, 0);
  tokens[rank_] = rank_;
  return allGather(tokens.data(), sizeof(int32_t));
}

void Bootstrap::abort() {
  aborted_.store(true, std::memory_order_release);
  listener_.shutdown();
  ringOut_.shutdown();
  ringIn_.shutdown();
}

}  // namespace ferry
