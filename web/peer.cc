#include "web/peer.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "common/json.h"

namespace paratune::web {
namespace {

bool IsLoopbackIp(const std::string& ip) {
  return ip.rfind("127.", 0) == 0 || ip == "::1" || ip.rfind("::ffff:127.", 0) == 0;
}

// The kernel prints an address as the 32-bit words of its network-order bytes
// in host order (%08X each): the same text as the bytes of inet_pton read as
// native words.
std::string KernelHex(const std::string& ip) {
  unsigned char buf[16] = {0};
  size_t n = 0;
  if (::inet_pton(AF_INET, ip.c_str(), buf) == 1) {
    n = 4;
  } else if (::inet_pton(AF_INET6, ip.c_str(), buf) == 1) {
    n = 16;
  } else {
    return "";
  }
  std::string out;
  for (size_t w = 0; w < n; w += 4) {
    uint32_t word;
    std::memcpy(&word, buf + w, 4);
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08X", word);
    out += hex;
  }
  return out;
}

std::string Endpoint(const std::string& ip, int port) {
  char p[8];
  std::snprintf(p, sizeof p, "%04X", port & 0xffff);
  return KernelHex(ip) + ":" + p;
}

}  // namespace

std::optional<uid_t> SocketOwner(const std::string& table, const std::string& peer_ip,
                                 int peer_port, const std::string& local_ip, int local_port) {
  const std::string want_local = Endpoint(peer_ip, peer_port);
  const std::string want_remote = Endpoint(local_ip, local_port);
  std::istringstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, state, queues, timer, retr, uid;
    if (!(f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid)) continue;
    if (local == want_local && remote == want_remote) {
      return static_cast<uid_t>(std::strtoul(uid.c_str(), nullptr, 10));
    }
  }
  return std::nullopt;
}

std::string ClientKey(const std::string& remote_ip, int remote_port, const std::string& local_ip,
                      int local_port) {
  if (IsLoopbackIp(remote_ip)) {
    const char* file = remote_ip.find(':') != std::string::npos ? "/proc/net/tcp6" : "/proc/net/tcp";
    if (auto table = ReadFileToString(file); table.ok()) {
      if (auto uid = SocketOwner(*table, remote_ip, remote_port, local_ip, local_port))
        return "uid:" + std::to_string(*uid);
    }
  }
  return "ip:" + remote_ip;
}

}  // namespace paratune::web
