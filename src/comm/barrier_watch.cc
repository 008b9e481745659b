#include "comm/barrier_watch.h"

#include <string>

#include "comm/comm.h"
#include "core/log.h"
#include "core/wait.h"
#include "mem/window_binding.h"

namespace ferry {
namespace {

enum class Wait { kReached, kGivenUp, kTimedOut };

// Whether waits should end unfulfilled: stopped, or the communicator was
// aborted or failed (here, or on another rank of the host: pollBackground).
bool givenUp(Comm* c, const std::atomic<bool>& stop) {
  if (stop.load()) return true;
  c->pollBackground();
  return c->abortFlag()->load() || c->asyncResult() != ncclSuccess;
}

// Until f reaches g, in slices of 10 ms between which givenUp is asked;
// kTimedOut once nowMs() passed end. Only the first slice spins: a barrier
// is queued here at the call, and this rank's stream may take long to
// reach it, while the watch should not take cores from it meanwhile.
Wait waitFor(Comm* c, const std::atomic<bool>& stop, const accel::HostFlag* f, uint32_t g, int64_t end) {
  for (bool first = true;; first = false) {
    if (f->reached(g)) return Wait::kReached;
    if (givenUp(c, stop)) return Wait::kGivenUp;
    if (f->waitAtLeast(g, 10, &stop, first)) return Wait::kReached;
    if (nowMs() >= end) return Wait::kTimedOut;
  }
}

// Failed, not only latched: the board tells the host's other ranks, whose
// streams would otherwise pass later barriers against this rank's stale
// flags.
void report(Comm* c, const Status& st) {
  c->fail(st);
  FERRY_WARN("%s", st.message().c_str());
}

}  // namespace

BarrierWatch::BarrierWatch(Comm* comm, mem::NodeSync* sync, std::shared_ptr<accel::HostFlag> gate)
    : comm_(comm), sync_(sync), gate_(std::move(gate)), thread_([this] { run(); }) {}

BarrierWatch::~BarrierWatch() {
  {
    std::lock_guard<std::mutex> g(mu_);
    quit_ = true;
  }
  stop();
  thread_.join();
}

void BarrierWatch::add(uint32_t g, const mem::SymDescriptor* mine) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back({g, mine != nullptr, mine ? *mine : mem::SymDescriptor{}});
  }
  cv_.notify_one();
}

void BarrierWatch::stop() {
  stop_ = true;
  cv_.notify_one();
}

void BarrierWatch::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return quit_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Pending p = queue_.front();
    lk.unlock();
    release(p);
    lk.lock();
    queue_.pop_front();
  }
}

// This rank's arrival has no deadline (its stream may be busy with the
// user's work for long); the others' is the communicator's timeout from it.
void BarrierWatch::release(const Pending& p) {
  const int me = comm_->rank();
  Wait w = waitFor(comm_, stop_, sync_->deviceFlag(me), p.g, INT64_MAX);
  const int64_t end = nowMs() + comm_->timeoutMs();
  for (int r = 0; r < sync_->nranks() && w == Wait::kReached; ++r) {
    w = waitFor(comm_, stop_, sync_->deviceFlag(r), p.g, end);
    if (w == Wait::kTimedOut)
      report(comm_, timeoutError("device windows: rank " + std::to_string(r) + " did not reach barrier " +
                                 std::to_string(p.g) + " within " + std::to_string(comm_->timeoutMs()) +
                                 " ms; rank " + std::to_string(me) + "'s stream goes on"));
  }
  if (w == Wait::kGivenUp && stop_.load() && comm_->asyncResult() == ncclSuccess)
    report(comm_, invalidUsage("device windows: rank " + std::to_string(me) + "'s communicator was destroyed " +
                               "while its stream still had barrier " + std::to_string(p.g) +
                               " ahead; released without its peers (that operation's results are undefined)"));
  mem::SymDescriptor theirs;
  int r = w == Wait::kReached && p.check ? sync_->firstDeviceMismatch(&theirs) : -1;
  if (r >= 0)
    report(comm_, invalidUsage("ranks disagree on a collective over device windows: rank " + std::to_string(me) +
                               " runs " + mem::describe(p.mine) + ", rank " + std::to_string(r) + " runs " +
                               mem::describe(theirs) +
                               " (every rank must pass window buffers at the same offsets)"));
  gate_->raiseTo(p.g);
}

}  // namespace ferry
