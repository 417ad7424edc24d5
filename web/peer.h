// web/peer.h: who is on the other end of a connection, as a key for fair
// shares (search slots, the plan cache). A remote client is its address. On
// loopback every local user has the same address, so a local client is its
// user: the uid that owns the peer's socket, read from /proc/net/tcp{,6} as
// identd does (the kernel records each socket's owner there).
#pragma once

#include <optional>
#include <string>

#include <sys/types.h>

namespace paratune::web {

// "uid:N" for a loopback peer whose socket is found, else "ip:ADDRESS".
std::string ClientKey(const std::string& remote_ip, int remote_port, const std::string& local_ip,
                      int local_port);

// The uid owning the socket at (peer_ip, peer_port) connected to
// (local_ip, local_port), from a /proc/net/tcp-format table; nullopt when no
// row matches. Exposed for tests.
std::optional<uid_t> SocketOwner(const std::string& table, const std::string& peer_ip,
                                 int peer_port, const std::string& local_ip, int local_port);

}  // namespace paratune::web
