// IoGate (exec/io_gate.h): which steps may start on the input pieces in
// place, when output pieces become final, and an executor run held and
// released by it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <vector>

#include "exec/executor.h"
#include "exec/io_gate.h"

namespace ferry {
namespace {

constexpr size_t kPiece = 4096;

// A collective's gate: input and output of `bytes` each.
struct Gated {
  explicit Gated(size_t bytes = 3 * kPiece) : gate(kPiece, {{kInputBuf, bytes}}, {{kOutputBuf, bytes}},
                                                   &staged, [this](uint32_t n) { published.push_back(n); }) {}
  std::atomic<uint32_t> staged{0};
  std::vector<uint32_t> published;
  IoGate gate;
};

Step copyAt(size_t inOff, size_t outOff, size_t bytes) {
  return copyStep({kInputBuf, inOff}, {kOutputBuf, outOff}, bytes);
}

TEST(IoGate, AStepWaitsForEveryInputPieceUpToTheEndOfWhatItReads) {
  Gated g;
  // Lane 0 reads [0, 4K) then [4K+100, 12K): needs 1, then 3 pieces.
  Schedule s{"t", {Lane{{copyAt(0, 0, kPiece), copyAt(kPiece + 100, kPiece + 100, 2 * kPiece - 100)}}}};
  g.gate.plan(s);
  EXPECT_FALSE(g.gate.stepReady(0, 0));
  g.staged = 1;
  EXPECT_TRUE(g.gate.stepReady(0, 0));
  EXPECT_FALSE(g.gate.stepReady(0, 1));
  g.staged = 2;
  EXPECT_FALSE(g.gate.stepReady(0, 1));
  g.staged = 3;
  EXPECT_TRUE(g.gate.stepReady(0, 1));
}

TEST(IoGate, StepsThatReadNoInputNeverWait) {
  Gated g;
  Schedule s{"t", {Lane{{recvStep(1, {kOutputBuf, 0}, kPiece),
                         copyStep({kOutputBuf, 0}, {kScratchBuf, 0}, kPiece)}}}};
  g.gate.plan(s);
  EXPECT_TRUE(g.gate.stepReady(0, 0));
  EXPECT_TRUE(g.gate.stepReady(0, 1));
}

TEST(IoGate, AnOutputPieceIsFinalOnceEveryLaneWroteItForTheLastTime) {
  Gated g(3 * kPiece);
  // Piece 0: lane 0 steps 0 and 2, lane 1 step 0. Piece 1: lane 1 step 1.
  Schedule s{"t",
             {Lane{{copyAt(0, 0, 100), copyAt(0, 2 * kPiece, 10), copyAt(0, 200, 100)}},
              Lane{{copyAt(0, 300, 100), copyAt(0, kPiece, kPiece)}}}};
  g.gate.plan(s);
  EXPECT_EQ(g.gate.outputPieces(), 3u);
  EXPECT_TRUE(g.published.empty());
  g.gate.stepDone(0, 0);  // lane 0 writes piece 0 again later
  g.gate.stepDone(1, 0);
  EXPECT_TRUE(g.published.empty());
  g.gate.stepDone(1, 1);  // piece 1 final, but piece 0 is not: nothing in offset order
  EXPECT_TRUE(g.published.empty());
  g.gate.stepDone(0, 1);  // piece 2 final
  EXPECT_TRUE(g.published.empty());
  g.gate.stepDone(0, 2);  // piece 0 final: 0, 1, 2 at once
  EXPECT_EQ(g.published, std::vector<uint32_t>{3});
}

TEST(IoGate, PiecesNoStepWritesArePublishedAtOnceAndTheProloguesCount) {
  Gated g;
  // Piece 0 written by the prologue only, piece 1 by nobody, piece 2 by the
  // prologue and then lane 0.
  Schedule s{"t", {Lane{{copyAt(0, 2 * kPiece, kPiece)}}}};
  s.prologue = {copyAt(0, 0, kPiece), copyAt(0, 2 * kPiece, 10)};
  g.gate.plan(s);
  EXPECT_TRUE(g.published.empty());
  EXPECT_FALSE(g.gate.prologueReady());
  g.staged = 1;
  EXPECT_TRUE(g.gate.prologueReady());
  g.gate.prologueDone();
  EXPECT_EQ(g.published, std::vector<uint32_t>{2});
  g.gate.stepDone(0, 0);
  EXPECT_EQ(g.published, (std::vector<uint32_t>{2, 3}));
}

TEST(IoGate, ARunIsHeldUntilItsInputIsStagedAndPublishesItsOutput) {
  constexpr size_t kBytes = 4 * kPiece;
  std::vector<int32_t> in(kBytes / 4), out(kBytes / 4, 0);
  std::iota(in.begin(), in.end(), 1);
  // Prologue: output piece 0 from input piece 0; the lane copies pieces 1-3
  // in order, then reduces input piece 3 into output piece 0.
  Schedule s{"t", {Lane{{copyAt(kPiece, kPiece, kPiece), copyAt(2 * kPiece, 2 * kPiece, kPiece),
                         copyAt(3 * kPiece, 3 * kPiece, kPiece),
                         makeStep(StepKind::kLocalReduce, -1, -1, {kInputBuf, 3 * kPiece},
                                  {kOutputBuf, 0}, kPiece)}}}};
  s.prologue = {copyAt(0, 0, kPiece)};
  Executor e(std::move(s), {in.data(), out.data()}, 4, ReduceSpec{kernels::DType::kInt32}, {});
  class NoPeers : public ConnectionSource {
    Result<Connection*> connection(int) override { return internalError("no peers here"); }
  } none;
  Gated g(kBytes);
  e.setGate(&g.gate);
  ASSERT_TRUE(e.start(none).isOk());
  bool moved = false;
  ASSERT_TRUE(e.progress(&moved).isOk());
  EXPECT_FALSE(moved);
  EXPECT_FALSE(e.done());
  EXPECT_EQ(out[0], 0);  // even the prologue waits for its piece
  g.staged = 2;
  ASSERT_TRUE(e.progress(&moved).isOk());
  EXPECT_TRUE(moved);
  EXPECT_EQ(out[0], in[0]);                    // the prologue ran
  EXPECT_EQ(out[kPiece / 4], in[kPiece / 4]);  // step 0 ran
  EXPECT_EQ(out[2 * kPiece / 4], 0);           // step 1 waits for input piece 2
  EXPECT_TRUE(g.published.empty());            // output piece 0 is still to be reduced
  g.staged = 4;
  ASSERT_TRUE(e.progress(&moved).isOk());
  ASSERT_TRUE(e.done());
  EXPECT_EQ(g.published, std::vector<uint32_t>{4});
  for (size_t i = 0; i < kPiece / 4; ++i) ASSERT_EQ(out[i], in[i] + in[3 * kPiece / 4 + i]) << i;
  for (size_t i = kPiece / 4; i < out.size(); ++i) ASSERT_EQ(out[i], in[i]) << i;
  // The gate is the run's: without it the executor runs at once.
  e.setGate(nullptr);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(e.start(none).isOk());
  ASSERT_TRUE(e.progress(&moved).isOk());
  EXPECT_TRUE(e.done());
  EXPECT_EQ(out[kPiece / 4], in[kPiece / 4]);
}

// A Send/Recv batch gates several buffers, counted one after the other in
// the order given: buffer 2's pieces come after buffer 0's.
TEST(IoGate, SeveralBuffersAreCountedInTheOrderGiven) {
  std::atomic<uint32_t> staged{0};
  std::vector<uint32_t> published;
  IoGate gate(kPiece, {{2, 2 * kPiece}, {0, kPiece}}, {{1, kPiece}, {3, 2 * kPiece}}, &staged,
              [&](uint32_t n) { published.push_back(n); });
  Schedule s{"t", {Lane{{sendStep(1, {0, 0}, kPiece), sendStep(1, {2, 0}, kPiece)}},
                   Lane{{recvStep(1, {3, kPiece}, kPiece), recvStep(1, {1, 0}, kPiece)}}}};
  gate.plan(s);
  EXPECT_EQ(gate.outputPieces(), 3u);
  EXPECT_FALSE(gate.stepReady(0, 0));  // buffer 0 is pieces 2..2
  staged = 2;
  EXPECT_FALSE(gate.stepReady(0, 0));
  EXPECT_TRUE(gate.stepReady(0, 1));
  staged = 3;
  EXPECT_TRUE(gate.stepReady(0, 0));
  EXPECT_TRUE(gate.stepReady(1, 0));  // receives read nothing gated
  gate.stepDone(1, 0);                // buffer 3's second piece: output piece 2
  EXPECT_TRUE(published.empty());
  gate.stepDone(1, 1);  // buffer 1: piece 0; buffer 3's first piece (1) nobody writes
  EXPECT_EQ(published, std::vector<uint32_t>{3});
}

}  // namespace
}  // namespace ferry
