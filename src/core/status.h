// Status: the one error type used inside Ferry.
//
// Every internal function that can fail returns a Status (or a Result<T>).
// The C ABI edge (src/api/) converts a Status to ncclResult_t in exactly one
// place (toNcclResult in src/api/edge.h). No exceptions are thrown inside the
// library; the few std calls that can throw are wrapped at the edge.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ferry {

// Codes mirror ncclResult_t's meaning so the mapping at the edge is trivial,
// but they are our own names: internal code never spells ncclResult_t.
enum class Code : int {
  kOk = 0,
  kSystem,           // an OS call failed (errno-level problem on this process)
  kInternal,         // a bug in Ferry
  kInvalidArgument,  // the caller passed a bad value
  kInvalidUsage,     // the caller used the API in a wrong order or unsupported way
  kRemote,           // a peer died, closed its connection or reported an error
  kInProgress,       // nonblocking operation not finished yet
  kTimeout,          // a deadline passed without progress (reported as kRemote at the edge)
};

// An ok Status is a null pointer: creating, testing and dropping one (every
// FERRY_TRY on the success path) costs a compare, not a std::string's
// construction and destruction. The small-message path passes a few dozen of
// them per collective (perf/README.md, "`instr_per_op`").
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string msg)
      : rep_(code == Code::kOk ? nullptr : new Rep{code, std::move(msg)}) {}
  Status(const Status& o) : rep_(o.rep_ ? new Rep(*o.rep_) : nullptr) {}
  Status(Status&& o) noexcept : rep_(o.rep_) { o.rep_ = nullptr; }
  Status& operator=(const Status& o) {
    if (this != &o) {
      Rep* copy = o.rep_ ? new Rep(*o.rep_) : nullptr;
      delete rep_;
      rep_ = copy;
    }
    return *this;
  }
  Status& operator=(Status&& o) noexcept {
    if (this != &o) {
      delete rep_;
      rep_ = o.rep_;
      o.rep_ = nullptr;
    }
    return *this;
  }
  ~Status() { delete rep_; }

  static Status ok() { return Status(); }
  bool isOk() const { return rep_ == nullptr; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  const std::string& message() const { return rep_ ? rep_->msg : emptyMessage(); }

 private:
  struct Rep {
    Code code;
    std::string msg;
  };
  static const std::string& emptyMessage() {
    static const std::string kEmpty;
    return kEmpty;
  }
  Rep* rep_ = nullptr;
};

inline Status systemError(std::string m) { return Status(Code::kSystem, std::move(m)); }
inline Status internalError(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status invalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status invalidUsage(std::string m) { return Status(Code::kInvalidUsage, std::move(m)); }
inline Status remoteError(std::string m) { return Status(Code::kRemote, std::move(m)); }
inline Status timeoutError(std::string m) { return Status(Code::kTimeout, std::move(m)); }
inline Status inProgress() { return Status(Code::kInProgress, "in progress"); }

// Result<T>: a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}   // NOLINT: implicit by design
  bool isOk() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return isOk() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() { return std::get<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  T&& take() { return std::move(std::get<T>(v_)); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ferry

#define FERRY_CONCAT_INNER(a, b) a##b
#define FERRY_CONCAT(a, b) FERRY_CONCAT_INNER(a, b)

// Propagate a non-ok Status to the caller.
#define FERRY_TRY(expr)                        \
  do {                                         \
    ::ferry::Status _st = (expr);              \
    if (!_st.isOk()) return _st;               \
  } while (0)

// `FERRY_ASSIGN(auto x, fn())` : unwrap a Result<T> or return its Status.
#define FERRY_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                      \
  if (!tmp.isOk()) return tmp.status();   \
  lhs = tmp.take()
#define FERRY_ASSIGN(lhs, expr) FERRY_ASSIGN_IMPL(FERRY_CONCAT(_res_, __LINE__), lhs, expr)
