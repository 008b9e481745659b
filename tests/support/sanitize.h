// Test helpers for sanitizer builds (tests/sanitize/run.sh).
//
// childLeakCheck(): forked ranks end with _exit(), which skips
// LeakSanitizer's at-exit check; this runs it (ASan/LSan builds only) and
// returns true when a leak was reported (the report goes to stderr).
#pragma once

#include <dirent.h>

#include <cstdint>
#include <cstdlib>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FERRY_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FERRY_TEST_ASAN 1
#endif
#ifdef FERRY_TEST_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace ferry::test {

// Threads of this process (from /proc/self/task); 0 if unknown.
inline int processThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

inline bool childLeakCheck() {
#ifdef FERRY_TEST_ASAN
  return __lsan_do_recoverable_leak_check() != 0;
#else
  return false;
#endif
}

}  // namespace ferry::test
