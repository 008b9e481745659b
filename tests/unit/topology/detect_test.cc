// Discovery (this machine and a fake sysfs tree), NCCL_TOPO_FILE merge and
// file-only modes, NCCL_TOPO_DUMP_FILE.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "tests/unit/topology/fake_sysfs.h"
#include "tests/unit/topology/topo_files.h"
#include "topology/detect.h"
#include "topology/merge.h"
#include "topology/paths.h"
#include "topology/probe.h"
#include "topology/rails.h"

namespace ferry::topo {
namespace {

using testing::link;
using testing::pciDev;
using testing::put;
using testing::TempDir;

// Two NUMA nodes (Sapphire Rapids), a switch with a GPU and a 200G HCA (whose
// IPoIB netdev must not appear twice), a 25G Ethernet NIC on node 1, an
// emulated VGA adapter (not a GPU), and virtual lo/docker0.
std::string fakeSysfs(const TempDir& t) {
  const std::string& r = t.path();
  put(r + "/sys/devices/system/node/node0/cpumap", "00000000,0000ffff");
  put(r + "/sys/devices/system/node/node1/cpumap", "00000000,ffff0000");
  put(r + "/proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: X\n");
  const std::string rp = "/sys/devices/pci0000:00/0000:00:01.0", sw = rp + "/0000:01:00.0";
  pciDev(r, rp, "0x060400", "0x8086", "0", "32.0 GT/s PCIe", "16");
  pciDev(r, sw, "0x060400", "0x1000", "0", "32.0 GT/s PCIe", "16");
  pciDev(r, sw + "/0000:02:00.0", "0x030200", "0x10de", "0", "16.0 GT/s PCIe", "16");
  pciDev(r, sw + "/0000:02:01.0", "0x020700", "0x15b3", "0", "32.0 GT/s PCIe", "16");
  pciDev(r, "/sys/devices/pci0000:00/0000:00:02.0", "0x030000", "0x1234", "-1", "", "");
  pciDev(r, "/sys/devices/pci0000:80/0000:80:01.0", "0x020000", "0x8086", "1", "8.0 GT/s PCIe", "8");
  std::string hca = sw + "/0000:02:01.0/infiniband/mlx5_0";
  put(r + hca + "/node_guid", "0c42:a103:0016:054c");
  put(r + hca + "/ports/1/rate", "200 Gb/sec (4X HDR)");
  link(r, "/sys/class/infiniband/mlx5_0", hca);
  link(r, "/sys/class/infiniband/mlx5_0/device", sw + "/0000:02:01.0");
  put(r + sw + "/0000:02:01.0/net/ib0/speed", "200000");
  link(r, "/sys/class/net/ib0", sw + "/0000:02:01.0/net/ib0");
  put(r + "/sys/devices/pci0000:80/0000:80:01.0/net/ens1/speed", "25000");
  link(r, "/sys/class/net/ens1", "/sys/devices/pci0000:80/0000:80:01.0/net/ens1");
  for (const char* v : {"lo", "docker0"}) {
    put(r + "/sys/devices/virtual/net/" + v + "/speed", "");
    link(r, std::string("/sys/class/net/") + v, std::string("/sys/devices/virtual/net/") + v);
  }
  return r;
}

DetectOptions fakeOptions(const TempDir& t) {
  DetectOptions o;
  o.sysRoot = fakeSysfs(t);
  o.useNvml = false;
  o.useHwloc = false;
  return o;
}

TEST(TopoDiscover, FakeSysfsGivesNcclXml) {
  TempDir t;
  auto xml = discoverXml(fakeOptions(t));
  Probe arch;
  probeSysCpus(arch);  // arch comes from uname, not the fake tree
  std::string cpuAttrs = " arch=\"" + arch.arch + "\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\"";
  std::string want =
      "<system version=\"1\">\n"
      "  <cpu numaid=\"0\" affinity=\"00000000,0000ffff\"" + cpuAttrs + ">\n"
      "    <pci busid=\"0000:00:01.0\" class=\"0x060400\" vendor=\"0x8086\" device=\"0x0001\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
      "      <pci busid=\"0000:01:00.0\" class=\"0x060400\" vendor=\"0x1000\" device=\"0x0001\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
      "        <pci busid=\"0000:02:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x0001\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"/>\n"
      "        <pci busid=\"0000:02:01.0\" class=\"0x020700\" vendor=\"0x15b3\" device=\"0x0001\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
      "          <nic>\n"
      "            <net name=\"mlx5_0\" dev=\"0\" speed=\"200000\" port=\"1\" guid=\"0x0c42a1030016054c\"/>\n"
      "          </nic>\n"
      "        </pci>\n"
      "      </pci>\n"
      "    </pci>\n"
      "    <nic>\n"
      "      <net name=\"docker0\" dev=\"1\" virtual=\"1\"/>\n"
      "      <net name=\"lo\" dev=\"3\" virtual=\"1\"/>\n"
      "    </nic>\n"
      "  </cpu>\n"
      "  <cpu numaid=\"1\" affinity=\"00000000,ffff0000\"" + cpuAttrs + ">\n"
      "    <pci busid=\"0000:80:01.0\" class=\"0x020000\" vendor=\"0x8086\" device=\"0x0001\" link_speed=\"8.0 GT/s PCIe\" link_width=\"8\">\n"
      "      <nic>\n"
      "        <net name=\"ens1\" dev=\"2\" speed=\"25000\"/>\n"
      "      </nic>\n"
      "    </pci>\n"
      "  </cpu>\n"
      "</system>\n";
  EXPECT_EQ(writeXml(*xml), want);
}

TEST(TopoDiscover, FakeSysfsRailsAndPaths) {
  TempDir t;
  auto g = detect(fakeOptions(t));
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto r = assignRails(g.value());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].gpu, "0000:02:00.0");
  EXPECT_EQ(r[0].nic, "mlx5_0");
  EXPECT_EQ(r[0].path, PathType::kPix);
  auto m = PathMatrix::compute(g.value());
  EXPECT_EQ(m.path("0000:02:00.0", "mlx5_0").type, PathType::kPix);
  EXPECT_DOUBLE_EQ(m.path("0000:02:00.0", "mlx5_0").bw, 24.0);
  EXPECT_EQ(m.path("0000:02:00.0", "ens1").type, PathType::kSys);
  EXPECT_DOUBLE_EQ(m.path("0000:02:00.0", "ens1").bw, 3.125);  // the 25 Gb/s net; SPR SYS is 22, Gen3 x8 is 6
  EXPECT_DOUBLE_EQ(m.path("CPU/0", "CPU/1").bw, 22.0);
  // Every CPU carries this host's hash.
  for (const Node& n : g.value().nodes())
    if (n.kind == Kind::kCpu) {
      EXPECT_EQ(n.attr("host_hash"), localHostHash());
    }
}

TEST(TopoDiscover, ThisMachineIsSmallHonestAndReloads) {
  auto g = discover();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  int cpus = 0, gpus = 0, nets = 0;
  for (size_t i = 0; i < g.value().nodes().size(); ++i) {
    const Node& n = g.value().node(static_cast<int>(i));
    cpus += n.kind == Kind::kCpu;
    gpus += g.value().isGpuPci(static_cast<int>(i));
    nets += n.kind == Kind::kNet;
    if (n.kind == Kind::kNet && n.attr("name") == "lo") {
      EXPECT_EQ(n.attr("virtual"), "1");
    }
  }
  EXPECT_GE(cpus, 1);
  EXPECT_GE(nets, 1);  // at least lo
  if (access("/dev/nvidia0", F_OK) != 0) {
    EXPECT_EQ(gpus, 0);
  }
  auto again = Graph::fromXml(g.value().toXml());
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again.value().canonical(), g.value().canonical());
}

TEST(TopoDetect, TopoFileFileOnlyAndDump) {
  FERRY_NEED_TOPO_DIR();
  TempDir t;
  DetectOptions o;
  o.topoFile = testing::topoFile("nvidia-dgx-a100.xml");
  o.fileOnly = true;
  o.dumpFile = t.path() + "/dump.xml";
  auto g = detect(o);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto file = Graph::fromFile(o.topoFile);
  ASSERT_TRUE(file.isOk());
  EXPECT_EQ(g.value().canonical(), file.value().canonical());
  auto dumped = Graph::fromFile(o.dumpFile);
  ASSERT_TRUE(dumped.isOk()) << dumped.status().message();
  EXPECT_EQ(dumped.value().canonical(), file.value().canonical());
}

TEST(TopoDetect, TopoFileMergesDiscoveryUnderneath) {
  // The file knows the switch and the GPU (with its own link speed) but not
  // the HCA; discovery (fake sysfs) adds the HCA, fills the GPU's missing
  // attributes and adds node 1 with its NIC. File values win.
  TempDir t;
  DetectOptions o = fakeOptions(t);
  o.topoFile = t.path() + "/hint.xml";
  put(o.topoFile,
      "<system version=\"1\"><cpu numaid=\"0\" arch=\"x86_64\"><pci busid=\"0000:01:00.0\">"
      "<pci busid=\"0000:02:00.0\" link_speed=\"8.0 GT/s PCIe\"/></pci></cpu></system>");
  auto g = detect(o);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto r = assignRails(g.value());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].nic, "mlx5_0");
  auto m = PathMatrix::compute(g.value());
  EXPECT_EQ(m.path("0000:02:00.0", "mlx5_0").type, PathType::kPix);
  EXPECT_DOUBLE_EQ(m.path("0000:02:00.0", "mlx5_0").bw, 12.0);  // the file's Gen3 speed won
  EXPECT_EQ(m.path("0000:02:00.0", "ens1").type, PathType::kSys);
  int gpu = -1;
  for (size_t i = 0; i < g.value().nodes().size(); ++i)
    if (g.value().node(static_cast<int>(i)).attr("busid") == "0000:02:00.0") gpu = static_cast<int>(i);
  ASSERT_GE(gpu, 0);
  EXPECT_EQ(g.value().node(gpu).attr("class"), "0x030200");
  EXPECT_EQ(g.value().node(gpu).attr("link_speed"), "8.0 GT/s PCIe");
  EXPECT_EQ(g.value().node(g.value().node(gpu).parent).attr("busid"), "0000:01:00.0");
}

TEST(TopoDetect, ConfigNamesTheFileAndReportsErrors) {
  TempDir t;
  std::string dump = t.path() + "/found.xml";
  setenv("NCCL_TOPO_DUMP_FILE", dump.c_str(), 1);
  setenv("NCCL_TOPO_FILE", (t.path() + "/missing.xml").c_str(), 1);
  config::reload();
  auto bad = detect();
  EXPECT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("NCCL_TOPO_FILE " + t.path() + "/missing.xml: cannot open"), std::string::npos)
      << bad.status().message();
  unsetenv("NCCL_TOPO_FILE");
  config::reload();
  auto g = detect();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto dumped = Graph::fromFile(dump);
  ASSERT_TRUE(dumped.isOk()) << dumped.status().message();
  EXPECT_EQ(dumped.value().canonical(), g.value().canonical());
  setenv("NCCL_TOPO_DUMP_FILE", "/nonexistent-dir/x.xml", 1);
  config::reload();
  auto unwritable = detect();
  EXPECT_FALSE(unwritable.isOk());
  EXPECT_NE(unwritable.status().message().find("NCCL_TOPO_DUMP_FILE /nonexistent-dir/x.xml: cannot open for writing"),
            std::string::npos)
      << unwritable.status().message();
  unsetenv("NCCL_TOPO_DUMP_FILE");
  config::reload();
}

}  // namespace
}  // namespace ferry::topo
