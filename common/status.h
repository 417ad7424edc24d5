// common/status.h: the one error mechanism for failures at a boundary (files,
// JSON, CUDA, NCCL, MPI, HTTP). A Status is a code plus a human message; context
// is prepended on the way up ("reading profile.json: /collectives/3/alpha_us: ...").
// Programmer bugs use PT_CHECK instead, which aborts with file:line.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace paratune {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller's input breaks a rule (CLI exit code 2)
  kNotFound,           // a named preset, file or key does not exist
  kParseError,         // malformed JSON or log text
  kIoError,            // the filesystem said no
  kUnavailable,        // a capability (GPU, MPI, driver) is absent: skip / waive
  kFailedPrecondition, // the system is not in a state to do this (e.g. cache locked)
  kInternal,           // a third-party library failed (CUDA, NCCL, MPI)
  kTimeout,            // a bounded operation ran out of time
};

// Returns a stable lower-case name for `code` ("invalid_argument"), used in JSON and logs.
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status ParseError(std::string m) { return {StatusCode::kParseError, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: <message>"; "ok" when ok.
  std::string ToString() const;

  // Returns a copy whose message reads "<context>: <old message>". No-op when ok.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status that explains its absence. REQUIRES: constructed from a
// non-ok Status when there is no value.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::Internal("Result constructed from an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const std::string& msg);

}  // namespace paratune

// Aborts with file:line when `cond` is false: for programmer bugs only.
#define PT_CHECK(cond)                                                       \
  do {                                                                       \
    if (!(cond)) ::paratune::CheckFailed(__FILE__, __LINE__, #cond, "");     \
  } while (0)
#define PT_CHECK_MSG(cond, msg)                                              \
  do {                                                                       \
    if (!(cond)) ::paratune::CheckFailed(__FILE__, __LINE__, #cond, (msg));  \
  } while (0)

#define PT_CONCAT_INNER(a, b) a##b
#define PT_CONCAT(a, b) PT_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not ok.
#define PT_RETURN_IF_ERROR(expr)                     \
  do {                                               \
    ::paratune::Status pt_status_ = (expr);          \
    if (!pt_status_.ok()) return pt_status_;         \
  } while (0)

// `lhs = value of expr`, or return its Status from the enclosing function.
#define PT_ASSIGN_OR_RETURN(lhs, expr) \
  PT_ASSIGN_OR_RETURN_IMPL(PT_CONCAT(pt_result_, __LINE__), lhs, expr)
#define PT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
