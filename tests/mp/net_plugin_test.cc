// Collectives across simulated nodes (NCCL_HOSTID) through each network
// Ferry can use, checked exactly: external plugins of our own built as
// separate .so files (ABI v8 and v6, loaded with NCCL_NET_PLUGIN and picked
// with NCCL_NET), the built-in UCX network and the standalone
// libnccl-net-ferryucx.so. Each rank logs to its own NCCL_DEBUG_FILE; the
// test reads the files to prove which network carried the traffic.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("netplugin"); }

int collectivesBody(int rank, int n, const ncclUniqueId& id) {
  return withComm(rank, n, id, [](const Rank& me) {
    MP_TRY(caseAllReductions(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, 1000));
    MP_TRY(caseAllReductions(me, RedCase{ncclInt32, TestOp::kMax, me.nranks}, 7));
    MP_TRY(caseAllMovement(me, ncclInt32, 1000));
    MP_TRY(caseSendRecvAllPairs(me, ncclUint8, 4096));
    // Several pieces per connection (FERRY_NET_SLOT_BYTES is 64 KiB here).
    MP_TRY(caseAllReduce(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, (1 << 20) + 3, false));
    return 0;
  });
}

// 4 ranks on 2 simulated nodes, every rank logging to logDir()/<tag>.<pid>.
RunResult runOnTwoNodes(const std::string& tag, Env env) {
  return runRanks(4, collectivesBody, pairedNodesOptions(logDir(), tag, std::move(env), 4, 120));
}

int filesWith(const std::string& tag, const std::string& text) {
  return logFilesWith(logDir(), tag, text);
}

std::string lib(const char* name) { return std::string(FERRY_PLUGIN_DIR) + "/" + name; }

TEST(MpNetPlugin, ExternalV8Plugin) {
  RunResult res = runOnTwoNodes("v8", {{"NCCL_NET_PLUGIN", lib("libnccl-net-ferrytest.so")},
                                       {"NCCL_NET", "FerryTest"}});
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(filesWith("v8", "NET: using network FerryTest"), 4);
  EXPECT_EQ(filesWith("v8", "(v8)"), 4);
}

TEST(MpNetPlugin, ExternalV6PluginInAList) {
  // The first name does not load; the second is the v6 plugin.
  RunResult res = runOnTwoNodes("v6", {{"NCCL_NET_PLUGIN", "nosuchplugin," + lib("libnccl-net-ferrytest6.so")},
                                       {"NCCL_NET", "FerryTest"}});
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(filesWith("v6", "NET: using network FerryTest"), 4);
  EXPECT_EQ(filesWith("v6", "(v6)"), 4);
}

TEST(MpNetPlugin, UnloadablePluginFallsBackToSocket) {
  RunResult res = runOnTwoNodes("fallback", {{"NCCL_NET_PLUGIN", lib("libnccl-net-empty.so") + ",nosuchplugin"}});
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(filesWith("fallback", "NET: using network Socket (built-in)"), 4);
}

TEST(MpNetPlugin, UnknownNetNameFailsInit) {
  RunOptions o;
  o.timeoutSec = 60;
  o.env["NCCL_NET"] = "NoSuchNet";
  o.rankEnv.resize(2);
  for (int r = 0; r < 2; ++r) o.rankEnv[r]["NCCL_HOSTID"] = "bad-node-" + std::to_string(r);
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
        MP_CHECK(r == ncclInvalidUsage, "init returned %d, not ncclInvalidUsage", int(r));
        return 0;
      },
      o);
  EXPECT_RANKS_OK(res);
}

#ifdef FERRY_HAVE_UCX
TEST(MpNetPlugin, BuiltInUcx) {
  RunResult res = runOnTwoNodes("ucx", {{"NCCL_NET", "UCX"}, {"NCCL_NET_PLUGIN", "none"}});
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(filesWith("ucx", "NET: using network UCX (built-in)"), 4);
}

TEST(MpNetPlugin, StandaloneUcxPlugin) {
  RunResult res = runOnTwoNodes("ucxso", {{"NCCL_NET_PLUGIN", lib("libnccl-net-ferryucx.so")},
                                          {"NCCL_NET", "UCX"}});
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(filesWith("ucxso", "libnccl-net-ferryucx.so (v11)"), 4);
}
#endif

}  // namespace
}  // namespace ferry::mp
