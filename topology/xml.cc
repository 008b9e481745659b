#include "topology/xml.h"

#include <cctype>

namespace ferry::topo {

const std::string* XmlElement::attr(const std::string& key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void XmlElement::setAttr(const std::string& key, std::string value) {
  for (auto& kv : attrs)
    if (kv.first == key) { kv.second = std::move(value); return; }
  attrs.emplace_back(key, std::move(value));
}

namespace {

// The five predefined XML entities; interface names may hold any of these characters.
const std::pair<const char*, char> kEntities[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};

std::string unescape(const std::string& v) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) {
    bool done = false;
    for (const auto& [ent, c] : kEntities) {
      if (v.compare(i, std::char_traits<char>::length(ent), ent) != 0) continue;
      o += c;
      i += std::char_traits<char>::length(ent) - 1;
      done = true;
      break;
    }
    if (!done) o += v[i];
  }
  return o;
}

std::string escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    const char* ent = nullptr;
    for (const auto& [e, ch] : kEntities)
      if (ch == c && ch != '\'') ent = e;
    o += ent ? ent : std::string(1, c);
  }
  return o;
}

class Parser {
 public:
  explicit Parser(const std::string& t) : t_(t) {}

  Result<std::unique_ptr<XmlElement>> document() {
    std::unique_ptr<XmlElement> root;
    while (true) {
      FERRY_TRY(skipMisc());
      if (pos_ >= t_.size()) break;
      if (root) return err("content after the root element");
      auto r = element();
      if (!r.isOk()) return r.status();
      root = r.take();
    }
    if (!root) return err("no root element");
    return root;
  }

 private:
  Status err(const std::string& what) const {
    return invalidArgument("XML line " + std::to_string(line()) + ": " + what);
  }
  int line() const {
    int n = 1;
    for (size_t i = 0; i < pos_ && i < t_.size(); ++i) n += t_[i] == '\n';
    return n;
  }
  bool starts(const char* s) const { return t_.compare(pos_, std::char_traits<char>::length(s), s) == 0; }
  void skipSpace() { while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_; }

  // Skips whitespace, comments and <?...?> processing instructions.
  Status skipMisc() {
    while (true) {
      skipSpace();
      const char* close = nullptr;
      if (starts("<!--")) close = "-->";
      else if (starts("<?")) close = "?>";
      else return Status::ok();
      size_t end = t_.find(close, pos_);
      if (end == std::string::npos) return err(std::string("unterminated ") + (close[0] == '-' ? "comment" : "<?...?>"));
      pos_ = end + std::char_traits<char>::length(close);
    }
  }

  std::string name() {
    size_t b = pos_;
    while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_' ||
                                t_[pos_] == '-' || t_[pos_] == ':' || t_[pos_] == '.'))
      ++pos_;
    return t_.substr(b, pos_ - b);
  }

  Result<std::unique_ptr<XmlElement>> element() {
    if (!starts("<")) return err("expected '<'");
    ++pos_;
    auto e = std::make_unique<XmlElement>();
    e->line = line();
    e->name = name();
    if (e->name.empty()) return err("missing element name");
    while (true) {
      skipSpace();
      if (starts("/>")) { pos_ += 2; return e; }
      if (starts(">")) { ++pos_; break; }
      std::string key = name();
      if (key.empty()) return err("bad attribute in <" + e->name + ">");
      skipSpace();
      if (!starts("=")) return err("attribute '" + key + "' of <" + e->name + "> has no value");
      ++pos_;
      skipSpace();
      if (pos_ >= t_.size() || (t_[pos_] != '"' && t_[pos_] != '\'')) return err("unquoted attribute '" + key + "'");
      char q = t_[pos_++];
      size_t end = t_.find(q, pos_);
      if (end == std::string::npos) return err("unterminated attribute '" + key + "'");
      e->attrs.emplace_back(key, unescape(t_.substr(pos_, end - pos_)));
      pos_ = end + 1;
    }
    while (true) {
      FERRY_TRY(skipMisc());
      if (pos_ >= t_.size()) return err("<" + e->name + "> is never closed");
      if (starts("</")) {
        pos_ += 2;
        std::string n = name();
        skipSpace();
        if (n != e->name || !starts(">")) return err("</" + n + "> does not close <" + e->name + ">");
        ++pos_;
        return e;
      }
      if (!starts("<")) return err("unexpected text inside <" + e->name + ">");
      auto c = element();
      if (!c.isOk()) return c.status();
      e->children.push_back(c.take());
    }
  }

  const std::string& t_;
  size_t pos_ = 0;
};

void writeRec(const XmlElement& e, int depth, std::string& out) {
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "<" + e.name;
  for (const auto& kv : e.attrs) out += " " + kv.first + "=\"" + escape(kv.second) + "\"";
  if (e.children.empty()) { out += "/>\n"; return; }
  out += ">\n";
  for (const auto& c : e.children) writeRec(*c, depth + 1, out);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "</" + e.name + ">\n";
}

}  // namespace

Result<std::unique_ptr<XmlElement>> parseXml(const std::string& text) { return Parser(text).document(); }

std::string writeXml(const XmlElement& root) {
  std::string out;
  writeRec(root, 0, out);
  return out;
}

}  // namespace ferry::topo
