#include "comm/stream_bridge.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "comm/comm.h"
#include "core/config.h"
#include "core/log.h"
#include "exec/io_gate.h"
#include "mem/staging.h"

namespace ferry {
namespace {

// A stream the job waits for, with the copies it makes on each side.
struct StreamPart {
  accel::Accelerator* dev;
  accel::StreamHandle stream;
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  std::vector<Copy> in, out;
  std::vector<Copy> scalars;  // PreMulSum scalars in device memory: first
};

// Where a piece's flag waits are released all at once (the job is over).
constexpr uint32_t kReleaseAll = 1u << 30;

class BridgeJob final : public QueuedOp {
 public:
  BridgeJob(Comm* c, std::vector<CollTask> colls, std::vector<P2pTask> p2ps)
      : comm_(c), colls_(std::move(colls)), p2ps_(std::move(p2ps)) {}

  Status build();
  Status enqueueStreams(const std::shared_ptr<BridgeJob>& self);
  Status enqueuePieces(StreamPart& p, const std::shared_ptr<BridgeJob>& self, int64_t waitMs);
  void run() override;
  void cancel(const Status& why) override;
  // Never queued: streams that got the job's tasks go on without it.
  void release() { finish(); }
  // Best effort, after a failure: each stream holds the job until it gets
  // here (the tasks enqueued before point into it).
  void holdStreams(const std::shared_ptr<BridgeJob>& self) {
    for (StreamPart& p : parts_) (void)p.dev->hostFnAsync(p.stream, [self] {});
  }
  size_t heldBytes() const override { return held_; }
  size_t stagedBytes() const { return staged_; }
  // Staged in pieces of this size (0: whole buffers).
  size_t pieceBytes() const { return gate_ ? pieceBytes_ : 0; }
  const char* deviceName() const { return parts_.front().dev->name(); }

 private:
  StreamPart& part(accel::Accelerator* dev, accel::StreamHandle s);
  Result<void*> stage(StreamPart& p, const void* user, size_t bytes, bool in, bool out);
  Status stageColl(CollTask& t);
  Status stageP2p(P2pTask& t);
  Status runTasks();
  bool pipelines(const CollTask& t) const;
  void finish() {
    if (done_) done_->add(kReleaseAll);
  }

  Comm* comm_;
  std::vector<CollTask> colls_;
  std::vector<P2pTask> p2ps_;
  std::vector<StreamPart> parts_;
  std::vector<std::shared_ptr<char[]>> blocks_;
  // Device scalars as the stream read them, for their tasks' runs.
  std::vector<std::pair<CollTask*, const char*>> scalars_;
  size_t held_ = 0, staged_ = 0;
  accel::HostFlag reached_;
  std::shared_ptr<accel::HostFlag> done_;  // from the job's device (newFlag)
  size_t pieceBytes_ = 0;
  std::shared_ptr<accel::HostFlag> piecesIn_;  // input pieces in place (pipelined)
  std::unique_ptr<IoGate> gate_;  // pipelined: the one collective's gate
};

StreamPart& BridgeJob::part(accel::Accelerator* dev, accel::StreamHandle s) {
  for (StreamPart& p : parts_)
    if (p.dev == dev && p.stream == s) return p;
  parts_.push_back(StreamPart{dev, s, {}, {}, {}});
  return parts_.back();
}

// Staging is pinned with the device, so its copies to and from a block do
// not hold the call until the stream gets there (CUDA, pageable memory).
mem::BlockPinner pinnerFor(accel::Accelerator* dev) {
  return {dev,
          [](void* d, void* q, size_t n) { return static_cast<accel::Accelerator*>(d)->pinHost(q, n); },
          [](void* d, void* q) { static_cast<accel::Accelerator*>(d)->unpinHost(q); }};
}

Result<void*> BridgeJob::stage(StreamPart& p, const void* user, size_t bytes, bool in, bool out) {
  if (bytes == 0) return const_cast<void*>(user);
  // Before anything is enqueued: a copy refused halfway through a job would
  // leave copies back into the user's buffer that must then still run.
  FERRY_TRY(p.dev->checkRange(user, bytes));
  const mem::BlockPinner pinner = pinnerFor(p.dev);
  FERRY_ASSIGN(std::shared_ptr<char[]> b, comm_->bridgePool().take(bytes, &pinner));
  blocks_.push_back(b);
  held_ += bytes;
  if (in) p.in.push_back({b.get(), user, bytes});
  if (out) p.out.push_back({const_cast<void*>(user), b.get(), bytes});
  staged_ += bytes * ((in ? 1 : 0) + (out ? 1 : 0));
  return static_cast<void*>(b.get());
}

// Bytes a rank reads from sendbuff and writes to recvbuff, and whether it
// uses each at all (NCCL's rules for rooted collectives).
void ioBytes(const CollArgs& a, size_t* send, size_t* recv) {
  size_t b = a.count * a.elemSize, all = b * static_cast<size_t>(a.nranks);
  bool root = a.rank == a.root;
  *send = *recv = b;
  switch (a.kind) {
    case CollKind::kAllGather: *recv = all; break;
    case CollKind::kReduceScatter: *send = all; break;
    case CollKind::kAllToAll: *send = *recv = all; break;
    case CollKind::kGather: *recv = root ? all : 0; break;
    case CollKind::kScatter: *send = root ? all : 0; break;
    case CollKind::kBroadcast: *send = root ? b : 0; break;
    case CollKind::kReduce: *recv = root ? b : 0; break;
    default: break;
  }
}

Status BridgeJob::stageColl(CollTask& t) {
  if (t.alltoallv) return invalidUsage("ferryAlltoAllv does not run on device memory yet");
  StreamPart& p = part(t.dev, t.stream);
  size_t sb, rb;
  ioBytes(t.args, &sb, &rb);
  // In place or not, the input is read before the output is written: the
  // staging copies make every call out-of-place.
  FERRY_ASSIGN(void* s, stage(p, t.sendbuff, sb, true, false));
  FERRY_ASSIGN(void* r, stage(p, t.recvbuff, rb, false, true));
  t.sendbuff = sb ? s : nullptr;
  t.recvbuff = rb ? r : nullptr;
  t.args.inPlace = false;
  if (t.deviceScalar) {
    // Into a pinned block: a copy into pageable memory may wait for the
    // stream, and the call must return before the stream gets there.
    const size_t e = kernels::sizeOf(t.reduce.dtype);
    FERRY_TRY(p.dev->checkRange(t.deviceScalar, e));
    const mem::BlockPinner pinner = pinnerFor(p.dev);
    FERRY_ASSIGN(std::shared_ptr<char[]> b, comm_->bridgePool().take(e, &pinner));
    blocks_.push_back(b);
    p.scalars.push_back({b.get(), t.deviceScalar, e});
    scalars_.push_back({&t, b.get()});
    t.deviceScalar = nullptr;
  }
  t.key.kind = -1;  // staging blocks change from call to call: never a repeat
  t.dev = nullptr;
  t.stream = nullptr;
  if (pipelines(t)) {
    // Published output pieces release the stream's waits one by one.
    piecesIn_ = p.dev->newFlag();  // the stream raises it: registered with the device
    std::vector<IoGate::Buffer> in, out;
    if (sb) in.push_back({kInputBuf, sb});
    if (rb) out.push_back({kOutputBuf, rb});
    gate_ = std::make_unique<IoGate>(pieceBytes_, std::move(in), std::move(out), piecesIn_->word(),
                                     [this](uint32_t n) { done_->raiseTo(n); });
    t.gate = gate_.get();
  }
  return Status::ok();
}

// One collective alone on one stream, larger than a piece: staged in pieces.
// (A group of several would need a gate per run and pieces per task.)
bool BridgeJob::pipelines(const CollTask& t) const {
  if (pieceBytes_ == 0 || colls_.size() != 1 || !p2ps_.empty() || parts_.size() != 1) return false;
  size_t sb, rb;
  ioBytes(t.args, &sb, &rb);
  return std::max(sb, rb) > pieceBytes_;
}

Status BridgeJob::stageP2p(P2pTask& t) {
  StreamPart& p = part(t.dev, t.stream);
  FERRY_ASSIGN(t.buf, stage(p, t.buf, t.bytes, t.isSend, !t.isSend));
  t.dev = nullptr;
  t.stream = nullptr;
  return Status::ok();
}

// FERRY_BRIDGE_PIECE_BYTES; by default (-1) 1 MiB pieces where the device
// copies on engines of its own, whole buffers where its copies take host
// cores as the collective does (testdev: pieces cost 1-9% there, since
// nothing can overlap; perf/README.md).
size_t pieceBytesFor(const accel::Accelerator& dev) {
  int64_t piece = config::getInt(config::Param::kBridgePieceBytes);
  if (piece < 0) piece = dev.copyEngines() ? (1 << 20) : 0;
  return piece == 0 ? 0 : (static_cast<size_t>(piece) + 4095) / 4096 * 4096;
}

Status notCapturing(accel::Accelerator* dev, accel::StreamHandle s) {
  FERRY_ASSIGN(bool cap, dev->capturing(s));
  if (!cap) return Status::ok();
  return invalidUsage(std::string("the ") + dev->name() +
                      " stream is capturing a graph: collectives and Send/Recv in stream capture "
                      "(CUDA graphs) are not supported yet; call them outside the capture");
}

Status BridgeJob::build() {
  // Tasks the caller gave no stream for follow the job's first device task.
  accel::Accelerator* dev = nullptr;
  accel::StreamHandle s = nullptr;
  bool mixed = false;
  auto first = [&](accel::Accelerator* d, accel::StreamHandle st) {
    if (d && !dev) dev = d, s = st;
    mixed = mixed || (d && d != dev);
  };
  for (const CollTask& t : colls_) first(t.dev, t.stream);
  for (const P2pTask& t : p2ps_) first(t.dev, t.stream);
  if (!dev) return internalError("a bridge job without a device task");
  if (mixed) return invalidUsage("one group's work on two device kinds");
  for (CollTask& t : colls_) {
    if (!t.dev) t.dev = dev, t.stream = s;
    part(t.dev, t.stream);
  }
  for (P2pTask& t : p2ps_) {
    if (!t.dev) t.dev = dev, t.stream = s;
    part(t.dev, t.stream);
  }
  // Each stream once, before anything is pinned or enqueued (either would
  // spoil the capture).
  for (const StreamPart& p : parts_) FERRY_TRY(notCapturing(p.dev, p.stream));
  done_ = dev->newFlag();
  pieceBytes_ = pieceBytesFor(*dev);
  for (CollTask& t : colls_) FERRY_TRY(stageColl(t));
  for (P2pTask& t : p2ps_) FERRY_TRY(stageP2p(t));
  return Status::ok();
}

// Each stream: inputs out to staging, "reached", wait for "done", results
// back. The last task holds the job (and its staging) until then.
Status BridgeJob::enqueueStreams(const std::shared_ptr<BridgeJob>& self) {
  const int64_t waitMs = std::max<int64_t>(4 * comm_->timeoutMs(), 120000);
  // A gated job has one stream part (pipelines).
  if (gate_) return enqueuePieces(parts_.front(), self, waitMs);
  for (StreamPart& p : parts_) {
    for (const auto& c : p.scalars) FERRY_TRY(p.dev->copyAsync(c.dst, c.src, c.bytes, p.stream));
    for (const auto& c : p.in) FERRY_TRY(p.dev->copyAsync(c.dst, c.src, c.bytes, p.stream));
    FERRY_TRY(p.dev->hostFnAsync(p.stream, [self] { self->reached_.add(1); }));
    FERRY_TRY(p.dev->waitFlagAsync(p.stream, done_.get(), 1, waitMs));
    for (const auto& c : p.out) FERRY_TRY(p.dev->copyAsync(c.dst, c.src, c.bytes, p.stream));
    FERRY_TRY(p.dev->hostFnAsync(p.stream, [self] {}));
  }
  return Status::ok();
}

// Pipelined: "reached" first, then each input piece and its count (the
// gate's input pieces), then each output piece once the run has published
// it (piece j: done_ > j).
Status BridgeJob::enqueuePieces(StreamPart& p, const std::shared_ptr<BridgeJob>& self,
                                int64_t waitMs) {
  for (const auto& c : p.scalars) FERRY_TRY(p.dev->copyAsync(c.dst, c.src, c.bytes, p.stream));
  FERRY_TRY(p.dev->hostFnAsync(p.stream, [self] { self->reached_.add(1); }));
  uint32_t counted = 0;
  for (const auto& c : p.in) {
    for (size_t off = 0; off < c.bytes; off += pieceBytes_) {
      size_t n = std::min(pieceBytes_, c.bytes - off);
      FERRY_TRY(p.dev->copyAsync(static_cast<char*>(c.dst) + off,
                                 static_cast<const char*>(c.src) + off, n, p.stream));
      FERRY_TRY(p.dev->signalFlagAsync(p.stream, piecesIn_.get(), ++counted));
    }
  }
  for (const auto& c : p.out) {
    uint32_t j = 0;
    for (size_t off = 0; off < c.bytes; off += pieceBytes_, ++j) {
      size_t n = std::min(pieceBytes_, c.bytes - off);
      FERRY_TRY(p.dev->waitFlagAsync(p.stream, done_.get(), j + 1, waitMs));
      FERRY_TRY(p.dev->copyAsync(static_cast<char*>(c.dst) + off,
                                 static_cast<const char*>(c.src) + off, n, p.stream));
    }
  }
  return p.dev->hostFnAsync(p.stream, [self] {});
}

Status BridgeJob::runTasks() {
  if (colls_.size() == 1 && p2ps_.empty()) return enqueueColl(colls_[0]);
  FERRY_TRY(groupStart());
  Status st;
  for (const CollTask& t : colls_)
    if (st.isOk()) st = enqueueColl(t);
  for (const P2pTask& t : p2ps_)
    if (st.isOk()) st = enqueueP2p(t);
  Status ended = groupEnd();
  return st.isOk() ? ended : st;
}

void BridgeJob::run() {
  const uint32_t streams = static_cast<uint32_t>(parts_.size());
  if (!reached_.waitAtLeast(streams, comm_->timeoutMs(), comm_->abortFlag())) {
    Status st = comm_->abortFlag()->load()
                    ? remoteError("communicator aborted")
                    : timeoutError("rank " + std::to_string(comm_->rank()) + ": the stream of a " +
                                   deviceName() + " operation did not reach it within " +
                                   std::to_string(comm_->timeoutMs()) + " ms");
    FERRY_WARN("%s", st.message().c_str());
    comm_->fail(st);
  } else {
    for (auto [t, bytes] : scalars_) t->reduce.scalar = kernels::scalarFromBytes(t->reduce.dtype, bytes);
    // A failure is logged and latched on the communicator by the engine.
    (void)runTasks();
  }
  finish();
}

void BridgeJob::cancel(const Status& why) {
  comm_->latch(why);
  finish();
}

}  // namespace

Result<accel::Accelerator*> orderingDevice(const void* a, const void* b, accel::StreamHandle s) {
  accel::Accelerator* host = &accel::host();
  accel::Accelerator* da = a ? &accel::ownerOf(a) : host;
  accel::Accelerator* db = b ? &accel::ownerOf(b) : host;
  if (da != host && db != host && da != db)
    return invalidUsage(std::string("one call on ") + da->name() + " and " + db->name() +
                        " memory");
  accel::Accelerator* d = da != host ? da : db != host ? db : nullptr;
  accel::Accelerator* ds = s ? accel::streamOwner(s) : nullptr;
  if (d && s && ds != d)
    return invalidUsage(std::string("buffers are ") + d->name() +
                        " memory but the stream is not one of its streams");
  return d ? d : ds;
}

Status bridgeSubmit(Comm* c, std::vector<CollTask> colls, std::vector<P2pTask> p2ps) {
  auto job = std::make_shared<BridgeJob>(c, std::move(colls), std::move(p2ps));
  FERRY_TRY(job->build());
  c->noteStaged(job->deviceName(), job->stagedBytes(), job->pieceBytes());
  Status st = job->enqueueStreams(job);
  if (st.isOk())
    st = c->ensureOpQueue().push(job, Comm::kBridgeMaxHeldBytes, c->abortFlag(), c->timeoutMs());
  // Not queued: the call fails (the communicator stays usable) and streams
  // that got the job's tasks must not wait for it; a last task on each holds
  // the job (its flags and staging) until they are past them.
  if (!st.isOk()) {
    job->release();
    job->holdStreams(job);
  }
  return st;
}

}  // namespace ferry
