// Status and Result<T>: how every fallible neardup call reports success or a described error.
//
// Errors are values, never exceptions or crashes: a Status is either ok() or carries a code and a
// message that names the place (file, line, field) where that is known. Result<T> holds either a
// T or a non-ok Status. Both are cheap to move and safe to copy; neither is thread-shared state.
#ifndef NEARDUP_STATUS_H_
#define NEARDUP_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "neardup/export.h"

namespace neardup {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a caller-supplied value is out of range or malformed
  kInvalidUtf8,        // text is not valid UTF-8
  kNotFound,           // a file, id or resource does not exist
  kAlreadyExists,      // an id or file that must be new exists already
  kIoError,            // the operating system reported a failure
  kCorruption,         // stored data failed a checksum or format check
  kUnsupported,        // a format version or option this build cannot handle
  kResourceExhausted,  // a size or memory limit was hit
  kInternal,           // a broken invariant: a bug in neardup
};

// Returns a short stable name for `code`, such as "InvalidArgument".
NEARDUP_EXPORT const char* StatusCodeName(StatusCode code);

class [[nodiscard]] NEARDUP_EXPORT Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status InvalidUtf8(std::string msg) {
    return Status(StatusCode::kInvalidUtf8, std::move(msg));
  }
  static Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status AlreadyExists(std::string msg) {
    return Status(StatusCode::kAlreadyExists, std::move(msg));
  }
  static Status IoError(std::string msg) { return Status(StatusCode::kIoError, std::move(msg)); }
  static Status Corruption(std::string msg) {
    return Status(StatusCode::kCorruption, std::move(msg));
  }
  static Status Unsupported(std::string msg) {
    return Status(StatusCode::kUnsupported, std::move(msg));
  }
  static Status ResourceExhausted(std::string msg) {
    return Status(StatusCode::kResourceExhausted, std::move(msg));
  }
  static Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>"; ok stays ok.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value of type T or a non-ok Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "a Result built from a Status must carry an error");
    if (status_.ok()) status_ = Status::Internal("Result built from an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // Precondition: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace neardup

// Propagates a non-ok Status from an expression to the caller.
#define NEARDUP_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::neardup::Status neardup_status_ = (expr);        \
    if (!neardup_status_.ok()) return neardup_status_; \
  } while (0)

#endif  // NEARDUP_STATUS_H_
