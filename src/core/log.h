// Logging: NCCL_DEBUG-compatible levels and subsystems.
//
// Lines look like NCCL's so existing tooling can grep them:
//   INFO : "<host>:<pid>:<tid> [<rank>] NCCL INFO <message>"
//   WARN : "\n[<timestamp>] <host>:<pid>:<tid> [<rank>] <file>:<line> NCCL WARN <message>"
//   TRACE: "<host>:<pid>:<tid> [<rank>] <ms> <func>:<line> NCCL TRACE <message>"
// Level and subsystem are checked before formatting. Thread-safe; each line is
// written with a single fwrite. The text of the last WARN is kept for
// ncclGetLastError.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace ferry::log {

enum class Level : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kAbort = 4, kTrace = 5 };

// Subsystem bits: same values as NCCL's ncclDebugLogSubSys, so the plugin
// logger callback can pass them through unchanged.
enum Subsys : uint64_t {
  kInit = 0x1,
  kColl = 0x2,
  kP2P = 0x4,
  kShm = 0x8,
  kNet = 0x10,
  kGraph = 0x20,
  kTuning = 0x40,
  kEnv = 0x80,
  kAlloc = 0x100,
  kCall = 0x200,
  kProxy = 0x400,
  kNvls = 0x800,
  kBootstrap = 0x1000,
  kReg = 0x2000,
  kProfile = 0x4000,
  kRas = 0x8000,
  kAll = ~uint64_t(0),
};

// True if a message at this level/subsystem would be printed (cheap after the
// first call; reads NCCL_DEBUG / NCCL_DEBUG_SUBSYS once).
bool enabled(Level level, uint64_t subsys);

// The highest level NCCL_DEBUG lets through (kTrace until it was read): an
// INFO or TRACE site under a quieter level costs an inline load and compare,
// not a call (a small collective passes several such sites).
extern std::atomic<int> gLevelCeiling;
inline bool mayLog(Level level) {
  return level <= Level::kWarn ||
         static_cast<int>(level) <= gLevelCeiling.load(std::memory_order_relaxed);
}

// Print one line. Use the macros below instead of calling this directly.
void write(Level level, uint64_t subsys, const char* file, int line, const char* func,
           const char* fmt, ...) __attribute__((format(printf, 6, 7)));

// The rank printed in "[rank]" for lines logged by this thread (default 0).
void setThreadRank(int rank);

// Text of the last WARN logged by this process ("" if none).
std::string lastError();

// Print "NCCL version ..."-style line once per process when the level is
// VERSION or above (no host prefix, like NCCL).
void versionLine(const char* text);

// Re-read NCCL_DEBUG* settings (used by ncclResetDebugInit and tests).
void reset();

}  // namespace ferry::log

#define FERRY_LOG_(lvl, sub, ...)                                                         \
  do {                                                                                    \
    if (::ferry::log::mayLog(lvl) && ::ferry::log::enabled(lvl, sub))                    \
      ::ferry::log::write(lvl, sub, __FILE__, __LINE__, __func__, __VA_ARGS__);           \
  } while (0)

// WARN is printed for every subsystem once the level allows it.
#define FERRY_WARN(...) FERRY_LOG_(::ferry::log::Level::kWarn, ::ferry::log::kAll, __VA_ARGS__)
#define FERRY_INFO(sub, ...) FERRY_LOG_(::ferry::log::Level::kInfo, sub, __VA_ARGS__)
#define FERRY_TRACE(sub, ...) FERRY_LOG_(::ferry::log::Level::kTrace, sub, __VA_ARGS__)
