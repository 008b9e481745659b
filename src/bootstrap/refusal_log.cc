// Rate-limited refusal WARNs (see refusal_log.h).
#include "bootstrap/refusal_log.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/log.h"
#include "core/wait.h"

namespace ferry::bootstrap {
namespace {
std::atomic<bool> gExiting{false};
void markExiting() { gExiting.store(true); }
}  // namespace

bool logAllowed() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(markExiting); });
  return !gExiting.load();
}

RefusalLog::RefusalLog(std::string where, int64_t intervalMs)
    : where_(std::move(where)), intervalMs_(intervalMs) {}

void RefusalLog::note(const std::string& line) {
  total_++;
  int64_t now = nowMs();
  if (total_ == 1) {
    lastPrintMs_ = now;
    if (logAllowed()) FERRY_WARN("%s", line.c_str());
    return;
  }
  unreported_++;
  lastLine_ = line;
  tick();
}

void RefusalLog::tick() {
  int64_t now = nowMs();
  if (unreported_ == 0 || now - lastPrintMs_ < intervalMs_) return;
  if (logAllowed()) {
    FERRY_WARN("bootstrap: refused %llu more connections on %s in the last %.1f s (%llu in all; "
               "last: %s)",
               static_cast<unsigned long long>(unreported_), where_.c_str(),
               (now - lastPrintMs_) / 1000.0, static_cast<unsigned long long>(total_),
               lastLine_.c_str());
  }
  unreported_ = 0;
  lastPrintMs_ = now;
}

void RefusalLog::flush() {
  if (unreported_ > 0 && logAllowed()) {
    FERRY_WARN("bootstrap: refused %llu more connections on %s (%llu in all; last: %s)",
               static_cast<unsigned long long>(unreported_), where_.c_str(),
               static_cast<unsigned long long>(total_), lastLine_.c_str());
  }
  unreported_ = 0;
}

}  // namespace ferry::bootstrap
