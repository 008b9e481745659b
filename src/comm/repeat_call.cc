#include "comm/repeat_call.h"

namespace ferry {

void RepeatCalls::remember(const RepeatEntry& e) {
  for (RepeatEntry& x : entries_) {
    if (x.key == e.key) {
      x = e;
      return;
    }
  }
  entries_[next_] = e;
  next_ = (next_ + 1) % kEntries;
}

}  // namespace ferry
