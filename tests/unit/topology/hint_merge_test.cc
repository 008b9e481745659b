// The p5 case of shared/topologies/SOURCES.md: AWS's NCCL_TOPO_FILE lists
// only switches and EFA bus ids (no class, no GPUs); discovery on the VM
// (a fake sysfs tree shaped like a p5 here) fills in classes, EFA devices
// and the one GPU behind each switch, and the rails become 4 EFAs per GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "tests/unit/topology/fake_sysfs.h"
#include "tests/unit/topology/topo_files.h"
#include "topology/detect.h"
#include "topology/paths.h"
#include "topology/rails.h"

namespace ferry::topo {
namespace {

using testing::link;
using testing::pciDev;
using testing::put;
using testing::TempDir;

std::string hex2(int v) {
  char b[8];
  std::snprintf(b, sizeof b, "%02x", v);
  return b;
}

// Switch buses as in the AWS file; EFAs at switch+10..+13, GPU at +14, each
// behind its own downstream port (bus switch+1), which the file leaves out.
const int kSwitches[] = {0x45, 0x56, 0x67, 0x78, 0x89, 0x9a, 0xab, 0xbc};

std::string fakeP5(const TempDir& t) {
  const std::string& r = t.path();
  put(r + "/sys/devices/system/node/node0/cpumap", "00000000,0000ffff");
  put(r + "/sys/devices/system/node/node1/cpumap", "00000000,ffff0000");
  put(r + "/proc/cpuinfo", "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n");
  for (int i = 0; i < 8; ++i) {
    int s = kSwitches[i];
    std::string numa = i < 4 ? "0" : "1";
    std::string rp = "/sys/devices/pci0000:" + hex2(s - 1) + "/0000:" + hex2(s - 1) + ":01.1";
    std::string sw = rp + "/0000:" + hex2(s) + ":00.0";
    pciDev(r, rp, "0x060400", "0x1022", numa, "32.0 GT/s PCIe", "16");
    pciDev(r, sw, "0x060400", "0x1000", numa, "32.0 GT/s PCIe", "16");
    for (int k = 0; k < 5; ++k) {
      std::string port = sw + "/0000:" + hex2(s + 1) + ":0" + std::to_string(k) + ".0";
      std::string dev = port + "/0000:" + hex2(s + 10 + k) + ":00.0";
      pciDev(r, port, "0x060400", "0x1000", numa, "32.0 GT/s PCIe", "16");
      if (k < 4) {
        pciDev(r, dev, "0x020000", "0x1d0f", numa, "32.0 GT/s PCIe", "16");
        std::string name = "rdmap" + std::to_string(s + 10 + k) + "s0";
        put(r + dev + "/infiniband/" + name + "/ports/1/rate", "100 Gb/sec (4X EDR)");
        link(r, "/sys/class/infiniband/" + name, dev + "/infiniband/" + name);
        link(r, "/sys/class/infiniband/" + name + "/device", dev);
      } else {
        pciDev(r, dev, "0x030200", "0x10de", numa, "32.0 GT/s PCIe", "16");
      }
    }
  }
  return r;
}

TEST(TopoHintMerge, AwsP5FourEfasPerGpu) {
  FERRY_NEED_TOPO_DIR();
  TempDir t;
  DetectOptions o;
  o.sysRoot = fakeP5(t);
  o.useHwloc = false;
  o.useNvml = false;
  o.topoFile = testing::topoFile("aws-p5-48xlarge.xml");
  auto g = detect(o);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto rails = assignRails(g.value());
  ASSERT_EQ(rails.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    int s = kSwitches[i];
    const Rail& r = rails[static_cast<size_t>(i)];
    EXPECT_EQ(r.gpu, "0000:" + hex2(s + 14) + ":00.0");
    EXPECT_EQ(r.path, PathType::kPxb) << r.gpu;  // GPU and EFA each behind a downstream port of the switch
    std::vector<std::string> want;
    for (int k = 0; k < 4; ++k) want.push_back("rdmap" + std::to_string(s + 10 + k) + "s0");
    EXPECT_EQ(r.nics, want) << r.gpu;
    EXPECT_EQ(r.nic, want[0]) << r.gpu;
  }
  auto m = PathMatrix::compute(g.value());
  PathInfo own = m.path("0000:53:00.0", "rdmap79s0");
  EXPECT_EQ(own.type, PathType::kPxb);
  EXPECT_DOUBLE_EQ(own.bw, 12.5);  // the 100 Gb/s EFA; the file's "32 GT/s PCIe/s" x16 links give 48
  EXPECT_EQ(m.path("0000:53:00.0", "rdmap96s0").type, PathType::kPhb);   // next switch, same socket
  EXPECT_EQ(m.path("0000:53:00.0", "rdmap147s0").type, PathType::kSys);  // other socket
  // The file's structure won: the EFA sits directly under the file's switch,
  // with the file's link speed string; discovery added its class.
  for (const Node& n : g.value().nodes()) {
    if (n.attr("busid") != "0000:4f:00.0") continue;
    EXPECT_EQ(g.value().node(n.parent).attr("busid"), "0000:45:00.0");
    EXPECT_EQ(n.attr("link_speed"), "32 GT/s PCIe/s");
    EXPECT_EQ(n.attr("class"), "0x020000");
  }
}

TEST(TopoHintMerge, FileAloneHasNoRails) {
  FERRY_NEED_TOPO_DIR();
  DetectOptions o;
  o.topoFile = testing::topoFile("aws-p5-48xlarge.xml");
  o.fileOnly = true;
  auto g = detect(o);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_TRUE(assignRails(g.value()).empty());
}

}  // namespace
}  // namespace ferry::topo
