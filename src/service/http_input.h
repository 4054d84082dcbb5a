// Request-side pieces of the HTTP service that do not depend on the HTTP library: a request body
// decoder that counts decoded bytes as they arrive and stops at a limit (identity, gzip and
// deflate content encodings, inflated incrementally with zlib), and the bearer-token check.
//
// Internal header. Pure functions and small classes without I/O, driven by fuzz/http_input_fuzz.cc.
#ifndef NEARDUP_SERVICE_HTTP_INPUT_H_
#define NEARDUP_SERVICE_HTTP_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "neardup/status.h"

namespace neardup::service {

// Accumulates one request body. Both the bytes received (after HTTP transfer framing, e.g.
// chunked) and the bytes decoded (after Content-Encoding) are counted as they arrive; the first
// Append that would exceed `max_bytes` fails with ResourceExhausted and nothing more is kept.
class BodyDecoder {
 public:
  BodyDecoder();
  ~BodyDecoder();
  BodyDecoder(const BodyDecoder&) = delete;
  BodyDecoder& operator=(const BodyDecoder&) = delete;

  // `content_encoding` is the Content-Encoding header value (empty or "identity": none; "gzip",
  // "x-gzip", "deflate"; case-insensitive). Unsupported for anything else (HTTP 415).
  Status Init(std::string_view content_encoding, size_t max_bytes);
  // Feeds received bytes. ResourceExhausted past the limit, InvalidArgument for a damaged
  // compressed stream. After an error every later call fails too.
  Status Append(const char* data, size_t size);
  // Called at the end of the body: InvalidArgument if a compressed stream is truncated.
  Status Finish();

  const std::string& body() const { return body_; }
  uint64_t received_bytes() const { return received_; }

 private:
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;  // null for identity
  std::string body_;
  size_t max_bytes_ = 0;
  uint64_t received_ = 0;
  Status error_;
};

// Checks "Authorization: Bearer <token>" values against the expected token. The scheme is
// case-insensitive (RFC 7235); the comparison is of fixed-length keyed digests (XXH3-128 with a
// per-process random seed) in constant time, so its timing tells nothing about the token's length
// or content.
class TokenChecker {
 public:
  explicit TokenChecker(std::string_view token);
  // `value` is the whole header value, e.g. "Bearer s3cret".
  bool Matches(std::string_view value) const;

 private:
  uint64_t seed_;
  unsigned char expected_[16];
};

// The token from the contents of a token file: the first line, with its line end ("\n" or "\r\n")
// removed. `*stripped_cr` is set if a '\r' was removed (worth a warning: the file has CRLF line
// ends). InvalidArgument if the token is empty or holds whitespace or control characters.
Result<std::string> TokenFromFileContents(std::string_view contents, bool* stripped_cr);

}  // namespace neardup::service

#endif  // NEARDUP_SERVICE_HTTP_INPUT_H_
