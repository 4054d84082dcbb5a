// The HTTP/1.1 transport of the neardup service: accepts connections, parses requests strictly
// (Boost.Beast's parser plus the framing rules of http_input.h; anything ambiguous is refused
// with 400 and the connection closed, before any handler runs), enforces every deadline and
// byte limit whatever the pace or encoding of a request, and writes replies. It knows nothing of
// the neardup API: an HttpApplication (the server's handlers) admits each request from its head
// and answers it once its body is read.
//
// Internal header. Connections are multiplexed over `threads` Asio threads (epoll), one strand per
// connection; an idle connection holds a socket and a few hundred bytes, no buffer and no thread.
#ifndef NEARDUP_SERVICE_HTTP_TRANSPORT_H_
#define NEARDUP_SERVICE_HTTP_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/status.h"
#include "service/http_input.h"

namespace neardup::service {

// A reply as a handler builds it.
struct Reply {
  int status = 200;
  std::string body;
  const char* content_type = "application/json";
  bool www_authenticate = false;
  bool close = false;  // close the connection after this reply

  void Json(int code, std::string json) {
    status = code;
    body = std::move(json);
  }
  void Error(int code, std::string_view name, std::string_view message);
  void Error(const Status& s);
};

// The JSON error body {"error":{"code":..,"message":..}}.
std::string ErrorJson(std::string_view code, std::string_view message);
// The HTTP status for a Status code (400, 404, 409, 413, 501, 500).
int HttpStatusFor(StatusCode code);

// One request, from its head to its reply. The transport fills the head fields and the body; the
// application's fields are set by Admit.
struct HttpRequest {
  std::string method;
  int version = 11;  // 10 or 11
  RequestTarget target;
  std::vector<HeaderField> headers;
  std::chrono::steady_clock::time_point start;  // first byte of the request
  BodyDecoder body;                             // Init'ed by Admit

  // The first value of header `name` (case-insensitive), or nullopt; HeaderCount counts them.
  std::optional<std::string> Header(std::string_view name) const;
  int HeaderCount(std::string_view name) const;
  std::optional<std::string> Param(std::string_view name) const { return target.Param(name); }

  // Set by the application.
  int endpoint = -1;
  std::string path_id;
};

// How a request ended, for the application's metrics.
enum class RequestOutcome {
  kReplied,     // a reply was written (or the write began before the connection went)
  kIncomplete,  // its head never completed or was refused as malformed by the transport
  kAborted,     // admitted, but the connection was lost before the reply
};

class HttpApplication {
 public:
  virtual ~HttpApplication() = default;
  // The head is complete and passed the framing rules: route, authenticate and Init the body
  // decoder (encoding, limit). False refuses the request with `reply`; its body is never read and
  // the connection is closed.
  virtual bool Admit(HttpRequest* request, Reply* reply) = 0;
  // The body is complete and decoded. Must call `done` exactly once, from any thread.
  virtual void Handle(std::shared_ptr<HttpRequest> request, std::function<void(Reply)> done) = 0;
  // Every request that started, once it ends; `request` is null for one whose head never parsed.
  virtual void Finished(const HttpRequest* request, int status, RequestOutcome outcome) = 0;
};

struct TransportOptions {
  int threads = 1;
  unsigned max_connections = 1024;
  int request_timeout_seconds = 30;   // first byte of a request to its reply's last byte
  int idle_timeout_seconds = 60;      // between requests
  size_t max_head_bytes = 32u << 10;  // request line and fields (431/414 past it)
  // Bytes held across all connections for request bodies being read and replies not yet written;
  // a request that would take more is answered 503 (and its connection closed).
  size_t max_buffered_bytes = 256u << 20;
  // Bytes of a refused request's body read and thrown away after its reply, so that the client
  // sees the reply rather than a reset; then the connection is closed.
  size_t linger_bytes = 1u << 20;
};

struct TransportCounters {
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> open_connections{0};
  std::atomic<uint64_t> timeouts_total{0};
  std::atomic<uint64_t> malformed_total{0};  // heads refused with 400/501/431/414
  std::atomic<uint64_t> body_bytes_total{0};
  std::atomic<uint64_t> buffered_bytes{0};     // gauge
  std::atomic<uint64_t> buffer_full_total{0};  // 503s for max_buffered_bytes
};

class HttpTransport {
 public:
  HttpTransport(HttpApplication* app, TransportOptions options);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Serves connections accepted on `listen_fd` (bound and listening, non-blocking) on the
  // transport's threads. Returns at once.
  Status Start(int listen_fd);
  // Stops accepting (closes the listening socket), closes idle connections, and marks every later
  // reply `Connection: close`.
  void Quiesce();
  // Requests between their first byte and their reply (or loss).
  int64_t in_flight() const { return in_flight_.load(); }
  // Closes every connection and joins the threads.
  void Stop();
  // Takes `bytes` from the buffer budget (max_buffered_bytes) for a handler's working memory;
  // false (nothing taken, counted in buffer_full_total) if that would pass the budget. Release
  // gives them back.
  bool Reserve(size_t bytes);
  void Release(size_t bytes);
  const TransportCounters& counters() const { return counters_; }

 private:
  friend class Session;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<int64_t> in_flight_{0};
  TransportCounters counters_;
};

}  // namespace neardup::service

#endif  // NEARDUP_SERVICE_HTTP_TRANSPORT_H_
