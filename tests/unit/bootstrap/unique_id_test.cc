// Layout of the unique id and NCCL_COMM_ID handling in createUniqueId.
#include <gtest/gtest.h>

#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "tests/support/test_util.h"

namespace ferry {
namespace {

uint64_t magicOf(const ncclUniqueId& id) {
  uint64_t m;
  memcpy(&m, id.internal, 8);
  return m;
}

TEST(UniqueId, LayoutMagicFamilyPort) {
  test::ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  ncclUniqueId a, b;
  ASSERT_TRUE(createUniqueId(&a).isOk());
  ASSERT_TRUE(createUniqueId(&b).isOk());
  EXPECT_NE(magicOf(a), 0u);
  EXPECT_NE(magicOf(a), bootstrap::kCommIdMagic);
  EXPECT_NE(magicOf(a), magicOf(b));  // fresh random secret each time
  sa_family_t fam;
  memcpy(&fam, a.internal + 8, sizeof(fam));
  EXPECT_TRUE(fam == AF_INET || fam == AF_INET6) << fam;
  SockAddr root = SockAddr::unpack(a.internal + 8, SockAddr::kPackedBytes);
  ASSERT_TRUE(root.valid());
  EXPECT_NE(root.port(), 0);
  for (size_t i = 8 + SockAddr::kPackedBytes; i < sizeof(a.internal); i++) {
    ASSERT_EQ(a.internal[i], 0) << "byte " << i;
  }
  EXPECT_EQ(bootstrap::decodeId(a).secret, magicOf(a));
  // The root is up: it accepts a connection.
  auto s = connectSocket(root, Until::after(2000));
  EXPECT_TRUE(s.isOk()) << s.status().message();
}

TEST(UniqueId, RootHonoursSocketIfname) {
  test::ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  test::ScopedEnv f("NCCL_SOCKET_IFNAME", "=lo");
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  SockAddr root = bootstrap::decodeId(id).root;
  EXPECT_EQ(root.host(), "127.0.0.1");
}

TEST(UniqueId, CommIdV4EncodesFixedMagicAndStartsNoRoot) {
  int port = test::freePort();
  test::ScopedEnv e("NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port));
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  EXPECT_EQ(magicOf(id), 0x0280028002800280ULL);
  SockAddr root = bootstrap::decodeId(id).root;
  EXPECT_EQ(root.family(), AF_INET);
  EXPECT_EQ(root.toString(), "127.0.0.1<" + std::to_string(port) + ">");
  // Nobody listens there until rank 0 runs Bootstrap::create.
  auto s = connectSocket(root, Until::after(200));
  EXPECT_EQ(s.status().code(), Code::kTimeout);
}

TEST(UniqueId, CommIdV6) {
  test::ScopedEnv e("NCCL_COMM_ID", "[::1]:29500");
  ncclUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  EXPECT_EQ(magicOf(id), bootstrap::kCommIdMagic);
  SockAddr root = bootstrap::decodeId(id).root;
  EXPECT_EQ(root.family(), AF_INET6);
  EXPECT_EQ(root.toString(), "::1<29500>");
}

TEST(UniqueId, BadCommIdIsAnError) {
  test::ScopedEnv e("NCCL_COMM_ID", "not-an-address");
  ncclUniqueId id;
  Status st = createUniqueId(&id);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
