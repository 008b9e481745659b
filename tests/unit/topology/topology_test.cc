// Topology XML reader, graph validation and round trip.
#include <gtest/gtest.h>

#include <algorithm>

#include "topology/graph.h"
#include "topology/system.h"
#include "topology/xml.h"
#include "tests/unit/topology/topo_files.h"

namespace ferry::topo {
namespace {

using testing::allTopoFiles;
using testing::kMalformed;
using testing::topoFile;

TEST(TopoXml, ParsesHeaderCommentsAndAttributes) {
  auto r = parseXml("<?xml version=\"1.0\"?>\n<!-- c -->\n<system version=\"1\">\n"
                    "  <cpu numaid='0'><!-- inline --><pci busid=\"0000:01:00.0\"/></cpu>\n</system>\n");
  ASSERT_TRUE(r.isOk()) << r.status().message();
  const XmlElement& root = *r.value();
  EXPECT_EQ(root.name, "system");
  ASSERT_NE(root.attr("version"), nullptr);
  EXPECT_EQ(*root.attr("version"), "1");
  ASSERT_EQ(root.children.size(), 1u);
  EXPECT_EQ(*root.children[0]->attr("numaid"), "0");
  ASSERT_EQ(root.children[0]->children.size(), 1u);
  EXPECT_EQ(*root.children[0]->children[0]->attr("busid"), "0000:01:00.0");
  EXPECT_EQ(root.children[0]->children[0]->line, 4);
}

TEST(TopoXml, EntitiesRoundTrip) {
  auto r = parseXml("<system a=\"x&amp;y &lt;&gt; &quot;q&quot; &apos;\" b='it&apos;s'/>");
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(*r.value()->attr("a"), "x&y <> \"q\" '");
  EXPECT_EQ(*r.value()->attr("b"), "it's");
  EXPECT_EQ(writeXml(*r.value()), "<system a=\"x&amp;y &lt;&gt; &quot;q&quot; '\" b=\"it's\"/>\n");
}

TEST(TopoXml, RejectsBrokenDocuments) {
  EXPECT_NE(parseXml("<system><cpu></system>").status().message().find("</system> does not close <cpu>"),
            std::string::npos);
  EXPECT_NE(parseXml("<system>").status().message().find("never closed"), std::string::npos);
  EXPECT_NE(parseXml("<system a=1/>").status().message().find("unquoted attribute 'a'"), std::string::npos);
  EXPECT_NE(parseXml("<!-- x").status().message().find("unterminated comment"), std::string::npos);
  EXPECT_FALSE(parseXml("<a/><b/>").isOk());
}

TEST(TopoGraph, RejectsDanglingLink) {
  auto g = Graph::fromXml("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\">"
                          "<gpu dev=\"0\"><nvlink target=\"0000:02:00.0\" count=\"2\" tclass=\"0x030200\"/>"
                          "</gpu></pci></cpu></system>");
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.status().message().find("dangling link <nvlink target=\"0000:02:00.0\">"), std::string::npos)
      << g.status().message();
}

TEST(TopoGraph, ToleratesNvSwitchTargetsAndSelfLoops) {
  auto g = Graph::fromXml("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\">"
                          "<gpu dev=\"0\"><nvlink target=\"0000:a9:00.0\" count=\"2\" tclass=\"0x068000\"/>"
                          "<nvlink target=\"0000:01:00.0\" count=\"12\" tclass=\"0x030200\"/>"
                          "</gpu></pci></cpu></system>");
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_TRUE(g.value().isGpuPci(2));
}

TEST(TopoGraph, RejectsWrongRootAndMissingBusId) {
  EXPECT_NE(Graph::fromXml("<topology/>").status().message().find("root element is <topology>"),
            std::string::npos);
  EXPECT_NE(Graph::fromXml("<system><cpu><pci class=\"0x030200\"/></cpu></system>").status().message().find(
                "<pci> at line 1 has no busid"),
            std::string::npos);
}

// Found by tests/fuzz/fuzz_topology: a huge width overflowed pciBw's int product.
TEST(TopoGraph, RejectsLinkWidthBeyondPcie) {
  auto xml = [](const char* w) {
    return std::string("<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x020000\" link_width=\"") +
           w + "\"/></cpu></system>";
  };
  for (const char* ok : {"", "0", "1", "16", "32"}) EXPECT_TRUE(Graph::fromXml(xml(ok)).isOk()) << ok;
  for (const char* bad : {"33", "877423224", "-1", "x16"}) {
    auto g = Graph::fromXml(xml(bad));
    ASSERT_FALSE(g.isOk()) << bad;
    EXPECT_NE(g.status().message().find("not a PCIe width"), std::string::npos) << g.status().message();
  }
  EXPECT_EQ(pciBw("8.0 GT/s PCIe", "877423224"), pciBw("8.0 GT/s PCIe", "16"));
}

TEST(TopoFiles, AllButMalformedLoad) {
  FERRY_NEED_TOPO_DIR();
  auto files = allTopoFiles();
  EXPECT_GE(files.size(), 24u);
  for (const auto& f : files) {
    auto g = Graph::fromFile(topoFile(f));
    if (f == kMalformed) continue;
    EXPECT_TRUE(g.isOk()) << f << ": " << g.status().message();
  }
}

TEST(TopoFiles, MalformedIsRejectedNamingTheElement) {
  FERRY_NEED_TOPO_DIR();
  auto g = Graph::fromFile(topoFile(kMalformed));
  ASSERT_FALSE(g.isOk());
  const std::string& m = g.status().message();
  EXPECT_NE(m.find("duplicate bus id with conflicting classes (0x020700 vs 0x030200)"), std::string::npos) << m;
  EXPECT_NE(m.find("<pci busid=\"0000:ba:00.0\"> at line 15"), std::string::npos) << m;
}

TEST(TopoFiles, RoundTripGivesSameGraph) {
  FERRY_NEED_TOPO_DIR();
  for (const auto& f : allTopoFiles()) {
    if (f == kMalformed) continue;
    auto g = Graph::fromFile(topoFile(f));
    ASSERT_TRUE(g.isOk()) << f;
    std::string dump = g.value().toXml();
    auto g2 = Graph::fromXml(dump);
    ASSERT_TRUE(g2.isOk()) << f << ": " << g2.status().message();
    EXPECT_EQ(g.value().canonical(), g2.value().canonical()) << f;
    EXPECT_EQ(g2.value().toXml(), dump) << f;
    EXPECT_GT(g.value().nodes().size(), 2u) << f;
  }
}

}  // namespace
}  // namespace ferry::topo
