// SockAddr parsing, printing and packing (see sock_addr.h).
#include "net/sock_addr.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>

namespace ferry {
namespace {

Result<uint16_t> parsePort(const std::string& text, const std::string& whole) {
  if (text.empty() || text.size() > 5) return invalidArgument("bad port in address '" + whole + "'");
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return invalidArgument("bad port in address '" + whole + "'");
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 65535) return invalidArgument("port out of range in address '" + whole + "'");
  return static_cast<uint16_t>(v);
}

Result<SockAddr> resolve(const std::string& host, uint16_t port, const std::string& whole) {
  SockAddr out;
  in_addr a4{};
  in6_addr a6{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    auto* s = reinterpret_cast<sockaddr_in*>(&out.storage);
    s->sin_family = AF_INET;
    s->sin_addr = a4;
  } else if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&out.storage);
    s->sin6_family = AF_INET6;
    s->sin6_addr = a6;
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      return invalidArgument("cannot resolve host '" + host + "' in address '" + whole +
                             "': " + gai_strerror(rc));
    }
    for (addrinfo* p = res; p; p = p->ai_next) {
      if (p->ai_family == AF_INET || p->ai_family == AF_INET6) {
        out = SockAddr::fromSockaddr(p->ai_addr, p->ai_addrlen);
        break;
      }
    }
    freeaddrinfo(res);
    if (!out.valid()) return invalidArgument("no IPv4/IPv6 address for host '" + host + "'");
  }
  out.setPort(port);
  return out;
}

}  // namespace

SockAddr SockAddr::fromSockaddr(const sockaddr* sa, socklen_t len) {
  SockAddr out;
  if (!sa) return out;
  if (sa->sa_family == AF_INET && len >= socklen_t(sizeof(sockaddr_in))) {
    std::memcpy(&out.storage, sa, sizeof(sockaddr_in));
  } else if (sa->sa_family == AF_INET6 && len >= socklen_t(sizeof(sockaddr_in6))) {
    std::memcpy(&out.storage, sa, sizeof(sockaddr_in6));
  }
  return out;
}

Result<SockAddr> SockAddr::parse(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return invalidArgument("bad address '" + text + "': expected [v6addr]:port");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return invalidArgument("bad address '" + text + "': expected host:port");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  FERRY_ASSIGN(uint16_t p, parsePort(port, text));
  return resolve(host, p, text);
}

SockAddr SockAddr::unpack(const void* src, size_t bytes) {
  sockaddr_storage tmp{};
  std::memcpy(&tmp, src, bytes < sizeof(tmp) ? bytes : sizeof(tmp));
  return fromSockaddr(reinterpret_cast<const sockaddr*>(&tmp), static_cast<socklen_t>(bytes));
}

void SockAddr::pack(void* dst) const {
  std::memset(dst, 0, kPackedBytes);
  if (valid()) std::memcpy(dst, &storage, length());
}

socklen_t SockAddr::length() const {
  if (family() == AF_INET) return sizeof(sockaddr_in);
  if (family() == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return 0;
}

void SockAddr::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

bool SockAddr::isLoopback() const {
  if (family() == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr);
    return (a >> 24) == 127;
  }
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr);
  }
  return false;
}

bool SockAddr::isLinkLocalV6() const {
  return family() == AF_INET6 &&
         IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr);
}

std::string SockAddr::host() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof(buf));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf,
              sizeof(buf));
  }
  return buf;
}

std::string SockAddr::toString() const {
  if (!valid()) return "<invalid>";
  return host() + "<" + std::to_string(port()) + ">";
}

bool SockAddr::operator==(const SockAddr& o) const {
  return family() == o.family() && valid() && std::memcmp(&storage, &o.storage, length()) == 0;
}

}  // namespace ferry
