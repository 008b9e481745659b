// SockAddr: an IPv4 or IPv6 socket address, printable the NCCL way
// ("10.0.0.1<43211>") and packable into the fixed 28-byte slots that the
// unique id and PeerInfo carry (sockaddr_in6 is the larger of the two).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace ferry {

struct SockAddr {
  // Bytes needed to store any supported address (sizeof(sockaddr_in6)).
  static constexpr size_t kPackedBytes = sizeof(sockaddr_in6);

  sockaddr_storage storage{};

  SockAddr() { storage.ss_family = AF_UNSPEC; }
  static SockAddr fromSockaddr(const sockaddr* sa, socklen_t len);

  // "host:port", "[v6addr]:port" or "v6addr" without port is not accepted.
  // host may be a name; it is resolved (first address of a supported family).
  static Result<SockAddr> parse(const std::string& text);

  // Inverse of pack(); an unknown family yields an invalid address.
  static SockAddr unpack(const void* src, size_t bytes);
  // Writes kPackedBytes bytes (zero-padded) to dst; dst must hold that many.
  void pack(void* dst) const;

  int family() const { return storage.ss_family; }
  bool valid() const { return family() == AF_INET || family() == AF_INET6; }
  socklen_t length() const;
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;
  bool isLinkLocalV6() const;

  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }

  // Numeric address only, e.g. "10.0.0.1" or "fd00::2".
  std::string host() const;
  // "10.0.0.1<43211>" (NCCL's format), "<invalid>" for an empty address.
  std::string toString() const;

  bool operator==(const SockAddr& o) const;
};

}  // namespace ferry
