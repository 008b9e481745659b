// Rail assignment against the expectations written in shared/topologies/SOURCES.md.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <string>

#include "topology/graph.h"
#include "topology/rails.h"
#include "tests/unit/topology/topo_files.h"

namespace ferry::topo {
namespace {

using testing::topoFile;

struct Want {
  std::string nic;
  std::string path;
};
using Table = std::map<std::string, Want>;  // GPU bus id -> rail

std::map<std::string, std::string> railsOf(const std::string& file, std::map<std::string, std::string>* paths) {
  std::map<std::string, std::string> out;
  auto g = Graph::fromFile(topoFile(file));
  EXPECT_TRUE(g.isOk()) << file << ": " << g.status().message();
  if (!g.isOk()) return out;
  for (const Rail& r : assignRails(g.value())) {
    out[r.gpu] = r.nic;
    (*paths)[r.gpu] = pathName(r.path);
  }
  return out;
}

void expectRails(const std::string& file, const Table& want) {
  std::map<std::string, std::string> paths;
  auto got = railsOf(file, &paths);
  EXPECT_EQ(got.size(), want.size()) << file;
  for (const auto& [gpu, w] : want) {
    ASSERT_TRUE(got.count(gpu)) << file << ": no rail for GPU " << gpu;
    EXPECT_EQ(got[gpu], w.nic) << file << " GPU " << gpu;
    EXPECT_EQ(paths[gpu], w.path) << file << " GPU " << gpu;
  }
}

// Pairs "gpu-domain-or-bus:nic" sharing one path type, for compact tables.
Table same(const std::string& path, std::initializer_list<std::pair<const char*, const char*>> pairs) {
  Table t;
  for (const auto& [g, n] : pairs) t[g] = {n, path};
  return t;
}

TEST(TopoRails, AzureNdv4PairsInsideEachSwitch) {
  FERRY_NEED_TOPO_DIR();
  expectRails("azure-ndv4.xml", same("PIX", {{"0003:00:00.0", "0103:00:00.0"}, {"0004:00:00.0", "0104:00:00.0"},
                                             {"0001:00:00.0", "0101:00:00.0"}, {"0002:00:00.0", "0102:00:00.0"},
                                             {"000d:00:00.0", "0107:00:00.0"}, {"000e:00:00.0", "0108:00:00.0"},
                                             {"000b:00:00.0", "0105:00:00.0"}, {"000c:00:00.0", "0106:00:00.0"}}));
}

TEST(TopoRails, AzureNdv5OneToOneNotByDigits) {
  FERRY_NEED_TOPO_DIR();
  expectRails("azure-ndv5.xml", same("PIX", {{"0001:00:00.0", "0101:00:00.0"}, {"0002:00:00.0", "0102:00:00.0"},
                                             {"0003:00:00.0", "0103:00:00.0"}, {"0008:00:00.0", "0104:00:00.0"},
                                             {"0009:00:00.0", "0105:00:00.0"}, {"000a:00:00.0", "0106:00:00.0"},
                                             {"000b:00:00.0", "0107:00:00.0"}, {"000c:00:00.0", "0108:00:00.0"}}));
}

TEST(TopoRails, AzureNdv2SingleNic) {
  FERRY_NEED_TOPO_DIR();
  Table t;
  for (int i = 1; i <= 8; ++i) t["000" + std::to_string(i) + ":00:00.0"] = {"0101:00:00.0", i <= 4 ? "PHB" : "SYS"};
  expectRails("azure-ndv2.xml", t);
}

TEST(TopoRails, AzureNcv4SocketNicBothVariants) {
  FERRY_NEED_TOPO_DIR();
  Table t = {{"0001:00:00.0", {"eth0", "PHB"}}, {"0002:00:00.0", {"eth0", "SYS"}},
             {"0003:00:00.0", {"eth0", "SYS"}}, {"0004:00:00.0", {"eth0", "SYS"}}};
  expectRails("azure-ncv4.xml", t);
  expectRails("azure-ncv4-selfloop-variant.xml", t);
}

TEST(TopoRails, AwsP4dTwoGpusPerEfa) {
  FERRY_NEED_TOPO_DIR();
  Table t;
  for (const char* b : {"10", "20", "90", "a0"})
    for (const char* f : {"1c", "1d"})
      t[std::string("0000:") + b + ":" + f + ".0"] = {std::string("0000:") + b + ":1b.0", "PIX"};
  expectRails("aws-p4d-24xlarge.xml", t);
}

TEST(TopoRails, FilesWithoutGpusHaveNoRails) {
  FERRY_NEED_TOPO_DIR();
  expectRails("aws-p5-48xlarge.xml", {});
  expectRails("aws-g5-48xlarge.xml", {});
}

TEST(TopoRails, DgxA100OneToOne) {
  FERRY_NEED_TOPO_DIR();
  expectRails("nvidia-dgx-a100.xml", same("PIX", {{"0000:07:00.0", "0000:12:00.0"}, {"0000:0f:00.0", "0000:0c:00.0"},
                                                  {"0000:47:00.0", "0000:54:00.0"}, {"0000:4e:00.0", "0000:4b:00.0"},
                                                  {"0000:87:00.0", "0000:94:00.0"}, {"0000:90:00.0", "0000:8d:00.0"},
                                                  {"0000:b7:00.0", "0000:cc:00.0"}, {"0000:bd:00.0", "0000:ba:00.0"}}));
}

TEST(TopoRails, HpeTwoGpusPerIbThroughSwitch) {
  FERRY_NEED_TOPO_DIR();
  expectRails("hpe-xl675d-hgx-a100.xml", same("PXB", {{"0000:07:00.0", "ib0"}, {"0000:0b:00.0", "ib0"},
                                                      {"0000:48:00.0", "ib1"}, {"0000:4c:00.0", "ib1"},
                                                      {"0000:88:00.0", "ib2"}, {"0000:8b:00.0", "ib2"},
                                                      {"0000:c8:00.0", "ib3"}, {"0000:cb:00.0", "ib3"}}));
}

TEST(TopoRails, OciH100FirstPortOfOwnNic) {
  FERRY_NEED_TOPO_DIR();
  expectRails("oci-bm-gpu-h100-8.xml", same("PXB", {{"0000:0f:00.0", "mlx5_0"}, {"0000:2d:00.0", "mlx5_3"},
                                                    {"0000:44:00.0", "mlx5_5"}, {"0000:5b:00.0", "mlx5_7"},
                                                    {"0000:89:00.0", "mlx5_9"}, {"0000:a8:00.0", "mlx5_12"},
                                                    {"0000:c0:00.0", "mlx5_14"}, {"0000:d8:00.0", "mlx5_16"}}));
}

TEST(TopoRails, OciFlattenedPairByOrder) {
  FERRY_NEED_TOPO_DIR();
  expectRails("oci-bm-gpu4-8-a100.xml", same("PIX", {{"0000:0f:00.0", "0000:0c:00.0"}, {"0000:15:00.0", "0000:16:00.0"},
                                                     {"0000:51:00.0", "0000:48:00.0"}, {"0000:54:00.0", "0000:4c:00.0"},
                                                     {"0000:8d:00.0", "0000:8a:00.0"}, {"0000:92:00.0", "0000:94:00.0"},
                                                     {"0000:d6:00.0", "0000:c3:00.0"}, {"0000:da:00.0", "0000:d1:00.0"}}));
  expectRails("oci-bm-gpu-b4-8-a100.xml", same("PIX", {{"0000:0f:00.0", "0000:0c:00.0"}, {"0000:15:00.0", "0000:16:00.0"},
                                                       {"0000:50:00.0", "0000:47:00.0"}, {"0000:53:00.0", "0000:4b:00.0"},
                                                       {"0000:8c:00.0", "0000:89:00.0"}, {"0000:91:00.0", "0000:93:00.0"},
                                                       {"0000:d6:00.0", "0000:c3:00.0"}, {"0000:da:00.0", "0000:d1:00.0"}}));
}

TEST(TopoRails, RtpLlmBondsNotTheCx7) {
  FERRY_NEED_TOPO_DIR();
  const char* gpus[] = {"1b", "32", "68", "75", "9b", "bb", "db", "eb"};
  Table t;
  for (int i = 0; i < 8; ++i) t[std::string("0000:") + gpus[i] + ":00.0"] = {"mlx5_bond_" + std::to_string(i), "PXB"};
  expectRails("pcie-8gpu-cx8-rtp-llm.xml", t);
}

TEST(TopoRails, Mi300xOneToOne) {
  FERRY_NEED_TOPO_DIR();
  const char* gpus[] = {"0c", "15", "1e", "69", "9f", "af", "bf", "df"};
  Table t;
  for (int i = 0; i < 8; ++i) t[std::string("0000:") + gpus[i] + ":00.0"] = {"mlx5_" + std::to_string(i), "PXB"};
  expectRails("amd-mi300x-8gpu.xml", t);
}

TEST(TopoRails, Mi250TwoGcdsPerNic) {
  FERRY_NEED_TOPO_DIR();
  const char* gcds[] = {"4e", "51", "56", "59", "0e", "11", "16", "19", "cf", "d2", "d7", "da", "8f", "92", "97", "9a"};
  const char* nics[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_7", "mlx5_8"};
  Table t;
  for (int i = 0; i < 16; ++i) t[std::string("0000:") + gcds[i] + ":00.0"] = {nics[i / 2], "PXB"};
  expectRails("amd-mi250-16gcd.xml", t);
}

TEST(TopoRails, Mi300aByNuma) {
  FERRY_NEED_TOPO_DIR();
  expectRails("amd-mi300a-4apu-slingshot.xml", same("PHB", {{"0000:82:00.0", "cxi0"}, {"0000:c2:00.0", "cxi1"},
                                                            {"0000:02:00.0", "cxi2"}, {"0000:42:00.0", "cxi3"}}));
}

TEST(TopoRails, Rtx3090SingleNicPixAndSys) {
  FERRY_NEED_TOPO_DIR();
  Table t;
  for (const char* b : {"0f", "10", "11", "12"}) t[std::string("0000:") + b + ":00.0"] = {"mlx5_0", "SYS"};
  for (const char* b : {"9b", "9c", "9d", "9e"}) t[std::string("0000:") + b + ":00.0"] = {"mlx5_0", "PIX"};
  expectRails("rtx3090-8gpu-1nic.xml", t);
}

TEST(TopoRails, DualPortNicGivesOnePortPerGpu) {
  FERRY_NEED_TOPO_DIR();
  expectRails("a100pcie-2gpu-nvbridge.xml", same("PHB", {{"0000:17:00.0", "mlx5_0"}, {"0000:65:00.0", "mlx5_1"}}));
  expectRails("rtx-a6000-2gpu-nvbridge.xml", same("PHB", {{"0000:07:00.0", "eno1"}, {"0000:08:00.0", "eno1"}}));
  expectRails("rtx4090-2gpu-cx4.xml", {{"0000:01:00.0", {"mlx5_0", "PHB"}}, {"0000:46:00.0", {"mlx5_1", "SYS"}}});
}

TEST(TopoRails, SlowerNicIsNotARail) {
  // Two NICs on the GPU's own switch; the 10G one loses to the 100G one.
  auto g = Graph::fromXml(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:10:00.0\" class=\"0x060400\">"
      "<pci busid=\"0000:11:00.0\" class=\"0x030200\"/>"
      "<pci busid=\"0000:12:00.0\" class=\"0x020000\"><nic><net name=\"slow\" speed=\"10000\"/></nic></pci>"
      "</pci><pci busid=\"0000:20:00.0\" class=\"0x020700\"><nic><net name=\"fast\" speed=\"100000\"/></nic></pci>"
      "</cpu></system>");
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto r = assignRails(g.value());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].nic, "fast");
  EXPECT_EQ(r[0].path, PathType::kPhb);
}

TEST(TopoTool, RailsJsonForOneFile) {
  FERRY_NEED_TOPO_DIR();
  std::string cmd = std::string(FERRY_TOPO_TOOL) + " --topo-file " + topoFile("aws-p4d-24xlarge.xml") + " --rails --json";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  std::string want = "{\"rails\": [";
  const char* bus[] = {"10", "20", "90", "a0"};
  for (int i = 0; i < 8; ++i) {
    if (i) want += ", ";
    want += std::string("{\"gpu\": \"0000:") + bus[i / 2] + (i % 2 ? ":1d.0" : ":1c.0") + "\", \"nic\": \"0000:" +
            bus[i / 2] + ":1b.0\", \"path\": \"PIX\"}";
  }
  EXPECT_EQ(out, want + "]}\n");
}

TEST(TopoTool, MalformedFileExitsNonZero) {
  FERRY_NEED_TOPO_DIR();
  std::string cmd = std::string(FERRY_TOPO_TOOL) + " --topo-file " + topoFile(testing::kMalformed) +
                    " --rails --json 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 1) << rc;
  EXPECT_NE(out.find("duplicate bus id with conflicting classes"), std::string::npos) << out;
}

}  // namespace
}  // namespace ferry::topo
