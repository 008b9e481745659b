// Virtual interfaces never become rails; NCCL_IB_HCA include/exclude lists.
#include <gtest/gtest.h>

#include <map>

#include "tests/unit/topology/topo_files.h"
#include "topology/nicfilter.h"
#include "topology/rails.h"

namespace ferry::topo {
namespace {

TEST(TopoNicFilter, VirtualNames) {
  for (const char* v : {"lo", "tunl0", "tun0", "tap3", "br-702d9f064725", "docker0", "veth12ab", "cali1c7388b97f5",
                        "virbr0", "flannel.1", "cni0", "vxlan.calico", "ifb0", "dummy0", "wg0", "cilium_host"})
    EXPECT_TRUE(isVirtualNetName(v)) << v;
  for (const char* r : {"eth0", "eno1", "enp34s0f0", "ib0", "mlx5_0", "mlx5_bond_0", "bond0", "cxi0", "local0"})
    EXPECT_FALSE(isVirtualNetName(r)) << r;
}

TEST(TopoNicFilter, HcaSyntax) {
  HcaFilter all = HcaFilter::parse("");
  EXPECT_TRUE(all.empty());
  EXPECT_TRUE(all.accepts("anything", 1));

  HcaFilter prefix = HcaFilter::parse("mlx5_1");  // prefix: also mlx5_10
  EXPECT_TRUE(prefix.accepts("mlx5_1", 1));
  EXPECT_TRUE(prefix.accepts("mlx5_10", 1));
  EXPECT_FALSE(prefix.accepts("mlx5_0", 1));

  HcaFilter exact = HcaFilter::parse("=mlx5_1");
  EXPECT_TRUE(exact.accepts("mlx5_1", 2));
  EXPECT_FALSE(exact.accepts("mlx5_10", 1));

  HcaFilter ports = HcaFilter::parse("mlx5_0:1,mlx5_1:1");
  EXPECT_TRUE(ports.accepts("mlx5_0", 1));
  EXPECT_FALSE(ports.accepts("mlx5_0", 2));
  EXPECT_TRUE(ports.accepts("mlx5_1", -1));  // unknown port matches any
  EXPECT_FALSE(ports.accepts("mlx5_2", 1));

  HcaFilter excl = HcaFilter::parse("^mlx5_0");
  EXPECT_FALSE(excl.accepts("mlx5_0", 1));
  EXPECT_FALSE(excl.accepts("mlx5_01", 1));
  EXPECT_TRUE(excl.accepts("mlx5_1", 1));

  HcaFilter exclExact = HcaFilter::parse("^=mlx5_1:2");
  EXPECT_FALSE(exclExact.accepts("mlx5_1", 2));
  EXPECT_TRUE(exclExact.accepts("mlx5_1", 1));
  EXPECT_TRUE(exclExact.accepts("mlx5_10", 2));
}

std::map<std::string, std::string> rails(const std::string& file, const RailOptions& opt) {
  std::map<std::string, std::string> out;
  auto g = Graph::fromFile(testing::topoFile(file));
  EXPECT_TRUE(g.isOk()) << g.status().message();
  if (!g.isOk()) return out;
  for (const Rail& r : assignRails(g.value(), opt)) out[r.gpu] = r.nic + "/" + pathName(r.path);
  return out;
}

TEST(TopoNicFilter, DockerVirtualNicsAreNotRails) {
  FERRY_NEED_TOPO_DIR();
  auto r = rails("rtx4090-4gpu-docker-nics.xml", {});
  std::map<std::string, std::string> want = {{"0000:01:00.0", "enp34s0f0/SYS"},
                                             {"0000:26:00.0", "enp34s0f0/PHB"},
                                             {"0000:61:00.0", "enp34s0f0/SYS"},
                                             {"0000:81:00.0", "enp34s0f0/SYS"}};
  EXPECT_EQ(r, want);
}

TEST(TopoNicFilter, VirtualAttributeFromDiscovery) {
  auto g = Graph::fromXml(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"/>"
      "<nic><net name=\"fast0\" speed=\"400000\" virtual=\"1\"/></nic>"
      "<nic><net name=\"eth0\" speed=\"10000\"/></nic></cpu></system>");
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto r = assignRails(g.value());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].nic, "eth0");
}

TEST(TopoNicFilter, IbHcaSteersOciH100) {
  FERRY_NEED_TOPO_DIR();
  const std::string f = "oci-bm-gpu-h100-8.xml";
  EXPECT_EQ(rails(f, {})["0000:0f:00.0"], "mlx5_0/PXB");
  // Without port 1 of its NIC, GPU0 takes port 2 of the same NIC.
  EXPECT_EQ(rails(f, {"^=mlx5_0"})["0000:0f:00.0"], "mlx5_1/PXB");
  EXPECT_EQ(rails(f, {"mlx5_0:2,mlx5_1:2"})["0000:0f:00.0"], "mlx5_1/PXB");
  // Only two NICs allowed: GPUs on socket 0 share mlx5_0/mlx5_3 by path, then load.
  auto two = rails(f, {"=mlx5_0,mlx5_3"});
  EXPECT_EQ(two["0000:0f:00.0"], "mlx5_0/PXB");
  EXPECT_EQ(two["0000:2d:00.0"], "mlx5_3/PXB");
  EXPECT_EQ(two.size(), 8u);
  for (const auto& [gpu, nic] : two) EXPECT_TRUE(nic.rfind("mlx5_0/", 0) == 0 || nic.rfind("mlx5_3/", 0) == 0) << gpu;
  // Excluding everything leaves no rails.
  EXPECT_TRUE(rails(f, {"^mlx5"}).empty());
}

}  // namespace
}  // namespace ferry::topo
