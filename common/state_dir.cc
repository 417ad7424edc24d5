#include "common/state_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <string_view>
#include <vector>

namespace paratune {
namespace {

std::string Errno(int err) { return std::strerror(err); }

const char* KindOf(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISFIFO(m)) return "a FIFO";
  return "not a file or folder";
}

// 16 random hex digits: a temporary name nobody can predict.
std::string RandomSuffix() {
  static thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  static const char kHex[] = "0123456789abcdef";
  uint64_t v = gen();
  std::string out(16, '0');
  for (char& c : out) {
    c = kHex[v & 15];
    v >>= 4;
  }
  return out;
}

bool WriteAllTo(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status WriteFileExclusive(const std::string& path, std::string_view data, unsigned mode) {
  // A fresh name created exclusively and never through a link, so a file or
  // link planted beside `path` is neither written through nor reused.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    tmp = path + ".tmp." + RandomSuffix();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                static_cast<mode_t>(mode));
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    return Status::IoError("cannot create a temporary file beside '" + path +
                           "': " + std::strerror(errno));
  }
  const bool written = WriteAllTo(fd, data) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    return Status::IoError("cannot write '" + path + "': " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rerr = errno;
    ::unlink(tmp.c_str());
    return Status::IoError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(rerr));
  }
  return Status::Ok();
}


std::string StateWriteObstacle(const std::string& dir) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) == 0) {
    if (vfs.f_flag & ST_RDONLY) return "the file system is mounted read-only";
    if (vfs.f_bavail == 0) return "the disk is full";
  }
  if (::access(dir.c_str(), W_OK) != 0) return "the folder cannot be written (" + Errno(errno) + ")";
  return "";
}

Status CheckStateEntry(const std::string& path, const struct stat& st) {
  if (st.st_uid != ::geteuid()) {
    return Status::FailedPrecondition(
        "'" + path + "' belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
        std::to_string(::geteuid()) +
        " that runs paratune: another user could have prepared it; use a folder of your own "
        "(or `chown -R " + std::to_string(::geteuid()) + " '" + path + "'` if it is yours)");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return Status::FailedPrecondition(
        "'" + path + "' is writable by its group or by others, so another user could change "
        "what paratune reads there; fix it with `chmod go-w '" + path + "'`");
  }
  return Status::Ok();
}

Status MakeStateSubdirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0) return Status::Ok();
  const int err = errno;
  if (err != EEXIST) return Status::IoError("cannot create '" + path + "': " + Errno(err));
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return Status::IoError("cannot inspect '" + path + "': " + Errno(errno));
  if (!S_ISDIR(st.st_mode))
    return Status::FailedPrecondition("'" + path + "' is " + KindOf(st.st_mode) +
                                      ", not a folder; remove it");
  return CheckStateEntry(path, st);
}

Result<StateDirectory> PrepareStateDirectory(const std::string& dir, size_t max_entries) {
  if (dir.empty()) return Status::InvalidArgument("the state directory is required");
  StateDirectory out;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::IoError("cannot inspect '" + dir + "': " + Errno(errno));
    const std::filesystem::path parent = std::filesystem::path(dir).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) return Status::IoError("cannot create '" + parent.string() + "': " + ec.message());
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::IoError("cannot create '" + dir + "': " + Errno(errno));
    if (::stat(dir.c_str(), &st) != 0)
      return Status::IoError("cannot inspect '" + dir + "': " + Errno(errno));
  }
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition("'" + dir + "' is not a folder");
  PT_RETURN_IF_ERROR(CheckStateEntry(dir, st));

  // Depth first over everything inside, never following a link.
  std::vector<std::string> todo = {dir};
  size_t seen = 0;
  while (!todo.empty()) {
    const std::string folder = std::move(todo.back());
    todo.pop_back();
    DIR* d = ::opendir(folder.c_str());
    if (!d) return Status::IoError("cannot list '" + folder + "': " + Errno(errno));
    Status bad = Status::Ok();
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (++seen > max_entries) {
        bad = Status::FailedPrecondition("'" + dir + "' holds more than " +
                                         std::to_string(max_entries) +
                                         " entries: not a paratune state folder");
        break;
      }
      const std::string path = folder + "/" + name;
      struct stat es {};
      if (::lstat(path.c_str(), &es) != 0) {
        if (errno == ENOENT) continue;  // removed meanwhile
        bad = Status::IoError("cannot inspect '" + path + "': " + Errno(errno));
        break;
      }
      if (!S_ISDIR(es.st_mode) && !S_ISREG(es.st_mode)) {
        bad = Status::FailedPrecondition("'" + path + "' is " + KindOf(es.st_mode) +
                                         "; a state folder holds only files and folders "
                                         "(remove it)");
        break;
      }
      bad = CheckStateEntry(path, es);
      if (!bad.ok()) break;
      if (S_ISDIR(es.st_mode)) todo.push_back(path);
    }
    ::closedir(d);
    PT_RETURN_IF_ERROR(bad);
  }
  out.why_read_only = StateWriteObstacle(dir);
  out.writable = out.why_read_only.empty();
  return out;
}

Result<std::string> ReadStateFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound("'" + path + "' does not exist");
    if (err == ELOOP)
      return Status::FailedPrecondition("'" + path + "' is a symbolic link; state files never are");
    return Status::IoError("cannot open '" + path + "': " + Errno(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::IoError("cannot inspect '" + path + "': " + Errno(errno));
  if (!S_ISREG(st.st_mode))
    return Status::FailedPrecondition("'" + path + "' is " + KindOf(st.st_mode) + ", not a file");
  PT_RETURN_IF_ERROR(CheckStateEntry(path, st));
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    return Status::FailedPrecondition("'" + path + "' is larger than " +
                                      std::to_string(max_bytes) + " bytes");
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError("cannot read '" + path + "': " + Errno(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
}

}  // namespace paratune
