// NCCL_DEBUG-compatible logger (see log.h).
//
// Recursion with config: init() reads NCCL_DEBUG* through config, and config
// logs "X set by ..." the first time it reads a set variable. While this
// thread is inside init() (tInit), enabled() answers true and write() only
// queues the line; init() replays the queue through the normal filter once
// the settings are published. config never logs with its own lock held, and
// initMu_ is only taken by a thread that is not already initialising, so
// neither lock is ever re-entered.
#include "core/log.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <vector>

#include "core/config.h"

namespace ferry::log {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::atomic<bool> ready_{false};
std::atomic<int> level_{0};
std::atomic<uint64_t> mask_{0};
std::atomic<uint32_t> tsLevels_{0};  // bit (1 << level) set: print a timestamp
std::atomic<bool> versionPrinted_{false};
std::mutex initMu_;

// The strings are never destroyed: detached threads (the bootstrap root)
// may still log while exit() runs static destructors, and a write into a
// destroyed string is a use-after-free (TSan: race of the root thread's
// emit() with ~basic_string at exit). std::mutex has no destructor to race.
std::mutex outMu_;  // guards out_, tsFormat_ and each line's write
FILE* out_ = stdout;
std::string& tsFormat_ = *new std::string;

std::mutex errMu_;
std::string& lastError_ = *new std::string;

char host_[256] = "";
int pid_ = 0;
SteadyClock::time_point start_;
bool started_ = false;

struct Pending {
  Level level;
  uint64_t subsys;
  const char* file;
  int line;
  const char* func;
  std::string msg;
};

thread_local int tRank = 0;
thread_local int tTid = 0;
thread_local bool tInit = false;
thread_local std::vector<Pending> tPending;

struct Name {
  const char* name;
  uint64_t bits;
};

constexpr Name kSubsysNames[] = {
    {"INIT", kInit},     {"COLL", kColl},   {"P2P", kP2P},           {"SHM", kShm},
    {"NET", kNet},       {"GRAPH", kGraph}, {"TUNING", kTuning},     {"ENV", kEnv},
    {"ALLOC", kAlloc},   {"CALL", kCall},   {"PROXY", kProxy},       {"NVLS", kNvls},
    {"BOOTSTRAP", kBootstrap}, {"REG", kReg}, {"PROFILE", kProfile}, {"RAS", kRas},
    {"ALL", kAll},
};

constexpr Name kLevelNames[] = {
    {"VERSION", 1u << int(Level::kVersion)}, {"WARN", 1u << int(Level::kWarn)},
    {"INFO", 1u << int(Level::kInfo)},       {"ABORT", 1u << int(Level::kAbort)},
    {"TRACE", 1u << int(Level::kTrace)},     {"ALL", ~0u},
};

// "A,B,C" or "^A,B" -> OR of the named bits (inverted with ^). Unknown names
// are ignored, as NCCL does.
template <size_t N>
uint64_t parseList(const std::string& text, const Name (&names)[N]) {
  const char* s = text.c_str();
  bool invert = *s == '^';
  if (invert) s++;
  uint64_t bits = 0;
  while (*s) {
    const char* comma = std::strchr(s, ',');
    size_t len = comma ? size_t(comma - s) : std::strlen(s);
    for (const Name& n : names) {
      if (std::strlen(n.name) == len && strncasecmp(s, n.name, len) == 0) bits |= n.bits;
    }
    s += len;
    if (*s == ',') s++;
  }
  return invert ? ~bits : bits;
}

Level parseLevel(const std::string& s) {
  if (strcasecmp(s.c_str(), "VERSION") == 0) return Level::kVersion;
  if (strcasecmp(s.c_str(), "WARN") == 0) return Level::kWarn;
  if (strcasecmp(s.c_str(), "INFO") == 0) return Level::kInfo;
  if (strcasecmp(s.c_str(), "ABORT") == 0) return Level::kAbort;
  if (strcasecmp(s.c_str(), "TRACE") == 0) return Level::kTrace;
  return Level::kNone;
}

// NCCL_DEBUG_FILE pattern: %h hostname, %p pid, %% a percent sign.
std::string expandPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); i++) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') { out += host_; i++; continue; }
      if (c == 'p') { out += std::to_string(pid_); i++; continue; }
      if (c == '%') { out += '%'; i++; continue; }
    }
    out += pattern[i];
  }
  return out;
}

// A forked child must not print its parent's pid/tid: reset the caches in
// the child (the forking thread is the child's only thread).
void afterFork() {
  tTid = 0;
  pid_ = static_cast<int>(getpid());
}

int tid() {
  static const int registered = pthread_atfork(nullptr, nullptr, afterFork);
  (void)registered;
  if (tTid == 0) tTid = static_cast<int>(gettid());
  return tTid;
}

FILE* openDebugFile(Level level, const std::string& pattern) {
  if (level <= Level::kVersion || pattern.empty()) return stdout;
  std::string path = expandPath(pattern);
  FILE* f = std::fopen(path.c_str(), "w");
  if (f) return f;
  std::fprintf(stderr, "\n%s:%d:%d [%d] %s:%d NCCL WARN Cannot open debug file %s: %s\n", host_,
               pid_, tid(), tRank, "log.cc", __LINE__, path.c_str(), std::strerror(errno));
  return stdout;
}

void emit(Level level, uint64_t subsys, const char* file, int line, const char* func,
          const char* msg);

void init() {
  {
    std::lock_guard<std::mutex> lk(initMu_);
    if (ready_.load(std::memory_order_acquire)) return;
    tInit = true;
    std::string debug = config::getString(config::Param::kDebug);
    std::string subsys = config::getString(config::Param::kDebugSubsys);
    std::string file = config::getString(config::Param::kDebugFile);
    std::string tsLevels = config::getString(config::Param::kDebugTimestampLevels);
    std::string tsFormat = config::getString(config::Param::kDebugTimestampFormat);
    tInit = false;

    if (!started_) {  // identity and clock origin stay fixed across reset()
      start_ = SteadyClock::now();
      pid_ = static_cast<int>(getpid());
      if (gethostname(host_, sizeof(host_) - 1) != 0) std::strcpy(host_, "unknown");
      host_[sizeof(host_) - 1] = '\0';
      if (char* dot = std::strchr(host_, '.')) *dot = '\0';
      started_ = true;
    }

    Level level = parseLevel(debug);
    FILE* f = openDebugFile(level, file);
    {
      std::lock_guard<std::mutex> olk(outMu_);
      if (out_ != stdout && out_ != stderr && out_ != f) std::fclose(out_);
      out_ = f;
      tsFormat_ = tsFormat;
    }
    level_.store(static_cast<int>(level), std::memory_order_relaxed);
    gLevelCeiling.store(static_cast<int>(level), std::memory_order_relaxed);
    mask_.store(parseList(subsys, kSubsysNames), std::memory_order_relaxed);
    tsLevels_.store(static_cast<uint32_t>(parseList(tsLevels, kLevelNames)),
                    std::memory_order_relaxed);
    ready_.store(true, std::memory_order_release);
  }
  std::vector<Pending> pending;
  pending.swap(tPending);
  for (const Pending& p : pending) emit(p.level, p.subsys, p.file, p.line, p.func, p.msg.c_str());
}

bool passes(Level level, uint64_t subsys) {
  return static_cast<int>(level) <= level_.load(std::memory_order_relaxed) &&
         (subsys & mask_.load(std::memory_order_relaxed)) != 0;
}

const char* baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// Store WARN text, filter, then format and print one line.
void emit(Level level, uint64_t subsys, const char* file, int line, const char* func,
          const char* msg) {
  if (level == Level::kWarn) {
    std::lock_guard<std::mutex> lk(errMu_);
    lastError_ = msg;
  }
  if (!passes(level, subsys)) return;
  char buf[2048];
  size_t len = 0;
  auto add = [&](const char* fmt, auto... args) {
    int n = std::snprintf(buf + len, sizeof(buf) - len, fmt, args...);
    if (n > 0) len = std::min(len + size_t(n), sizeof(buf) - 2);
  };
  std::lock_guard<std::mutex> lk(outMu_);
  if (level == Level::kWarn) buf[len++] = '\n';
  if (tsLevels_.load(std::memory_order_relaxed) & (1u << static_cast<int>(level))) {
    time_t now = time(nullptr);
    struct tm tmv;
    localtime_r(&now, &tmv);
    len += std::strftime(buf + len, 256, tsFormat_.c_str(), &tmv);
  }
  if (level == Level::kWarn) {
    add("%s:%d:%d [%d] %s:%d NCCL WARN ", host_, pid_, tid(), tRank, baseName(file), line);
  } else if (level == Level::kTrace && subsys == kCall) {
    add("%s:%d:%d NCCL CALL ", host_, pid_, tid());
  } else if (level == Level::kTrace) {
    double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start_).count();
    add("%s:%d:%d [%d] %f %s:%d NCCL TRACE ", host_, pid_, tid(), tRank, ms, func, line);
  } else {
    add("%s:%d:%d [%d] NCCL INFO ", host_, pid_, tid(), tRank);
  }
  add("%s", msg);
  buf[len++] = '\n';
  std::fwrite(buf, 1, len, out_);
  std::fflush(out_);
}

}  // namespace

std::atomic<int> gLevelCeiling{static_cast<int>(Level::kTrace)};

// WARN always answers true: its text is kept for lastError() even when the
// level hides it, and write() does the level check.
bool enabled(Level level, uint64_t subsys) {
  if (!ready_.load(std::memory_order_acquire)) {
    if (tInit) return true;
    init();
  }
  return level == Level::kWarn || passes(level, subsys);
}

void write(Level level, uint64_t subsys, const char* file, int line, const char* func,
           const char* fmt, ...) {
  char msg[1024];  // NCCL truncates a message at 1023 characters
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (!ready_.load(std::memory_order_acquire)) {
    if (tInit) {
      tPending.push_back({level, subsys, file, line, func, msg});
      return;
    }
    init();
  }
  emit(level, subsys, file, line, func, msg);
}

void setThreadRank(int rank) { tRank = rank; }

std::string lastError() {
  std::lock_guard<std::mutex> lk(errMu_);
  return lastError_;
}

void versionLine(const char* text) {
  if (!ready_.load(std::memory_order_acquire)) init();
  if (level_.load(std::memory_order_relaxed) < static_cast<int>(Level::kVersion)) return;
  if (versionPrinted_.exchange(true)) return;
  std::string line = std::string(text) + "\n";
  std::lock_guard<std::mutex> lk(outMu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

void reset() {
  std::lock_guard<std::mutex> lk(initMu_);
  config::reload();
  gLevelCeiling.store(static_cast<int>(Level::kTrace), std::memory_order_relaxed);
  ready_.store(false, std::memory_order_release);
}

}  // namespace ferry::log
