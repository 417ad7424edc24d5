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

Problem ProblemFromStatus(const Status& s) {
  Problem p;
  p.detail = s.message();
  switch (s.code()) {
    case StatusCode::kParseError:
      p.status = 400;
      p.type = "urn:paratune:problem:malformed-json";
      p.title = "The request body is not valid JSON";
      break;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      p.status = 422;
      p.type = "urn:paratune:problem:invalid-spec";
      p.title = "The request breaks a rule of the specification";
      p.pointer = PointerFromMessage(s.message());
      break;
    case StatusCode::kFailedPrecondition:
      p.status = 409;
      p.type = "urn:paratune:problem:conflict";
      p.title = "The resource is busy";
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kTimeout:
      p.status = 503;
      p.type = "urn:paratune:problem:unavailable";
      p.title = "The service cannot do this now";
      break;
    default:
      p.status = 500;
      p.type = "urn:paratune:problem:internal";
      p.title = "Internal error";
      break;
  }
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
