#include "tests/unit/bootstrap/flood_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "tests/support/test_util.h"

namespace ferry::test {

Result<std::vector<std::unique_ptr<Bootstrap>>> bootstrapPair(int64_t timeoutMs) {
  ncclUniqueId id;
  FERRY_TRY(createUniqueId(&id));
  std::vector<std::unique_ptr<Bootstrap>> bs(2);
  auto st = runThreads(2, [&](int rank) -> Status {
    FERRY_ASSIGN(bs[rank], Bootstrap::create(id, rank, 2, nullptr, timeoutMs));
    return Status::ok();
  });
  for (const Status& s : st) FERRY_TRY(s);
  return bs;
}

std::set<int> ownLoopbackListeners() {
  std::set<unsigned long> inodes;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char link[64] = {}, path[300];
      snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
      if (readlink(path, link, sizeof(link) - 1) <= 0) continue;
      unsigned long ino;
      if (sscanf(link, "socket:[%lu]", &ino) == 1) inodes.insert(ino);
    }
    closedir(d);
  }
  std::set<int> ports;
  std::ifstream f("/proc/self/net/tcp");
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    unsigned addr, port, state;
    unsigned long ino = 0;
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    if (sscanf(line.c_str(), " %*d: %8X:%4X %*8X:%*4X %2X %*8X:%*8X %*2X:%*8X %*8X %*u %*u %lu",
               &addr, &port, &state, &ino) != 4) {
      continue;
    }
    if (state == 0x0A && addr == htonl(INADDR_LOOPBACK) && inodes.count(ino)) ports.insert(port);
  }
  return ports;
}

SockAddr loopback(int port) { return SockAddr::parse("127.0.0.1:" + std::to_string(port)).take(); }

std::vector<Socket> idleConnections(const SockAddr& to, int n) {
  std::vector<Socket> out;
  for (int i = 0; i < n; i++) {
    auto s = connectSocket(to, Until::after(5000));
    if (s.isOk()) out.push_back(std::move(s.value()));
  }
  return out;
}

int countLines(const std::string& path, const std::string& needle) {
  std::ifstream f(path);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) n += line.find(needle) != std::string::npos;
  return n;
}

void GarbageFlood::addTarget(const SockAddr& a) {
  std::lock_guard<std::mutex> lk(mu_);
  targets_.push_back(a);
}

void GarbageFlood::start() { thread_ = std::thread([this] { run(); }); }

void GarbageFlood::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void GarbageFlood::run() {
  std::mt19937_64 rng(12345);
  while (!stop_) {
    std::vector<SockAddr> targets;
    {
      std::lock_guard<std::mutex> lk(mu_);
      targets = targets_;
    }
    for (const SockAddr& to : targets) {
      auto s = connectSocket(to, Until::after(1000));
      if (!s.isOk()) continue;
      uint64_t junk[8];
      for (auto& w : junk) w = rng();
      if (sent_ % 2 == 0) {  // a well-formed header with a wrong secret
        bootstrap::ConnHeader h{junk[0], bootstrap::kCheckIn};
        std::memcpy(junk, &h, sizeof(h));
      }
      (void)sendAll(s.value(), junk, sizeof(junk), Until::after(1000));
      sent_++;
    }
    if (targets.empty()) usleep(1000);
  }
}

}  // namespace ferry::test
