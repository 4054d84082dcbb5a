// Request-side pieces of the HTTP service that do not depend on the HTTP library: the framing
// rules a request head must pass before anything acts on it (RFC 9112 message length: one
// Content-Length of digits, Transfer-Encoding ending in chunked and never beside Content-Length,
// exactly one Host in HTTP/1.1, no obs-fold), the request target's decoding (percent-escapes,
// UTF-8, each query parameter once), a request body decoder that counts decoded bytes as they
// arrive and stops at a limit (identity, gzip and deflate content encodings, inflated
// incrementally with zlib), and the bearer-token check.
//
// Internal header. Pure functions and small classes without I/O, driven by fuzz/http_input_fuzz.cc.
#ifndef NEARDUP_SERVICE_HTTP_INPUT_H_
#define NEARDUP_SERVICE_HTTP_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  // `limit_name` names the limit in the error message (the server option that sets it).
  Status Init(std::string_view content_encoding, size_t max_bytes,
              std::string_view limit_name = "max_body_bytes");
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
  std::string limit_name_;
  uint64_t received_ = 0;
  Status error_;
};

// One header field as received: the name as sent, the value without surrounding whitespace.
using HeaderField = std::pair<std::string, std::string>;

// Why a request head is refused before anything acts on it: the HTTP status (400 malformed, 501
// an unknown transfer coding) and a message naming the field. The connection is then closed.
struct HeadRefusal {
  int status = 400;
  std::string message;
};

// The framing rules of RFC 9112 that an HTTP parser may leave to its caller, checked on a request
// head that already parsed (field names are tokens, values hold no control characters):
// - Content-Length: at most one field, its value digits only ("44, 44" and a repeated field are
//   refused: a proxy in front may have used another one);
// - Transfer-Encoding: only in HTTP/1.1, never with Content-Length, its last coding "chunked"
//   (else 400) and no other coding (else 501, none is implemented);
// - Host: exactly one in HTTP/1.1, at most one in HTTP/1.0;
// - `raw_head` (the bytes of the request line and fields, up to the empty line) holds no obs-fold
//   (a field line continued on the next line by leading whitespace).
// nullopt: the head may be served.
std::optional<HeadRefusal> CheckRequestHead(int version, const std::vector<HeaderField>& fields,
                                            std::string_view raw_head);

// The request target "/path?query", decoded: the path with its percent-escapes decoded, and each
// query parameter (name and value percent-decoded, '+' as a space). InvalidArgument, naming the
// part, for a bad escape ("%4G", "%"), a decoded NUL or invalid UTF-8, a parameter named twice
// ("k=3&k=4": which one counts would be a guess), or a target that is neither origin form ("/...")
// nor absolute form ("http://host/...", whose path is used).
struct RequestTarget {
  std::string path;
  std::vector<std::pair<std::string, std::string>> params;
  // The value of parameter `name`, or nullopt.
  std::optional<std::string> Param(std::string_view name) const;
};
Result<RequestTarget> ParseRequestTarget(std::string_view target);

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
// The token of the file at `path` (TokenFromFileContents); `*stripped_cr` as there. Errors name
// the file: InvalidArgument "PATH: cannot read the token file" or "PATH: token: ...".
Result<std::string> ReadTokenFile(const std::string& path, bool* stripped_cr);

}  // namespace neardup::service

#endif  // NEARDUP_SERVICE_HTTP_INPUT_H_
