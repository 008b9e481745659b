#include "comm/device_direct.h"

#include <string>
#include <vector>

#include "algorithms/builders.h"
#include "comm/barrier_watch.h"
#include "comm/comm.h"
#include "comm/group.h"
#include "comm/symmetric_bind.h"
#include "core/config.h"
#include "core/log.h"

namespace ferry {

namespace {

// PreMulSum never (a symmetric schedule reduces peers' inputs, each
// scaled by its own rank's scalar); Avg where the backend can divide.
bool directOp(const CollTask& t) { return !t.reduce.premul && (t.reduce.divisor <= 1 || t.dev->divides()); }

// Steps as large as possible where each one is a kernel launch on engines
// of the device's own; on testdev (host cores do the work) 1 MiB kept the
// cache's help and ran 1.6-2x faster than the host's 32 KiB pieces.
size_t pieceBytes(const accel::Accelerator& dev) {
  static const int64_t set = config::getInt(config::Param::kDevwinPieceBytes);
  if (set > 0) return static_cast<size_t>(set);
  return dev.copyEngines() ? size_t(1) << 40 : size_t(1) << 20;
}

// One step with its operands resolved (barriers have none).
struct Move {
  StepKind kind;
  char* dst = nullptr;
  const char* src = nullptr;
  size_t bytes = 0;
  bool divide = false;  // Avg: the step makes final values, divide them
};

char* operand(const CollTask& t, const mem::WindowBinding& b, char* scratch, const Region& r) {
  if (r.peer >= 0) return b.base(r.peer, r.buf) + r.offset;
  if (r.buf == kScratchBuf) return scratch + r.offset;
  char* own = r.buf == kInputBuf ? const_cast<char*>(static_cast<const char*>(t.sendbuff))
                                 : static_cast<char*>(t.recvbuff);
  return own + r.offset;
}

// Whether the step runs a kernel (reduction, Avg's division), whose
// operands the backend checks as such.
bool kernelStep(const Move& m) { return m.kind == StepKind::kLocalReduce || m.divide; }

// The schedule's one lane as moves. False if the stream cannot run this
// call's shape (then nothing was enqueued and the bridge takes the call:
// every rank decides that alike from the call's arguments); an error if an
// operand is one the backend cannot take: a fact of this rank's alone
// (its peers, which cannot know it, take the path), so the call fails.
// Scratch (AlltoAll in place sends from a copy) is device memory of the
// communicator's (`scratch`, at least s.scratchBytes).
Result<bool> plan(const CollTask& t, const mem::WindowBinding& b, const Schedule& s, char* scratch,
                  std::vector<Move>* out) {
  if (s.lanes.size() != 1 || !s.prologue.empty()) return false;
  for (const Step& x : s.lanes[0].steps) {
    if (x.kind == StepKind::kBarrier) {
      out->push_back({x.kind});
      continue;
    }
    bool kind = x.kind == StepKind::kCopy || (x.kind == StepKind::kLocalReduce && t.dev->reduces());
    if (!kind || x.scaleSrc || x.src.buf > kScratchBuf || x.dst.buf > kScratchBuf) return false;
    Move m{x.kind, operand(t, b, scratch, x.dst), operand(t, b, scratch, x.src), x.bytes,
           x.finalValue && t.reduce.divisor > 1};
    for (const void* p : {static_cast<const void*>(m.dst), static_cast<const void*>(m.src)})
      FERRY_TRY(kernelStep(m) ? t.dev->checkKernelOperand(p, m.bytes) : t.dev->checkRange(p, m.bytes));
    if (m.kind == StepKind::kCopy && m.dst == m.src && !m.divide) continue;  // in place: nothing to move
    out->push_back(m);
  }
  return true;
}

class StreamRun {
 public:
  StreamRun(const CollTask& t, mem::NodeSync* sync, BarrierWatch* watch, const accel::HostFlag* gate,
            int64_t gateMs)
      : t_(t), dev_(t.dev), sync_(sync), watch_(watch), gate_(gate), gateMs_(gateMs) {}

  // Before any step: this rank's descriptor of the operation goes into its
  // sync page, to be compared with every rank's once the first barrier
  // has passed (a rank cannot publish its next one before every rank
  // reached this operation's last barrier, which comes after the check).
  Status publish(const mem::SymDescriptor& d) {
    desc_ = d;
    mem::NodeSync* sync = sync_;
    return dev_->hostFnAsync(t_.stream, [sync, d] { sync->publishDevice(d); });
  }

  // As the host executor runs the step (exec/executor.cc): a copy that
  // makes final values divides on the way, a reduction divides its result.
  Status run(const Move& m) {
    const size_t n = m.bytes / t_.args.elemSize;
    switch (m.kind) {
      case StepKind::kCopy:
        if (m.divide) return dev_->divideAsync(m.dst, m.src, n, t_.reduce.dtype, t_.reduce.divisor, t_.stream);
        return dev_->copyAsync(m.dst, m.src, m.bytes, t_.stream);
      case StepKind::kLocalReduce:  // dst = src OP dst
        FERRY_TRY(dev_->reduceAsync(m.dst, m.src, m.dst, n, t_.reduce.dtype, t_.reduce.op, t_.stream));
        if (m.divide) return dev_->divideAsync(m.dst, m.dst, n, t_.reduce.dtype, t_.reduce.divisor, t_.stream);
        return Status::ok();
      default:
        return barrier();
    }
  }

 private:
  // My flag rises to the barrier's number (a host function that does not
  // block), then the stream waits for the gate the watch raises once every
  // rank's flag has (barrier_watch.h).
  Status barrier() {
    const uint32_t g = sync_->nextDeviceBarrier();
    watch_->add(g, checked_ ? nullptr : &desc_);
    checked_ = true;
    FERRY_TRY(dev_->signalFlagAsync(t_.stream, sync_->deviceFlag(t_.comm->rank()), g));
    return dev_->waitFlagAsync(t_.stream, gate_, g, gateMs_);
  }

  const CollTask& t_;
  accel::Accelerator* dev_;
  mem::NodeSync* sync_;
  BarrierWatch* watch_;
  const accel::HostFlag* gate_;
  int64_t gateMs_;
  mem::SymDescriptor desc_;
  bool checked_ = false;
};

}  // namespace

DeviceDirect& Comm::direct() {
  if (!direct_) direct_ = std::make_unique<DeviceDirect>(this);
  return *direct_;
}

DeviceDirect::DeviceDirect(Comm* c) : comm_(c) {}

// Up to the last operation whose end was enqueued: one that failed to
// enqueue (the communicator failed then) never raises the flag.
bool DeviceDirect::drain(int64_t timeoutMs) const {
  return signaled_ == 0 || done_->waitAtLeast(uint32_t(signaled_), timeoutMs);
}

DeviceDirect::~DeviceDirect() {
  // A barrier gives up after the timeout, and the first failure makes the
  // later ones pass at once: past that and some slack, release them all.
  if (!drain(comm_->timeoutMs() + 5000)) {
    watch_->stop();
    if (!drain(5000)) {
      FERRY_WARN("device windows: work of rank %d's communicator is still queued on a stream at its "
                 "destruction; its sync pages, imported windows and flags stay mapped", comm_->rank());
      comm_->windows().abandon();
      // Streams still wait on these (on CUDA by address, in the flag slab).
      new std::shared_ptr<accel::HostFlag>(done_);
      new std::shared_ptr<accel::HostFlag>(gate_);
      return;  // and the scratch stays allocated
    }
  }
  for (char* p : scratch_)
    if (Status st = scratchDev_->free(p); !st.isOk()) FERRY_WARN("device windows: %s", st.message().c_str());
}

// Grown, never shrunk; a smaller one may still be read by queued work, so it
// is freed with the communicator (after the drain), not here.
Result<char*> DeviceDirect::scratch(accel::Accelerator* dev, size_t bytes) {
  if (bytes <= scratchBytes_) return scratch_.empty() ? nullptr : scratch_.back();
  FERRY_ASSIGN(void* p, dev->alloc(bytes));
  scratchDev_ = dev;
  scratch_.push_back(static_cast<char*>(p));
  scratchBytes_ = bytes;
  return scratch_.back();
}

Result<bool> DeviceDirect::submit(const CollTask& t) {
  mem::NodeSync* sync = comm_->windows().sync();
  if (!t.dev || !sync || !directOp(t) || (dev_ && dev_ != t.dev)) return false;
  std::unique_ptr<mem::WindowBinding> b = bindWindows(comm_, t, t.info);
  if (!b || b->device() != t.dev) return false;
  // Captured work would replay barrier numbers that have passed.
  FERRY_ASSIGN(bool capturing, t.dev->capturing(t.stream));
  if (capturing) return false;
  CollArgs a = t.args;
  a.symmetric = true;
  a.streamPieceBytes = pieceBytes(*t.dev);
  if (!symmetricSupports(a, comm_->view())) return false;
  std::vector<Move> moves;
  Schedule sched = symmetricSchedule(a, comm_->view());
  Result<char*> scratch = this->scratch(t.dev, sched.scratchBytes);
  Result<bool> planned = scratch.isOk() ? plan(t, *b, sched, scratch.value(), &moves) : scratch.status();
  if (!planned.isOk()) {
    Status st = invalidUsage(std::string(collName(t.args.kind)) + " on " + t.dev->name() +
                             " windows: " + planned.status().message() + "; the other ranks run it as " +
                             "stream work, so this communicator cannot go on");
    comm_->fail(st);
    return st;
  }
  if (!planned.value()) return false;
  if (!done_) {
    dev_ = t.dev;
    done_ = t.dev->newFlag();
    gate_ = t.dev->newFlag();
    watch_ = std::make_unique<BarrierWatch>(comm_, sync, gate_);
  }
  const uint64_t k = ++ops_;
  mem::SymDescriptor d = b->descriptor();
  d.collSeq = sync->nextDeviceOp();
  // The watch releases every barrier within the timeout of this rank's
  // arrival; the gate's own deadline only backs that up.
  const int64_t gateMs = comm_->timeoutMs() + 10000;
  StreamRun run(t, sync, watch_.get(), gate_.get(), gateMs);
  // The order flag counts operations in its 32 bits, wrap-safe.
  Status st = k > 1 ? t.dev->waitFlagAsync(t.stream, done_.get(), uint32_t(k - 1), gateMs) : Status::ok();
  if (st.isOk()) st = run.publish(d);
  for (size_t i = 0; i < moves.size() && st.isOk(); ++i) st = run.run(moves[i]);
  if (st.isOk()) st = t.dev->signalFlagAsync(t.stream, done_.get(), uint32_t(k));
  if (st.isOk()) signaled_ = k;
  if (!st.isOk()) {
    // Part of the operation may be on the stream, and the operation and
    // barrier numbers ran ahead of the peers': this communicator cannot go on.
    comm_->fail(st);
    return st;
  }
  FERRY_INFO(log::kColl, "%s on %s windows: %zu steps enqueued as stream work (no staging)",
             collName(t.args.kind), t.dev->name(), moves.size());
  return true;
}

}  // namespace ferry
