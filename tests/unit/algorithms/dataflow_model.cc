#include "tests/unit/algorithms/dataflow_model.h"

#include <algorithm>

namespace ferry::sim {

Sym contribution(int rank, size_t idx) {
  uint64_t z = (static_cast<uint64_t>(rank) << 40) ^ idx ^ 0x6a09e667f3bcc909ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64's finalizer
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return {z ^ (z >> 31), 1};
}

DataflowModel::DataflowModel(std::vector<RankModel> ranks, std::function<WireShape(int, int)> wire)
    : ranks_(std::move(ranks)), shapeOf_(std::move(wire)) {}

DataflowModel::Wire& DataflowModel::wire(int from, int to) {
  auto it = wires_.find({from, to});
  if (it != wires_.end()) return it->second;
  Wire& w = wires_[{from, to}];
  w.shape = shapeOf_(from, to);
  return w;
}

size_t DataflowModel::room(int from, int to) {
  Wire& w = wire(from, to);
  if (w.q.size() >= w.shape.slots) return 0;
  return w.shape.slotElems - (w.first ? 4 : 0);  // the 32-byte descriptor
}

void DataflowModel::push(int from, int to, std::vector<Sym> piece) {
  Wire& w = wire(from, to);
  w.first = false;
  w.q.push_back(std::move(piece));
}

bool DataflowModel::take(Lane& l, int from, int to, size_t remaining) {
  if (l.have) return true;
  Wire& w = wire(from, to);
  if (w.q.empty()) return false;
  l.piece = std::move(w.q.front());
  w.q.pop_front();
  l.used = 0;
  l.have = true;
  if (l.piece.size() > remaining && error_.empty())
    error_ = "rank " + std::to_string(to) + " got a piece of " + std::to_string(l.piece.size()) +
             " elements from rank " + std::to_string(from) + " with " + std::to_string(remaining) +
             " left in the step";
  return error_.empty();
}

void DataflowModel::local(int r, const Step& s) {
  RankModel& m = ranks_[r];
  size_t n = s.bytes / 8;
  std::vector<Sym> src(m.at(s.src), m.at(s.src) + n);  // src and dst may overlap
  Sym* dst = m.at(s.dst);
  for (size_t i = 0; i < n; ++i) {
    Sym v = s.scaleSrc ? scaled(src[i]) : src[i];
    if (s.kind == StepKind::kLocalReduce) v = plus(dst[i], v);
    dst[i] = s.finalValue ? divided(v) : v;
  }
}

// One step of lane l on rank r, as far as it can go now; true if it moved.
bool DataflowModel::advance(int r, Lane& l, const Step& s) {
  RankModel& m = ranks_[r];
  size_t total = s.bytes / 8;
  if (s.kind == StepKind::kCopy || s.kind == StepKind::kLocalReduce) {
    local(r, s);
    l.off = total;
    return true;
  }
  bool moved = false;
  bool recvs = s.kind != StepKind::kSend;
  bool sends = s.kind == StepKind::kSend || s.kind == StepKind::kRecvReduceSend ||
               s.kind == StepKind::kRecvReduceCopySend || s.kind == StepKind::kRecvCopySend;
  bool reduces = s.kind == StepKind::kRecvReduceSend || s.kind == StepKind::kRecvReduceCopy ||
                 s.kind == StepKind::kRecvReduceCopySend;
  bool writes = s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduceCopy ||
                s.kind == StepKind::kRecvReduceCopySend || s.kind == StepKind::kRecvCopySend ||
                (s.kind == StepKind::kSend && s.alsoCopy);
  while (l.off < total && error_.empty()) {
    size_t k = total - l.off;
    if (recvs) {
      if (!take(l, s.recvPeer, r, total - l.off)) break;
      k = std::min(k, l.piece.size() - l.used);
    }
    if (sends) {
      size_t cap = room(r, s.sendPeer);
      if (cap == 0) break;
      k = std::min(k, cap);
    }
    std::vector<Sym> out(k);
    for (size_t i = 0; i < k; ++i) {
      Sym local;
      if (!recvs || reduces) local = m.at(s.src)[l.off + i];  // a Recv's src is unused
      if (s.scaleSrc) local = scaled(local);
      Sym v = !recvs ? local : reduces ? plus(l.piece[l.used + i], local) : l.piece[l.used + i];
      if (reduces && s.finalValue) v = divided(v);
      if (writes) m.at(s.dst)[l.off + i] = v;
      out[i] = v;
    }
    if (sends) push(r, s.sendPeer, std::move(out));
    if (recvs && (l.used += k) == l.piece.size()) l.have = false;
    l.off += k;
    moved = true;
  }
  return moved;
}

std::string DataflowModel::run() {
  std::vector<std::vector<Lane>> lanes(ranks_.size());
  for (size_t r = 0; r < ranks_.size(); ++r) {
    for (const Step& s : ranks_[r].sched.prologue) local(static_cast<int>(r), s);
    lanes[r].resize(ranks_[r].sched.lanes.size());
  }
  for (bool moved = true; moved && error_.empty();) {
    moved = false;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      for (size_t i = 0; i < lanes[r].size(); ++i) {
        const std::vector<Step>& steps = ranks_[r].sched.lanes[i].steps;
        Lane& l = lanes[r][i];
        while (l.step < steps.size() && error_.empty()) {
          const Step& s = steps[l.step];
          moved |= advance(static_cast<int>(r), l, s);
          if (l.off < s.bytes / 8) break;
          l.step++;
          l.off = 0;
          moved = true;
        }
      }
    }
  }
  if (!error_.empty()) return error_;
  for (size_t r = 0; r < ranks_.size(); ++r)
    for (size_t i = 0; i < lanes[r].size(); ++i) {
      const std::vector<Step>& steps = ranks_[r].sched.lanes[i].steps;
      if (lanes[r][i].step < steps.size()) {
        const Step& s = steps[lanes[r][i].step];
        return "deadlock: rank " + std::to_string(r) + " lane " + std::to_string(i) + " stuck at step " +
               std::to_string(lanes[r][i].step) + " (" + stepName(s.kind) + ", send " +
               std::to_string(s.sendPeer) + ", recv " + std::to_string(s.recvPeer) + ")";
      }
    }
  for (auto& [k, w] : wires_)
    if (!w.q.empty())
      return "unconsumed pieces from rank " + std::to_string(k.first) + " to " + std::to_string(k.second);
  return "";
}

}  // namespace ferry::sim
