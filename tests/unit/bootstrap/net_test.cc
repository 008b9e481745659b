// SockAddr, interface selection and the deadline-bounded socket helpers.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/wait.h"
#include "net/interfaces.h"
#include "net/socket.h"
#include "tests/support/test_util.h"

namespace ferry {
namespace {

TEST(SockAddr, ParsesAndPrintsV4) {
  auto a = SockAddr::parse("127.0.0.1:5000");
  ASSERT_TRUE(a.isOk()) << a.status().message();
  EXPECT_EQ(a.value().family(), AF_INET);
  EXPECT_EQ(a.value().port(), 5000);
  EXPECT_EQ(a.value().toString(), "127.0.0.1<5000>");
  EXPECT_TRUE(a.value().isLoopback());
}

TEST(SockAddr, ParsesAndPrintsV6) {
  auto a = SockAddr::parse("[fd00::2]:6001");
  ASSERT_TRUE(a.isOk()) << a.status().message();
  EXPECT_EQ(a.value().family(), AF_INET6);
  EXPECT_EQ(a.value().toString(), "fd00::2<6001>");
  EXPECT_FALSE(a.value().isLoopback());
  auto lo = SockAddr::parse("[::1]:1");
  ASSERT_TRUE(lo.isOk());
  EXPECT_TRUE(lo.value().isLoopback());
}

TEST(SockAddr, ResolvesHostNames) {
  auto a = SockAddr::parse("localhost:80");
  ASSERT_TRUE(a.isOk()) << a.status().message();
  EXPECT_TRUE(a.value().isLoopback());
  EXPECT_EQ(a.value().port(), 80);
}

TEST(SockAddr, RejectsBadText) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:12a",
                          "[::1]6000", "[::1:6000", ":5000"}) {
    auto a = SockAddr::parse(bad);
    EXPECT_FALSE(a.isOk()) << bad;
    if (!a.isOk()) {
      EXPECT_EQ(a.status().code(), Code::kInvalidArgument) << bad;
    }
  }
}

TEST(SockAddr, PackRoundTrip) {
  for (const char* text : {"10.1.2.3:4242", "[fd00::1:2]:65535"}) {
    SockAddr a = SockAddr::parse(text).take();
    uint8_t buf[SockAddr::kPackedBytes + 4];
    memset(buf, 0xab, sizeof(buf));
    a.pack(buf);
    EXPECT_EQ(buf[SockAddr::kPackedBytes], 0xab);  // writes exactly kPackedBytes
    SockAddr b = SockAddr::unpack(buf, SockAddr::kPackedBytes);
    EXPECT_TRUE(a == b) << text;
    EXPECT_EQ(b.toString(), a.toString());
  }
  uint8_t zero[SockAddr::kPackedBytes] = {};
  EXPECT_FALSE(SockAddr::unpack(zero, sizeof(zero)).valid());
  EXPECT_EQ(SockAddr().toString(), "<invalid>");
}

NetIf makeIf(const char* name, const char* addr, int prefix) {
  NetIf n;
  n.name = name;
  n.addr = SockAddr::parse(std::string(addr) + ":0").take();
  n.prefixLen = prefix;
  return n;
}

std::vector<NetIf> fakeIfs() {
  return {makeIf("lo", "127.0.0.1", 8),        makeIf("eth0", "10.0.0.5", 24),
          makeIf("docker0", "172.17.0.1", 16), makeIf("virbr0", "192.168.122.1", 24),
          makeIf("ib0", "10.1.0.5", 16),       makeIf("eth0", "[fd00::5]", 64),
          makeIf("eth1", "[fd01::5]", 64),     makeIf("lo", "[::1]", 128)};
}

std::string names(const std::vector<NetIf>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : ",") + n.name + "/" + n.addr.host();
  return s;
}

// The first class with any interface wins (NCCL): IPoIB, other real ones,
// docker, loopback, libvirt; classes never mix.
TEST(Interfaces, DefaultClasses) {
  auto all = fakeIfs();
  EXPECT_EQ(names(selectInterfaces(all, "", AF_UNSPEC, 10)), "ib0/10.1.0.5");
  EXPECT_EQ(names(selectInterfaces(all, "", AF_INET6, 10)), "eth0/fd00::5,eth1/fd01::5");
  auto without = [&](std::initializer_list<const char*> drop) {
    std::vector<NetIf> v;
    for (const NetIf& n : all) {
      bool keep = true;
      for (const char* d : drop) keep = keep && n.name.rfind(d, 0) != 0;
      if (keep) v.push_back(n);
    }
    return v;
  };
  EXPECT_EQ(names(selectInterfaces(without({"ib"}), "", AF_UNSPEC, 10)), "eth0/10.0.0.5,eth1/fd01::5");
  EXPECT_EQ(names(selectInterfaces(without({"ib"}), "", AF_UNSPEC, 1)), "eth0/10.0.0.5");
  EXPECT_EQ(names(selectInterfaces(without({"ib", "eth"}), "", AF_UNSPEC, 10)), "docker0/172.17.0.1");
  EXPECT_EQ(names(selectInterfaces(without({"ib", "eth", "docker"}), "", AF_UNSPEC, 10)), "lo/127.0.0.1");
  EXPECT_EQ(names(selectInterfaces(without({"ib", "eth", "docker", "lo"}), "", AF_UNSPEC, 10)),
            "virbr0/192.168.122.1");
}

TEST(Interfaces, IfnameRules) {
  auto all = fakeIfs();
  EXPECT_EQ(names(selectInterfaces(all, "lo", AF_UNSPEC, 10)), "lo/127.0.0.1");
  EXPECT_EQ(names(selectInterfaces(all, "=lo", AF_INET6, 10)), "lo/::1");
  EXPECT_EQ(names(selectInterfaces(all, "eth", AF_UNSPEC, 10)), "eth0/10.0.0.5,eth1/fd01::5");
  EXPECT_EQ(names(selectInterfaces(all, "=eth", AF_UNSPEC, 10)), "");
  EXPECT_EQ(names(selectInterfaces(all, "ib,docker", AF_UNSPEC, 10)),
            "docker0/172.17.0.1,ib0/10.1.0.5");
  EXPECT_EQ(names(selectInterfaces(all, "^lo,eth,docker", AF_UNSPEC, 10)),
            "virbr0/192.168.122.1,ib0/10.1.0.5");
  EXPECT_EQ(names(selectInterfaces(all, "^=eth0,lo,virbr0", AF_UNSPEC, 10)),
            "docker0/172.17.0.1,ib0/10.1.0.5,eth1/fd01::5");
  EXPECT_EQ(names(selectInterfaces(all, "eth", AF_INET6, 1)), "eth0/fd00::5");
}

TEST(Interfaces, SubnetMatch) {
  auto all = fakeIfs();
  EXPECT_TRUE(inSubnet(all[1], SockAddr::parse("10.0.0.200:1").take()));
  EXPECT_FALSE(inSubnet(all[1], SockAddr::parse("10.0.1.200:1").take()));
  EXPECT_TRUE(inSubnet(all[5], SockAddr::parse("[fd00::99]:1").take()));
  EXPECT_FALSE(inSubnet(all[5], SockAddr::parse("10.0.0.200:1").take()));
}

TEST(Interfaces, FamilyParsing) {
  EXPECT_EQ(parseFamily("").value(), AF_UNSPEC);
  EXPECT_EQ(parseFamily("AF_INET").value(), AF_INET);
  EXPECT_EQ(parseFamily("AF_INET6").value(), AF_INET6);
  EXPECT_FALSE(parseFamily("AF_UNIX").isOk());
}

// On this machine: lo always exists.
TEST(Interfaces, MachineLoopback) {
  {
    test::ScopedEnv e("NCCL_SOCKET_IFNAME", "=lo");
    auto r = findInterfaces(4);
    ASSERT_TRUE(r.isOk()) << r.status().message();
    ASSERT_EQ(r.value().size(), 1u);
    EXPECT_EQ(r.value()[0].name, "lo");
    EXPECT_EQ(r.value()[0].addr.host(), "127.0.0.1");
  }
  {
    test::ScopedEnv e("NCCL_SOCKET_IFNAME", "lo");
    test::ScopedEnv f("NCCL_SOCKET_FAMILY", "AF_INET6");
    auto r = findInterfaces(4);
    if (r.isOk()) {  // only if IPv6 is configured on lo
      EXPECT_EQ(r.value()[0].addr.host(), "::1");
    }
  }
  {
    test::ScopedEnv e("NCCL_SOCKET_IFNAME", "^lo");
    auto all = listInterfaces().take();
    auto r = findInterfaces(16);
    bool others = false;
    for (const auto& n : all) others = others || n.name.rfind("lo", 0) != 0;
    ASSERT_EQ(r.isOk(), others);
    if (r.isOk()) {
      for (const auto& n : r.value()) EXPECT_NE(n.name.rfind("lo", 0), 0u) << n.name;
    }
  }
  {
    test::ScopedEnv e("NCCL_SOCKET_IFNAME", "=nosuchif0");
    auto r = findInterfaces(1);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("nosuchif0"), std::string::npos);
  }
}

TEST(Interfaces, MachineDefaultPrefersRealInterfaces) {
  test::ScopedEnv e("NCCL_SOCKET_IFNAME", std::nullopt);
  auto all = listInterfaces().take();
  bool real = false;
  for (const auto& n : all) {
    real = real || (n.name.rfind("lo", 0) != 0 && n.name.rfind("docker", 0) != 0 &&
                    n.name.rfind("virbr", 0) != 0);
  }
  auto r = findInterfaces(1);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  if (real) {
    EXPECT_NE(r.value()[0].name.rfind("lo", 0), 0u);
  } else {
    EXPECT_EQ(r.value()[0].name.rfind("lo", 0) == 0 || r.value()[0].name.rfind("docker", 0) == 0,
              true);
  }
}

SockAddr loopback() { return SockAddr::parse("127.0.0.1:0").take(); }

TEST(Socket, ConnectAcceptTransfer) {
  auto l = listenSocket(loopback());
  ASSERT_TRUE(l.isOk()) << l.status().message();
  ASSERT_NE(l.value().peer().port(), 0);
  Until u = Until::after(5000);
  auto c = connectSocket(l.value().peer(), u);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  auto a = acceptSocket(l.value(), u);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  // Larger than the socket buffers in both directions at once.
  const size_t n = 8 << 20;
  std::vector<char> s1(n), s2(n), r1(n), r2(n);
  for (size_t i = 0; i < n; i++) s1[i] = test::pattern(1, i), s2[i] = test::pattern(2, i);
  Status st2;
  std::thread t([&] { st2 = sendRecvAll(a.value(), s2.data(), n, a.value(), r2.data(), n, u); });
  Status st1 = sendRecvAll(c.value(), s1.data(), n, c.value(), r1.data(), n, u);
  t.join();
  ASSERT_TRUE(st1.isOk()) << st1.message();
  ASSERT_TRUE(st2.isOk()) << st2.message();
  EXPECT_EQ(r1, s2);
  EXPECT_EQ(r2, s1);
}

// Peeking with an offset returns each byte once, leaves it queued, and a
// plain receive then takes the bytes from the front; the end of stream shows.
TEST(Socket, PeekOffsetSeesOnlyNewBytes) {
  auto l = listenSocket(loopback());
  ASSERT_TRUE(l.isOk()) << l.status().message();
  Until u = Until::after(5000);
  auto c = connectSocket(l.value().peer(), u);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  auto a = acceptSocket(l.value(), u);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  if (!setPeekOffset(a.value())) GTEST_SKIP() << "no SO_PEEK_OFF for TCP on this kernel";
  // Poll until `want` new bytes are peeked (loopback delivers at once, but
  // the test must not rely on it).
  auto peekAll = [&](char* out, size_t want) {
    size_t got = 0;
    for (int i = 0; i < 5000 && got < want; ++i) {
      auto n = peekSome(a.value(), out + got, want - got);
      EXPECT_TRUE(n.isOk()) << n.status().message();
      if (!n.isOk()) return got;
      got += n.value();
      if (got < want) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return got;
  };
  ASSERT_TRUE(sendAll(c.value(), "abcd", 4, u).isOk());
  char buf[16] = {};
  ASSERT_EQ(peekAll(buf, 4), 4u);
  EXPECT_EQ(std::string(buf, 4), "abcd");
  auto none = peekSome(a.value(), buf, sizeof(buf));
  ASSERT_TRUE(none.isOk());
  EXPECT_EQ(none.value(), 0u);  // nothing new
  ASSERT_TRUE(sendAll(c.value(), "efg", 3, u).isOk());
  ASSERT_EQ(peekAll(buf, 3), 3u);
  EXPECT_EQ(std::string(buf, 3), "efg");
  // Everything is still queued: a receive starts at the front.
  auto two = recvSome(a.value(), buf, 2);
  ASSERT_TRUE(two.isOk());
  ASSERT_EQ(two.value(), 2u);
  EXPECT_EQ(std::string(buf, 2), "ab");
  ASSERT_TRUE(sendAll(c.value(), "h", 1, u).isOk());
  ASSERT_EQ(peekAll(buf, 1), 1u);
  EXPECT_EQ(buf[0], 'h');
  auto rest = recvSome(a.value(), buf, sizeof(buf));
  ASSERT_TRUE(rest.isOk());
  EXPECT_EQ(std::string(buf, rest.value()), "cdefgh");
  c.value().close();
  bool eof = false;
  for (int i = 0; i < 5000 && !eof; ++i) {
    auto n = peekSome(a.value(), buf, sizeof(buf), &eof);
    ASSERT_TRUE(n.isOk()) << n.status().message();
    if (!eof) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(eof);
}

TEST(Socket, ConnectRetriesUntilListenerAppears) {
  int port = test::freePort();
  SockAddr addr = SockAddr::parse("127.0.0.1:" + std::to_string(port)).take();
  Result<Socket> late(Status(Code::kInternal, "unset"));
  std::thread t([&] {
    usleep(300 * 1000);
    late = listenSocket(addr);
  });
  int64_t t0 = nowMs();
  auto c = connectSocket(addr, Until::after(5000));
  t.join();
  ASSERT_TRUE(late.isOk()) << late.status().message();
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_GE(nowMs() - t0, 250);
}

TEST(Socket, ConnectGivesUpAtDeadline) {
  int port = test::freePort();
  SockAddr addr = SockAddr::parse("127.0.0.1:" + std::to_string(port)).take();
  int64_t t0 = nowMs();
  auto c = connectSocket(addr, Until::after(400));
  int64_t took = nowMs() - t0;
  ASSERT_FALSE(c.isOk());
  EXPECT_EQ(c.status().code(), Code::kTimeout);
  EXPECT_NE(c.status().message().find("Connection refused"), std::string::npos)
      << c.status().message();
  EXPECT_GE(took, 390);
  EXPECT_LT(took, 1500);
}

TEST(Socket, AcceptHonoursDeadlineAndAbort) {
  auto l = listenSocket(loopback()).take();
  int64_t t0 = nowMs();
  auto a = acceptSocket(l, Until::after(300));
  EXPECT_EQ(a.status().code(), Code::kTimeout);
  EXPECT_GE(nowMs() - t0, 290);

  std::atomic<bool> abortFlag{false};
  std::thread t([&] {
    usleep(200 * 1000);
    abortFlag = true;
  });
  t0 = nowMs();
  auto b = acceptSocket(l, Until::after(10000, &abortFlag));
  t.join();
  EXPECT_EQ(b.status().code(), Code::kRemote);
  EXPECT_NE(b.status().message().find("aborted"), std::string::npos);
  EXPECT_LT(nowMs() - t0, 2000);
}

TEST(Socket, PeerCloseIsRemoteErrorNamingPeer) {
  auto l = listenSocket(loopback()).take();
  Until u = Until::after(5000);
  auto c = connectSocket(l.peer(), u).take();
  auto a = acceptSocket(l, u).take();
  const char msg[] = "hello";
  ASSERT_TRUE(sendAll(c, msg, 5, u).isOk());
  c.close();
  char buf[16];
  ASSERT_TRUE(recvAll(a, buf, 5, u).isOk());
  EXPECT_EQ(std::string(buf, 5), "hello");
  Status st = recvAll(a, buf, 1, u);
  EXPECT_EQ(st.code(), Code::kRemote);
  EXPECT_NE(st.message().find(a.peer().toString()), std::string::npos) << st.message();
  // Writing to the closed peer ends in a remote error too (EPIPE/ECONNRESET), never SIGPIPE.
  std::vector<char> big(1 << 20);
  Status w;
  for (int i = 0; i < 50 && w.isOk(); i++) w = sendAll(a, big.data(), big.size(), u);
  EXPECT_EQ(w.code(), Code::kRemote) << w.message();
}

}  // namespace
}  // namespace ferry
