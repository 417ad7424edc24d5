// Versioned JSON documents (profiles, run reports): the "schema" key every
// document opens with, checked before any other key so that a document of
// another kind or version is refused by name rather than half-read; and
// loading one from a file with the errors naming the file.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"

namespace paratune {

// Reads `r`'s "schema" string and fails naming it unless it is `want`:
// `must be "<want>" (got "<schema>")`.
inline Status ReadSchema(ObjectReader& r, const char* want) {
  std::string schema;
  PT_RETURN_IF_ERROR(r.String("schema", &schema));
  if (schema != want) {
    return r.Error("schema", std::string("must be \"") + want + "\" (got \"" + schema + "\")");
  }
  return Status::Ok();
}

// The document `what` (e.g. "profile") at `path`, read and handed to `parse`;
// every error is prefixed with "<what> <path>".
template <class T>
Result<T> LoadDocument(const std::string& path, const std::string& what,
                       Result<T> (*parse)(const Json&)) {
  PT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  PT_ASSIGN_OR_RETURN(Json j, ParseJson(text, what + " " + path));
  Result<T> doc = parse(j);
  if (!doc.ok()) return doc.status().WithContext(what + " " + path);
  return doc;
}

}  // namespace paratune
