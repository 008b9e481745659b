#include "topology/graph.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace ferry::topo {

std::string lowerHex(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Node::attr(const std::string& key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return kv.second;
  return "";
}

bool Node::has(const std::string& key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return true;
  return false;
}

namespace {

Kind kindOf(const std::string& tag) {
  if (tag == "system") return Kind::kSystem;
  if (tag == "cpu") return Kind::kCpu;
  if (tag == "pci") return Kind::kPci;
  if (tag == "gpu") return Kind::kGpu;
  if (tag == "nic") return Kind::kNic;
  if (tag == "net") return Kind::kNet;
  if (tag == "nvlink" || tag == "xgmi" || tag == "c2c") return Kind::kLink;
  return Kind::kOther;
}

bool classIs(const std::string& cls, std::initializer_list<const char*> prefixes) {
  std::string c = lowerHex(cls);
  for (const char* p : prefixes)
    if (c.rfind(p, 0) == 0) return true;
  return false;
}

std::string where(const Node& n) {
  std::string s = "<" + n.tag;
  if (n.has("busid")) s += " busid=\"" + n.attr("busid") + "\"";
  if (n.has("target")) s += " target=\"" + n.attr("target") + "\"";
  return s + "> at line " + std::to_string(n.line);
}

}  // namespace

int Graph::add(const XmlElement& e, int parent) {
  Node n;
  n.kind = kindOf(e.name);
  n.tag = e.name;
  n.attrs = e.attrs;
  n.parent = parent;
  n.line = e.line;
  int id = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(n));
  for (const auto& c : e.children) {
    int cid = add(*c, id);
    nodes_[static_cast<size_t>(id)].children.push_back(cid);
  }
  return id;
}

Result<Graph> Graph::fromXml(const std::string& text) {
  auto doc = parseXml(text);
  if (!doc.isOk()) return doc.status();
  return fromElement(*doc.value());
}

Result<Graph> Graph::fromElement(const XmlElement& root) {
  if (root.name != "system")
    return invalidArgument("topology XML: root element is <" + root.name + ">, expected <system>");
  Graph g;
  g.add(root, -1);
  FERRY_TRY(g.validate());
  return g;
}

Result<Graph> Graph::fromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return systemError("cannot open topology file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto g = fromXml(ss.str());
  if (!g.isOk()) return Status(g.status().code(), path + ": " + g.status().message());
  return g;
}

int Graph::cpuOf(int i) const {
  while (i >= 0 && node(i).kind != Kind::kCpu) i = node(i).parent;
  return i;
}

bool Graph::isGpuPci(int i) const {
  const Node& n = node(i);
  if (n.kind != Kind::kPci) return false;
  for (int c : n.children)
    if (node(c).kind == Kind::kGpu) return true;
  return classIs(n.attr("class"), {"0x0302", "0x0300", "0x0380", "0x1200"});
}

bool Graph::isNicPci(int i) const {
  const Node& n = node(i);
  if (n.kind != Kind::kPci) return false;
  for (int c : n.children)
    if (node(c).kind == Kind::kNic) return !isBridge(i);
  return classIs(n.attr("class"), {"0x0200", "0x0207"});
}

bool Graph::isBridge(int i) const {
  const Node& n = node(i);
  if (n.kind != Kind::kPci) return false;
  if (n.has("class")) return classIs(n.attr("class"), {"0x06"});
  for (int c : n.children)
    if (node(c).kind == Kind::kPci) return true;
  return false;
}

namespace {
bool validLinkWidth(const std::string& v) {
  if (v.empty() || v.size() > 2) return v.empty();
  for (char c : v)
    if (c < '0' || c > '9') return false;
  return std::stoi(v) <= 32;
}
}  // namespace

Status Graph::validate() const {
  for (const Node& n : nodes_) {
    if (n.kind == Kind::kLink && (n.parent < 0 || node(n.parent).kind != Kind::kGpu))
      return invalidArgument("topology XML: " + where(n) + " is not inside a <gpu>");
    if (n.kind == Kind::kPci && !n.has("busid"))
      return invalidArgument("topology XML: " + where(n) + " has no busid");
    if (n.has("link_width") && !validLinkWidth(n.attr("link_width"))) {
      // NCCL's files say 0 for "unknown"; anything else is a lane count. A
      // huge one overflowed the bandwidth computation (found by tests/fuzz).
      return invalidArgument("topology XML: " + where(n) + " has link_width \"" +
                             n.attr("link_width") + "\", not a PCIe width (0 to 32 lanes)");
    }
  }
  FERRY_TRY(checkBusIds());
  return checkLinks();
}

// A bus id names one device; two elements with the same id would give the
// same device two places in the tree, so rail and path answers would depend
// on which one we happened to look at.
Status Graph::checkBusIds() const {
  std::map<std::string, int> seen;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.kind != Kind::kPci) continue;
    auto [it, fresh] = seen.emplace(lowerHex(n.attr("busid")), static_cast<int>(i));
    if (fresh) continue;
    const Node& first = node(it->second);
    std::string why = lowerHex(first.attr("class")) != lowerHex(n.attr("class"))
                          ? "duplicate bus id with conflicting classes (" + first.attr("class") + " vs " +
                                n.attr("class") + ")"
                          : "duplicate bus id";
    return invalidArgument("topology XML: " + why + ": " + where(n) + " repeats " + where(first));
  }
  return Status::ok();
}

// NVSwitches (tclass 0x068000) and NCCL's invisible switch "fffffff:ff:ff.0"
// are never listed as <pci> in dumps, and a self-loop is known dump noise
// (Azure NCv4); any other target must be a device in the file.
Status Graph::checkLinks() const {
  std::map<std::string, int> bus;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == Kind::kPci) bus[lowerHex(nodes_[i].attr("busid"))] = static_cast<int>(i);
  for (const Node& n : nodes_) {
    if (n.kind != Kind::kLink || n.tag == "c2c") continue;  // C2C goes to the GPU's own CPU
    std::string t = lowerHex(n.attr("target"));
    if (t.empty()) return invalidArgument("topology XML: " + where(n) + " has no target");
    if (bus.count(t) || lowerHex(n.attr("tclass")) == "0x068000" || t.rfind("fffffff:", 0) == 0) continue;
    return invalidArgument("topology XML: dangling link " + where(n) + ": no device with bus id " + t);
  }
  return Status::ok();
}

std::unique_ptr<XmlElement> Graph::toElement(int i) const {
  auto e = std::make_unique<XmlElement>();
  e->name = node(i).tag;
  e->attrs = node(i).attrs;
  for (int c : node(i).children) e->children.push_back(toElement(c));
  return e;
}

std::string Graph::toXml() const {
  if (nodes_.empty()) return "";
  return writeXml(*toElement(0));
}

void Graph::canonicalRec(int i, int depth, std::string& out) const {
  auto attrs = node(i).attrs;
  std::sort(attrs.begin(), attrs.end());
  out += std::to_string(depth) + " " + node(i).tag;
  for (const auto& kv : attrs) out += " " + kv.first + "=" + kv.second;
  out += "\n";
  for (int c : node(i).children) canonicalRec(c, depth + 1, out);
}

std::string Graph::canonical() const {
  std::string out;
  if (!nodes_.empty()) canonicalRec(0, 0, out);
  return out;
}

void Graph::treeRec(int i, int depth, std::string& out) const {
  const Node& n = node(i);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += n.tag;
  std::string role = isGpuPci(i) ? " [GPU]" : isNicPci(i) ? " [NIC]" : isBridge(i) ? " [bridge]" : "";
  for (const char* k : {"numaid", "busid", "class", "name", "target", "speed", "link_speed", "link_width", "count", "sm", "virtual"})
    if (n.has(k)) out += std::string(" ") + k + "=" + n.attr(k);
  out += role + "\n";
  for (int c : n.children) treeRec(c, depth + 1, out);
}

std::string Graph::tree() const {
  std::string out;
  if (!nodes_.empty()) treeRec(0, 0, out);
  return out;
}

}  // namespace ferry::topo
