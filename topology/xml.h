// A minimal XML reader/writer for NCCL topology files: elements, attributes,
// comments and the <?xml?> header. No DTDs, CDATA or text content, because
// NCCL's format has none; anything else is reported as an error.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ferry::topo {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // in file order
  std::vector<std::unique_ptr<XmlElement>> children;
  int line = 0;

  const std::string* attr(const std::string& key) const;
  void setAttr(const std::string& key, std::string value);
};

// Parses a whole document; returns its single root element.
Result<std::unique_ptr<XmlElement>> parseXml(const std::string& text);
// Writes the element and its subtree in NCCL's indented style.
std::string writeXml(const XmlElement& root);

}  // namespace ferry::topo
