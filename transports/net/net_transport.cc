// NetTransport: set-up and connect (see net_transport.h); the pair
// handshake is in net_handshake.cc.
#include "transports/net/net_transport.h"

#include <algorithm>
#include <set>
#include <string>

#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"
#include "transports/net/net_connection.h"

namespace ferry::net {
namespace {

int localRank(const CommContext& ctx) {
  const std::vector<PeerInfo>& peers = *ctx.peers;
  int local = 0;
  for (int r = 0; r < ctx.rank; ++r) local += peers[r].hostHash == peers[ctx.rank].hostHash;
  return local;
}

// Same answer on every rank (it depends only on what all ranks know), so
// either all ranks take part in prepare's allgather or none does.
bool networkNeeded(const CommContext& ctx) {
  if (config::getBool(config::Param::kShmDisable) && ctx.nranks > 1) return true;
  std::set<uint64_t> hosts;
  for (const PeerInfo& p : *ctx.peers) hosts.insert(p.hostHash);
  return hosts.size() > 1;
}

}  // namespace

// The rail table names local rank i's NIC (GPU i's); a rank without one, or a
// NIC the network does not list, takes device localRank % ndev.
int NetTransport::homeDevice(const CommContext& ctx) const {
  int ndev = std::min(net_.ndev, kMaxRails);
  int local = localRank(ctx);
  if (ctx.railNics.empty()) return local % ndev;
  const std::string& nic = ctx.railNics[local % ctx.railNics.size()];
  for (int d = 0; d < ndev; ++d) {
    ncclNetProperties_v11_t props{};
    if (net_.net->getProperties(d, &props) == ncclSuccess && props.name && nic == props.name) return d;
  }
  FERRY_WARN("NET/%s: the rail table's NIC %s (local rank %d) is not one of the network's devices; "
             "using device %d", net_.net->name, nic.c_str(), local, local % ndev);
  return local % ndev;
}

// See the header: the peer's rail with PXN, else our own. Hosts are assumed
// to list their rails in the same order (as NCCL assumes).
int NetTransport::sendDevice(int peer) const {
  int theirs = handles_[peer].home;
  if (!pxn_ || theirs >= std::min(net_.ndev, kMaxRails)) return dev_;
  return theirs;
}

NetTransport::~NetTransport() { closeAll(); }

void NetTransport::closeAll() {
  if (!opened_) return;
  const ncclNet_v11_t* n = net_.net;
  reapHellos();
  for (auto& in : incoming_) {
    if (in->mh) n->deregMr(in->recvComm, in->mh);
    n->closeRecv(in->recvComm);
  }
  for (auto& [peer, p] : pairs_) {
    if (p->outMh) n->deregMr(p->sendComm, p->outMh);
    if (p->sendComm) n->closeSend(p->sendComm);
    if (p->recvComm) n->closeRecv(p->recvComm);
  }
  incoming_.clear();
  pairs_.clear();
  for (void* l : listenComms_) n->closeListen(l);
  listenComms_.clear();
  if (net_.ctx && n->finalize) n->finalize(net_.ctx);
  opened_ = false;
}

Status NetTransport::setup(const CommContext& ctx, PeerInfo* self) {
  // A misspelt NCCL_NET fails communicator creation, not the first collective.
  return checkNetName();
}

Status NetTransport::listenAll() {
  Listeners& mine = handles_[0];
  mine.ndev = std::min(net_.ndev, kMaxRails);
  for (int d = 0; d < mine.ndev; ++d) {
    void* l = nullptr;
    FERRY_TRY(check(net_.net->listen(net_.ctx, d, mine.handle[d], &l), "listen",
                    "device " + std::to_string(d)));
    if (!l) return internalError("network listen returned no comm");
    listenComms_.push_back(l);
  }
  return Status::ok();
}

Status NetTransport::prepare(const CommContext& ctx) {
  if (!networkNeeded(ctx)) return Status::ok();
  if (!ctx.exchange) return internalError("net transport needs the communicator's PeerExchange");
  handles_.assign(1, Listeners{});
  Status st = Status::ok();
  {
    Result<ActiveNet> net = openNet(ctx.commHash);
    if (net.isOk()) {
      net_ = net.take();
      opened_ = true;
      dev_ = homeDevice(ctx);
      handles_[0].home = dev_;
      pxn_ = !config::getBool(config::Param::kPxnDisable) &&
             config::getInt(config::Param::kP2pPxnLevel) > 0;
      st = listenAll();
    } else {
      st = net.status();
    }
  }
  // Take part in the allgather even after a local failure, so the other
  // ranks see a clean error instead of waiting for us until their deadline.
  Listeners mine = handles_[0];
  handles_.assign(ctx.nranks, Listeners{});
  handles_[ctx.rank] = mine;
  Status ex = ctx.exchange->allGather(handles_.data(), sizeof(Listeners));
  FERRY_TRY(st);
  FERRY_TRY(ex);
  for (int r = 0; r < ctx.nranks; ++r) {
    if (handles_[r].ndev < 1 || handles_[r].ndev > kMaxRails)
      return remoteError("rank " + std::to_string(r) + " has no network device to listen on");
    if (handles_[r].home < 0 || handles_[r].home >= handles_[r].ndev)
      return remoteError("rank " + std::to_string(r) + " published home device " +
                         std::to_string(handles_[r].home) + " of " + std::to_string(handles_[r].ndev));
  }
  FERRY_INFO(log::kInit | log::kNet, "NET: %s: home device %d, listening on %d device(s), PXN %s",
             net_.net->name, dev_, mine.ndev, pxn_ ? "on" : "off");
  return Status::ok();
}

TransportReport NetTransport::report() const {
  TransportReport r;
  if (!opened_) return r;
  r.active = true;
  r.devices = std::min(net_.ndev, kMaxRails);
  r.sendDevice = dev_;
  r.fifoBytes = size_t(std::max<int64_t>(2, config::getInt(config::Param::kNetSlots))) *
                size_t(std::max<int64_t>(4096, config::getInt(config::Param::kNetSlotBytes)));
  ncclNetProperties_v11_t props{};
  if (net_.net->getProperties(dev_, &props) == ncclSuccess) {
    if (props.name) r.deviceName = props.name;
    r.mbps = props.speed > 0 ? props.speed : 0;
    r.latencyUs = props.latency > 0 ? props.latency : 0;
    r.software = props.pciPath == nullptr || props.pciPath[0] == '\0';
  }
  return r;
}

Result<std::unique_ptr<Connection>> NetTransport::connect(const CommContext& ctx, int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!opened_) {
    return internalError("no network was set up for this communicator (rank " +
                         std::to_string(peer) + " must be reached over the network)");
  }
  pairFor(ctx, peer);
  Waiter w(ctx.abortFlag, ctx.timeoutMs, "connecting over the network");
  std::string where = std::string(net_.net->name) + " rank " + std::to_string(peer);
  for (;;) {
    bool moved = false;
    Status st = pump(ctx, &moved);
    if (st.isOk() && pairs_[peer]->complete()) break;
    if (st.isOk()) {
      if (moved) w.progressed(); else st = w.idle();
    }
    if (!st.isOk()) return Status(st.code(), "connecting to " + where + ": " + st.message());
  }
  std::unique_ptr<Pair> p = std::move(pairs_[peer]);
  pairs_.erase(peer);
  int slots = static_cast<int>(std::max<int64_t>(2, config::getInt(config::Param::kNetSlots)));
  size_t slotBytes = static_cast<size_t>(
      std::max<int64_t>(4096, config::getInt(config::Param::kNetSlotBytes)));
  int from = sendDevice(peer);
  std::string desc = std::string(net_.net->name) + "/" + std::to_string(from) +
                     (from != dev_ ? "(PXN)" : "") + " rank " + std::to_string(peer) + " (" +
                     (*ctx.peers)[peer].hostname + ")";
  FERRY_INFO(log::kNet, "Connection to rank %d via NET/%s", peer, desc.c_str());
  auto conn = std::make_unique<NetConnection>(net_.net, p->sendComm, p->recvComm, peer, slots,
                                              slotBytes, desc);
  conn->setAbortFlag(ctx.abortFlag);
  conn->setWaitsOnFds(net_.notesReadiness);
  const PeerInfo& me = (*ctx.peers)[ctx.rank];
  const PeerInfo& them = (*ctx.peers)[peer];
  conn->setCloseExchange(!(me.hostHash == them.hostHash && me.pid == them.pid));
  FERRY_TRY(conn->init());
  return std::unique_ptr<Connection>(std::move(conn));
}

std::unique_ptr<Transport> createNetTransport() { return std::make_unique<NetTransport>(); }

}  // namespace ferry::net
