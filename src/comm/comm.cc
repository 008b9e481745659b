#include "comm/comm.h"

#include "accel/accelerator.h"

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <set>

#include "comm/device_direct.h"
#include "comm/host_id.h"
#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"

namespace ferry {
namespace {

// The last-level cache this CPU shares, from sysfs. Not sysconf: in a VM
// glibc reports the host's whole L3 (384 MiB here, where the guest's
// cores share 32 MiB). 0 when unknown.
size_t lastLevelCacheBytes() {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    size_t kib = 0;
    char unit = 0;
    if (!(f >> kib >> unit)) break;
    size_t bytes = unit == 'M' ? kib << 20 : unit == 'K' ? kib << 10 : kib;
    best = std::max(best, bytes);  // the highest level is the largest
  }
  return best;
}

// FERRY_COPY_STREAM_BYTES: -1 (auto) a quarter of the last-level cache.
size_t streamCopyBytes(int64_t setting) {
  if (setting == 0) return SIZE_MAX;
  if (setting > 0) return static_cast<size_t>(setting);
  static const size_t llc = lastLevelCacheBytes();  // sysfs once, not per communicator
  return llc > 0 ? std::max<size_t>(llc / 4, size_t(1) << 20) : size_t(8) << 20;
}

}  // namespace

Comm::Comm(int rank, int nranks, CommConfig config)
    : rank_(rank),
      nranks_(nranks),
      config_(std::move(config)),
      bridgePool_(32, static_cast<size_t>(
                          std::max<int64_t>(0, config::getInt(config::Param::kBridgePoolBytes)))) {
  timeoutMs_ = config::getInt(config::Param::kTimeoutMs);
  peerCheckMs_ = std::max<int64_t>(1, config::getInt(config::Param::kPeerCheckMs));
  execOptions_.allowRefs = !config::getBool(config::Param::kP2pDisable);
  execOptions_.refThreshold = static_cast<size_t>(
      std::max<int64_t>(1, config::getInt(config::Param::kCmaThreshold)));
  execOptions_.refAdaptive = !config::isSet(config::Param::kCmaThreshold);
  execOptions_.streamCopyBytes = streamCopyBytes(config::getInt(config::Param::kCopyStreamBytes));
  std::string stream = config::getString(config::Param::kShmStream);
  if (!SlotWrites::parseMode(stream, &execOptions_.slotWrites))
    FERRY_WARN("FERRY_SHM_STREAM=%s is not auto, always or never; using auto", stream.c_str());
  execOptions_.flat = config::getBool(config::Param::kExecFlat);
  checkOps_ = config::getBool(config::Param::kCheckOps);
  p2pRail_ = config::getBool(config::Param::kP2pRail);
  asyncResult_.store(ncclInProgress);
}

Comm::~Comm() {
  queue_.reset();  // cancels what never ran, joins the progress thread
  joinInit();
  plans_.clear();
  closeConnections();
  for (auto& c : conns_) c.reset();
}

// All connections step their close together under one deadline, so a peer
// that destroys its communicators in another order costs one timeout per
// communicator at most, not one per connection.
void Comm::closeConnections() {
  Waiter w(&abort_, config::getInt(config::Param::kCloseTimeoutMs), "closing connections");
  for (;;) {
    bool moved = false, done = true;
    for (auto& c : conns_)
      if (c && !c->stepClose(&moved)) done = false;
    if (done) return;
    if (moved) {
      w.progressed();
      continue;
    }
    if (!w.idle().isOk()) break;
  }
  // Name what is still open (a network pair's close exchange; a shm
  // segment the peer never mapped, whose pieces go with it).
  std::string open;
  int left = 0;
  for (auto& c : conns_) {
    bool moved = false;
    if (c && !c->stepClose(&moved) && left++ < 4) open += (open.empty() ? "" : ", ") + c->describe();
  }
  FERRY_WARN("rank %d: connections did not finish closing within FERRY_CLOSE_TIMEOUT_MS (%s%s); "
             "closing them with requests in flight", rank_, open.c_str(), left > 4 ? ", ..." : "");
  for (auto& c : conns_)
    if (c) c->markFailed();
}

void Comm::initAsync(const ncclUniqueId& id) {
  initThread_ = std::thread([this, id] { (void)init(id); });
}

void Comm::joinInit() {
  if (initThread_.joinable()) initThread_.join();
}

Status Comm::init(const ncclUniqueId& id) {
  log::setThreadRank(rank_);
  // A GPU program hands over cudaMalloc'd buffers without saying so: the
  // CUDA backend must exist before the first call checks a pointer.
  accel::probe();
  int64_t initTimeout = config::getInt(config::Param::kInitTimeoutMs);
  Status st = [&]() -> Status {
    // Before the bootstrap: every rank reads the same environment, so a bad
    // value fails creation on all of them at once.
    FERRY_ASSIGN(algoFilter_, parseAlgoFilter(config::getString(config::Param::kAlgo)));
    FERRY_TRY(parseProtoFilter(config::getString(config::Param::kProto)).status());
    FERRY_ASSIGN(bootstrap_, Bootstrap::create(id, rank_, nranks_, &abort_, initTimeout));
    // The topology before the transports: the network sends on the rails.
    FERRY_TRY(loadTopology());
    FERRY_TRY(setupPeers());
    return buildView();
  }();
  if (!st.isOk()) {
    fail(st);
    return st;
  }
  // Connections made later, inside collectives, wait no longer than any
  // other wait of a collective.
  ctx_.timeoutMs = timeoutMs_;
  // The tuner before ready: with nonblocking init the caller may start
  // collectives (which read tuner_) as soon as it sees ncclSuccess (TSan
  // race, mp_api_test NonblockingInitCollectiveFinalize).
  openTuner();
  ready_.store(true);
  asyncResult_.store(ncclSuccess);
  if (rank_ == 0)
    log::versionLine("NCCL version 2.28.9+ferry" FERRY_VERSION_STRING " (Ferry " FERRY_VERSION_STRING
                     ", host memory)");
  logTopology();
  return Status::ok();
}

Status Comm::setupPeers() {
  ctx_.rank = rank_;
  ctx_.nranks = nranks_;
  ctx_.secret = bootstrap_->secret();
  ctx_.abortFlag = &abort_;
  ctx_.timeoutMs = config::getInt(config::Param::kInitTimeoutMs);
  ctx_.exchange = &exchange_;
  ctx_.connectCheck = [this](int peer) { return connectCheck(peer); };
  for (const topo::Rail& r : rails_) ctx_.railNics.push_back(r.nic);
  transports_ = createTransports();
  peers_.assign(nranks_, PeerInfo{});
  PeerInfo& me = peers_[rank_];
  me.rank = rank_;
  me.pid = getpid();
  me.hostHash = hostHash();
  me.nonce = randomNonce();
  gethostname(me.hostname, sizeof(me.hostname) - 1);
  for (auto& t : transports_) FERRY_TRY(t->setup(ctx_, &me));
  FERRY_TRY(bootstrap_->allGather(peers_.data(), sizeof(PeerInfo)));
  // The secret names the job's rendezvous; rank 0's nonce makes the hash
  // unique even when NCCL_COMM_ID fixes the secret.
  uint64_t seed[2] = {ctx_.secret, peers_[0].nonce};
  ctx_.commHash = hash64(seed, sizeof(seed));
  ctx_.peers = &peers_;
  conns_.resize(nranks_);
  FERRY_TRY(openBoard());
  for (auto& t : transports_) FERRY_TRY(t->prepare(ctx_));
  return Status::ok();
}

// Every rank of a host maps the board and the presence lines before any
// removes their names, hence the barrier; all ranks agree whether they are
// needed (some host has two ranks).
Status Comm::openBoard() {
  std::set<uint64_t> hosts;
  for (const PeerInfo& p : peers_) hosts.insert(p.hostHash);
  if (hosts.size() == peers_.size()) return Status::ok();
  Result<std::unique_ptr<FailureBoard>> b = FailureBoard::open(ctx_.commHash);
  if (!b.isOk())  // still correct without it, only slower to report failures
    FERRY_WARN("rank %d: no failure board: %s", rank_, b.status().message().c_str());
  Result<std::unique_ptr<Presence>> pr = Presence::open(ctx_.commHash, nranks_);
  if (!pr.isOk())  // still correct without it: waits fall back to their learned spin
    FERRY_WARN("rank %d: no presence lines: %s", rank_, pr.status().message().c_str());
  Status st = bootstrap_->barrier();
  if (b.isOk()) {
    board_ = b.take();
    board_->unlink();  // also when the barrier failed: leave nothing in /dev/shm
  }
  if (pr.isOk()) {
    presence_ = pr.take();
    presence_->unlink();
  }
  return st;
}

PeerState Comm::peerState(const std::vector<int>& peers) const {
  if (!presence_ || peers.empty()) return PeerState::kUnknown;
  const uint64_t self = peers_[rank_].hostHash;
  for (int p : peers)  // a rank on another host has no line here
    if (peers_[p].hostHash != self || !presence_->parked(p)) return PeerState::kUnknown;
  return PeerState::kParked;
}

void Comm::logTopology() const {
  size_t localRanks = view_.hostRanks[view_.hostOf[rank_]].size();
  FERRY_INFO(log::kInit, "comm %p rank %d nRanks %d nNodes %d localRanks %zu localRank %d - Init COMPLETE",
             static_cast<const void*>(this), rank_, nranks_, view_.nHosts(), localRanks,
             view_.localRankOf[rank_]);
}

Status Comm::BootstrapExchange::allGather(void* all, size_t bytesPerRank) {
  return comm_->bootstrap_->allGather(all, bytesPerRank);
}

Result<Connection*> Comm::connection(int peer) {
  if (peer < 0 || peer >= nranks_) return internalError("connection to invalid rank");
  {
    std::lock_guard<std::mutex> lk(connsMu_);
    if (conns_[peer]) return conns_[peer].get();
  }
  const PeerInfo& me = peers_[rank_];
  for (auto& t : transports_) {
    if (!t->canConnect(ctx_, me, peers_[peer])) continue;
    // Connected without the lock (it may wait for the peer; abort() must
    // not block behind it), published under it: abort() on another thread
    // iterates conns_ (TSan race, mp_fault_test AbortFromAnotherThread*).
    FERRY_ASSIGN(std::unique_ptr<Connection> c, t->connect(ctx_, peer));
    FERRY_INFO(log::kInit | log::kP2P, "Channel 00/0 : %d[%d] -> %d[%d] via %s", rank_, rank_, peer,
               peer, c->describe().c_str());
    Connection* raw = c.get();
    std::lock_guard<std::mutex> lk(connsMu_);
    conns_[peer] = std::move(c);
    if (abort_.load()) raw->markFailed();  // abort() ran while it connected
    return raw;
  }
  return internalError("no transport can reach rank " + std::to_string(peer));
}

namespace {
// A process that is gone or a zombie has exited.
bool processAlive(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}
}  // namespace

Status Comm::checkPeers(const std::vector<int>& peers) {
  if (!peerCheckDue()) return Status::ok();
  lastPeerCheckMs_ = nowCoarseMs();  // a rate limit of ~100 ms: the tick is fine
  for (int p : peers) {
    if (p == rank_ || p < 0 || p >= nranks_) continue;
    if (peers_[p].hostHash != peers_[rank_].hostHash) continue;  // remote: sockets report it
    if (!processAlive(peers_[p].pid) && !outlives(p))
      return remoteError("rank " + std::to_string(p) + " (pid " + std::to_string(peers_[p].pid) +
                         ") exited");
  }
  return Status::ok();
}

// A peer that finished its part and exited may have left what we still need
// in shared memory: its death counts once that is read (a leaf of a Reduce
// tree exited while its parent waited on the root for room, and the parent
// failed with "rank N exited" holding the leaf's whole share).
bool Comm::outlives(int peer) const {
  std::lock_guard<std::mutex> lk(connsMu_);
  return conns_[peer] && conns_[peer]->outlivesPeer();
}

// The board and the flags are plain loads; checkPeers rate-limits itself.
Status Comm::connectCheck(int peer) {
  FERRY_TRY(boardCheck());
  FERRY_TRY(checkPeers({peer}));
  for (auto& c : conns_) {
    if (!c) continue;
    Status st = c->health();
    if (!st.isOk())
      return Status(st.code(), "while connecting to rank " + std::to_string(peer) + ": " + st.message());
  }
  return Status::ok();
}

void Comm::latch(const Status& st) {
  std::lock_guard<std::mutex> lk(errorMu_);
  if (firstError_.isOk()) {
    firstError_ = st;
    asyncResult_.store(toNcclResult(st));
  }
}

void Comm::fail(const Status& st) {
  latch(st);
  if (board_) board_->post(rank_, st);
  std::lock_guard<std::mutex> lk(connsMu_);
  for (auto& c : conns_)
    if (c) c->reportFailure(st.code());
}

Status Comm::usableSlow() const {
  if (abort_.load()) return invalidUsage("communicator was aborted");
  if (revoked_.load())
    return invalidUsage("communicator was revoked (ncclCommRevoke, or ncclCommShrink with NCCL_SHRINK_ABORT): "
                        "only ncclCommDestroy, ncclCommSplit and ncclCommShrink may follow");
  if (!ready_.load()) {
    if (asyncResult_.load() == ncclInProgress) return invalidUsage("communicator is still initializing");
  }
  ncclResult_t r = asyncResult_.load();
  if (r != ncclSuccess && r != ncclInProgress)
    return Status(firstError_.code(), "communicator has failed earlier: " + firstError_.message());
  return Status::ok();
}

void Comm::abort() {
  abort_.store(true);
  {
    std::lock_guard<std::mutex> lk(connsMu_);
    for (auto& c : conns_)
      if (c) c->markFailed();
  }
  if (bootstrap_) bootstrap_->abort();
}

void Comm::revoke() {
  revoked_.store(true);
  std::lock_guard<std::mutex> lk(connsMu_);
  for (auto& c : conns_)
    if (c) c->markFailed();
}

// A peer that merely exited is not a failure here: it may have destroyed
// its communicator and finished (frameworks poll this from a watchdog).
void Comm::pollBackground() {
  if (!ready_.load() || asyncResult_.load() != ncclSuccess) return;
  Status st = boardCheck();
  if (!st.isOk()) latch(st);
}

OpQueue& Comm::ensureOpQueue() {
  if (!queue_) queue_ = std::make_unique<OpQueue>(rank_);
  return *queue_;
}

Status Comm::quiesce() {
  if (!queue_ || !queue_->busy() || queue_->onThread()) return Status::ok();
  return queue_->drain(&abort_, timeoutMs_);
}

void Comm::noteStaged(const char* device, size_t bytes, size_t pieceBytes) {
  stagedBytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (!stagedLogged_.exchange(true))
    FERRY_INFO(log::kInit, "rank %d: %s memory is staged through host buffers (CPU-forward bridge); "
               "operations on it are queued behind their streams", rank_, device);
  if (pieceBytes > 0 && !piecesLogged_.exchange(true))
    FERRY_INFO(log::kInit, "rank %d: %s staging in pieces of %zu bytes: the stream's copies overlap "
               "the collective", rank_, device, pieceBytes);
}

void Comm::waitIdle(int64_t timeoutMs) {
  int64_t end = nowMs() + timeoutMs;
  Backoff b;
  while (users_.load() > 0 && nowMs() < end) b.pause();
}

int Comm::addPremul(PremulOp op) {
  for (size_t i = 0; i < premulOps_.size(); ++i) {
    if (!premulOps_[i]) {
      premulOps_[i] = std::make_unique<PremulOp>(op);
      return ncclNumOps + static_cast<int>(i);
    }
  }
  premulOps_.push_back(std::make_unique<PremulOp>(op));
  return ncclNumOps + static_cast<int>(premulOps_.size() - 1);
}

Status Comm::removePremul(int op) {
  size_t i = static_cast<size_t>(op - ncclNumOps);
  if (op < ncclNumOps || i >= premulOps_.size() || !premulOps_[i])
    return invalidArgument("ncclRedOpDestroy: op " + std::to_string(op) +
                           " is not a PreMulSum operator of this communicator");
  premulOps_[i].reset();
  return Status::ok();
}

const PremulOp* Comm::premul(int op) const {
  size_t i = static_cast<size_t>(op - ncclNumOps);
  if (op < ncclNumOps || i >= premulOps_.size()) return nullptr;
  return premulOps_[i].get();
}

std::string Comm::describe() const {
  return "comm " + std::to_string(reinterpret_cast<uintptr_t>(this)) + " rank " +
         std::to_string(rank_) + "/" + std::to_string(nranks_);
}

ncclResult_t toNcclResult(const Status& st) {
  switch (st.code()) {
    case Code::kOk: return ncclSuccess;
    case Code::kSystem: return ncclSystemError;
    case Code::kInternal: return ncclInternalError;
    case Code::kInvalidArgument: return ncclInvalidArgument;
    case Code::kInvalidUsage: return ncclInvalidUsage;
    case Code::kRemote: return ncclRemoteError;
    case Code::kInProgress: return ncclInProgress;
    case Code::kTimeout: return ncclRemoteError;
  }
  return ncclInternalError;
}

}  // namespace ferry
