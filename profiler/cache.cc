#include "profiler/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backend/bootstrap.h"
#include "common/strings.h"

namespace paratune::profiler {
namespace {

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create cache directory '" + dir + "': " + ec.message());
  return Status::Ok();
}

}  // namespace

std::string DefaultCacheDir() {
  if (const char* d = std::getenv("PARATUNE_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/paratune";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/paratune";
}

std::string CachedProfilePath(const std::string& dir, const std::string& fingerprint) {
  return dir + "/profiles/" + fingerprint + ".json";
}

Result<CacheLock> CacheLock::TryAcquire(const std::string& dir, const std::string& fingerprint) {
  PT_RETURN_IF_ERROR(CheckPathToken(fingerprint, "cluster fingerprint"));
  PT_RETURN_IF_ERROR(MakeDirs(dir + "/profiles"));
  const std::string path = dir + "/profiles/" + fingerprint + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError("cannot open lock '" + path + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[256] = {0};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return Status::FailedPrecondition(
          "the profile cache for cluster " + fingerprint + " is locked by another paratune (" +
          (n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("unknown")) +
          ", lock " + path + "): it is profiling this cluster now; try again when it is done");
    }
    return Status::IoError("cannot lock '" + path + "': " + std::strerror(err));
  }
  const std::string me = backend::LocalHostName() + " pid " + std::to_string(::getpid());
  if (::ftruncate(fd, 0) == 0) {
    ssize_t w = ::pwrite(fd, me.data(), me.size(), 0);
    (void)w;  // the holder note is informational only
  }
  return CacheLock(fd);
}

CacheLock::CacheLock(CacheLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

CacheLock& CacheLock::operator=(CacheLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

CacheLock::~CacheLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

Result<std::optional<Profile>> LoadCachedProfile(const std::string& dir,
                                                 const std::string& fingerprint) {
  PT_RETURN_IF_ERROR(CheckPathToken(fingerprint, "cluster fingerprint"));
  const std::string path = CachedProfilePath(dir, fingerprint);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<Profile>();
  PT_ASSIGN_OR_RETURN(Profile p, LoadProfile(path));
  if (p.cluster_fingerprint != fingerprint) {
    return Status::InvalidArgument("cached profile " + path + " belongs to cluster " +
                                   p.cluster_fingerprint + ", not " + fingerprint);
  }
  return std::optional<Profile>(std::move(p));
}

Status StoreCachedProfile(const std::string& dir, const Profile& p, const CacheLock&) {
  PT_CHECK(!p.cluster_fingerprint.empty());
  PT_RETURN_IF_ERROR(CheckPathToken(p.cluster_fingerprint, "/cluster_fingerprint"));
  if (IsSynthetic(p)) {
    auto existing = LoadCachedProfile(dir, p.cluster_fingerprint);
    if (existing.ok() && existing->has_value() && !IsSynthetic(**existing)) {
      return Status::FailedPrecondition(
          "a profile measured with the fake backend never replaces the measured profile of "
          "cluster " +
          p.cluster_fingerprint + " (backend " + (*existing)->environment.backend +
          "); delete that one first if it is wrong");
    }
  }
  PT_RETURN_IF_ERROR(MakeDirs(dir + "/profiles"));
  return WriteProfile(p, CachedProfilePath(dir, p.cluster_fingerprint));
}

bool IsSynthetic(const Profile& p) { return p.environment.backend == "fake"; }

Result<bool> DeleteCachedProfile(const std::string& dir, const std::string& fingerprint,
                                 const CacheLock&) {
  PT_RETURN_IF_ERROR(CheckPathToken(fingerprint, "cluster fingerprint"));
  std::error_code ec;
  const bool removed = std::filesystem::remove(CachedProfilePath(dir, fingerprint), ec);
  if (ec)
    return Status::IoError("cannot delete the cached profile of " + fingerprint + ": " +
                           ec.message());
  return removed;
}

}  // namespace paratune::profiler
