#include "comm/device_direct.h"

#include <string>

#include "algorithms/builders.h"
#include "comm/symmetric_bind.h"
#include "core/config.h"
#include "core/log.h"

namespace ferry {
namespace {

bool directOp(const CollTask& t) {
  return !t.reduce.premul && t.reduce.divisor <= 1;
}

// Steps as large as possible where each one is a kernel launch on engines
// of the device's own; on testdev (host cores do the work) 1 MiB kept the
// cache's help and ran 1.6-2x faster than the host's 32 KiB pieces.
size_t pieceBytes(const accel::Accelerator& dev) {
  static const int64_t set = config::getInt(config::Param::kDevwinPieceBytes);
  if (set > 0) return static_cast<size_t>(set);
  return dev.copyEngines() ? size_t(1) << 40 : size_t(1) << 20;
}

// Copies, local reductions and barriers on one lane: what a stream can run.
bool streamable(const Schedule& s) {
  if (s.lanes.size() != 1 || !s.prologue.empty() || s.scratchBytes) return false;
  for (const Step& x : s.lanes[0].steps) {
    bool kind = x.kind == StepKind::kCopy || x.kind == StepKind::kLocalReduce || x.kind == StepKind::kBarrier;
    if (!kind || x.scaleSrc || x.src.buf > kOutputBuf || x.dst.buf > kOutputBuf) return false;
  }
  return true;
}

class StreamRun {
 public:
  StreamRun(Comm* c, const CollTask& t, const mem::WindowBinding& b, accel::Accelerator* dev)
      : c_(c), t_(t), b_(b), dev_(dev), sync_(c->windows().sync()) {}

  // Before any step: this rank's descriptor of the operation goes into its
  // sync page, to be compared with every rank's once the first barrier
  // has passed (a rank cannot publish its next one before every rank
  // reached this operation's last barrier, which comes after the check).
  Status publish() {
    desc_ = b_.descriptor();
    desc_.collSeq = sync_->nextDeviceOp();
    mem::NodeSync* sync = sync_;
    mem::SymDescriptor d = desc_;
    return dev_->hostFnAsync(t_.stream, [sync, d] { sync->publishDevice(d); });
  }

  Status step(const Step& s) {
    switch (s.kind) {
      case StepKind::kCopy:
        return dev_->copyAsync(at(s.dst), at(s.src), s.bytes, t_.stream);
      case StepKind::kLocalReduce:  // dst = src OP dst
        return dev_->reduceAsync(at(s.dst), at(s.src), at(s.dst), s.bytes / t_.args.elemSize,
                                 t_.reduce.dtype, t_.reduce.op, t_.stream);
      default:
        return barrier();
    }
  }

 private:
  char* at(const Region& r) const {
    if (r.peer >= 0) return b_.base(r.peer, r.buf) + r.offset;
    char* own = r.buf == kInputBuf ? const_cast<char*>(static_cast<const char*>(t_.sendbuff))
                                   : static_cast<char*>(t_.recvbuff);
    return own + r.offset;
  }

  // My flag rises to the barrier's number; the stream then waits (in a
  // host function, so that the wait sees the communicator's abort and
  // deadline) until every rank's flag has. Once the communicator failed,
  // later barriers no longer wait: the error is what the caller gets.
  Status barrier() {
    const uint32_t g = sync_->nextDeviceBarrier();
    FERRY_TRY(dev_->signalFlagAsync(t_.stream, sync_->deviceFlag(c_->rank()), g));
    Comm* c = c_;
    mem::NodeSync* sync = sync_;
    const bool check = !checked_;
    checked_ = true;
    return dev_->hostFnAsync(t_.stream, [c, sync, g, check, d = desc_] {
      for (int p = 0; p < sync->nranks(); ++p) {
        if (c->abortFlag()->load() || c->asyncResult() != ncclSuccess) return;
        if (sync->deviceFlag(p)->waitAtLeast(g, c->timeoutMs(), c->abortFlag())) continue;
        if (c->abortFlag()->load()) return;
        fail(c, timeoutError("device windows: rank " + std::to_string(p) + " did not reach barrier " +
                             std::to_string(g) + " within " + std::to_string(c->timeoutMs()) +
                             " ms; rank " + std::to_string(c->rank()) + "'s stream goes on"));
        return;
      }
      mem::SymDescriptor theirs;
      int r = check ? sync->firstDeviceMismatch(&theirs) : -1;
      if (r >= 0)
        fail(c, invalidUsage("ranks disagree on a collective over device windows: rank " +
                             std::to_string(c->rank()) + " runs " + mem::describe(d) + ", rank " +
                             std::to_string(r) + " runs " + mem::describe(theirs) +
                             " (every rank must pass window buffers at the same offsets)"));
    });
  }

  // From the stream: latched for ncclCommGetAsyncError, and named once.
  static void fail(Comm* c, const Status& st) {
    c->latch(st);
    FERRY_WARN("%s", st.message().c_str());
  }

  Comm* c_;
  const CollTask& t_;
  const mem::WindowBinding& b_;
  accel::Accelerator* dev_;
  mem::NodeSync* sync_;
  mem::SymDescriptor desc_;
  bool checked_ = false;
};

}  // namespace

Result<bool> submitDeviceDirect(Comm* c, const CollTask& t) {
  if (!t.dev || !c->windows().sync() || !directOp(t)) return false;
  std::unique_ptr<mem::WindowBinding> b = bindWindows(c, t, t.info);
  if (!b || b->device() != t.dev) return false;
  CollArgs a = t.args;
  a.symmetric = true;
  a.streamPieceBytes = pieceBytes(*t.dev);
  if (!symmetricSupports(a, c->view())) return false;
  Schedule s = symmetricSchedule(a, c->view());
  if (!streamable(s)) return false;
  c->windows().noteStream(t.dev, t.stream);
  StreamRun run(c, t, *b, t.dev);
  for (size_t i = 0; i <= s.lanes[0].steps.size(); ++i) {
    Status st = i == 0 ? run.publish() : run.step(s.lanes[0].steps[i - 1]);
    if (st.isOk()) continue;
    // Part of the collective may be on the stream, and the operation and
    // barrier numbers ran ahead of the peers': this communicator cannot go on.
    c->fail(st);
    return st;
  }
  FERRY_INFO(log::kColl, "%s on %s windows: %zu steps enqueued as stream work (no staging)",
             collName(t.args.kind), t.dev->name(), s.lanes[0].steps.size());
  return true;
}

}  // namespace ferry
