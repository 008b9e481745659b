#include "mem/window_binding.h"

#include <string>

#include "algorithms/schedule.h"

namespace ferry::mem {

WindowBinding::WindowBinding(NodeSync* sync, PeerArea in, PeerArea out, const SymDescriptor& desc,
                             int self)
    : sync_(sync), in_(in), out_(out), desc_(desc), self_(self) {}

char* WindowBinding::base(int peer, uint32_t buf) const {
  const PeerArea& a = buf == kInputBuf ? in_ : out_;
  if (!a.window) return nullptr;
  return a.window->peerBase[peer] + a.offset + static_cast<size_t>(peer) * a.stride;
}

accel::Accelerator* WindowBinding::device() const {
  accel::Accelerator* dev = nullptr;
  for (const PeerArea* a : {&in_, &out_}) {
    if (!a->window) continue;
    if (!a->window->device || (dev && dev != a->window->device)) return nullptr;
    dev = a->window->device;
  }
  return dev;
}

// The first barrier of the call carries its descriptor.
void WindowBinding::arrive() {
  if (arrivals_++ == 0) sync_->publish(desc_);
  sync_->arrive();
}

Result<bool> WindowBinding::passed() {
  if (!sync_->passed()) return false;
  if (checked_) return true;
  checked_ = true;
  SymDescriptor theirs;
  int r = sync_->firstMismatch(&theirs);
  if (r < 0) return true;
  return invalidUsage("ranks disagree on a collective over symmetric windows: rank " +
                      std::to_string(self_) + " runs " + describe(desc_) + ", rank " +
                      std::to_string(r) + " runs " + describe(theirs) +
                      " (every rank must pass window buffers at the same offsets)");
}

std::string describe(const SymDescriptor& d) {
  return std::string(collName(static_cast<CollKind>(d.kind))) + " #" + std::to_string(d.collSeq) +
         " count " + std::to_string(d.count) + " dtype " + std::to_string(d.dtype) + " op " +
         std::to_string(d.op) + " root " + std::to_string(d.root) + (d.inPlace ? " in place" : "") + ", input window " +
         std::to_string(d.inWindow) + "+" + std::to_string(d.inOffset) + ", output window " +
         std::to_string(d.outWindow) + "+" + std::to_string(d.outOffset);
}

}  // namespace ferry::mem
