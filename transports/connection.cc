// Defaults for the optional zero-copy part of the Connection interface.
#include "transports/transport.h"

namespace ferry {

Status Connection::sendRef(const void*, size_t, bool* accepted) {
  *accepted = false;
  return internalError("sendRef on a connection without reference support: " + describe());
}

Status Connection::readRef(const RecvPiece&, size_t, void*, size_t) {
  return internalError("readRef on a connection without reference support: " + describe());
}

}  // namespace ferry
