// ferry-info: print the configuration registry (params.def) with current
// values. `--json` prints a JSON array for scripts.
#include <cstdio>
#include <cstring>
#include <string>

#include "core/config.h"

namespace {

using ferry::config::ParamDef;
using ferry::config::Type;

const char* typeName(Type t) {
  switch (t) {
    case Type::kInt: return "int";
    case Type::kBool: return "bool";
    case Type::kString: return "string";
  }
  return "?";
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The current value as a JSON value of the parameter's type; an int with no
// value at all (empty default, unset) is null.
std::string jsonValue(const ParamDef& d) {
  namespace cfg = ferry::config;
  std::string text = cfg::getString(d.id);
  if (d.type == Type::kBool) return cfg::getBool(d.id) ? "true" : "false";
  if (d.type == Type::kInt) return text.empty() ? "null" : std::to_string(cfg::getInt(d.id));
  return jsonString(text);
}

void printJson() {
  std::printf("[\n");
  auto params = ferry::config::all();
  for (size_t i = 0; i < params.size(); i++) {
    const ParamDef& d = params[i];
    std::printf("  {\"name\": %s, \"type\": \"%s\", \"default\": %s, \"value\": %s, "
                "\"source\": %s, \"doc\": %s}%s\n",
                jsonString(d.name).c_str(), typeName(d.type), jsonString(d.def).c_str(),
                jsonValue(d).c_str(), jsonString(ferry::config::source(d.id)).c_str(),
                jsonString(d.doc).c_str(), i + 1 < params.size() ? "," : "");
  }
  std::printf("]\n");
}

void printText() {
  for (const ParamDef& d : ferry::config::all()) {
    std::string value = ferry::config::getString(d.id);
    std::string source = ferry::config::source(d.id);
    std::printf("%-28s %-6s default=\"%s\" value=\"%s\" (%s)\n    %s\n", d.name, typeName(d.type),
                d.def, value.c_str(), source.c_str(), d.doc);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      std::fprintf(stderr, "usage: %s [--json]\n", argv[0]);
      return std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0 ? 0 : 2;
    }
  }
  if (json) {
    printJson();
  } else {
    printText();
  }
  return 0;
}
