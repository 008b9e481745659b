// The executor over in-memory connections: what a rank does first when
// several lanes can move. Sends are posted before any receive copies, so a
// peer waiting for our data never idles through our copy (a receive may be
// a whole-block cross-memory read; two ranks' SendRecv took turns).
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "exec/executor.h"

namespace ferry {
namespace {

using Pipe = std::deque<std::vector<char>>;

// One direction each way; logs "send" on commit and "recv" when a piece is taken.
class FakeConnection : public Connection {
 public:
  FakeConnection(Pipe* out, Pipe* in, std::vector<std::string>* log) : out_(out), in_(in), log_(log) {}
  Status trySend(SendSlot* s) override {
    slot_.resize(4096);
    s->data = slot_.data();
    s->capacity = slot_.size();
    return Status::ok();
  }
  Status commitSend(size_t bytes) override {
    out_->emplace_back(slot_.begin(), slot_.begin() + static_cast<long>(bytes));
    log_->push_back("send");
    return Status::ok();
  }
  Status tryRecv(RecvPiece* p) override {
    *p = RecvPiece{};
    if (in_->empty()) return Status::ok();
    log_->push_back("recv");
    p->ready = true;
    p->data = in_->front().data();
    p->size = in_->front().size();
    return Status::ok();
  }
  Status releaseRecv() override {
    in_->pop_front();
    return Status::ok();
  }
  bool sendsDrained() override { return true; }
  std::string describe() const override { return "fake"; }

 private:
  Pipe* out_;
  Pipe* in_;
  std::vector<std::string>* log_;
  std::vector<char> slot_;
};

class OnePeer : public ConnectionSource {
 public:
  explicit OnePeer(Connection* c) : c_(c) {}
  Result<Connection*> connection(int) override { return c_; }

 private:
  Connection* c_;
};

TEST(ExecutorOrder, SendsArePostedBeforeReceivesCopy) {
  constexpr size_t kBytes = 1024;
  std::vector<char> in(kBytes, 'a'), out(kBytes, 0);
  Pipe toPeer, fromPeer;
  fromPeer.emplace_back(kBytes, 'b');  // the peer's data is already there
  std::vector<std::string> log;
  FakeConnection conn(&toPeer, &fromPeer, &log);
  OnePeer source(&conn);
  // The receive's lane comes first in the schedule.
  Schedule s{"test", {Lane{{recvStep(1, {kOutputBuf, 0}, kBytes)}}, Lane{{sendStep(1, {kInputBuf, 0}, kBytes)}}}};
  ExecOptions opt;
  opt.allowRefs = false;
  Executor e(std::move(s), {in.data(), out.data()}, 1, ReduceSpec{}, opt);
  ASSERT_TRUE(e.start(source).isOk());
  bool progressed = false;
  ASSERT_TRUE(e.progress(&progressed).isOk());
  ASSERT_EQ(log, (std::vector<std::string>{"send", "recv"}));
  ASSERT_EQ(toPeer.size(), 1u);
  EXPECT_EQ(toPeer.front(), in);
  EXPECT_EQ(out, std::vector<char>(kBytes, 'b'));
}

}  // namespace
}  // namespace ferry
