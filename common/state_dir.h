// common/state_dir.h: a directory of state that a long-lived process trusts
// (the service's cache: profiles, job records, locks, its token), kept as
// OpenSSH and PostgreSQL keep theirs: owned by the user that runs the
// process and writable by nobody else, so no other user of a shared node can
// plant a file, a symbolic link or a folder that the process then reads or
// writes through. Files inside are read with O_NOFOLLOW and checked the same way.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace paratune {

// What PrepareStateDirectory found.
struct StateDirectory {
  bool writable = true;   // false: read-only (a read-only mount, no write permission)
  std::string why_read_only;  // when !writable, in words, without the path
};

// Writes `data` to `path` atomically: a temporary file of an unpredictable
// name in the same folder, created exclusively and never through a symbolic
// link (O_CREAT | O_EXCL | O_NOFOLLOW, `mode` less the umask), written,
// fsync'd and renamed over `path`. common/json.h's WriteFileAtomic is this
// with mode 0666; state files are written with 0600 (WriteStateFile).
Status WriteFileExclusive(const std::string& path, std::string_view data, unsigned mode);
inline Status WriteStateFile(const std::string& path, std::string_view data) {
  return WriteFileExclusive(path, data, 0600);
}

// Makes `dir` (mode 0700, parents as needed) when it is missing, then checks
// it and everything in it: each must be owned by the effective user and not
// writable by group or others, and nothing inside may be a symbolic link, a
// device, a socket or a FIFO (`dir` itself may be a link to a directory that
// passes). kFailedPrecondition names the first offender and the command that
// fixes it; kIoError when it cannot be made or read. Walks at most
// `max_entries` entries (kFailedPrecondition past that: not a state folder).
Result<StateDirectory> PrepareStateDirectory(const std::string& dir, size_t max_entries = 100000);

// Why `dir` cannot take a write now, in words and without the path ("" when
// it can): a read-only mount, no write permission, no free space. Writes
// nothing, so an unauthenticated probe can ask it as often as it likes.
std::string StateWriteObstacle(const std::string& dir);

// Checks one existing path the way PrepareStateDirectory checks each entry
// (owner, group/other write bits); for folders the service creates later.
Status CheckStateEntry(const std::string& path, const struct stat& st);

// Reads a file of the state directory: opened with O_NOFOLLOW (a symbolic
// link is refused, not followed), and refused unless it is a regular file
// owned by the effective user, not writable by group or others, and at most
// `max_bytes` long. kNotFound when it does not exist.
Result<std::string> ReadStateFile(const std::string& path, size_t max_bytes = 64u << 20);

// Creates the folder `path` with mode 0700 when it is missing (its parent
// must exist); an existing one must pass CheckStateEntry and not be a link.
Status MakeStateSubdirectory(const std::string& path);

}  // namespace paratune
