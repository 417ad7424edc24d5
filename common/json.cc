#include "common/json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "common/state_dir.h"
#include "common/user_input.h"

namespace paratune {

Result<Json> ParseJson(std::string_view text, const std::string& what) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return Status::ParseError(what + ": invalid JSON at byte " + std::to_string(e.byte) + ": " +
                              e.what());
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number beyond double ("1e999"), found by the fuzzer.
    return Status::ParseError(what + ": invalid JSON: " + e.what());
  }
}

namespace {

std::string LimitText() {
  return std::to_string(kMaxInputFileBytes >> 20) + " MiB";
}

Status TooLarge(const std::string& what) {
  return Status::InvalidArgument(what + " is larger than the " + LimitText() +
                                 " limit on an input file");
}

// What kind of file `mode` is, for a refusal; nullptr for the kinds read.
const char* RefusedKind(mode_t mode) {
  if (S_ISREG(mode) || S_ISFIFO(mode)) return nullptr;
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status NotAFile(const std::string& path, const char* kind) {
  return Status::InvalidArgument("'" + path + "' is " + kind +
                                 " (a regular file, a FIFO or - for stdin is read)");
}

}  // namespace

Result<std::string> ReadStreamToString(std::istream& in, const std::string& what) {
  std::string data;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof(buf));
    const size_t n = static_cast<size_t>(in.gcount());
    if (data.size() + n > kMaxInputFileBytes) return TooLarge(what);
    data.append(buf, n);
  }
  if (in.bad()) return Status::IoError("cannot read " + what);
  return data;
}

Result<std::string> ReadFileToString(const std::string& path) {
  if (path == "-") return ReadStreamToString(std::cin, "<stdin>");
  // Looked at before opening: opening a device may block or act on it.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::IoError("cannot open '" + path + "': " + std::strerror(errno));
  }
  if (const char* kind = RefusedKind(st.st_mode)) return NotAFile(path, kind);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError("cannot open '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Checked again on what was opened: the path may have changed in between.
  if (::fstat(fd, &st) != 0) {
    return Status::IoError("cannot read '" + path + "': " + std::strerror(errno));
  }
  if (const char* kind = RefusedKind(st.st_mode)) return NotAFile(path, kind);
  const std::string what = "'" + path + "'";
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kMaxInputFileBytes) {
    return TooLarge(what);
  }
  std::string data;
  if (S_ISREG(st.st_mode)) data.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError("cannot read '" + path + "': " + std::strerror(errno));
    }
    if (n == 0) break;
    // Files that grow while read and FIFOs are held to the same limit.
    if (data.size() + static_cast<size_t>(n) > kMaxInputFileBytes) return TooLarge(what);
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  return WriteFileExclusive(path, data, 0666);
}

std::string JsonPointerToken(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

ObjectReader::ObjectReader(const Json& object, std::string pointer)
    : object_(object), pointer_(std::move(pointer)), is_object_(object.is_object()) {}

bool ObjectReader::Has(std::string_view key) const {
  return is_object_ && object_.contains(key) && !object_.at(std::string(key)).is_null();
}

std::string ObjectReader::PointerOf(std::string_view key) const {
  return pointer_ + "/" + JsonPointerToken(key);
}

void ObjectReader::Ignore(std::string_view key) { seen_.emplace_back(key); }

const Json& ObjectReader::Raw(std::string_view key) {
  seen_.emplace_back(key);
  return object_.at(std::string(key));
}

const Json* ObjectReader::Find(std::string_view key) {
  seen_.emplace_back(key);
  if (!is_object_) return nullptr;
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status ObjectReader::Error(std::string_view key, const std::string& rule) const {
  return Status::InvalidArgument(PointerOf(key) + ": " + rule);
}

namespace {
Status NotObject(const std::string& pointer) {
  return Status::InvalidArgument((pointer.empty() ? std::string("/") : pointer) +
                                 ": must be a JSON object");
}
}  // namespace

Status ObjectReader::OptNumber(std::string_view key, double* out) {
  if (!is_object_) return NotObject(pointer_);
  const Json* v = Find(key);
  if (!v) return Status::Ok();
  if (!v->is_number()) return Error(key, "must be a number");
  double d = v->get<double>();
  if (!std::isfinite(d)) return Error(key, "must be finite");
  *out = d;
  return Status::Ok();
}

Status ObjectReader::OptInteger(std::string_view key, int64_t* out) {
  if (!is_object_) return NotObject(pointer_);
  const Json* v = Find(key);
  if (!v) return Status::Ok();
  if (v->is_number_integer()) {
    *out = v->get<int64_t>();
    return Status::Ok();
  }
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      *out = static_cast<int64_t>(d);
      return Status::Ok();
    }
  }
  return Error(key, "must be an integer");
}

Status ObjectReader::OptInt(std::string_view key, int* out) {
  int64_t v = *out;
  PT_RETURN_IF_ERROR(OptInteger(key, &v));
  if (v < INT32_MIN || v > INT32_MAX) return Error(key, "is out of range");
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ObjectReader::OptString(std::string_view key, std::string* out) {
  if (!is_object_) return NotObject(pointer_);
  const Json* v = Find(key);
  if (!v) return Status::Ok();
  if (!v->is_string()) return Error(key, "must be a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

Status ObjectReader::OptBool(std::string_view key, bool* out) {
  if (!is_object_) return NotObject(pointer_);
  const Json* v = Find(key);
  if (!v) return Status::Ok();
  if (!v->is_boolean()) return Error(key, "must be true or false");
  *out = v->get<bool>();
  return Status::Ok();
}

Status ObjectReader::OptStringList(std::string_view key, std::vector<std::string>* out) {
  if (!Has(key)) {
    Ignore(key);
    return Status::Ok();
  }
  const Json& a = Raw(key);
  if (!a.is_array()) return Error(key, "must be an array of strings");
  out->clear();
  for (const Json& s : a) {
    if (!s.is_string()) return Error(key, "must be an array of strings");
    out->push_back(s.get<std::string>());
  }
  return Status::Ok();
}

Status ObjectReader::Number(std::string_view key, double* out) {
  if (!Has(key)) return is_object_ ? Error(key, "is required") : NotObject(pointer_);
  return OptNumber(key, out);
}
Status ObjectReader::Integer(std::string_view key, int64_t* out) {
  if (!Has(key)) return is_object_ ? Error(key, "is required") : NotObject(pointer_);
  return OptInteger(key, out);
}
Status ObjectReader::String(std::string_view key, std::string* out) {
  if (!Has(key)) return is_object_ ? Error(key, "is required") : NotObject(pointer_);
  return OptString(key, out);
}
Status ObjectReader::Bool(std::string_view key, bool* out) {
  if (!Has(key)) return is_object_ ? Error(key, "is required") : NotObject(pointer_);
  return OptBool(key, out);
}

Status ObjectReader::Finish() const {
  if (!is_object_) return NotObject(pointer_);
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (std::find(seen_.begin(), seen_.end(), it.key()) == seen_.end()) {
      // The keys asked for are the object's schema: the closest of those the
      // object does not hold is what was meant ("seq" for "seq_len").
      std::vector<std::string> absent;
      for (const std::string& k : seen_) {
        if (!object_.contains(k) && std::find(absent.begin(), absent.end(), k) == absent.end())
          absent.push_back(k);
      }
      const std::string hint = DidYouMean(it.key(), absent);
      return Status::InvalidArgument(PointerOf(it.key()) + ": unknown key" +
                                     (hint.empty() ? "" : "; " + hint));
    }
  }
  return Status::Ok();
}

}  // namespace paratune
