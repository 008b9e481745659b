#include "exec/io_gate.h"

#include <algorithm>
#include <utility>

namespace ferry {
namespace {

bool readsSrc(const Step& s) {
  switch (s.kind) {
    case StepKind::kCopy:
    case StepKind::kSend:
    case StepKind::kRecvReduceSend:
    case StepKind::kRecvReduceCopy:
    case StepKind::kRecvReduceCopySend:
    case StepKind::kLocalReduce:
      return true;
    default:
      return false;
  }
}

bool writesDst(const Step& s) {
  switch (s.kind) {
    case StepKind::kCopy:
    case StepKind::kRecv:
    case StepKind::kRecvReduceCopy:
    case StepKind::kRecvReduceCopySend:
    case StepKind::kRecvCopySend:
    case StepKind::kLocalReduce:
      return true;
    case StepKind::kSend:
      return s.alsoCopy;
    default:
      return false;
  }
}

}  // namespace

IoGate::IoGate(size_t pieceBytes, std::vector<Buffer> inputs, std::vector<Buffer> outputs,
               const std::atomic<uint32_t>* staged, std::function<void(uint32_t)> publish)
    : piece_(std::max<size_t>(pieceBytes, 1)), in_(std::move(inputs)), out_(std::move(outputs)),
      staged_(staged), publish_(std::move(publish)) {
  for (const Buffer& b : out_) outPieces_ += piecesOf(b.bytes, piece_);
}

int64_t IoGate::baseOf(const std::vector<Buffer>& list, const Region& r, uint32_t* count) const {
  if (r.peer >= 0) return -1;
  int64_t base = 0;
  for (const Buffer& b : list) {
    *count = piecesOf(b.bytes, piece_);
    if (b.index == r.buf) return base;
    base += *count;
  }
  return -1;
}

// Pieces in staging order: a step needs every piece up to the end of what
// it reads. A local reduction reads its destination too.
uint32_t IoGate::inputNeed(const Step& s) const {
  if (s.bytes == 0) return 0;
  uint32_t need = 0;
  auto reads = [&](const Region& r) {
    uint32_t count = 0;
    int64_t base = baseOf(in_, r, &count);
    if (base < 0) return;
    uint32_t end = std::min(count, piecesOf(r.offset + s.bytes, piece_));
    need = std::max(need, static_cast<uint32_t>(base) + end);
  };
  if (readsSrc(s)) reads(s.src);
  if (s.kind == StepKind::kLocalReduce) reads(s.dst);
  return need;
}

bool IoGate::outputRange(const Step& s, uint32_t* lo, uint32_t* hi) const {
  if (s.bytes == 0 || !writesDst(s)) return false;
  uint32_t count = 0;
  int64_t base = baseOf(out_, s.dst, &count);
  if (base < 0) return false;
  // Clipped to the buffer: a write past its end is not this gate's to count.
  uint32_t first = static_cast<uint32_t>(std::min<size_t>(s.dst.offset / piece_, count));
  *lo = static_cast<uint32_t>(base) + first;
  *hi = static_cast<uint32_t>(base) + std::min(count, piecesOf(s.dst.offset + s.bytes, piece_));
  return *lo < *hi;
}

void IoGate::plan(const Schedule& s) {
  const uint32_t nOut = outPieces_;
  uint32_t lo = 0, hi = 0;
  pending_.assign(nOut, 0);
  next_ = 0;

  prologueNeed_ = 0;
  prologueLast_.clear();
  std::vector<char> written(nOut, 0);
  for (const Step& st : s.prologue) {
    prologueNeed_ = std::max(prologueNeed_, inputNeed(st));
    if (!outputRange(st, &lo, &hi)) continue;
    for (uint32_t p = lo; p < hi; ++p) written[p] = 1;
  }
  for (uint32_t p = 0; p < nOut; ++p)
    if (written[p]) prologueLast_.push_back(p), pending_[p]++;

  const size_t lanes = s.lanes.size();
  need_.assign(lanes, {});
  finish_.assign(lanes, {});
  cursor_.assign(lanes, 0);
  std::vector<size_t> last(nOut);
  constexpr size_t kNone = SIZE_MAX;
  for (size_t i = 0; i < lanes; ++i) {
    const std::vector<Step>& steps = s.lanes[i].steps;
    need_[i].resize(steps.size());
    std::fill(last.begin(), last.end(), kNone);
    for (size_t k = 0; k < steps.size(); ++k) {
      need_[i][k] = inputNeed(steps[k]);
      if (!outputRange(steps[k], &lo, &hi)) continue;
      for (uint32_t p = lo; p < hi; ++p) last[p] = k;
    }
    for (uint32_t p = 0; p < nOut; ++p)
      if (last[p] != kNone) finish_[i].push_back({last[p], p}), pending_[p]++;
    std::sort(finish_[i].begin(), finish_[i].end(),
              [](const Finish& a, const Finish& b) { return a.step < b.step; });
  }
  advance();
}

void IoGate::prologueDone() {
  for (uint32_t p : prologueLast_) release(p);
  prologueLast_.clear();
  advance();
}

void IoGate::stepDone(size_t lane, size_t step) {
  std::vector<Finish>& f = finish_[lane];
  size_t& c = cursor_[lane];
  bool any = false;
  for (; c < f.size() && f[c].step <= step; ++c) {
    release(f[c].piece);
    any = true;
  }
  if (any) advance();
}

void IoGate::advance() {
  uint32_t n = next_;
  while (n < pending_.size() && pending_[n] == 0) ++n;
  if (n == next_) return;
  next_ = n;
  if (publish_) publish_(n);
}

}  // namespace ferry
