// PeerMemory: other ranks' buffers as this process sees them, and the
// barrier that orders loads and stores on them.
//
// A schedule step whose Region names a peer (Region::peer >= 0) reads or
// writes that rank's buffer directly (symmetric windows, src/mem/window.h);
// kBarrier steps separate the phases in which ranks write what others read.
// The executor gets one PeerMemory per run; it never learns how the memory
// was mapped.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace ferry {

class PeerMemory {
 public:
  virtual ~PeerMemory() = default;
  // Buffer `buf` (kInputBuf / kOutputBuf) of rank `peer`, mapped here.
  virtual char* base(int peer, uint32_t buf) const = 0;
  // This rank reached the next barrier (once per barrier step).
  virtual void arrive() = 0;
  // Whether every rank has reached it; an error when the ranks turn out to
  // run different operations (checked at the first barrier of a run).
  virtual Result<bool> passed() = 0;
  // Ranks the current barrier still waits for (appended).
  virtual void waitingOn(std::vector<int>* peers) const = 0;
};

}  // namespace ferry
