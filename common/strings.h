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

// Parses "tp=8, pp=16,recompute=full" into ordered (key, value) pairs.
// A piece without '=' or with an empty key is kInvalidArgument naming the piece.
Result<std::vector<std::pair<std::string, std::string>>> ParseKeyValueList(std::string_view text);

// Parses a non-negative integer ("64"); errors name `what`.
Result<int64_t> ParseInt(std::string_view text, const std::string& what);
// Parses a finite number ("0.1", "1e9").
Result<double> ParseDouble(std::string_view text, const std::string& what);
// nccl-tests size syntax: a number with an optional K/M/G suffix (powers of 1024).
Result<int64_t> ParseSizeBytes(std::string_view text);

// "1.23", fixed with `digits` decimals.
std::string FormatFixed(double v, int digits);

}  // namespace paratune
