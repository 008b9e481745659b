// Intra-host calibration: the speeds the cost model assumes for copies and
// reductions on this machine, and for one step between two of its ranks.
//
// Measured at first use in a process (about 20 ms: a 4 MiB and a 256 KiB
// memcpy and float sum, best of three; a ping-pong of a shared flag between
// two threads on two cores, best of five batches) unless a
// cached file holds them; the first process that measures writes the file,
// so later processes only read it. The file is FERRY_CALIBRATION_FILE, by
// default $XDG_CACHE_HOME/ferry/calibration-<hostname>.txt (else
// ~/.cache/ferry/...); 'none' disables it. `ferry-topo --calibrate` measures
// again and rewrites it; deleting it also refreshes. FERRY_INTRA_LAT_NS /
// FERRY_INTRA_BW_MBS override the figures.
#pragma once

#include <string>

#include "core/status.h"

namespace ferry {

struct HostCalibration {
  double memcpyBytesPerUs = 0;  // one core copying (MB/s)
  double reduceBytesPerUs = 0;  // one core summing floats, bytes of output per us
  double stepLatencyUs = 0;     // a handoff between two ranks through shared memory
  // The same two speeds on data that fits in a core's cache (256 KiB), and
  // that cache's size: small messages move several times faster.
  double cachedMemcpyBytesPerUs = 0;
  double cachedReduceBytesPerUs = 0;
  double cacheBytes = 0;
  std::string source;           // "measured", "file <path>", "defaults"
};

// The process's calibration (cached after the first call; thread-safe).
const HostCalibration& hostCalibration();

// Measure now, in this process (no file involved).
HostCalibration measureCalibration();

// The cache file's path ("" when disabled).
std::string calibrationPath();
Status writeCalibration(const std::string& path, const HostCalibration& c);
Result<HostCalibration> readCalibration(const std::string& path);

}  // namespace ferry
