#include "profiler/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backend/bootstrap.h"
#include "common/json.h"
#include "common/state_dir.h"
#include "common/strings.h"

namespace paratune::profiler {
namespace {

// <dir> (with its parents) and <dir>/profiles, the latter mode 0700 and, when
// it exists already, owned by this user and writable by nobody else: a
// profile another user dropped there would be applied to every plan.
Status MakeProfilesDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create cache directory '" + dir + "': " + ec.message());
  return MakeStateSubdirectory(dir + "/profiles");
}

std::string LockPath(const std::string& dir, const std::string& fingerprint) {
  return dir + "/profiles/" + fingerprint + ".lock";
}

// Whether `fd` is still the file at `path` (a holder that released it may
// have removed it since it was opened).
bool SameFile(int fd, const std::string& path) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
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
  PT_RETURN_IF_ERROR(MakeProfilesDir(dir));
  const std::string path = LockPath(dir, fingerprint);
  // The holder removes the lock file when it releases it, so a lock taken on
  // a file that is no longer at `path` is dropped and taken again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return Status::IoError("cannot open lock '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::FailedPrecondition("the lock '" + path + "' is not a regular file");
    }
    if (Status mine = CheckStateEntry(path, st); !mine.ok()) {
      ::close(fd);
      return mine;
    }
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
    if (!SameFile(fd, path)) {
      ::close(fd);
      continue;
    }
    const std::string me = backend::LocalHostName() + " pid " + std::to_string(::getpid());
    if (::ftruncate(fd, 0) == 0) {
      ssize_t w = ::pwrite(fd, me.data(), me.size(), 0);
      (void)w;  // the holder note is informational only
    }
    return CacheLock(fd, path);
  }
  return Status::Unavailable("the lock '" + path + "' kept changing; try again");
}

CacheLock::CacheLock(CacheLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

CacheLock& CacheLock::operator=(CacheLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

CacheLock::~CacheLock() { Release(); }

void CacheLock::Release() {
  if (fd_ < 0) return;
  // Removed while still held, so no lock file outlives what it locks; a
  // process that opened it meanwhile sees it gone (SameFile) and retries.
  if (SameFile(fd_, path_)) ::unlink(path_.c_str());
  ::close(fd_);  // closing the descriptor releases the flock
  fd_ = -1;
}

Result<std::optional<Profile>> LoadCachedProfile(const std::string& dir,
                                                 const std::string& fingerprint) {
  PT_RETURN_IF_ERROR(CheckPathToken(fingerprint, "cluster fingerprint"));
  const std::string path = CachedProfilePath(dir, fingerprint);
  // Read without following a link, and only when this user alone can write it.
  auto text = ReadStateFile(path);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) return std::optional<Profile>();
  if (!text.ok()) return text.status();
  PT_ASSIGN_OR_RETURN(Json j, ParseJson(*text, "profile " + path));
  Result<Profile> p = ParseProfile(j);
  if (!p.ok()) return p.status().WithContext("profile " + path);
  if (p->cluster_fingerprint != fingerprint) {
    return Status::InvalidArgument("cached profile " + path + " belongs to cluster " +
                                   p->cluster_fingerprint + ", not " + fingerprint);
  }
  return std::optional<Profile>(*std::move(p));
}

Status StoreCachedProfile(const std::string& dir, const Profile& p, const CacheLock&) {
  PT_CHECK(!p.cluster_fingerprint.empty());
  PT_RETURN_IF_ERROR(CheckPathToken(p.cluster_fingerprint, "/cluster_fingerprint"));
  if (IsSynthetic(p)) {
    return Status::FailedPrecondition(
        "a profile made by the fake backend measured no hardware, so it never enters the "
        "profile cache that plans read (it would change every plan of cluster " +
        p.cluster_fingerprint + "); keep it in a file and pass it with --profile");
  }
  PT_RETURN_IF_ERROR(MakeProfilesDir(dir));
  return WriteStateFile(CachedProfilePath(dir, p.cluster_fingerprint),
                         ProfileToJson(p).dump(2) + "\n");
}

std::string SyntheticCacheDir(const std::string& dir) { return dir + "/synthetic"; }

Status StoreSyntheticProfile(const std::string& dir, const Profile& p, const CacheLock&) {
  PT_CHECK(!p.cluster_fingerprint.empty());
  PT_RETURN_IF_ERROR(CheckPathToken(p.cluster_fingerprint, "/cluster_fingerprint"));
  if (!IsSynthetic(p)) return Status::InvalidArgument("only fake-backend profiles go here");
  const std::string root = SyntheticCacheDir(dir);
  PT_RETURN_IF_ERROR(MakeProfilesDir(root));
  return WriteStateFile(CachedProfilePath(root, p.cluster_fingerprint),
                        ProfileToJson(p).dump(2) + "\n");
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
