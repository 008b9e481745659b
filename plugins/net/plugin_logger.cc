// The logger handed to plugins: NCCL's levels and subsystem bits are the same
// numbers as Ferry's, so a plugin's line is filtered exactly like ours.
#include <cstdarg>
#include <cstdio>

#include "core/log.h"
#include "plugins/net/net_plugins.h"

namespace ferry::netplugin {
namespace {

void logFromPlugin(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  if (level <= NCCL_LOG_NONE || level > NCCL_LOG_TRACE || fmt == nullptr) return;
  auto lvl = static_cast<log::Level>(level);
  if (level == NCCL_LOG_VERSION) lvl = log::Level::kInfo;  // plugins' banners are INFO lines
  if (!log::enabled(lvl, flags)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  log::write(lvl, flags, file ? file : "plugin", line, file ? file : "plugin", "%s", msg);
}

}  // namespace

ncclDebugLogger_t pluginLogger() { return &logFromPlugin; }

}  // namespace ferry::netplugin
