// Configuration registry: every NCCL_* / FERRY_* variable Ferry reads is
// declared exactly once in params.def (name, type, default, doc). Nothing
// else in the tree calls getenv() for a configuration value.
//
// Lookup order for a value: the environment, then the config files
// ($NCCL_CONF_FILE, else ~/.nccl.conf, then /etc/nccl.conf; lines VAR=value),
// then the declared default. Values are read once and cached; reload()
// forgets the cache (tests, ncclResetDebugInit).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace ferry::config {

enum class Type { kInt, kBool, kString };

enum class Param : int {
#define FERRY_PARAM(id, name, type, def, doc) id,
#include "core/params.def"
#undef FERRY_PARAM
  kCount
};

struct ParamDef {
  Param id;
  const char* name;   // environment variable name, e.g. "NCCL_DEBUG"
  Type type;
  const char* def;    // default, as text ("" = unset)
  const char* doc;    // one-line description
};

std::span<const ParamDef> all();
const ParamDef& def(Param p);

// Typed getters. An int/bool value that does not parse is reported once with
// a WARN naming the variable, and the default is used.
int64_t getInt(Param p);
bool getBool(Param p);          // accepts 0/1, true/false, yes/no, on/off
std::string getString(Param p);
bool isSet(Param p);            // set by environment or config file
std::string source(Param p);    // "environment", "config file <path>" or "default"

void reload();

}  // namespace ferry::config
