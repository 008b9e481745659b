// WindowBinding: one symmetric collective's view of its peers' buffers
// (PeerMemory over windows), built per call from the windows that hold this
// call's input and output at the same offsets on every rank.
#pragma once

#include <cstddef>

#include "exec/peer_memory.h"
#include "mem/node_sync.h"
#include "mem/window.h"

namespace ferry::mem {

// Where rank p's buffer is: window->peerBase[p] + offset + p * stride
// (stride 0 but for in-place AllGather inputs; window null: never read).
struct PeerArea {
  const Window* window = nullptr;
  size_t offset = 0;
  size_t stride = 0;
};

class WindowBinding final : public PeerMemory {
 public:
  WindowBinding(NodeSync* sync, PeerArea in, PeerArea out, const SymDescriptor& desc, int self);

  char* base(int peer, uint32_t buf) const override;
  void arrive() override;
  Result<bool> passed() override;
  void waitingOn(std::vector<int>* peers) const override { sync_->waitingOn(peers); }
  // The backend whose memory every window of this call is, or null (host
  // windows, or a mix).
  accel::Accelerator* device() const;
  const SymDescriptor& descriptor() const { return desc_; }

 private:
  NodeSync* sync_;
  PeerArea in_, out_;
  SymDescriptor desc_;
  int self_;
  int arrivals_ = 0;
  bool checked_ = false;
};

// "AllReduce #12 count 1024 dtype 7 op 0 root -1, input window 1+0, output window 1+4096"
std::string describe(const SymDescriptor& d);

}  // namespace ferry::mem
