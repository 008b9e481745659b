// IoGate: a run that starts before all of its input is in place and tells,
// piece by piece, which parts of its output are final.
//
// The CPU-forward bridge (comm/stream_bridge.h) uses it to overlap a
// stream's staging copies with the host collective instead of running
// them one after the other: the stream copies the input into host memory
// in pieces, in offset order, and counts them; the executor starts a step
// once every piece the step reads is counted; and as steps finish it
// publishes how many output pieces, again in offset order, no step will
// write any more, which the stream waits for before copying each piece
// back. Which buffers are gated is the caller's to say (a collective's
// kInputBuf and kOutputBuf, a Send/Recv batch's send and receive buffers,
// schedule.h): input pieces are counted buffer after buffer in the order
// given, output pieces likewise; other buffers are not gated.
//
// Offset order is not always the order a schedule reads in (a ring's rank
// starts on its own chunk of a round), but rounds are at most a few chunks
// (FERRY_CHUNK_BYTES) while pieces are about as large as one, so a rank
// waits for at most a round's worth before it starts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "algorithms/schedule.h"

namespace ferry {

class IoGate {
 public:
  struct Buffer {
    uint32_t index;  // a schedule buffer number (Region::buf)
    size_t bytes;
  };
  // `staged` counts the pieces of `inputs` in place (read with acquire);
  // `publish(n)` says the first n pieces of `outputs` are final, with n
  // growing from call to call. Both must outlive the gate.
  IoGate(size_t pieceBytes, std::vector<Buffer> inputs, std::vector<Buffer> outputs,
         const std::atomic<uint32_t>* staged, std::function<void(uint32_t)> publish);

  static uint32_t piecesOf(size_t bytes, size_t pieceBytes) {
    return static_cast<uint32_t>((bytes + pieceBytes - 1) / pieceBytes);
  }

  // At the start of a run of `s`: what each step reads and which output
  // pieces each step writes for the last time; publishes the pieces no step
  // writes at all.
  void plan(const Schedule& s);
  bool prologueReady() const { return ready(prologueNeed_); }
  void prologueDone();
  // Step `step` of lane `lane` may start: its input pieces are in place.
  bool stepReady(size_t lane, size_t step) const { return ready(need_[lane][step]); }
  // Step `step` of lane `lane` finished (steps of a lane finish in order).
  void stepDone(size_t lane, size_t step);
  uint32_t outputPieces() const { return static_cast<uint32_t>(pending_.size()); }

 private:
  struct Finish {
    size_t step;
    uint32_t piece;
  };
  bool ready(uint32_t need) const {
    return need == 0 || staged_->load(std::memory_order_acquire) >= need;
  }
  uint32_t inputNeed(const Step& s) const;
  // Pieces counted before r's buffer in `list` (its first piece's number;
  // *count: its pieces), or -1 when `list` does not gate r.
  int64_t baseOf(const std::vector<Buffer>& list, const Region& r, uint32_t* count) const;
  // Output pieces [*lo, *hi) that `s` writes; false if none.
  bool outputRange(const Step& s, uint32_t* lo, uint32_t* hi) const;
  void release(uint32_t piece) { --pending_[piece]; }
  void advance();

  size_t piece_;
  std::vector<Buffer> in_, out_;
  uint32_t outPieces_ = 0;
  const std::atomic<uint32_t>* staged_;
  std::function<void(uint32_t)> publish_;
  uint32_t prologueNeed_ = 0;
  std::vector<std::vector<uint32_t>> need_;  // [lane][step]: input pieces read
  std::vector<std::vector<Finish>> finish_;  // [lane]: in step order
  std::vector<size_t> cursor_;               // [lane]: next entry of finish_
  std::vector<uint32_t> prologueLast_;       // pieces the prologue writes last
  std::vector<uint32_t> pending_;            // [piece]: writers not yet past it
  uint32_t next_ = 0;                        // pieces published
};

}  // namespace ferry
