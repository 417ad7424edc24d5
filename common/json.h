// common/json.h: strict JSON reading for every document that crosses a
// boundary. An ObjectReader walks one JSON object, hands out typed fields and,
// at Finish(), rejects any key nobody asked for. Every error names the field by
// its JSON pointer ("/config/tp: must be a positive integer").
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace paratune {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Parses `text`; a syntax error is a kParseError naming `what` and the byte offset.
Result<Json> ParseJson(std::string_view text, const std::string& what);

// The most bytes ReadFileToString and ReadStreamToString return: 256 MiB. Every
// document paratune reads (requests, clusters, models, profiles, plans,
// calibration sets, training logs) is far below it; a larger input is a
// mistake or an attack, refused before it can exhaust memory.
inline constexpr size_t kMaxInputFileBytes = size_t{256} << 20;

// Reads a whole file ("-" = stdin) into a string. Accepts a regular file, a
// FIFO (process substitution, `<(...)`) and "-"; refuses, naming the path, a
// directory, a character or block device (/dev/zero), a socket, a regular
// file larger than kMaxInputFileBytes (before reading it) and a stream that
// runs past that limit (kInvalidArgument); a file that cannot be opened or
// read is kIoError.
Result<std::string> ReadFileToString(const std::string& path);
// Reads `in` to its end, refusing (naming `what`) more than kMaxInputFileBytes.
Result<std::string> ReadStreamToString(std::istream& in, const std::string& what);

// Writes `data` to `path` atomically (temp file in the same folder + rename).
Status WriteFileAtomic(const std::string& path, std::string_view data);

// Escapes one JSON-pointer reference token (RFC 6901: ~ → ~0, / → ~1).
std::string JsonPointerToken(std::string_view key);

class ObjectReader {
 public:
  // `pointer` is the JSON pointer of `object` within its document ("" = root).
  // A non-object value makes every call fail with a message naming `pointer`.
  ObjectReader(const Json& object, std::string pointer);

  bool Has(std::string_view key) const;
  // The pointer of a child key, for nested readers and error messages.
  std::string PointerOf(std::string_view key) const;
  // Marks `key` as known without reading it (e.g. "schema", read elsewhere).
  void Ignore(std::string_view key);
  // The raw child value. REQUIRES: Has(key).
  const Json& Raw(std::string_view key);

  // Required fields: a missing key is an error.
  Status Number(std::string_view key, double* out);
  Status Integer(std::string_view key, int64_t* out);
  Status String(std::string_view key, std::string* out);
  Status Bool(std::string_view key, bool* out);
  // Optional fields: a missing (or null) key leaves *out unchanged.
  Status OptNumber(std::string_view key, double* out);
  Status OptInteger(std::string_view key, int64_t* out);
  Status OptInt(std::string_view key, int* out);
  Status OptString(std::string_view key, std::string* out);
  Status OptBool(std::string_view key, bool* out);
  // An optional array of strings: a missing key leaves *out unchanged; a
  // present one replaces it, and anything but an array of strings is an error.
  Status OptStringList(std::string_view key, std::vector<std::string>* out);
  // A string field turned into a value by `parse` (a callable from the string
  // to Result<T>: ParsePrecision, ParseOutcome, ...); a parse error is the
  // field's error. Parsed requires the key; OptParsed leaves *out unchanged
  // when the key is missing or null.
  template <class T, class Parse>
  Status Parsed(std::string_view key, Parse parse, T* out) {
    std::string text;
    PT_RETURN_IF_ERROR(String(key, &text));
    auto value = parse(text);
    if (!value.ok()) return Error(key, value.status().message());
    *out = *std::move(value);
    return Status::Ok();
  }
  template <class T, class Parse>
  Status OptParsed(std::string_view key, Parse parse, T* out) {
    if (!Has(key) || Raw(key).is_null()) {
      Ignore(key);
      return Status::Ok();
    }
    return Parsed(key, parse, out);
  }

  // Fails when the object holds a key that no call above asked for.
  Status Finish() const;
  // A kInvalidArgument naming the pointer of `key`.
  Status Error(std::string_view key, const std::string& rule) const;

 private:
  const Json* Find(std::string_view key);
  const Json& object_;
  std::string pointer_;
  std::vector<std::string> seen_;
  bool is_object_;
};

}  // namespace paratune
