// A symbolic model of the executor for checking schedules without memory,
// network or arithmetic (ctest label `sim`).
//
// Every element holds a Sym: the sum (mod 2^64) of the hashes of the input
// contributions it contains, and how many. A reduction adds Syms, so an
// output that misses a contribution, or holds one twice, or holds one from
// the wrong element, shows as a wrong sum. Scaling (PreMulSum's scaleSrc) and
// division (Avg's finalValue) multiply the hash by odd constants, so applying
// either twice or never also shows.
//
// Connections are bounded FIFOs of pieces, as in the executor: a piece holds
// at most one slot's bytes (the first piece of an operation on a connection 40
// bytes less, for the operation descriptor), a FIFO holds `slots` pieces, a
// step moves piece by piece and a lane blocks when its FIFO is full or empty.
// Each lane is a sequential process reading and writing its own FIFOs, so
// the system is a Kahn network: whether it deadlocks does not depend on the
// order the model runs lanes in.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "algorithms/schedule.h"

namespace ferry::sim {

struct Sym {
  uint64_t h = 0;
  uint32_t n = 0;
  bool operator==(const Sym& o) const { return h == o.h && n == o.n; }
};

constexpr uint64_t kScale = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kDivide = 0xc2b2ae3d27d4eb4full;

inline Sym plus(Sym a, Sym b) { return {a.h + b.h, a.n + b.n}; }
inline Sym scaled(Sym a) { return {a.h * kScale, a.n}; }
inline Sym divided(Sym a) { return {a.h * kDivide, a.n}; }
// The contribution of element `idx` of `rank`'s input.
Sym contribution(int rank, size_t idx);

// Capacity of one connection direction.
struct WireShape {
  size_t slots = 8;
  size_t slotElems = 64;
};

// One rank: its schedule and its buffers (input and output may alias).
struct RankModel {
  Schedule sched;
  std::vector<Sym> store0, store1, scratch;
  Sym* buf[3] = {nullptr, nullptr, nullptr};
  Sym* at(const Region& g) { return buf[g.buf] + g.offset / 8; }
};

class DataflowModel {
 public:
  // `wire(from, to)` says how big the FIFO from rank `from` to `to` is.
  DataflowModel(std::vector<RankModel> ranks, std::function<WireShape(int, int)> wire);
  // Runs until nothing can move. Empty string when every lane finished and
  // every FIFO is empty; else what is stuck or wrong.
  std::string run();
  RankModel& rank(int r) { return ranks_[r]; }

 private:
  struct Wire {
    std::deque<std::vector<Sym>> q;
    WireShape shape;
    bool first = true;
  };
  struct Lane {
    size_t step = 0;
    size_t off = 0;            // elements of the step done
    std::vector<Sym> piece;    // incoming piece being consumed
    size_t used = 0;           // elements of it consumed
    bool have = false;
  };
  Wire& wire(int from, int to);
  // Free room for one more piece from `from` to `to`: its capacity, or 0.
  size_t room(int from, int to);
  void push(int from, int to, std::vector<Sym> piece);
  // Makes l.piece hold an arrived piece; false if none. Sets error_ on a
  // piece larger than what the step still expects.
  bool take(Lane& l, int from, int to, size_t remaining);
  bool advance(int r, Lane& l, const Step& s);
  void local(int r, const Step& s);

  std::vector<RankModel> ranks_;
  std::function<WireShape(int, int)> shapeOf_;
  std::map<std::pair<int, int>, Wire> wires_;
  std::string error_;
};

}  // namespace ferry::sim
