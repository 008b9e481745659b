#include "comm/device_direct.h"

#include <mutex>
#include <string>
#include <vector>

#include "algorithms/builders.h"
#include "comm/comm.h"
#include "comm/group.h"
#include "comm/symmetric_bind.h"
#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"

namespace ferry {

// Shared with the host functions on the streams, which may outlive the
// communicator's use of them: they touch the communicator only under mu,
// and only while comm is set.
struct DeviceDirect::Control {
  std::mutex mu;
  Comm* comm = nullptr;
  std::atomic<bool> stop{false};  // the communicator goes: waits end now
  int rank = 0;
  int64_t timeoutMs = 0;
};

namespace {

using Control = DeviceDirect::Control;

bool directOp(const CollTask& t) { return !t.reduce.premul && t.reduce.divisor <= 1; }

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
};

char* operand(const CollTask& t, const mem::WindowBinding& b, const Region& r) {
  if (r.peer >= 0) return b.base(r.peer, r.buf) + r.offset;
  char* own = r.buf == kInputBuf ? const_cast<char*>(static_cast<const char*>(t.sendbuff))
                                 : static_cast<char*>(t.recvbuff);
  return own + r.offset;
}

// The schedule's one lane as moves, every operand checked against the
// backend; false if the stream cannot run it (then nothing was enqueued
// and the bridge takes the call).
bool plan(const CollTask& t, const mem::WindowBinding& b, const Schedule& s, std::vector<Move>* out) {
  if (s.lanes.size() != 1 || !s.prologue.empty() || s.scratchBytes) return false;
  for (const Step& x : s.lanes[0].steps) {
    if (x.kind == StepKind::kBarrier) {
      out->push_back({x.kind});
      continue;
    }
    bool kind = x.kind == StepKind::kCopy || (x.kind == StepKind::kLocalReduce && t.dev->reduces());
    if (!kind || x.scaleSrc || x.src.buf > kOutputBuf || x.dst.buf > kOutputBuf) return false;
    Move m{x.kind, operand(t, b, x.dst), operand(t, b, x.src), x.bytes};
    if (!t.dev->checkRange(m.dst, m.bytes).isOk() || !t.dev->checkRange(m.src, m.bytes).isOk()) return false;
    if (m.kind == StepKind::kCopy && m.dst == m.src) continue;  // in place: nothing to move
    out->push_back(m);
  }
  return true;
}

// From the stream: latched for ncclCommGetAsyncError, and named once.
void report(Control& ctl, const Status& st) {
  std::lock_guard<std::mutex> g(ctl.mu);
  if (!ctl.comm) return;
  ctl.comm->latch(st);
  FERRY_WARN("%s", st.message().c_str());
}

// Whether a wait should end unfulfilled: the communicator is gone, was
// aborted or failed (here, or on another rank of the host: pollBackground).
bool givenUp(Control& ctl) {
  if (ctl.stop.load()) return true;
  std::lock_guard<std::mutex> g(ctl.mu);
  if (!ctl.comm) return true;
  ctl.comm->pollBackground();
  return ctl.comm->abortFlag()->load() || ctl.comm->asyncResult() != ncclSuccess;
}

enum class Wait { kReached, kGivenUp, kTimedOut };

bool reached(const accel::HostFlag* f, uint32_t g) { return static_cast<int32_t>(f->load() - g) >= 0; }

// Until f reaches g, in slices of 10 ms between which givenUp is asked.
Wait waitFor(Control& ctl, const accel::HostFlag* f, uint32_t g) {
  const int64_t end = nowMs() + ctl.timeoutMs;
  for (;;) {
    if (reached(f, g)) return Wait::kReached;
    if (givenUp(ctl)) return Wait::kGivenUp;
    if (f->waitAtLeast(g, 10, &ctl.stop)) return Wait::kReached;
    if (nowMs() >= end) return Wait::kTimedOut;
  }
}

class StreamRun {
 public:
  StreamRun(const CollTask& t, mem::NodeSync* sync, std::shared_ptr<Control> ctl)
      : t_(t), dev_(t.dev), sync_(sync), ctl_(std::move(ctl)) {}

  // Before any step: this rank's descriptor of the operation goes into its
  // sync page, to be compared with every rank's once the first barrier
  // has passed (a rank cannot publish its next one before every rank
  // reached this operation's last barrier, which comes after the check).
  Status publish(const mem::SymDescriptor& d) {
    desc_ = d;
    mem::NodeSync* sync = sync_;
    return dev_->hostFnAsync(t_.stream, [sync, d] { sync->publishDevice(d); });
  }

  Status run(const Move& m) {
    switch (m.kind) {
      case StepKind::kCopy:
        return dev_->copyAsync(m.dst, m.src, m.bytes, t_.stream);
      case StepKind::kLocalReduce:  // dst = src OP dst
        return dev_->reduceAsync(m.dst, m.src, m.dst, m.bytes / t_.args.elemSize, t_.reduce.dtype,
                                 t_.reduce.op, t_.stream);
      default:
        return barrier();
    }
  }

 private:
  // My flag rises to the barrier's number; the stream then waits (in a
  // host function, so that the wait sees the communicator's abort, its
  // failures and a deadline) until every rank's flag has. Once the
  // communicator failed, later barriers no longer wait.
  Status barrier() {
    const uint32_t g = sync_->nextDeviceBarrier();
    FERRY_TRY(dev_->signalFlagAsync(t_.stream, sync_->deviceFlag(ctl_->rank), g));
    const bool check = !checked_;
    checked_ = true;
    return dev_->hostFnAsync(t_.stream, [ctl = ctl_, sync = sync_, g, check, d = desc_] {
      for (int p = 0; p < sync->nranks(); ++p) {
        Wait w = waitFor(*ctl, sync->deviceFlag(p), g);
        if (w == Wait::kReached) continue;
        if (w == Wait::kTimedOut)
          report(*ctl, timeoutError("device windows: rank " + std::to_string(p) + " did not reach barrier " +
                                    std::to_string(g) + " within " + std::to_string(ctl->timeoutMs) +
                                    " ms; rank " + std::to_string(ctl->rank) + "'s stream goes on"));
        return;
      }
      mem::SymDescriptor theirs;
      int r = check ? sync->firstDeviceMismatch(&theirs) : -1;
      if (r >= 0)
        report(*ctl, invalidUsage("ranks disagree on a collective over device windows: rank " +
                                  std::to_string(ctl->rank) + " runs " + mem::describe(d) + ", rank " +
                                  std::to_string(r) + " runs " + mem::describe(theirs) +
                                  " (every rank must pass window buffers at the same offsets)"));
    });
  }

  const CollTask& t_;
  accel::Accelerator* dev_;
  mem::NodeSync* sync_;
  std::shared_ptr<Control> ctl_;
  mem::SymDescriptor desc_;
  bool checked_ = false;
};

}  // namespace

DeviceDirect& Comm::direct() {
  if (!direct_) direct_ = std::make_unique<DeviceDirect>(this);
  return *direct_;
}

DeviceDirect::DeviceDirect(Comm* c) : comm_(c), ctl_(std::make_shared<Control>()) {
  ctl_->comm = c;
  ctl_->rank = c->rank();
  ctl_->timeoutMs = c->timeoutMs();
}

bool DeviceDirect::drain(int64_t timeoutMs) const {
  return ops_ == 0 || done_->waitAtLeast(ops_, timeoutMs);
}

DeviceDirect::~DeviceDirect() {
  // A wait gives up after the timeout, and the first failure makes the
  // later ones give up at once: past that and some slack, stop them.
  if (!drain(ctl_->timeoutMs + 5000)) {
    ctl_->stop = true;
    if (!drain(5000)) {
      FERRY_WARN("device windows: work of rank %d's communicator is still queued on a stream at its "
                 "destruction; its sync pages and imported windows stay mapped", ctl_->rank);
      comm_->windows().abandon();
    }
  }
  std::lock_guard<std::mutex> g(ctl_->mu);
  ctl_->comm = nullptr;
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
  if (!plan(t, *b, symmetricSchedule(a, comm_->view()), &moves)) return false;
  if (!done_) {
    dev_ = t.dev;
    done_ = t.dev->newFlag();
  }
  const uint32_t k = ++ops_;
  mem::SymDescriptor d = b->descriptor();
  d.collSeq = sync->nextDeviceOp();
  StreamRun run(t, sync, ctl_);
  Status st = k > 1 ? t.dev->waitFlagAsync(t.stream, done_.get(), k - 1, ctl_->timeoutMs) : Status::ok();
  if (st.isOk()) st = run.publish(d);
  for (size_t i = 0; i < moves.size() && st.isOk(); ++i) st = run.run(moves[i]);
  if (st.isOk()) st = t.dev->signalFlagAsync(t.stream, done_.get(), k);
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
