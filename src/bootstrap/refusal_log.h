// Rate-limited WARNs for refused bootstrap connections.
//
// A listener that anyone can reach must not print one line per stranger
// (500 wrong-secret connections would be 500 WARN lines). RefusalLog prints
// the first refusal in full, then at most one summary line per interval
// ("refused 41 more connections ... in the last 1.0 s, last: ...") and, when
// flushed, a final count of what the summaries had not reported yet.
//
// Logging is skipped once the process is exiting (a detached root thread
// may still run while the logger's statics are destroyed); see logAllowed().
#pragma once

#include <cstdint>
#include <string>

namespace ferry::bootstrap {

// False once exit() has started (installs its atexit hook on first use).
bool logAllowed();

class RefusalLog {
 public:
  // `where` names the listener in the summaries ("bootstrap root 10.0.0.1<5000>").
  explicit RefusalLog(std::string where, int64_t intervalMs = 1000);
  ~RefusalLog() { flush(); }
  RefusalLog(const RefusalLog&) = delete;
  RefusalLog& operator=(const RefusalLog&) = delete;

  // One refused connection; `line` is its full WARN text.
  void note(const std::string& line);
  // Print the summary if refusals are unreported and the interval has passed.
  void tick();
  // Print the count not yet reported (if any) and start over.
  void flush();

  uint64_t total() const { return total_; }

 private:
  std::string where_;
  int64_t intervalMs_;
  uint64_t total_ = 0;       // every refusal so far
  uint64_t unreported_ = 0;  // refusals since the last printed line
  int64_t lastPrintMs_ = 0;
  std::string lastLine_;
};

}  // namespace ferry::bootstrap
