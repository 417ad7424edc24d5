// web/peer.h: who is on the other end of a connection, as a key for fair
// shares (search slots, the plan cache). A remote client is its address. On
// loopback every local user has the same address, so a local client is its
// user: the uid that owns the peer's socket, read from /proc/net/tcp{,6} as
// identd does (the kernel records each socket's owner there).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <sys/types.h>

namespace paratune::web {

// "uid:N" for a loopback peer whose socket is found, else "ip:ADDRESS".
std::string ClientKey(const std::string& remote_ip, int remote_port, const std::string& local_ip,
                      int local_port);

// A request's client, resolved to its ClientKey the first time the key is
// asked for: reading the kernel's socket table is a file read that a request
// answered from the plan cache never needs. Not thread-safe; one per request.
class Peer {
 public:
  Peer(std::string remote_ip, int remote_port, std::string local_ip, int local_port)
      : remote_ip_(std::move(remote_ip)), local_ip_(std::move(local_ip)),
        remote_port_(remote_port), local_port_(local_port) {}
  // A client already known by its key ("" for callers that are not clients).
  explicit Peer(std::string key) : key_(std::move(key)), resolved_(true) {}
  const std::string& key() const {
    if (!resolved_) {
      key_ = ClientKey(remote_ip_, remote_port_, local_ip_, local_port_);
      resolved_ = true;
    }
    return key_;
  }

 private:
  std::string remote_ip_, local_ip_;
  int remote_port_ = 0, local_port_ = 0;
  mutable std::string key_;
  mutable bool resolved_ = false;
};

// The uid owning the socket at (peer_ip, peer_port) connected to
// (local_ip, local_port), from a /proc/net/tcp-format table; nullopt when no
// row matches. Exposed for tests.
std::optional<uid_t> SocketOwner(const std::string& table, const std::string& peer_ip,
                                 int peer_port, const std::string& local_ip, int local_port);

}  // namespace paratune::web
