// The bootstrap root thread (see root.h for which check-ins it believes).
//
// One poll() loop (through an Acceptor) over the listener, every connection
// still sending its check-in and every rank that checked in, so a silent or
// hostile connection can never stall the rendezvous.
#include "bootstrap/root.h"

#include <poll.h>
#include <pthread.h>

#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <vector>

#include "bootstrap/acceptor.h"
#include "bootstrap/refusal_log.h"
#include "bootstrap/root_registry.h"
#include "bootstrap/wire.h"
#include "core/log.h"
#include "core/wait.h"

namespace ferry::bootstrap {
namespace {

#define ROOT_WARN(...) \
  do {                 \
    if (logAllowed()) FERRY_WARN(__VA_ARGS__); \
  } while (0)
#define ROOT_INFO(...) \
  do {                 \
    if (logAllowed()) FERRY_INFO(log::kBootstrap, __VA_ARGS__); \
  } while (0)

// Check-ins claiming more distinct nranks values than this are refused.
constexpr size_t kMaxGroups = 8;

struct Member {
  Socket sock;
  uint8_t addr[SockAddr::kPackedBytes];
};
// The check-ins claiming one nranks value, by rank.
using Group = std::map<int, Member>;

class Root final : public Protocol {
 public:
  Root(Socket listener, uint64_t secret, int64_t timeoutMs, int nranks)
      : listener_(std::move(listener)), where_("bootstrap root " + listener_.peer().toString()),
        timeoutMs_(timeoutMs), acceptor_(where_, secret),
        expect_(registerRoot(secret, listener_.peer(), nranks)) {}
  ~Root() override { unregisterRoot(expect_.get()); }
  void run();

  size_t headBytes(uint32_t type) const override { return type == kCheckIn ? sizeof(CheckIn) : 0; }
  BodyPlan body(uint32_t, const uint8_t*) override { return BodyPlan::read(0); }

 private:
  void onCheckIn(Incoming in);
  void applyTrust();
  void watchMembers(std::vector<pollfd>* fds);
  void onMemberEvents(const std::vector<pollfd>& fds);
  void problem(ReplyStatus code, const std::string& why);
  void refuse(Socket& s, ReplyStatus code, const std::string& why);
  void finish(int nranks, Group& g);
  void fail(ReplyStatus code, const std::string& why);

  Socket listener_;
  std::string where_;
  int64_t timeoutMs_;
  Acceptor acceptor_;
  std::shared_ptr<Expectation> expect_;
  int trusted_ = 0;                 // nranks from rank 0; 0 unknown
  std::map<int, Group> groups_;     // by claimed nranks
  ReplyStatus problemCode_ = kReplyOk;
  std::string problem_;             // the first mismatch/duplicate seen
  int64_t lastEventMs_ = 0;
};

void reply(Socket& s, int32_t status, const void* data, uint32_t bytes, const Until& u) {
  std::vector<uint8_t> msg(sizeof(RootReply) + bytes);
  RootReply h{status, bytes};
  std::memcpy(msg.data(), &h, sizeof(h));
  if (bytes) std::memcpy(msg.data() + sizeof(h), data, bytes);
  Status st = sendAll(s, msg.data(), msg.size(), u);
  if (!st.isOk() && status == kReplyOk) {
    ROOT_WARN("bootstrap root: could not send the address table to %s: %s",
              s.peer().toString().c_str(), st.message().c_str());
  }
}

void Root::run() {
  Until until = Until::after(timeoutMs_);
  lastEventMs_ = nowMs();
  std::vector<pollfd> fds;
  std::vector<Incoming> done;
  while (true) {
    applyTrust();
    for (auto& [n, g] : groups_) {
      if (static_cast<int>(g.size()) == n && (trusted_ == 0 || trusted_ == n)) {
        return finish(n, g);
      }
    }
    if (until.expired()) {
      size_t arrived = 0;
      for (auto& [n, g] : groups_) arrived += g.size();
 return fail(kReplyFailed, "timed out after " + std::to_string(timeoutMs_) + " ms with " + std::to_string(arrived) + " of " +
                                    (trusted_ ? std::to_string(trusted_) : std::string("?")) +
                                    " ranks checked in");
    }
    if (!problem_.empty() && nowMs() - lastEventMs_ >= kGraceMs) {
      return fail(problemCode_, "creation failed: " + problem_);
    }
    watchMembers(&fds);
    done.clear();
    Status st = acceptor_.step(listener_, *this, until.sliceMs(), &fds, &done);
    if (!st.isOk()) return fail(kReplyFailed, st.message());
    onMemberEvents(fds);
    for (Incoming& in : done) onCheckIn(std::move(in));
  }
}

void Root::applyTrust() {
  int n = expect_->nranks.load();
  if (n <= 0 || n == trusted_) return;
  trusted_ = n;
  // Check-ins that disagree with rank 0 came before it told us: refuse them now.
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (it->first == n) {
      ++it;
      continue;
    }
    std::string why = "nranks mismatch: " + std::to_string(it->second.size()) +
                      " check-ins say nranks " + std::to_string(it->first) + ", rank 0 says " +
                      std::to_string(n);
    problem(kReplyMismatch, why);
    for (auto& [r, m] : it->second) refuse(m.sock, kReplyMismatch, why);
    it = groups_.erase(it);
  }
}

void Root::onCheckIn(Incoming in) {
  CheckIn ci;
  Status valid = decodeCheckIn(in.head.data(), in.head.size(), &ci);
  std::string from = "rank " + std::to_string(ci.rank) + " of " + std::to_string(ci.nranks) +
                     " (" + in.sock.peer().toString() + ")";
  if (!valid.isOk()) {
    // Bogus: no real rank sends this (Bootstrap::create checks its arguments).
    return refuse(in.sock, kReplyInvalid, "invalid check-in: " + from);
  }
  bool newGroup = !groups_.count(ci.nranks);
  int other = groups_.empty() ? 0 : groups_.begin()->first;  // a value claimed before
  if (trusted_ && ci.nranks != trusted_) {
    std::string why = "nranks mismatch: " + from + " says nranks " + std::to_string(ci.nranks) +
                      ", rank 0 says " + std::to_string(trusted_);
    problem(kReplyMismatch, why);
    return refuse(in.sock, kReplyMismatch, why);
  }
  if (newGroup && groups_.size() >= kMaxGroups) {
    std::string why = "nranks mismatch: " + from + ": check-ins disagree on nranks (" +
                      std::to_string(groups_.size()) + " values seen)";
    problem(kReplyMismatch, why);
    return refuse(in.sock, kReplyMismatch, why);
  }
  Group& g = groups_[ci.nranks];
  auto dup = g.find(ci.rank);
  if (dup != g.end()) {
    std::string why = "duplicate check-in of rank " + std::to_string(ci.rank) + " from " +
                      in.sock.peer().toString() + " (first from " +
                      dup->second.sock.peer().toString() + ")";
    problem(kReplyDuplicate, why);
    return refuse(in.sock, kReplyDuplicate, why);
  }
  if (newGroup && other) {
    // Nobody vouches for either value: both groups wait; one must fill up.
    problem(kReplyMismatch, "nranks mismatch: " + from + " says nranks " +
                                std::to_string(ci.nranks) + ", other check-ins said " +
                                std::to_string(other));
  }
  Member& m = g[ci.rank];
  m.sock = std::move(in.sock);
  std::memcpy(m.addr, ci.addr, sizeof(m.addr));
  lastEventMs_ = nowMs();
}

void Root::watchMembers(std::vector<pollfd>* fds) {
  fds->clear();
  for (auto& [n, g] : groups_) {
    for (auto& [r, m] : g) fds->push_back(pollfd{m.sock.fd(), POLLIN, 0});
  }
}

void Root::onMemberEvents(const std::vector<pollfd>& fds) {
  // Same order as watchMembers. A checked-in rank has nothing more to say:
  // readable means it left (or talks out of turn), either way it is gone.
  size_t i = 0;
  for (auto& [n, g] : groups_) {
    for (auto it = g.begin(); it != g.end(); i++) {
      if (fds[i].revents == 0) {
        ++it;
        continue;
      }
      char b;
      bool eof = false;
      auto r = recvSome(it->second.sock, &b, 1, &eof);
      if (r.isOk() && !eof && r.value() == 0) {  // nothing after all
        ++it;
        continue;
      }
      ROOT_INFO("%s: rank %d (%s) left before the rendezvous completed", where_.c_str(),
                it->first, it->second.sock.peer().toString().c_str());
      it = g.erase(it);
    }
  }
  std::erase_if(groups_, [](const auto& kv) { return kv.second.empty(); });
}

void Root::problem(ReplyStatus code, const std::string& why) {
  if (problem_.empty()) {
    problem_ = why;
    problemCode_ = code;
  }
  lastEventMs_ = nowMs();
}

// Best effort: the message is small enough to sit in the socket buffer.
void replyText(Socket& s, ReplyStatus code, const std::string& why) {
  std::string text = why.substr(0, kMaxReplyText);
  reply(s, code, text.data(), static_cast<uint32_t>(text.size()), Until::after(100));
}

void Root::refuse(Socket& s, ReplyStatus code, const std::string& why) {
  acceptor_.refused("bootstrap root: refused check-in: " + why);
  replyText(s, code, why);
  s.close();
}

void Root::finish(int nranks, Group& g) {
  expect_->replying.store(true);
  std::vector<uint8_t> table(size_t(nranks) * SockAddr::kPackedBytes);
  for (auto& [r, m] : g) std::memcpy(&table[size_t(r) * SockAddr::kPackedBytes], m.addr, sizeof(m.addr));
  Until u = Until::after(timeoutMs_);
  for (auto& [r, m] : g) reply(m.sock, kReplyOk, table.data(), static_cast<uint32_t>(table.size()), u);
  for (auto& [n, other] : groups_) {
    if (&other == &g) continue;
    std::string why = "nranks mismatch: the communicator formed with nranks " +
                      std::to_string(nranks) + ", this rank said " + std::to_string(n);
    for (auto& [r, m] : other) refuse(m.sock, kReplyMismatch, why);
  }
  ROOT_INFO("%s: all %d ranks checked in", where_.c_str(), nranks);
}

void Root::fail(ReplyStatus code, const std::string& why) {
  expect_->replying.store(true);
  ROOT_WARN("%s: %s", where_.c_str(), why.c_str());
  for (auto& [n, g] : groups_)
    for (auto& [r, m] : g) replyText(m.sock, code, why);
}

void* rootMain(void* arg) {
  std::unique_ptr<Root> root(static_cast<Root*>(arg));
  try {
    root->run();
  } catch (const std::exception& e) {
    // Nothing may escape a detached thread; closing every connection (when
    // root goes) fails the waiting ranks at once.
    ROOT_WARN("bootstrap root: giving up: %s", e.what());
  }
  return nullptr;
}

}  // namespace

Status startRoot(Socket listener, uint64_t secret, int64_t timeoutMs, int nranks) {
  (void)logAllowed();  // installs the exit hook before the thread can log
  auto root = std::make_unique<Root>(std::move(listener), secret, timeoutMs, nranks);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t tid;
  int rc = pthread_create(&tid, &attr, rootMain, root.get());
  pthread_attr_destroy(&attr);
  if (rc != 0) return systemError(std::string("bootstrap: cannot start root thread: ") +
                                  std::strerror(rc));
  root.release();  // owned by the thread now
  return Status::ok();
}

}  // namespace ferry::bootstrap
