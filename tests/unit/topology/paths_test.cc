// Path types and bottleneck bandwidths on hand-built graphs, one per path
// type, and spot checks on real files.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/topology/topo_files.h"
#include "topology/paths.h"
#include "topology/rails.h"

namespace ferry::topo {
namespace {

// Small XML builders. Bandwidths: Gen4 x16 = 24, Gen3 x16 = 12, Gen3 x8 = 6,
// Gen5 x16 = 48 GB/s.
std::string pci(const std::string& bus, const std::string& cls, const std::string& speed, int width,
                const std::string& inner = "") {
  std::string s = "<pci busid=\"" + bus + "\" class=\"" + cls + "\" link_speed=\"" + speed + "\" link_width=\"" +
                  std::to_string(width) + "\"";
  return inner.empty() ? s + "/>" : s + ">" + inner + "</pci>";
}
std::string gpu(int sm, const std::string& links = "") {
  return "<gpu dev=\"0\" sm=\"" + std::to_string(sm) + "\">" + links + "</gpu>";
}
std::string nvlink(const std::string& target, int count, const std::string& tclass = "0x030200") {
  return "<nvlink target=\"" + target + "\" count=\"" + std::to_string(count) + "\" tclass=\"" + tclass + "\"/>";
}
std::string net(const std::string& name, int speed) {
  return "<nic><net name=\"" + name + "\" dev=\"0\" speed=\"" + std::to_string(speed) + "\"/></nic>";
}
std::string cpu(int numa, const std::string& inner, const std::string& extra = "arch=\"x86_64\" vendor=\"AuthenticAMD\"") {
  return "<cpu numaid=\"" + std::to_string(numa) + "\" " + extra + ">" + inner + "</cpu>";
}
PathMatrix matrix(const std::string& cpus, const PathOptions& opt = {}) {
  auto g = Graph::fromXml("<system version=\"1\">" + cpus + "</system>");
  EXPECT_TRUE(g.isOk()) << g.status().message();
  return PathMatrix::compute(g.value(), opt);
}

#define EXPECT_PATH(m, from, to, wantType, wantBw)                          \
  do {                                                                      \
    PathInfo _p = (m).path(from, to);                                       \
    EXPECT_STREQ(pathName(_p.type), wantType) << (from) << " -> " << (to);  \
    EXPECT_NEAR(_p.bw, wantBw, 1e-9) << (from) << " -> " << (to);           \
  } while (0)

const char* kG4 = "16.0 GT/s PCIe";
const char* kG3 = "8.0 GT/s PCIe";

TEST(TopoPaths, LocPixPxbPhbOnOneCpu) {
  // cpu0 > sw1(G4x16) > {gpuA(G4x16), nic1(G3x8, 100G)}
  //      > sw2(G4x16) > sw3(G4x16) > gpuB(G4x16) ; sw2 > nic2(G4x16, 400G)
  //      > gpuC (G3x16, directly under the CPU)
  auto m = matrix(cpu(0, pci("0000:10:00.0", "0x060400", kG4, 16,
                             pci("0000:11:00.0", "0x030200", kG4, 16, gpu(80)) +
                                 pci("0000:12:00.0", "0x020700", kG3, 8, net("nic1", 100000))) +
                             pci("0000:20:00.0", "0x060400", kG4, 16,
                                 pci("0000:21:00.0", "0x060400", kG4, 16, pci("0000:22:00.0", "0x030200", kG4, 16, gpu(80))) +
                                     pci("0000:23:00.0", "0x020700", kG4, 16, net("nic2", 400000))) +
                             pci("0000:30:00.0", "0x030200", kG3, 16, gpu(80))));
  EXPECT_PATH(m, "0000:11:00.0", "0000:11:00.0", "LOC", 5000.0);
  EXPECT_PATH(m, "0000:11:00.0", "nic1", "PIX", 6.0);    // G3 x8 NIC link is the bottleneck
  EXPECT_PATH(m, "0000:22:00.0", "nic2", "PXB", 24.0);   // two switches; the 50 GB/s NET is not
  EXPECT_PATH(m, "0000:11:00.0", "nic2", "PHB", 24.0);   // through the CPU
  EXPECT_PATH(m, "0000:11:00.0", "0000:22:00.0", "PHB", 24.0);
  EXPECT_PATH(m, "0000:30:00.0", "CPU/0", "PHB", 12.0);
  EXPECT_PATH(m, "0000:30:00.0", "nic1", "PHB", 6.0);
  EXPECT_PATH(m, "nic1", "nic2", "PHB", 6.0);
  EXPECT_EQ(m.endpoints().size(), 6u);  // 3 GPUs, 2 NETs, 1 CPU
  EXPECT_EQ(m.endpoints()[3].name, "nic1");
  EXPECT_EQ(m.endpoints()[5].name, "CPU/0");
}

TEST(TopoPaths, SysBandwidthByCpuVendorAndModel) {
  struct Case {
    const char* attrs;
    double bw;
  } cases[] = {
      {"arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"1\"", 16.0},
      {"arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"79\"", 6.0},   // Broadwell
      {"arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\"", 10.0},  // Skylake
      {"arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\"", 22.0}, // Sapphire Rapids
      {"arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"207\"", 40.0}, // Emerald Rapids
      {"arch=\"arm64\"", 6.0},
      {"arch=\"ppc64\"", 32.0},
      {"", 5000.0},  // unknown architecture: NCCL leaves it at LOC bandwidth
  };
  for (const Case& c : cases) {
    auto m = matrix(cpu(0, pci("0000:01:00.0", "0x030200", "32.0 GT/s PCIe", 16, gpu(90)), c.attrs) +
                    cpu(1, pci("0000:81:00.0", "0x020700", "32.0 GT/s PCIe", 16, net("ib0", 800000)), c.attrs));
    EXPECT_PATH(m, "CPU/0", "CPU/1", "SYS", c.bw);
    EXPECT_PATH(m, "0000:01:00.0", "ib0", "SYS", std::min(c.bw, 48.0));
  }
}

TEST(TopoPaths, NvlinkBandwidthBySmAndNvSwitch) {
  struct Case {
    int sm, count;
    double bw;
  } cases[] = {{60, 4, 72.0}, {70, 6, 120.0}, {80, 12, 240.0}, {86, 4, 48.0}, {90, 18, 370.8}, {100, 18, 721.8}};
  for (const Case& c : cases) {
    auto m = matrix(cpu(0, pci("0000:01:00.0", "0x030200", kG4, 16, gpu(c.sm, nvlink("0000:02:00.0", c.count))) +
                               pci("0000:02:00.0", "0x030200", kG4, 16, gpu(c.sm, nvlink("0000:01:00.0", c.count)))));
    PathInfo p = m.path("0000:01:00.0", "0000:02:00.0");
    EXPECT_STREQ(pathName(p.type), "NVL") << c.sm;
    EXPECT_NEAR(p.bw, c.bw, 1e-9) << c.sm;
  }
  // Three GPUs on one NVSwitch: each has 2 links of 3 elements to it (6 x 20).
  std::string sw = nvlink("0000:a0:00.0", 2, "0x068000") + nvlink("0000:a1:00.0", 2, "0x068000") +
                   nvlink("0000:a2:00.0", 2, "0x068000");
  auto m = matrix(cpu(0, pci("0000:01:00.0", "0x030200", kG4, 16, gpu(80, sw)) +
                             pci("0000:02:00.0", "0x030200", kG4, 16, gpu(80, sw)) +
                             pci("0000:03:00.0", "0x030200", kG4, 16, gpu(80, sw))));
  EXPECT_PATH(m, "0000:01:00.0", "0000:03:00.0", "NVL", 120.0);
  EXPECT_PATH(m, "0000:03:00.0", "0000:02:00.0", "NVL", 120.0);
}

TEST(TopoPaths, NvbThroughOneIntermediateGpu) {
  // A - B - C chain of NVLinks (A-B 4 links, B-C 2 links), no A-C link; D only on PCI.
  std::string gpus = pci("0000:01:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:02:00.0", 4))) +
                     pci("0000:02:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:01:00.0", 4) + nvlink("0000:03:00.0", 2))) +
                     pci("0000:03:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:02:00.0", 2) + nvlink("0000:04:00.0", 1))) +
                     pci("0000:04:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:03:00.0", 1)));
  auto m = matrix(cpu(0, gpus));
  EXPECT_PATH(m, "0000:01:00.0", "0000:02:00.0", "NVL", 80.0);
  EXPECT_PATH(m, "0000:01:00.0", "0000:03:00.0", "NVB", 40.0);
  EXPECT_PATH(m, "0000:03:00.0", "0000:01:00.0", "NVB", 40.0);
  // Two relays would be needed: NCCL never routes through more than one GPU.
  EXPECT_PATH(m, "0000:01:00.0", "0000:04:00.0", "PHB", 24.0);
  PathOptions off;
  off.nvb = false;
  auto m2 = matrix(cpu(0, gpus), off);
  EXPECT_PATH(m2, "0000:01:00.0", "0000:03:00.0", "PHB", 24.0);
}

TEST(TopoPaths, C2cAndP2c) {
  // Grace-like: the GPU has C2C to its CPU (bw in MB/s per link x count)
  // and a NIC hangs off the CPU's root port.
  auto m = matrix(cpu(0,
                      pci("0009:01:00.0", "0x030200", "32.0 GT/s PCIe", 16,
                          gpu(90, "<c2c bw=\"45000\" count=\"10\"/>")) +
                          pci("0000:01:00.0", "0x020700", "32.0 GT/s PCIe", 16, net("ib0", 400000)),
                      "arch=\"arm64\" vendor=\"NVIDIA\""));
  EXPECT_PATH(m, "0009:01:00.0", "CPU/0", "C2C", 450.0);
  EXPECT_PATH(m, "0009:01:00.0", "ib0", "P2C", 48.0);
  EXPECT_PATH(m, "ib0", "0009:01:00.0", "P2C", 48.0);
}

TEST(TopoPaths, PxnThroughNvlinkPeer) {
  // GPU A shares a switch with the NIC; GPU B is on the other socket but
  // NVLinked to A: B reaches the NIC through A (PXN), not over SYS.
  std::string cpus =
      cpu(0, pci("0000:10:00.0", "0x060400", kG4, 16,
                 pci("0000:11:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:91:00.0", 2))) +
                     pci("0000:12:00.0", "0x020700", kG4, 16, net("ib0", 200000)))) +
      cpu(1, pci("0000:91:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:11:00.0", 2))));
  auto m = matrix(cpus);
  EXPECT_PATH(m, "0000:11:00.0", "ib0", "PIX", 24.0);
  EXPECT_PATH(m, "0000:91:00.0", "ib0", "PXN", 24.0);  // min(NVLink 40, peer's PIX 24)
  EXPECT_PATH(m, "ib0", "0000:91:00.0", "SYS", 16.0);  // GPU->NIC direction only
  PathOptions off;
  off.pxn = false;
  auto m2 = matrix(cpus, off);
  EXPECT_PATH(m2, "0000:91:00.0", "ib0", "SYS", 16.0);
}

TEST(TopoPaths, NetBetweenHostsAndDisconnected) {
  auto host = [](const char* hash, const char* g, const char* n, int speed) {
    std::string nic = speed ? pci(std::string(n), "0x020700", kG4, 16, net(std::string("ib-") + hash, speed)) : "";
    return cpu(0, pci(g, "0x030200", kG4, 16, gpu(80)) + nic,
               std::string("arch=\"x86_64\" vendor=\"AuthenticAMD\" host_hash=\"") + hash + "\"");
  };
  auto m = matrix(host("0xa", "0000:01:00.0", "0000:02:00.0", 100000) + host("0xb", "0000:01:01.0", "0000:02:01.0", 400000));
  EXPECT_PATH(m, "0000:01:00.0", "0000:01:01.0", "NET", 12.5);
  EXPECT_PATH(m, "0000:01:01.0", "0000:01:00.0", "NET", 12.5);
  EXPECT_PATH(m, "0000:01:00.0", "ib-0xb", "DIS", 0.0);
  auto m2 = matrix(host("0xa", "0000:01:00.0", "", 0) + host("0xb", "0000:01:01.0", "0000:02:01.0", 400000));
  EXPECT_PATH(m2, "0000:01:00.0", "0000:01:01.0", "DIS", 0.0);
}

TEST(TopoPaths, OneSidedLinkKeepsEachDirection) {
  // a100pcie dump noise: one side says 1 link, the other 12; each direction keeps its own.
  auto m = matrix(cpu(0, pci("0000:17:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:65:00.0", 1))) +
                             pci("0000:65:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:17:00.0", 12)))));
  EXPECT_PATH(m, "0000:17:00.0", "0000:65:00.0", "NVL", 20.0);
  EXPECT_PATH(m, "0000:65:00.0", "0000:17:00.0", "NVL", 240.0);
  auto one = matrix(cpu(0, pci("0000:17:00.0", "0x030200", kG4, 16, gpu(80, nvlink("0000:65:00.0", 3))) +
                               pci("0000:65:00.0", "0x030200", kG4, 16, gpu(80))));
  EXPECT_PATH(one, "0000:65:00.0", "0000:17:00.0", "NVL", 60.0);
}

TEST(TopoPathsFiles, DgxA100) {
  FERRY_NEED_TOPO_DIR();
  auto g = Graph::fromFile(testing::topoFile("nvidia-dgx-a100.xml"));
  ASSERT_TRUE(g.isOk());
  auto m = PathMatrix::compute(g.value());
  EXPECT_PATH(m, "0000:07:00.0", "0000:12:00.0", "PIX", 24.0);  // own NIC
  EXPECT_PATH(m, "0000:07:00.0", "0000:0c:00.0", "PXB", 24.0);  // neighbour's NIC, same root switch
  EXPECT_PATH(m, "0000:07:00.0", "0000:0f:00.0", "PXB", 24.0);
  EXPECT_PATH(m, "0000:07:00.0", "0000:47:00.0", "SYS", 16.0);  // AMD Rome
  EXPECT_PATH(m, "0000:07:00.0", "CPU/3", "PHB", 24.0);
}

TEST(TopoPathsFiles, HpeNvSwitchAndPxn) {
  FERRY_NEED_TOPO_DIR();
  auto g = Graph::fromFile(testing::topoFile("hpe-xl675d-hgx-a100.xml"));
  ASSERT_TRUE(g.isOk());
  auto m = PathMatrix::compute(g.value());
  EXPECT_PATH(m, "0000:07:00.0", "0000:cb:00.0", "NVL", 240.0);  // 6 NVSwitch x 2 links x 20
  EXPECT_PATH(m, "0000:07:00.0", "ib0", "PXB", 24.0);
  EXPECT_PATH(m, "0000:07:00.0", "ib3", "PXN", 24.0);
  EXPECT_PATH(m, "ib3", "0000:07:00.0", "SYS", 16.0);
}

TEST(TopoPathsFiles, Ncv4AndNdv4) {
  FERRY_NEED_TOPO_DIR();
  auto g = Graph::fromFile(testing::topoFile("azure-ncv4.xml"));
  ASSERT_TRUE(g.isOk());
  auto m = PathMatrix::compute(g.value());
  EXPECT_PATH(m, "0001:00:00.0", "0002:00:00.0", "NVL", 240.0);
  EXPECT_PATH(m, "0001:00:00.0", "eth0", "PHB", 12.0);
  EXPECT_PATH(m, "0002:00:00.0", "eth0", "SYS", 12.0);  // eth0's GPU is only PHB: no PXN
  auto g4 = Graph::fromFile(testing::topoFile("azure-ndv4.xml"));
  ASSERT_TRUE(g4.isOk());
  auto m4 = PathMatrix::compute(g4.value());
  EXPECT_PATH(m4, "0003:00:00.0", "0103:00:00.0", "PIX", 24.0);
  EXPECT_PATH(m4, "0003:00:00.0", "0001:00:00.0", "SYS", 16.0);
}

}  // namespace
}  // namespace ferry::topo

namespace ferry::topo {
namespace {

// Rails classify GPU-NIC pairs from the PCI tree alone; the path matrix from
// typed links. They must agree on every real file, except where the matrix
// finds a PXN route that beats the direct one.
TEST(TopoPathsFiles, RailsAgreeWithTheMatrixOnEveryFile) {
  FERRY_NEED_TOPO_DIR();
  int checked = 0;
  for (const auto& f : testing::allTopoFiles()) {
    if (f == testing::kMalformed) continue;
    auto g = Graph::fromFile(testing::topoFile(f));
    ASSERT_TRUE(g.isOk()) << f;
    auto m = PathMatrix::compute(g.value());
    for (const Rail& r : assignRails(g.value())) {
      PathType t = m.path(r.gpu, r.nic).type;
      if (t == PathType::kPxn && r.path > PathType::kPxb) continue;
      EXPECT_STREQ(pathName(t), pathName(r.path)) << f << ": " << r.gpu << " -> " << r.nic;
      ++checked;
    }
  }
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace ferry::topo
