#include "web/problem.h"

namespace paratune::web {

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status >= 500 ? "Server Error" : "Client Error";
  }
}

std::string PointerFromMessage(std::string_view m) {
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i] != '/') continue;
    if (i != 0 && !(i >= 2 && m[i - 1] == ' ' && m[i - 2] == ':')) continue;
    size_t end = i;
    while (end < m.size() && m[end] != ':' && m[end] != ' ') ++end;
    return std::string(m.substr(i, end - i));
  }
  return "";
}

namespace {

// The problem type a status code answers as.
struct ProblemKind {
  int status;
  const char* type;
  const char* title;
};

const ProblemKind& KindOf(StatusCode code) {
  static constexpr ProblemKind kMalformed{400, "urn:paratune:problem:malformed-json",
                                          "The request body is not valid JSON"};
  static constexpr ProblemKind kInvalid{422, "urn:paratune:problem:invalid-spec",
                                        "The request breaks a rule of the specification"};
  static constexpr ProblemKind kConflict{409, "urn:paratune:problem:conflict",
                                         "The resource is busy"};
  static constexpr ProblemKind kUnavailable{503, "urn:paratune:problem:unavailable",
                                            "The service cannot do this now"};
  static constexpr ProblemKind kStorage{503, "urn:paratune:problem:storage",
                                        "The service could not read or write its state"};
  static constexpr ProblemKind kInternal{500, "urn:paratune:problem:internal", "Internal error"};
  switch (code) {
    case StatusCode::kIoError:
      return kStorage;
    case StatusCode::kParseError:
      return kMalformed;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return kInvalid;
    case StatusCode::kFailedPrecondition:
      return kConflict;
    case StatusCode::kUnavailable:
    case StatusCode::kTimeout:
      return kUnavailable;
    default:
      return kInternal;
  }
}

}  // namespace

Problem ProblemFromStatus(const Status& s, const std::string& operation) {
  const ProblemKind& kind = KindOf(s.code());
  Problem p;
  p.status = kind.status;
  p.type = kind.type;
  p.title = kind.title;
  p.detail = s.message();
  if (s.code() == StatusCode::kIoError) {
    // The operation and the system's reason, never the file it was about:
    // library messages end with strerror's text after the last ": ".
    const size_t colon = s.message().rfind(": ");
    const std::string reason = colon == std::string::npos ? "" : s.message().substr(colon + 2);
    const bool plain = !reason.empty() && reason.find('/') == std::string::npos;
    p.detail = "could not " + (operation.empty() ? std::string("use the state directory") : operation) +
               (plain ? ": " + reason : std::string());
  }
  // An invalid spec names its field: the JSON pointer in its message.
  if (kind.status == 422) p.pointer = PointerFromMessage(s.message());
  return p;
}

OrderedJson ProblemToJson(const Problem& p) {
  OrderedJson j;
  j["type"] = p.type.empty() ? "about:blank" : p.type;
  j["title"] = p.title.empty() ? ReasonPhrase(p.status) : p.title;
  j["status"] = p.status;
  if (!p.detail.empty()) j["detail"] = p.detail;
  if (!p.instance.empty()) j["instance"] = p.instance;
  if (!p.request_id.empty()) j["request_id"] = p.request_id;
  if (!p.pointer.empty()) {
    j["errors"] = OrderedJson::array({{{"pointer", p.pointer}, {"detail", p.detail}}});
  }
  return j;
}

}  // namespace paratune::web
