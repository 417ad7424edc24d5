// profiler/cache.h: profiles cached by cluster fingerprint in the cache
// directory (architecture.md, Persistence): <dir>/profiles/<fingerprint>.json.
// Writes are atomic (temp file + rename), and a profiling run holds an
// exclusive flock on <dir>/profiles/<fingerprint>.lock while it measures and
// stores, so a hundred array jobs starting at once profile once and never read
// a half-written file; the others are told the cache is busy (CLI exit 75).
// The lock file exists only while it is held. Profiles of the fake backend
// never enter the cache (they have one of their own, SyntheticCacheDir), and a cached file is read only when it is this
// user's alone (common/state_dir.h).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "common/status.h"
#include "profiler/profile.h"

namespace paratune::profiler {

// ${PARATUNE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paratune}.
std::string DefaultCacheDir();

// <dir>/profiles/<fingerprint>.json. Every function below refuses (kInvalidArgument)
// a fingerprint that is not a path token (common/strings.h IsPathToken), so no
// name reaches outside <dir>/profiles.
std::string CachedProfilePath(const std::string& dir, const std::string& fingerprint);

// An exclusive, non-blocking flock on one fingerprint's lock file, released
// when destroyed. Move-only.
class CacheLock {
 public:
  // kFailedPrecondition naming the holder (host and pid) when another process
  // holds it; kIoError when the directory cannot be made or the file opened.
  static Result<CacheLock> TryAcquire(const std::string& dir, const std::string& fingerprint);
  CacheLock(CacheLock&& other) noexcept;
  CacheLock& operator=(CacheLock&& other) noexcept;
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;
  ~CacheLock();  // removes the lock file, then releases the lock

 private:
  CacheLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void Release();
  int fd_ = -1;
  std::string path_;
};

// The cached profile for `fingerprint`, or nullopt when there is none. A file
// that does not parse is an error naming it (it was not written by us), and so
// is one that is a symbolic link, belongs to another user or is writable by
// group or others (common/state_dir.h ReadStateFile).
Result<std::optional<Profile>> LoadCachedProfile(const std::string& dir,
                                                 const std::string& fingerprint);

// Stores `p` under its cluster_fingerprint. A synthetic profile (made by the
// fake backend) is never stored: kFailedPrecondition. REQUIRES: the caller holds that fingerprint's
// CacheLock; p.cluster_fingerprint is not empty.
Status StoreCachedProfile(const std::string& dir, const Profile& p, const CacheLock& held);

// Where `paratune profile --backend fake` caches and locks its profiles:
// <dir>/synthetic, a cache of its own with the same layout, which plans, the
// service and GET /v1/profiles never read, so a synthetic profile cannot
// change a plan.
std::string SyntheticCacheDir(const std::string& dir);

// Stores a profile of the fake backend under SyntheticCacheDir(dir).
// REQUIRES: the caller holds that fingerprint's CacheLock in that folder.
Status StoreSyntheticProfile(const std::string& dir, const Profile& p, const CacheLock& held);

// Whether `p` was made by the fake backend (no hardware was measured).
bool IsSynthetic(const Profile& p);

// Removes the cached profile of `fingerprint`; false when there was none.
// REQUIRES: the caller holds that fingerprint's CacheLock.
Result<bool> DeleteCachedProfile(const std::string& dir, const std::string& fingerprint,
                                 const CacheLock& held);

}  // namespace paratune::profiler
