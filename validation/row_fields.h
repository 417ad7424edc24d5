// Lenient field readers for calibration rows (shared/calibration/*.json):
// rows are user files, so a missing field or one of another type reads as
// the default, never an exception. Each reader names what it falls back to.
#pragma once

#include <string>

#include "common/json.h"

namespace paratune::planner::row_fields {

// A string field, or `def`.
inline std::string Str(const Json& j, const char* key, const std::string& def = "") {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return def;
  return j[key].get<std::string>();
}
// Whether the field is present and not null.
inline bool Has(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && !j[key].is_null();
}
// A number, or `def`.
inline double Num(const Json& j, const char* key, double def) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return def;
  return j[key].get<double>();
}
// A number truncated to int, or `def`.
inline int Int(const Json& j, const char* key, int def) {
  return static_cast<int>(Num(j, key, def));
}
// A boolean that is true; false otherwise.
inline bool Bool(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

}  // namespace paratune::planner::row_fields
