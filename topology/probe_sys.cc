// sysfs / procfs probes (see probe.h).
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "topology/nicfilter.h"
#include "topology/probe.h"

namespace ferry::topo {

namespace fs = std::filesystem;

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  size_t b = line.find_first_not_of(" \t\r\n"), e = line.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : line.substr(b, e - b + 1);
}

std::string cpusToMask(const std::vector<int>& cpus) {
  int top = 0;
  for (int c : cpus) top = std::max(top, c);
  std::vector<unsigned> words(static_cast<size_t>(top / 32 + 1), 0);
  for (int c : cpus) words[static_cast<size_t>(c / 32)] |= 1u << (c % 32);
  std::string out;
  for (size_t i = words.size(); i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", words[i]);
    out += (out.empty() ? "" : ",") + std::string(buf);
  }
  return out;
}

namespace {

bool isBusId(const std::string& s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

// Real path of a sysfs entry relative to the probe's root ("/sys/devices/..."), "" if dangling.
std::string realUnder(const Probe& p, const std::string& path) {
  std::error_code ec;
  fs::path real = fs::canonical(p.sysRoot + path, ec);
  if (ec) return "";
  std::string s = real.string();
  if (!p.sysRoot.empty()) {
    fs::path root = fs::canonical(p.sysRoot, ec);
    if (ec || s.rfind(root.string(), 0) != 0) return "";
    s = s.substr(root.string().size());
  }
  return s;
}

// Bus ids along a device path, root port first.
std::vector<std::string> busChain(const std::string& real) {
  std::vector<std::string> out;
  for (const auto& part : fs::path(real))
    if (isBusId(part.string())) out.push_back(part.string());
  return out;
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  // Explicit increments with an error code: the range-for form throws on errors.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string cpuinfoField(const std::string& text, const std::string& key) {
  size_t at = text.find("\n" + key);
  if (at == std::string::npos) return "";
  size_t colon = text.find(':', at), nl = text.find('\n', at + 1);
  if (colon == std::string::npos || colon > nl) return "";
  std::string v = text.substr(colon + 1, nl - colon - 1);
  size_t b = v.find_first_not_of(" \t");
  return b == std::string::npos ? "" : v.substr(b);
}

}  // namespace

void probeSysCpus(Probe& p) {
  std::string dir = p.sysRoot + "/sys/devices/system/node";
  for (const std::string& n : listDir(dir)) {
    if (n.rfind("node", 0) != 0 || n.size() < 5 || !std::isdigit(static_cast<unsigned char>(n[4]))) continue;
    p.cpus.push_back({std::atoi(n.c_str() + 4), readLine(dir + "/" + n + "/cpumap")});
  }
  if (p.cpus.empty()) {  // kernels without NUMA support: one node with every online CPU
    std::vector<int> all;
    for (long i = 0; i < sysconf(_SC_NPROCESSORS_ONLN); ++i) all.push_back(static_cast<int>(i));
    p.cpus.push_back({0, cpusToMask(all)});
  }
  std::sort(p.cpus.begin(), p.cpus.end(), [](const ProbedCpu& a, const ProbedCpu& b) { return a.numa < b.numa; });
  utsname u{};
  if (uname(&u) == 0) {
    std::string m = u.machine;
    p.arch = m == "aarch64" ? "arm64" : m.rfind("ppc64", 0) == 0 ? "ppc64" : m;
  }
  std::ifstream in(p.sysRoot + "/proc/cpuinfo");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = "\n" + text;
  p.vendor = cpuinfoField(text, "vendor_id");
  std::string fam = cpuinfoField(text, "cpu family"), model = cpuinfoField(text, "model\t");
  if (!fam.empty()) p.family = std::atoi(fam.c_str());
  if (!model.empty()) p.model = std::atoi(model.c_str());
  p.sources.push_back("sysfs");
}

void probeSysPci(Probe& p, const std::string& busid) {
  std::string real = realUnder(p, "/sys/bus/pci/devices/" + busid);
  if (real.empty()) return;
  std::vector<std::string> chain = busChain(real);
  std::string dir = p.sysRoot + real.substr(0, real.find(chain.empty() ? busid : chain.front()));
  for (size_t i = 0; i < chain.size(); ++i) {
    dir += chain[i];
    if (!p.pci.count(chain[i])) {
      ProbedPci d;
      d.busid = chain[i];
      d.parent = i ? chain[i - 1] : "";
      std::string numa = readLine(dir + "/numa_node");
      d.numa = numa.empty() ? -1 : std::atoi(numa.c_str());
      static const std::pair<const char*, const char*> kFiles[] = {
          {"class", "class"}, {"vendor", "vendor"}, {"device", "device"}, {"subsystem_vendor", "subsystem_vendor"},
          {"subsystem_device", "subsystem_device"}, {"link_speed", "max_link_speed"}, {"link_width", "max_link_width"}};
      for (const auto& [attr, file] : kFiles) {
        std::string v = readLine(dir + "/" + file);
        if (!v.empty()) d.attrs.emplace_back(attr, v);
      }
      p.pci[chain[i]] = d;
    }
    dir += "/";
  }
}

void probeSysNets(Probe& p) {
  // InfiniBand/RoCE HCAs: one net per port, named like NCCL's IB transport does.
  std::set<std::string> ibPci;
  std::string ib = "/sys/class/infiniband";
  for (const std::string& hca : listDir(p.sysRoot + ib)) {
    std::vector<std::string> chain = busChain(realUnder(p, ib + "/" + hca + "/device"));
    std::string pci = chain.empty() ? "" : chain.back();
    std::string guid = readLine(p.sysRoot + ib + "/" + hca + "/node_guid");
    guid.erase(std::remove(guid.begin(), guid.end(), ':'), guid.end());
    for (const std::string& port : listDir(p.sysRoot + ib + "/" + hca + "/ports")) {
      std::string rate = readLine(p.sysRoot + ib + "/" + hca + "/ports/" + port + "/rate");  // "100 Gb/sec (4X EDR)"
      ProbedNet n{hca, pci, rate.empty() ? -1 : static_cast<long long>(std::atof(rate.c_str()) * 1000), std::atoi(port.c_str()),
                  guid.empty() ? "" : "0x" + guid, false};
      p.nets.push_back(n);
    }
    if (!pci.empty()) ibPci.insert(pci);
  }
  // Net devices; those of an HCA's PCI function are already listed as its ports.
  for (const std::string& name : listDir(p.sysRoot + "/sys/class/net")) {
    std::string real = realUnder(p, "/sys/class/net/" + name);
    std::vector<std::string> chain = busChain(real);
    ProbedNet n;
    n.name = name;
    n.pci = chain.empty() ? "" : chain.back();
    if (!n.pci.empty() && ibPci.count(n.pci)) continue;
    n.isVirtual = real.find("/devices/virtual/") != std::string::npos || isVirtualNetName(name);
    std::string speed = readLine(p.sysRoot + "/sys/class/net/" + name + "/speed");
    long long s = speed.empty() ? -1 : std::atoll(speed.c_str());
    n.speed = s > 0 ? s : -1;
    p.nets.push_back(n);
  }
  for (const ProbedNet& n : p.nets)
    if (!n.pci.empty()) probeSysPci(p, n.pci);
}

void probeSysGpus(Probe& p) {
  for (const std::string& bus : listDir(p.sysRoot + "/sys/bus/pci/devices")) {
    std::string dir = p.sysRoot + "/sys/bus/pci/devices/" + bus;
    std::string cls = readLine(dir + "/class"), vendor = readLine(dir + "/vendor");
    bool gpuClass = cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0 || cls.rfind("0x0380", 0) == 0 ||
                    cls.rfind("0x1200", 0) == 0;
    // Only NVIDIA and AMD: a VM's emulated VGA adapter is not a GPU to us.
    if (!gpuClass || (vendor != "0x10de" && vendor != "0x1002")) continue;
    bool known = false;
    for (const ProbedGpu& g : p.gpus) known |= g.busid == bus;
    if (!known) p.gpus.push_back({bus, -1, 0, {}});
    probeSysPci(p, bus);
  }
}

}  // namespace ferry::topo
