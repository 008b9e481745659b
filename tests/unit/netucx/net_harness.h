// Test driver for any ncclNet_v11_t: connection setup, ordered transfers with
// a window of requests, exact content checks, and a fork/watchdog helper.
// Header-only and independent of libferry, so the dlopen test can use it.
// Functions return "" on success or what went wrong (usable in children).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdlib.h>
#include <string>
#include <thread>
#include <vector>

#include <nccl_net.h>

namespace ferrytest {

inline int64_t msNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int64_t kStepMs = 60000;  // no single phase of a test may take longer

inline uint8_t patternByte(size_t i, int msg, int seed) {
  return static_cast<uint8_t>(i * 131 + static_cast<size_t>(msg) * 7 + static_cast<size_t>(seed));
}

inline std::string err(const char* what, ncclResult_t r) {
  return std::string(what) + " returned " + std::to_string(static_cast<int>(r));
}

// Both loops are non-blocking steps of one handshake: run them concurrently.
inline std::string acceptLoop(const ncclNet_v11_t* net, void* listenComm, void** recvComm) {
  ncclNetDeviceHandle_v11_t* dev = nullptr;
  *recvComm = nullptr;
  for (int64_t end = msNow() + kStepMs; !*recvComm; std::this_thread::yield()) {
    ncclResult_t r = net->accept(listenComm, recvComm, &dev);
    if (r != ncclSuccess) return err("accept", r);
    if (msNow() > end) return "accept timed out";
  }
  return "";
}

inline std::string connectLoop(const ncclNet_v11_t* net, void* ctx, int dev, void* handle,
                               void** sendComm) {
  ncclNetDeviceHandle_v11_t* devComm = nullptr;
  *sendComm = nullptr;
  for (int64_t end = msNow() + kStepMs; !*sendComm; std::this_thread::yield()) {
    ncclResult_t r = net->connect(ctx, dev, handle, sendComm, &devComm);
    if (r != ncclSuccess) return err("connect", r);
    if (msNow() > end) return "connect timed out";
  }
  return "";
}

// Poll one request to completion; *size gets the reported size.
inline std::string waitRequest(const ncclNet_v11_t* net, void* req, int* size,
                               ncclResult_t* failure = nullptr) {
  int done = 0;
  for (int64_t end = msNow() + kStepMs; !done;) {
    ncclResult_t r = net->test(req, &done, size);
    if (r != ncclSuccess) {
      if (failure) *failure = r;
      return err("test", r);
    }
    if (msNow() > end) return "test timed out";
  }
  return "";
}

// Send messages of the given sizes in order, with up to `window` in flight.
inline std::string sendAll(const ncclNet_v11_t* net, void* comm, const std::vector<size_t>& sizes,
                           int window, int seed) {
  size_t maxSize = 1;
  for (size_t s : sizes) maxSize = std::max(maxSize, s);
  std::vector<std::vector<uint8_t>> bufs(window, std::vector<uint8_t>(maxSize));
  std::vector<void*> mh(window);
  for (int w = 0; w < window; w++) {
    ncclResult_t r = net->regMr(comm, bufs[w].data(), maxSize, NCCL_PTR_HOST, &mh[w]);
    if (r != ncclSuccess) return err("regMr", r);
  }
  std::vector<void*> reqs(window, nullptr);
  size_t n = sizes.size();
  for (size_t m = 0, oldest = 0; oldest < n;) {
    if (m < n && m - oldest < static_cast<size_t>(window)) {
      int w = static_cast<int>(m % window);
      for (size_t i = 0; i < sizes[m]; i++) bufs[w][i] = patternByte(i, static_cast<int>(m), seed);
      void* req = nullptr;
      for (int64_t end = msNow() + kStepMs; !req;) {
        ncclResult_t r = net->isend(comm, bufs[w].data(), sizes[m], 0, mh[w], nullptr, &req);
        if (r != ncclSuccess) return err("isend", r);
        if (msNow() > end) return "isend never accepted the request";
      }
      reqs[w] = req;
      m++;
      continue;
    }
    int size = -1;
    std::string e = waitRequest(net, reqs[oldest % window], &size);
    if (!e.empty()) return "send " + std::to_string(oldest) + ": " + e;
    oldest++;
  }
  for (int w = 0; w < window; w++) net->deregMr(comm, mh[w]);
  return "";
}

// Receive them in order into buffers `extra` bytes larger than each message;
// check the reported size, every byte, and that the excess is untouched.
inline std::string recvAll(const ncclNet_v11_t* net, void* comm, const std::vector<size_t>& sizes,
                           int window, int seed, size_t extra = 16) {
  size_t maxSize = 0;
  for (size_t s : sizes) maxSize = std::max(maxSize, s);
  size_t cap = maxSize + extra;
  std::vector<std::vector<uint8_t>> bufs(window, std::vector<uint8_t>(cap));
  std::vector<void*> mh(window);
  for (int w = 0; w < window; w++) {
    ncclResult_t r = net->regMr(comm, bufs[w].data(), cap, NCCL_PTR_HOST, &mh[w]);
    if (r != ncclSuccess) return err("regMr", r);
  }
  std::vector<void*> reqs(window, nullptr);
  size_t n = sizes.size();
  for (size_t m = 0, oldest = 0; oldest < n;) {
    if (m < n && m - oldest < static_cast<size_t>(window)) {
      int w = static_cast<int>(m % window);
      std::memset(bufs[w].data(), 0xEE, cap);
      void* data = bufs[w].data();
      size_t size = sizes[m] + extra;
      int tag = 0;
      void* req = nullptr;
      for (int64_t end = msNow() + kStepMs; !req;) {
        ncclResult_t r = net->irecv(comm, 1, &data, &size, &tag, &mh[w], nullptr, &req);
        if (r != ncclSuccess) return err("irecv", r);
        if (msNow() > end) return "irecv never accepted the request";
      }
      reqs[w] = req;
      m++;
      continue;
    }
    int w = static_cast<int>(oldest % window);
    int got = -1;
    std::string e = waitRequest(net, reqs[w], &got);
    std::string where = "message " + std::to_string(oldest) + " (" + std::to_string(sizes[oldest]) + " B): ";
    if (!e.empty()) return where + e;
    if (got != static_cast<int>(sizes[oldest])) return where + "reported size " + std::to_string(got);
    for (size_t i = 0; i < cap; i++) {
      uint8_t want = i < sizes[oldest] ? patternByte(i, static_cast<int>(oldest), seed) : 0xEE;
      if (bufs[w][i] != want) return where + "byte " + std::to_string(i) + " differs";
    }
    oldest++;
  }
  for (int w = 0; w < window; w++) net->deregMr(comm, mh[w]);
  return "";
}

// ---- processes: run fn in a child; its return value is the exit code.
inline pid_t forkChild(const std::function<int()>& fn) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(120);  // last-resort watchdog inside the child too
    int code = fn();
    fflush(stdout);
    fflush(stderr);
    _exit(code);
  }
  return pid;
}

// Wait for all children; kill the rest after timeoutMs. Exit codes, or
// 128+signal, or -1 for a child that had to be killed by the watchdog.
inline std::vector<int> waitChildren(const std::vector<pid_t>& pids, int64_t timeoutMs) {
  std::vector<int> codes(pids.size(), -2);
  int64_t end = msNow() + timeoutMs;
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); i++) {
      if (codes[i] != -2) continue;
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        left--;
      }
    }
    if (left > 0 && msNow() > end) {
      for (size_t i = 0; i < pids.size(); i++) {
        if (codes[i] != -2) continue;
        kill(pids[i], SIGKILL);
        waitpid(pids[i], nullptr, 0);
        codes[i] = -1;
      }
      break;
    }
    if (left > 0) usleep(2000);
  }
  return codes;
}

// One side of a two-process test writes its result line to fd before exiting.
inline int report(int fd, const std::string& what) {
  std::string line = what.empty() ? "ok" : what;
  (void)!write(fd, line.data(), line.size());
  return what.empty() ? 0 : 1;
}

inline std::string readAll(int fd) {
  std::string s;
  char buf[512];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

// ---- a sender and a receiver over one connection, as processes or threads.
using Body = std::function<std::string(const ncclNet_v11_t*, void* comm)>;
struct Pair {
  std::function<const ncclNet_v11_t*()> getNet;  // called after env is set
  std::vector<std::pair<std::string, std::string>> env;
  int dev = 0;
  Body recvBody;
  Body sendBody;
};
struct PairResult {
  std::string recv;  // "" = ok
  std::string send;
  int recvCode = 0;  // exit codes (processes only)
  int sendCode = 0;
};

inline std::string runReceiver(const Pair& p, const ncclNet_v11_t* net,
                               const std::function<void(const char*)>& publish) {
  if (!net) return "no network table";
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ncclResult_t r = net->init(&ctx, 0x1234, &cfg, nullptr, nullptr);
  if (r != ncclSuccess) return err("init", r);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  if ((r = net->listen(ctx, p.dev, handle, &lc)) != ncclSuccess) return err("listen", r);
  publish(handle);
  void* rc = nullptr;
  std::string e = acceptLoop(net, lc, &rc);
  if (e.empty()) e = p.recvBody(net, rc);
  if (!e.empty() && getenv("FERRY_TEST_VERBOSE")) fprintf(stderr, "receiver: %s\n", e.c_str());
  // A body that closed the comm itself says so by returning "closed".
  if (rc && e != "closed" && (r = net->closeRecv(rc)) != ncclSuccess && e.empty())
    e = err("closeRecv", r);
  if ((r = net->closeListen(lc)) != ncclSuccess && e.empty()) e = err("closeListen", r);
  if ((r = net->finalize(ctx)) != ncclSuccess && e.empty()) e = err("finalize", r);
  return e;
}

inline std::string runSender(const Pair& p, const ncclNet_v11_t* net, char* handle) {
  if (!net) return "no network table";
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ncclResult_t r = net->init(&ctx, 0x1234, &cfg, nullptr, nullptr);
  if (r != ncclSuccess) return err("init", r);
  void* sc = nullptr;
  std::string e = connectLoop(net, ctx, p.dev, handle, &sc);
  if (e.empty()) e = p.sendBody(net, sc);
  if (!e.empty() && getenv("FERRY_TEST_VERBOSE")) fprintf(stderr, "sender: %s\n", e.c_str());
  if (sc && (r = net->closeSend(sc)) != ncclSuccess && e.empty()) e = err("closeSend", r);
  if ((r = net->finalize(ctx)) != ncclSuccess && e.empty()) e = err("finalize", r);
  return e;
}

inline PairResult runProcesses(const Pair& p, int64_t timeoutMs = 90000) {
  int hp[2], rp[2], sp[2];
  if (pipe(hp) != 0 || pipe(rp) != 0 || pipe(sp) != 0) return {"pipe failed", "pipe failed"};
  auto setEnv = [&p] {
    for (const auto& kv : p.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  };
  pid_t recvPid = forkChild([&] {
    setEnv();
    std::string e = runReceiver(p, p.getNet(), [&](const char* h) {
      (void)!write(hp[1], h, NCCL_NET_HANDLE_MAXSIZE);
    });
    return report(rp[1], e);
  });
  pid_t sendPid = forkChild([&] {
    setEnv();
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    size_t got = 0;
    while (got < sizeof(handle)) {
      ssize_t n = read(hp[0], handle + got, sizeof(handle) - got);
      if (n <= 0) return report(sp[1], "no handle from the receiver");
      got += static_cast<size_t>(n);
    }
    return report(sp[1], runSender(p, p.getNet(), handle));
  });
  for (int fd : {hp[0], hp[1], rp[1], sp[1]}) close(fd);
  std::vector<int> codes = waitChildren({recvPid, sendPid}, timeoutMs);
  PairResult res{readAll(rp[0]), readAll(sp[0]), codes[0], codes[1]};
  close(rp[0]);
  close(sp[0]);
  if (res.recv == "ok") res.recv = "";
  if (res.send == "ok") res.send = "";
  return res;
}

inline PairResult runThreads(const Pair& p) {
  for (const auto& kv : p.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  const ncclNet_v11_t* net = p.getNet();
  std::promise<std::string> handleP;
  auto handleF = handleP.get_future();
  PairResult res;
  std::thread recvT([&] {
    res.recv = runReceiver(p, net, [&](const char* h) {
      handleP.set_value(std::string(h, NCCL_NET_HANDLE_MAXSIZE));
    });
  });
  std::thread sendT([&] {
    if (handleF.wait_for(std::chrono::milliseconds(kStepMs)) != std::future_status::ready) {
      res.send = "no handle from the receiver";
      return;
    }
    std::string h = handleF.get();
    res.send = runSender(p, net, h.data());
  });
  recvT.join();
  sendT.join();
  for (const auto& kv : p.env) unsetenv(kv.first.c_str());
  return res;
}

}  // namespace ferrytest
