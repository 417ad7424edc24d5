#include "common/strings.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "common/user_input.h"

namespace paratune {

std::string Trim(std::string_view text) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  return std::string(text.substr(b, e - b));
}

std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) pos = text.size();
    std::string piece = Trim(text.substr(start, pos - start));
    if (!piece.empty()) out.push_back(std::move(piece));
    start = pos + 1;
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseKeyValueList(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& piece : Split(text, ',')) {
    size_t eq = piece.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("'" + piece + "' is not of the form key=value");
    }
    out.emplace_back(Trim(piece.substr(0, eq)), Trim(piece.substr(eq + 1)));
  }
  return out;
}

Result<int64_t> ParseInt(std::string_view text, const std::string& what) {
  std::string t = Trim(text);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
    return Status::InvalidArgument(what + ": '" + t + "' is not an integer");
  }
  return v;
}

Result<double> ParseDouble(std::string_view text, const std::string& what) {
  std::string t = Trim(text);
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v)) {
    return Status::InvalidArgument(what + ": '" + t + "' is not a number");
  }
  return v;
}

Result<int64_t> ParseSizeBytes(std::string_view text) {
  // The one reading of K/M/G (powers of 1024) that counts of tokens use too.
  auto v = ParseCount(text, "size");
  if (!v.ok()) return Status::InvalidArgument("'" + std::string(text) + "' is not a size (N[K|M|G])");
  return v;
}

std::string Fnv1a64Hex(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string UtcNowIso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatFixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

bool IsPathToken(std::string_view s) {
  if (s.empty() || s.size() > kMaxPathTokenLength) return false;
  for (char c : s) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status CheckPathToken(std::string_view s, const std::string& what) {
  if (IsPathToken(s)) return Status::Ok();
  return Status::InvalidArgument(what + ": must be 1-" + std::to_string(kMaxPathTokenLength) +
                                 " characters of A-Z a-z 0-9 _ - (it names a file)");
}

bool PathIsUnder(const std::string& path, const std::string& root) {
  std::error_code ec;
  const auto p = std::filesystem::absolute(path, ec).lexically_normal();
  if (ec) return false;
  const auto r = std::filesystem::absolute(root, ec).lexically_normal();
  if (ec) return false;
  const auto rel = p.lexically_relative(r);
  return !rel.empty() && *rel.begin() != ".." && !rel.is_absolute();
}

}  // namespace paratune
