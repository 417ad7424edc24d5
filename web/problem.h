// web/problem.h: RFC 9457 problem details (application/problem+json) for every
// error the service returns, and the mapping from a library Status to an HTTP
// status. Library messages carry the JSON pointer of the bad field
// ("/config/tp: must divide ..."); the problem lifts it into
// `errors[0].pointer` so a client need not parse prose.
#pragma once

#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"

namespace paratune::web {

inline constexpr const char* kProblemMediaType = "application/problem+json";

struct Problem {
  int status = 500;      // HTTP status code
  std::string type;      // a URI; "" = "about:blank"
  std::string title;     // short, the same for every instance of this type; "" = reason phrase
  std::string detail;    // this occurrence, in words
  std::string pointer;   // JSON pointer of the bad field in the request body; "" = none
  std::string instance;  // the request path
  std::string request_id;
};

// The standard reason phrase of an HTTP status ("Unprocessable Content").
const char* ReasonPhrase(int status);

// The first JSON pointer in a library message: the token that starts with '/'
// at the start of the message or after ": " and runs to the next ':' or space.
// "" when there is none. "--request x: /config/tp: must be" → "/config/tp".
std::string PointerFromMessage(std::string_view message);

// The problem for a failed library Status on a request body: parse errors 400,
// invalid or unknown input 422, a held lock 409, unavailable/timeout 503, an
// I/O failure 503 (urn:paratune:problem:storage) whose detail names
// `operation` ("store the profile") and the system's reason, never a path;
// everything else 500 (the server's fault, not the client's).
Problem ProblemFromStatus(const Status& s, const std::string& operation = "");

// The JSON body: type, title, status, detail, instance, request_id, and
// errors [{pointer, detail}] when a pointer is known.
OrderedJson ProblemToJson(const Problem& p);

}  // namespace paratune::web
