// Readiness: what a caller's idle wait can block on instead of spinning.
//
// A transport whose request cannot progress until one of its sockets is
// ready (readable, or writable again) notes that socket here; one that waits
// on anything else (another process's stores to shared memory, a helper
// thread, a timer) notes "other". Notes are per thread and per polling pass:
// the caller's Waiter (wait.h) reads them after a pass that moved nothing and
// clears them. When a pass noted only sockets, the Waiter may block in
// poll() on them (woken the moment one is ready) where it would otherwise
// yield the core: a spinning caller takes CPU time from the kernel's own
// network work (loopback and veth traffic runs in softirq, often in
// ksoftirqd), which costs a both-ways 64 MiB stream ~30% (perf/README.md,
// perf/fabric, "a slow mode"). The caller decides whether it may block at all
// (Waiter::allowFdWait): only when everything it waits on notes its sockets.
#pragma once

namespace ferry::readiness {

// Most sockets one pass keeps; more make the pass count as "other".
constexpr int kMaxFds = 16;

// This thread's caller cannot progress until `fd` reports one of `events`
// (POLLIN/POLLOUT). Repeated notes of one fd merge.
void note(int fd, short events);
// This thread's caller waits on something without a socket.
void noteOther();
// This thread's caller moved bytes in this pass although nothing finished
// (a large message on its way): the pass was not idle.
void noteMoved();
// This thread's caller waits for the rest of a message whose bytes have
// started to arrive (or leave): data is streaming through the socket.
void noteMidMessage();
bool midMessage();
// Whether a pass moved bytes since the last call (or clear()); forgets it.
bool takeMoved();
// Forget this pass's notes.
void clear();
// Block until a noted socket is ready or `timeoutUs` passed. False (at
// once) when the pass noted no socket, or noted "other".
bool wait(int timeoutUs);

}  // namespace ferry::readiness
