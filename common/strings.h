// common/strings.h: small text helpers shared by the CLI, the REST layer and importers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace paratune {

// Splits on `sep`, trimming blanks; empty pieces are dropped.
std::vector<std::string> Split(std::string_view text, char sep);
std::string Trim(std::string_view text);
// `text` with the ASCII letters A-Z lowered and every other byte kept, whatever
// the locale (names, model types, log keys).
std::string AsciiLower(std::string_view text);

// Whether `part` occurs in `text` (case-sensitive).
inline bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// Parses "tp=8, pp=16,recompute=full" into ordered (key, value) pairs.
// A piece without '=' or with an empty key is kInvalidArgument naming the piece.
Result<std::vector<std::pair<std::string, std::string>>> ParseKeyValueList(std::string_view text);

// Parses a non-negative integer ("64"); errors name `what`.
Result<int64_t> ParseInt(std::string_view text, const std::string& what);
// Parses a finite number ("0.1", "1e9").
Result<double> ParseDouble(std::string_view text, const std::string& what);
// nccl-tests size syntax: a number with an optional K/M/G suffix (powers of 1024).
Result<int64_t> ParseSizeBytes(std::string_view text);

// The 64-bit FNV-1a hash of `text` as 16 lower-case hex digits: a stable
// fingerprint of a canonical text (cluster specs, profiles).
std::string Fnv1a64Hex(std::string_view text);

// The current UTC time as ISO 8601 ("2026-01-31T12:00:00Z").
std::string UtcNowIso8601();

// "1.23", fixed with `digits` decimals.
std::string FormatFixed(double v, int digits);

// Identifiers that become file names (cluster fingerprints, job ids, cache
// keys): 1 to kMaxPathTokenLength characters from [A-Za-z0-9_-]. No '/', no
// '.', so no separator, no "..", no hidden file, and no NUL can reach a path.
inline constexpr size_t kMaxPathTokenLength = 64;
bool IsPathToken(std::string_view s);
// kInvalidArgument "<what>: must be 1-64 characters of A-Z a-z 0-9 _ -" unless IsPathToken.
Status CheckPathToken(std::string_view s, const std::string& what);
// Whether `path`, made absolute and normalised lexically, lies inside `root`
// (also absolute and normalised), so no ".." or absolute component escapes it.
bool PathIsUnder(const std::string& path, const std::string& root);

}  // namespace paratune
