// ferry-topo: every output on a small file, exactly; discovery without a file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

const char* kSmall =
    "<system version=\"1\">\n"
    "  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">\n"
    "    <pci busid=\"0000:10:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
    "      <pci busid=\"0000:11:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
    "        <gpu dev=\"0\" sm=\"80\">\n"
    "          <nvlink target=\"0000:91:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
    "        </gpu>\n"
    "      </pci>\n"
    "      <pci busid=\"0000:12:00.0\" class=\"0x020700\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
    "        <nic>\n"
    "          <net name=\"ib0\" dev=\"0\" speed=\"200000\"/>\n"
    "        </nic>\n"
    "      </pci>\n"
    "    </pci>\n"
    "  </cpu>\n"
    "  <cpu numaid=\"1\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">\n"
    "    <pci busid=\"0000:91:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
    "      <gpu dev=\"1\" sm=\"80\">\n"
    "        <nvlink target=\"0000:11:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
    "      </gpu>\n"
    "    </pci>\n"
    "  </cpu>\n"
    "</system>\n";

struct ToolRun {
  int rc = -1;
  std::string out;
};

// env: "VAR=value ..." placed before the command.
ToolRun run(const std::string& args, bool withStderr = false, const std::string& env = "") {
  std::string cmd = env + " " + FERRY_TOPO_TOOL + " " + args + (withStderr ? " 2>&1" : " 2>/dev/null");
  ToolRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class TopoToolOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ferry-topo-tool-XXXXXX";
    dir_ = mkdtemp(tmpl);
    file_ = dir_ + "/small.xml";
    std::ofstream(file_) << kSmall;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string f() const { return "--topo-file " + file_; }
  std::string dir_, file_;
};

TEST_F(TopoToolOutput, Tree) {
  ToolRun r = run(f());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out,
            "system\n"
            "  cpu numaid=0\n"
            "    pci busid=0000:10:00.0 class=0x060400 link_speed=16.0 GT/s PCIe link_width=16 [bridge]\n"
            "      pci busid=0000:11:00.0 class=0x030200 link_speed=16.0 GT/s PCIe link_width=16 [GPU]\n"
            "        gpu sm=80\n"
            "          nvlink target=0000:91:00.0 count=2\n"
            "      pci busid=0000:12:00.0 class=0x020700 link_speed=16.0 GT/s PCIe link_width=16 [NIC]\n"
            "        nic\n"
            "          net name=ib0 speed=200000\n"
            "  cpu numaid=1\n"
            "    pci busid=0000:91:00.0 class=0x030200 link_speed=16.0 GT/s PCIe link_width=16 [GPU]\n"
            "      gpu sm=80\n"
            "        nvlink target=0000:11:00.0 count=2\n");
}

TEST_F(TopoToolOutput, Rails) {
  ToolRun t = run(f() + " --rails");
  EXPECT_EQ(t.rc, 0);
  EXPECT_EQ(t.out,
            "GPU              NIC                  PATH  ALL NICS\n"
            "0000:11:00.0     ib0                  PIX   ib0\n"
            "0000:91:00.0     ib0                  SYS   ib0\n");
  ToolRun j = run(f() + " --rails --json");
  EXPECT_EQ(j.out,
            "{\"rails\": [{\"gpu\": \"0000:11:00.0\", \"nic\": \"ib0\", \"path\": \"PIX\"}, "
            "{\"gpu\": \"0000:91:00.0\", \"nic\": \"ib0\", \"path\": \"SYS\"}]}\n");
  EXPECT_EQ(run(f() + " --rails --json", false, "NCCL_IB_HCA=^ib").out, "{\"rails\": []}\n");
  EXPECT_EQ(run(f() + " --rails --json", false, "NCCL_IB_HCA==ib0").out, j.out);
}

TEST_F(TopoToolOutput, Paths) {
  ToolRun t = run(f() + " --paths");
  EXPECT_EQ(t.rc, 0);
  EXPECT_EQ(t.out,
            "from\\to       0000:11:00.0 0000:91:00.0 ib0        CPU/0      CPU/1\n"
            "0000:11:00.0  LOC/5000     NVL/40       PIX/24     PHB/24     PHB/24\n"
            "0000:91:00.0  NVL/40       LOC/5000     PXN/24     SYS/10     PHB/24\n"
            "ib0           PIX/24       SYS/10       LOC/5000   PHB/24     SYS/10\n"
            "CPU/0         PHB/24       SYS/10       PHB/24     LOC/5000   SYS/10\n"
            "CPU/1         SYS/10       PHB/24       SYS/10     SYS/10     LOC/5000\n");
  ToolRun j = run(f() + " --paths --json");
  EXPECT_EQ(j.rc, 0);
  EXPECT_EQ(j.out.rfind("{\"endpoints\": [{\"name\": \"0000:11:00.0\", \"type\": \"GPU\"}, {\"name\": \"0000:91:00.0\", "
                        "\"type\": \"GPU\"}, {\"name\": \"ib0\", \"type\": \"NET\"}, {\"name\": \"CPU/0\", \"type\": "
                        "\"CPU\"}, {\"name\": \"CPU/1\", \"type\": \"CPU\"}], \"paths\": [",
                        0),
            0u)
      << j.out;
  EXPECT_NE(j.out.find("{\"from\": \"0000:91:00.0\", \"to\": \"ib0\", \"type\": \"PXN\", \"bw\": 24}"), std::string::npos);
  EXPECT_NE(j.out.find("{\"from\": \"CPU/1\", \"to\": \"CPU/0\", \"type\": \"SYS\", \"bw\": 10}, "), std::string::npos);
  const std::string last = "{\"from\": \"CPU/1\", \"to\": \"CPU/1\", \"type\": \"LOC\", \"bw\": 5000}]}\n";
  EXPECT_EQ(j.out.substr(j.out.size() - last.size()), last);
  size_t pairs = 0;
  for (size_t at = j.out.find("\"from\""); at != std::string::npos; at = j.out.find("\"from\"", at + 1)) ++pairs;
  EXPECT_EQ(pairs, 25u);
}

TEST_F(TopoToolOutput, DumpIsTheFile) {
  ToolRun r = run(f() + " --dump");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, kSmall);
}

TEST_F(TopoToolOutput, DotAndPng) {
  std::string dot = dir_ + "/t.dot";
  ToolRun r = run(f() + " --dot " + dot);
  EXPECT_EQ(r.rc, 0);
  std::stringstream ss;
  ss << std::ifstream(dot).rdbuf();
  EXPECT_EQ(ss.str(),
            "graph topology {\n"
            "  node [fontname=\"Helvetica\", fontsize=10];\n"
            "  n1 [shape=box, style=rounded, label=\"CPU/0\\nGenuineIntel\"];\n"
            "  n2 [shape=ellipse, label=\"PCI 0000:10:00.0\"];\n"
            "  n3 [shape=box, style=filled, fillcolor=palegreen, label=\"GPU 0000:11:00.0\"];\n"
            "  n6 [shape=box, style=filled, fillcolor=lightblue, label=\"NIC 0000:12:00.0\\nib0 200000 Mb/s\"];\n"
            "  n9 [shape=box, style=rounded, label=\"CPU/1\\nGenuineIntel\"];\n"
            "  n10 [shape=box, style=filled, fillcolor=palegreen, label=\"GPU 0000:91:00.0\"];\n"
            "  n1 -- n2 [label=\"x16 16.0 GT/s\"];\n"
            "  n2 -- n3 [label=\"x16 16.0 GT/s\"];\n"
            "  n3 -- n10 [style=bold, color=darkgreen, label=\"nvlink x2\"];\n"
            "  n2 -- n6 [label=\"x16 16.0 GT/s\"];\n"
            "  n9 -- n10 [label=\"x16 16.0 GT/s\"];\n"
            "  n1 -- n9 [style=dashed, label=\"SYS\"];\n"
            "}\n");
  std::string png = dir_ + "/t.png";
  ToolRun p = run(f() + " --png " + png, true);
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    EXPECT_EQ(p.rc, 0) << p.out;
    std::ifstream in(png, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  } else {
    EXPECT_EQ(p.rc, 3);
    EXPECT_NE(p.out.find("--png needs Graphviz 'dot', which is not installed"), std::string::npos) << p.out;
    EXPECT_NE(access(png.c_str(), F_OK), 0);
  }
}

TEST_F(TopoToolOutput, WithoutFileDiscoversOrHonoursNcclTopoFile) {
  ToolRun d = run("");
  EXPECT_EQ(d.rc, 0);
  EXPECT_EQ(d.out.rfind("system\n  cpu numaid=", 0), 0u) << d.out;
  ToolRun dump = run("--dump");
  EXPECT_NE(dump.out.find("host_hash=\"0x"), std::string::npos) << dump.out;
  ToolRun file = run("--dump", false, "NCCL_TOPO_FILE=" + file_ + " FERRY_TOPO_FILE_ONLY=1");
  EXPECT_EQ(file.rc, 0);
  EXPECT_EQ(file.out, kSmall);
  // Merged (default): the file's devices stay, discovery adds this machine's NICs and host hash.
  ToolRun merged = run("--dump", false, "NCCL_TOPO_FILE=" + file_);
  EXPECT_EQ(merged.rc, 0);
  EXPECT_NE(merged.out.find("<pci busid=\"0000:91:00.0\""), std::string::npos) << merged.out;
  EXPECT_NE(merged.out.find("<net name=\"lo\""), std::string::npos) << merged.out;
  EXPECT_NE(merged.out.find("host_hash=\"0x"), std::string::npos) << merged.out;
}

TEST_F(TopoToolOutput, BadArgumentsAndMissingFile) {
  ToolRun u = run("--frobnicate", true);
  EXPECT_EQ(u.rc, 2);
  EXPECT_NE(u.out.find("usage: ferry-topo"), std::string::npos);
  ToolRun m = run("--topo-file " + dir_ + "/nope.xml", true);
  EXPECT_EQ(m.rc, 1);
  EXPECT_NE(m.out.find("cannot open topology file " + dir_ + "/nope.xml"), std::string::npos) << m.out;
}

}  // namespace
