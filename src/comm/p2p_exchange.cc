#include "comm/p2p_exchange.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "algorithms/builders.h"
#include "core/config.h"
#include "core/log.h"

namespace ferry {
namespace {

constexpr uintptr_t kNone = UINTPTR_MAX;

// One side (sends or receives) as counts and displacements from its lowest
// non-empty buffer.
struct Side {
  std::vector<size_t> counts, displs;
  std::vector<uintptr_t> at;  // block addresses, kNone if not posted
  uintptr_t base = 0;

  explicit Side(int n) : counts(n, 0), displs(n, 0), at(n, kNone) {}
  void rebase() {
    base = kNone;
    for (size_t p = 0; p < at.size(); ++p)
      if (counts[p] > 0) base = std::min(base, at[p]);
    if (base == kNone) base = 0;
    for (size_t p = 0; p < at.size(); ++p) displs[p] = counts[p] > 0 ? at[p] - base : 0;
  }
};

// Exactly one send to and one receive from every other rank; the rank's own
// pair is optional but whole. Fills the two sides.
bool fullExchange(int me, int n, const std::vector<P2pTask>& p2ps, Side* s, Side* r) {
  if (p2ps.size() < 2 * static_cast<size_t>(n - 1)) return false;
  for (const P2pTask& t : p2ps) {
    Side* side = t.isSend ? s : r;
    if (t.peer < 0 || t.peer >= n || side->at[t.peer] != kNone) return false;
    side->at[t.peer] = reinterpret_cast<uintptr_t>(t.buf);
    side->counts[t.peer] = t.bytes;
  }
  for (int p = 0; p < n; ++p) {
    bool send = s->at[p] != kNone, recv = r->at[p] != kNone;
    if (p == me ? send != recv : !(send && recv)) return false;
  }
  return true;
}

// The send blocks packed into a private copy, which becomes the send side.
std::shared_ptr<std::vector<char>> packSends(Side* s) {
  size_t total = 0;
  for (size_t c : s->counts) total += c;
  auto copy = std::make_shared<std::vector<char>>(total);
  size_t at = 0;
  for (size_t p = 0; p < s->counts.size(); ++p) {
    if (s->counts[p] == 0) continue;
    std::memcpy(copy->data() + at, reinterpret_cast<const void*>(s->at[p]), s->counts[p]);
    s->displs[p] = at;
    at += s->counts[p];
  }
  s->base = reinterpret_cast<uintptr_t>(copy->data());
  return copy;
}

}  // namespace

bool sendsOverlapReceives(const std::vector<P2pTask>& p2ps) {
  struct Block {
    uintptr_t lo, hi;
    bool send;
  };
  thread_local std::vector<Block> b;  // reused: checked on every Send/Recv group
  b.clear();
  for (const P2pTask& t : p2ps) {
    uintptr_t lo = reinterpret_cast<uintptr_t>(t.buf);
    if (t.bytes > 0) b.push_back({lo, lo + t.bytes, t.isSend});
  }
  std::sort(b.begin(), b.end(), [](const Block& x, const Block& y) { return x.lo < y.lo; });
  uintptr_t sendHi = 0, recvHi = 0;
  for (const Block& x : b) {
    if (x.lo < (x.send ? recvHi : sendHi)) return true;
    uintptr_t& hi = x.send ? sendHi : recvHi;
    hi = std::max(hi, x.hi);
  }
  return false;
}

std::shared_ptr<AlltoAllvCall> p2pRailExchange(Comm* c, const std::vector<P2pTask>& p2ps) {
  if (!c->p2pRail() || !railvSupports(c->view())) return nullptr;
  const int n = c->nranks(), me = c->rank();
  Side s(n), r(n);
  if (!fullExchange(me, n, p2ps, &s, &r)) return nullptr;
  s.rebase();
  r.rebase();
  // The exchange may write a receive block before it has read every send
  // block: a receive that overlaps a send (an in-place exchange) reads
  // from a copy taken now, before any data moves.
  std::shared_ptr<std::vector<char>> copy;
  if (sendsOverlapReceives(p2ps)) copy = packSends(&s);
  auto call = std::make_shared<AlltoAllvCall>(
      c, reinterpret_cast<const void*>(s.base), s.counts.data(), s.displs.data(),
      reinterpret_cast<void*>(r.base), r.counts.data(), r.displs.data(), 1);
  if (copy) call->own(copy);
  FERRY_INFO(log::kTuning, "Send/Recv group: %zu ops run as one rail exchange (FERRY_P2P_RAIL)%s",
             p2ps.size(), copy ? ", reading a copy of the send blocks (they overlap the receives)" : "");
  return call;
}

}  // namespace ferry
