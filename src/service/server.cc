// HTTP transport (libmicrohttpd: epoll polling threads, per-connection state, whole-request
// deadlines, body limits, auth from headers), handlers, error mapping and Prometheus metrics of
// the neardup service; see server.h and docs/api.md.
#include "neardup/server.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <simdjson.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "common/json_writer.h"
#include "common/parallel.h"
#include "service/http_input.h"
#include "service/request_parser.h"
#include "store/stats_json.h"

namespace neardup::service {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// kUnrouted: unknown path or method (404/405) and requests refused before routing.
enum Endpoint {
  kAdd,
  kCheck,
  kQuery,
  kGet,
  kDelete,
  kStats,
  kHealth,
  kMetrics,
  kUnrouted,
  kEndpointCount
};
constexpr std::array<const char*, kEndpointCount> kEndpointNames = {
    "add", "check", "query", "get", "delete", "stats", "healthz", "metrics", "none"};
constexpr std::array<double, 12> kLatencyBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                    0.01,   0.025,   0.05,   0.1,   0.5,    2.5};

struct EndpointMetrics {
  std::atomic<uint64_t> by_class[6] = {};  // index = status / 100
  std::atomic<uint64_t> buckets[kLatencyBuckets.size()] = {};
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> micros_sum{0};
};

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kInvalidUtf8:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kUnsupported:
      return 501;
    default:
      return 500;
  }
}

std::string ErrorJson(std::string_view code, std::string_view message) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("error").BeginObject().Key("code").String(code).Key("message").String(
      message);
  w.EndObject().EndObject();
  return out;
}

// A response being built by a handler.
struct Reply {
  int status = 200;
  std::string body;
  const char* content_type = "application/json";
  bool www_authenticate = false;

  void Json(int code, std::string json) {
    status = code;
    body = std::move(json);
  }
  void Error(int code, std::string_view name, std::string_view message) {
    Json(code, ErrorJson(name, message));
  }
  void Error(const Status& s) {
    Error(HttpStatusFor(s.code()), StatusCodeName(s.code()), s.message());
  }
};

// Writes stored metadata: raw if it is valid JSON (as the server stores it), else as a string.
void WriteMetadata(JsonWriter& w, std::string_view metadata) {
  if (metadata.empty()) {
    w.Null();
    return;
  }
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element element;
  if (parser.parse(metadata.data(), metadata.size(), true).get(element) == simdjson::SUCCESS) {
    w.Raw(metadata);
  } else {
    w.String(metadata);
  }
}

void WriteDocument(JsonWriter& w, const StoredDocument& doc, bool with_distance) {
  w.BeginObject().Key("id").String(doc.id).Key("fingerprint").String(ToHex(doc.fingerprint));
  if (with_distance) w.Key("distance").Int(doc.distance);
  w.Key("metadata");
  WriteMetadata(w, doc.metadata);
  w.EndObject();
}

// The store's health as the server reports it. DocumentStore::Health() (issue 10's store health
// API) is used when the store has it; a store without that API always reports "ok".
struct HealthView {
  std::string state = "ok";
  std::string reason;
  uint64_t write_errors = 0;
  uint64_t recoveries = 0;
  bool known = false;  // the store reports its health
};

template <typename Store>
HealthView HealthOf(const Store& store) {
  HealthView view;
  if constexpr (requires { store.Health(); }) {
    const auto health = store.Health();
    view.state = StoreStateName(health.state);
    view.reason = health.reason;
    view.write_errors = health.write_errors;
    view.recoveries = health.recoveries;
    view.known = true;
  }
  return view;
}

struct Request;

// Per-connection state (MHD's socket context). The watchdog reads the atomics from its own thread.
struct Connection {
  int fd = -1;
  std::atomic<int64_t> phase_start_ns{0};  // connection start, request line, or last response
  std::atomic<bool> in_request{false};
  std::atomic<bool> timed_out{false};
  Request* current = nullptr;  // the request being read (connection thread only)
};

// Per-request state (MHD's con_cls), created when the request line arrives.
struct Request {
  Connection* connection = nullptr;
  Clock::time_point start = Clock::now();
  Endpoint endpoint = kUnrouted;
  bool handler_called = false;
  bool responded = false;
  int status = 0;
  std::string path_id;  // the decoded id of /v1/documents/<id>
  BodyDecoder body;
  Status body_error;
  uint64_t discarded = 0;   // body bytes received after body_error
  bool dispatched = false;  // handed to a handler (possibly on a worker)
};

// Body bytes read and thrown away after a request failed its limit, so that it can still get its
// 413; past this the connection is dropped instead.
constexpr uint64_t kDiscardBudget = 4u << 20;

// Threads that run the store-touching handlers, so that a slow request (an fsync on a busy disk, a
// scan with a large k) holds a worker, never a polling thread that other connections share. The
// queue is bounded: past `max_queue` waiting jobs, TrySubmit refuses (the client gets 503).
class WorkerPool {
 public:
  WorkerPool(int threads, size_t max_queue) : max_queue_(max_queue) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~WorkerPool() { Stop(); }
  bool TrySubmit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_ || jobs_.size() >= max_queue_) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }
  // Runs every queued job, then joins the threads.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stopped_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  const size_t max_queue_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

struct Server::Impl {
  DocumentStore* store;
  const Fingerprinter* fingerprinter;
  ServerOptions options;
  std::unique_ptr<TokenChecker> token;
  int listen_fd = -1;
  int bound_port = -1;
  MHD_Daemon* daemon = nullptr;
  Clock::time_point started = Clock::now();

  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stop_requested = false;
  std::atomic<bool> stopping{false};

  std::mutex connections_mutex;
  std::unordered_set<Connection*> connections;  // guarded by connections_mutex
  std::thread watchdog;
  std::atomic<int64_t> in_flight{0};
  std::unique_ptr<WorkerPool> workers;
  int store_indexed_k = 0;  // queries up to this k use the permuted tables (answered inline)
  std::atomic<uint64_t> overloaded_total{0};

  std::array<EndpointMetrics, kEndpointCount> metrics;
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> timeouts_total{0};
  std::atomic<uint64_t> incomplete_total{0};  // request line seen, never reached a handler
  std::atomic<uint64_t> aborted_total{0};     // reached a handler, connection lost before a reply
  std::atomic<uint64_t> body_bytes_total{0};

  // ---- transport ------------------------------------------------------------------------------

  static MHD_Result Access(void* cls, MHD_Connection* c, const char* url, const char* method,
                           const char*, const char* upload_data, size_t* upload_data_size,
                           void** con_cls) {
    return static_cast<Impl*>(cls)->OnAccess(c, url, method, upload_data, upload_data_size,
                                             con_cls);
  }

  static void* UriLog(void* cls, const char*, MHD_Connection* c) {
    Impl* impl = static_cast<Impl*>(cls);
    auto* request = new Request();
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    Connection* conn = info != nullptr ? static_cast<Connection*>(info->socket_context) : nullptr;
    if (conn != nullptr) {
      if (conn->current != nullptr) {
        // Not expected (one request at a time per connection): a request that reached the
        // handler is freed by Completed, one that did not is freed here.
        if (conn->current->handler_called) {
          conn->current->connection = nullptr;
        } else {
          impl->FinishRequest(conn->current);
        }
      }
      conn->current = request;
      request->connection = conn;
      conn->phase_start_ns.store(NowNanos());
      conn->in_request.store(true);
    }
    return request;
  }

  static void Completed(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    auto* request = static_cast<Request*>(*con_cls);
    *con_cls = nullptr;
    if (request != nullptr) static_cast<Impl*>(cls)->FinishRequest(request);
  }

  static void ConnectionEvent(void* cls, MHD_Connection* c, void** socket_context,
                              MHD_ConnectionNotificationCode code) {
    Impl* impl = static_cast<Impl*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      auto* conn = new Connection();
      const MHD_ConnectionInfo* info =
          MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
      conn->fd = info != nullptr ? info->connect_fd : -1;
      conn->phase_start_ns.store(NowNanos());
      *socket_context = conn;
      impl->connections_total.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(impl->connections_mutex);
      impl->connections.insert(conn);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
      auto* conn = static_cast<Connection*>(*socket_context);
      if (conn == nullptr) return;
      *socket_context = nullptr;
      // Called before MHD closes the descriptor, so the watchdog (which holds the mutex while it
      // shuts sockets down) never touches a reused descriptor.
      {
        std::lock_guard<std::mutex> lock(impl->connections_mutex);
        impl->connections.erase(conn);
      }
      if (conn->current != nullptr) impl->FinishRequest(conn->current);
      delete conn;
    }
  }

  // Records a finished request in the metrics and frees it: one that never reached the handler
  // counts as incomplete, one that reached it without a reply as aborted.
  void FinishRequest(Request* request) {
    Connection* conn = request->connection;
    if (conn != nullptr && conn->current == request) {
      conn->current = nullptr;
      conn->in_request.store(false);
      conn->phase_start_ns.store(NowNanos());
    }
    if (request->handler_called) in_flight.fetch_sub(1);
    if (!request->handler_called) {
      incomplete_total.fetch_add(1, std::memory_order_relaxed);
    } else if (!request->responded) {
      aborted_total.fetch_add(1, std::memory_order_relaxed);
    } else {
      const double seconds = std::chrono::duration<double>(Clock::now() - request->start).count();
      EndpointMetrics& m = metrics[request->endpoint];
      m.by_class[std::min(5, std::max(0, request->status / 100))].fetch_add(
          1, std::memory_order_relaxed);
      for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
        if (seconds <= kLatencyBuckets[b]) {
          m.buckets[b].fetch_add(1, std::memory_order_relaxed);
          break;
        }
      }
      m.count.fetch_add(1, std::memory_order_relaxed);
      m.micros_sum.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
    }
    delete request;
  }

  // Queues `reply`; false if MHD refused it (the connection is then closed).
  // `close`: the request was refused before its whole body was read, so the connection cannot
  // carry another request.
  bool Respond(MHD_Connection* c, Request* request, const Reply& reply, bool close = false) {
    MHD_Response* response = MHD_create_response_from_buffer(
        reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return false;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.content_type);
    if (reply.www_authenticate) {
      MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    }
    if (close || stopping.load()) {
      MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    const MHD_Result queued =
        MHD_queue_response(c, static_cast<unsigned int>(reply.status), response);
    MHD_destroy_response(response);
    request->responded = queued == MHD_YES;
    request->status = reply.status;
    return queued == MHD_YES;
  }

  static std::optional<std::string> Header(MHD_Connection* c, const char* name) {
    const char* value = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  }

  static std::optional<std::string> Arg(MHD_Connection* c, const char* name) {
    const char* value = nullptr;
    size_t size = 0;
    if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, name, std::strlen(name), &value,
                                      &size) != MHD_YES) {
      return std::nullopt;
    }
    return value == nullptr ? std::string() : std::string(value, size);
  }

  // Routes the request; sets `write` (needs the token) and the endpoint. False: 404/405 reply set.
  bool Route(std::string_view method, std::string_view url, Request* request, bool* write,
             Reply* reply) {
    constexpr std::string_view kDocs = "/v1/documents";
    const bool get = method == "GET", post = method == "POST", del = method == "DELETE";
    auto allow = [&](bool ok, Endpoint e, bool w) {
      if (!ok) {
        reply->Error(405, "HttpError",
                     "method not allowed: " + std::string(method) + " " + std::string(url));
        return false;
      }
      request->endpoint = e;
      *write = w;
      return true;
    };
    if (url == kDocs) {
      if (post) return allow(true, kAdd, true);
      if (del) return allow(true, kDelete, true);
      return allow(get, kGet, false);
    }
    if (url.size() > kDocs.size() + 1 && url.substr(0, kDocs.size() + 1) == "/v1/documents/") {
      request->path_id = std::string(url.substr(kDocs.size() + 1));
      if (del) return allow(true, kDelete, true);
      return allow(get, kGet, false);
    }
    if (url == "/v1/check") return allow(post, kCheck, true);
    if (url == "/v1/query") return allow(get || post, kQuery, false);
    if (url == "/v1/stats") return allow(get, kStats, false);
    if (url == "/healthz") return allow(get, kHealth, false);
    if (url == "/metrics") return allow(get, kMetrics, false);
    reply->Error(404, "NotFound",
                 "no such endpoint: " + std::string(method) + " " + std::string(url));
    return false;
  }

  static MHD_Result CountAuthorization(void* cls, MHD_ValueKind, const char* key, const char*) {
    if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0) ++*static_cast<int*>(cls);
    return MHD_YES;
  }

  // The first call for a request: headers only. Decides routing, auth and body limits before
  // any body byte is read. Returns false if a reply was set (the request is refused).
  bool Admit(MHD_Connection* c, const char* url, const char* method, Request* request,
             Reply* reply) {
    bool write = false;
    if (!Route(method, url, request, &write, reply)) return false;
    int authorization_headers = 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND, &CountAuthorization, &authorization_headers);
    if (authorization_headers > 1) {
      reply->Error(400, "InvalidArgument", "Authorization: given more than once");
      return false;
    }
    if (token != nullptr && (write || options.auth_reads)) {
      const std::optional<std::string> value = Header(c, MHD_HTTP_HEADER_AUTHORIZATION);
      if (!value.has_value() || !token->Matches(*value)) {
        reply->Error(401, "Unauthenticated", "missing or wrong bearer token");
        reply->www_authenticate = true;
        return false;
      }
    }
    if (const auto length = Header(c, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long n = std::strtoull(length->c_str(), &end, 10);
      if (errno == ERANGE || n > options.max_body_bytes) {
        reply->Error(413, "ResourceExhausted",
                     "body: Content-Length " + *length + " exceeds the limit of " +
                         std::to_string(options.max_body_bytes) +
                         " bytes (the server's max_body_bytes)");
        return false;
      }
    }
    const Status init = request->body.Init(Header(c, MHD_HTTP_HEADER_CONTENT_ENCODING).value_or(""),
                                           options.max_body_bytes);
    if (!init.ok()) {
      reply->Error(415, "Unsupported", init.message());
      return false;
    }
    return true;
  }

  MHD_Result OnAccess(MHD_Connection* c, const char* url, const char* method,
                      const char* upload_data, size_t* upload_data_size, void** con_cls) {
    auto* request = static_cast<Request*>(*con_cls);
    if (request == nullptr) {  // no URI log callback call (should not happen)
      request = new Request();
      *con_cls = request;
    }
    if (!request->handler_called) {
      request->handler_called = true;
      in_flight.fetch_add(1);
      Reply reply;
      if (!Admit(c, url, method, request, &reply)) {
        return Respond(c, request, reply, /*close=*/true) ? MHD_YES : MHD_NO;
      }
      return MHD_YES;
    }
    if (*upload_data_size > 0) {
      // A request refused from its headers never has its body read: close the connection.
      if (request->responded) return MHD_NO;
      body_bytes_total.fetch_add(*upload_data_size, std::memory_order_relaxed);
      if (request->body_error.ok()) {
        request->body_error = request->body.Append(upload_data, *upload_data_size);
      } else {
        // Past the limit (or a damaged stream): MHD cannot reply before the body ends, so the
        // rest is discarded unread-into-memory, up to kDiscardBudget; a body that goes on longer
        // gets its connection dropped.
        request->discarded += *upload_data_size;
        if (request->discarded > kDiscardBudget) return MHD_NO;
      }
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (request->responded || request->dispatched) return MHD_YES;
    request->dispatched = true;
    Reply reply;
    Status finished = request->body_error.ok() ? request->body.Finish() : request->body_error;
    if (!finished.ok()) {
      reply.Error(finished);
      if (finished.code() == StatusCode::kUnsupported) reply.status = 415;
      return Respond(c, request, reply, /*close=*/!request->body_error.ok()) ? MHD_YES : MHD_NO;
    }
    if (workers == nullptr || RunsInline(c, request)) {
      Dispatch(c, request, &reply);
      return Respond(c, request, reply) ? MHD_YES : MHD_NO;
    }
    // Store work runs on a worker; the connection is suspended meanwhile (MHD accepts a reply for
    // a suspended connection from any thread) and resumed once the reply is queued.
    MHD_suspend_connection(c);
    const bool submitted = workers->TrySubmit([this, c, request] {
      Reply worker_reply;
      Dispatch(c, request, &worker_reply);
      Respond(c, request, worker_reply);
      MHD_resume_connection(c);
    });
    if (!submitted) {
      MHD_resume_connection(c);
      overloaded_total.fetch_add(1, std::memory_order_relaxed);
      reply.Error(503, "Unavailable", "server overloaded: too many requests waiting, retry later");
      return Respond(c, request, reply) ? MHD_YES : MHD_NO;
    }
    return MHD_YES;
  }

  // Whether a request is cheap and bounded enough to answer on the polling thread, skipping the
  // hand-off to a worker: health, metrics, stats, gets, and fingerprint queries that the permuted
  // tables answer (k <= the store's indexed_k). Text (fingerprinting), writes (fsync) and scans go
  // to the workers.
  bool RunsInline(MHD_Connection* c, const Request* request) const {
    switch (request->endpoint) {
      case kHealth:
      case kMetrics:
      case kStats:
      case kGet:
      case kUnrouted:
        return true;
      case kQuery: {
        const std::string& body = request->body.body();
        if (Arg(c, "fingerprint") || Arg(c, "text") || body.empty()) {
          if (Arg(c, "text") || !Arg(c, "fingerprint")) return false;
          const std::optional<std::string> k = Arg(c, "k");
          return !k.has_value() || (k->size() <= 2 && std::atoi(k->c_str()) <= store_indexed_k);
        }
        Result<QueryRequest> query = ParseQueryRequest(body, options.limits);
        return query.ok() && query->fingerprint.has_value() && query->k <= store_indexed_k;
      }
      default:
        return false;
    }
  }

  // Closes connections past their deadline: in a request, `request_timeout` from its request
  // line; between requests, the idle timeout plus `request_timeout` (a request line trickled in
  // byte by byte keeps a connection "idle" for MHD's inactivity timer, not for this one).
  void WatchdogLoop() {
    const int64_t request_ns = int64_t(options.request_timeout_seconds) * 1000000000;
    const int64_t idle_ns = int64_t(options.idle_timeout_seconds) * 1000000000 + request_ns;
    std::unique_lock<std::mutex> stop_lock(stop_mutex);
    while (!stop_cv.wait_for(stop_lock, std::chrono::milliseconds(200),
                             [&] { return watchdog_done; })) {
      stop_lock.unlock();
      const int64_t now = NowNanos();
      {
        std::lock_guard<std::mutex> lock(connections_mutex);
        for (Connection* conn : connections) {
          if (conn->timed_out.load() || conn->fd < 0) continue;
          const int64_t limit = conn->in_request.load() ? request_ns : idle_ns;
          if (now - conn->phase_start_ns.load() > limit) {
            conn->timed_out.store(true);
            timeouts_total.fetch_add(1, std::memory_order_relaxed);
            ::shutdown(conn->fd, SHUT_RDWR);  // MHD sees the hang-up and closes the connection
          }
        }
      }
      stop_lock.lock();
    }
  }
  bool watchdog_done = false;  // guarded by stop_mutex

  // ---- handlers -------------------------------------------------------------------------------

  void Dispatch(MHD_Connection* c, Request* request, Reply* reply) {
    const std::string& body = request->body.body();
    switch (request->endpoint) {
      case kAdd:
        return HandleAdd(body, reply);
      case kCheck:
        return HandleCheck(body, reply);
      case kQuery:
        if (Arg(c, "fingerprint") || Arg(c, "text") || body.empty()) {
          return HandleQueryGet(c, reply);
        }
        return HandleQueryPost(body, reply);
      case kGet:
        return HandleGet(c, request, reply);
      case kDelete:
        return HandleDelete(c, request, reply);
      case kStats:
        return HandleStats(reply);
      case kHealth:
        return HandleHealth(reply);
      case kMetrics:
        return HandleMetrics(reply);
      default:
        return reply->Error(404, "NotFound", "no such endpoint");
    }
  }

  // The fingerprint of a document/query given as text or fingerprint.
  Result<Fingerprint> Resolve(const std::optional<std::string>& text,
                              const std::optional<Fingerprint>& fingerprint,
                              const std::string& field) const {
    if (fingerprint.has_value()) return *fingerprint;
    if (fingerprinter == nullptr) {
      return Status::Unsupported(field + "text: this server has no text fingerprinter");
    }
    Result<Fingerprint> fp = fingerprinter->Compute(*text);
    if (!fp.ok()) return fp.status().WithContext(field + "text");
    return fp;
  }

  void HandleAdd(const std::string& body, Reply* reply) {
    Result<AddRequest> request = ParseAddRequest(body, options.limits);
    if (!request.ok()) return reply->Error(request.status());
    std::vector<Fingerprint> fps(request->documents.size());
    for (size_t i = 0; i < fps.size(); ++i) {
      const DocumentRequest& doc = request->documents[i];
      Result<Fingerprint> fp =
          Resolve(doc.text, doc.fingerprint, "documents[" + std::to_string(i) + "].");
      if (!fp.ok()) return reply->Error(fp.status());
      fps[i] = *fp;
    }
    std::vector<DocumentInput> inputs;
    inputs.reserve(fps.size());
    for (size_t i = 0; i < fps.size(); ++i) {
      const DocumentRequest& doc = request->documents[i];
      inputs.push_back({doc.id, fps[i], doc.metadata_json});
    }
    Status status = store->AddBatch(inputs);
    if (!status.ok()) return reply->Error(status);
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("added").Uint(inputs.size()).Key("fingerprints").BeginArray();
    for (const Fingerprint& fp : fps) w.String(ToHex(fp));
    w.EndArray().EndObject();
    reply->Json(200, std::move(out));
  }

  void HandleCheck(const std::string& body, Reply* reply) {
    Result<CheckRequest> request = ParseCheckRequest(body, options.limits);
    if (!request.ok()) return reply->Error(request.status());
    const DocumentRequest& doc = request->document;
    Result<Fingerprint> fp = Resolve(doc.text, doc.fingerprint, "");
    if (!fp.ok()) return reply->Error(fp.status());
    CheckResult result;
    if (request->add == AddMode::kNever) {
      Result<std::vector<StoredDocument>> found = store->Search(*fp, request->k);
      if (!found.ok()) return reply->Error(found.status());
      for (StoredDocument& d : *found) {
        if (d.id != doc.id) result.duplicates.push_back(std::move(d));
      }
    } else {
      Result<CheckResult> checked = store->CheckAndAdd({doc.id, *fp, doc.metadata_json}, request->k,
                                                       request->add == AddMode::kAlways);
      if (!checked.ok()) return reply->Error(checked.status());
      result = std::move(*checked);
    }
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("id").String(doc.id).Key("fingerprint").String(ToHex(*fp));
    w.Key("duplicate").Bool(!result.duplicates.empty());
    w.Key("added").Bool(result.added).Key("replaced").Bool(result.replaced);
    w.Key("duplicates").BeginArray();
    for (const StoredDocument& d : result.duplicates) WriteDocument(w, d, true);
    w.EndArray().EndObject();
    reply->Json(200, std::move(out));
  }

  void Query(const QueryRequest& request, Reply* reply) {
    Result<Fingerprint> fp = Resolve(request.text, request.fingerprint, "");
    if (!fp.ok()) return reply->Error(fp.status());
    Result<std::vector<StoredDocument>> found = store->Search(*fp, request.k, request.limit);
    if (!found.ok()) return reply->Error(found.status());
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("fingerprint").String(ToHex(*fp)).Key("k").Int(request.k);
    w.Key("results").BeginArray();
    for (const StoredDocument& d : *found) WriteDocument(w, d, true);
    w.EndArray().EndObject();
    reply->Json(200, std::move(out));
  }

  static MHD_Result FindUnknownParam(void* cls, MHD_ValueKind, const char* key, const char*) {
    const std::string_view name(key);
    if (name != "fingerprint" && name != "text" && name != "k" && name != "limit") {
      *static_cast<std::string*>(cls) = name;
      return MHD_NO;
    }
    return MHD_YES;
  }

  void HandleQueryGet(MHD_Connection* c, Reply* reply) {
    std::string unknown;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, &FindUnknownParam, &unknown);
    if (!unknown.empty()) {
      return reply->Error(Status::InvalidArgument(unknown + ": unknown parameter"));
    }
    Result<QueryRequest> request = ParseQueryParams(Arg(c, "fingerprint"), Arg(c, "text"),
                                                    Arg(c, "k"), Arg(c, "limit"), options.limits);
    if (!request.ok()) return reply->Error(request.status());
    Query(*request, reply);
  }

  void HandleQueryPost(const std::string& body, Reply* reply) {
    Result<QueryRequest> request = ParseQueryRequest(body, options.limits);
    if (!request.ok()) return reply->Error(request.status());
    Query(*request, reply);
  }

  // The id from /v1/documents/<id> (URL-decoded) or ?id=.
  static Result<std::string> IdOf(MHD_Connection* c, const Request* request) {
    if (!request->path_id.empty()) return request->path_id;
    if (auto id = Arg(c, "id"); id.has_value() && !id->empty()) return *id;
    return Status::InvalidArgument("id: missing (use /v1/documents/<id> or ?id=)");
  }

  void HandleGet(MHD_Connection* c, const Request* request, Reply* reply) {
    Result<std::string> id = IdOf(c, request);
    if (!id.ok()) return reply->Error(id.status());
    Result<StoredDocument> doc = store->Get(*id);
    if (!doc.ok()) return reply->Error(doc.status());
    std::string out;
    JsonWriter w(&out);
    WriteDocument(w, *doc, false);
    reply->Json(200, std::move(out));
  }

  void HandleDelete(MHD_Connection* c, const Request* request, Reply* reply) {
    Result<std::string> id = IdOf(c, request);
    if (!id.ok()) return reply->Error(id.status());
    Status status = store->Remove(*id);
    if (!status.ok()) return reply->Error(status);
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("id").String(*id).Key("deleted").Bool(true).EndObject();
    reply->Json(200, std::move(out));
  }

  void HandleStats(Reply* reply) {
    const StoreStats s = store->Stats();
    std::string out;
    JsonWriter w(&out);
    w.BeginObject();
    WriteStoreStatsFields(s, &w);
    w.Key("uptime_seconds").Double(std::chrono::duration<double>(Clock::now() - started).count());
    w.EndObject();
    reply->Json(200, std::move(out));
  }

  // 200 {"status":"ok"}; 503 with the reason while the store is degraded (a write failed, e.g.
  // disk full; reads still work and writes retry) or closed.
  void HandleHealth(Reply* reply) {
    const HealthView health = HealthOf(*store);
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("status").String(health.state);
    if (health.state != "ok") w.Key("reason").String(health.reason);
    if (health.known) {
      w.Key("write_errors").Uint(health.write_errors).Key("recoveries").Uint(health.recoveries);
    }
    w.EndObject();
    reply->Json(health.state == "ok" ? 200 : 503, std::move(out));
  }

  void HandleMetrics(Reply* reply) {
    const StoreStats s = store->Stats();
    std::string out;
    auto gauge = [&](const char* name, const char* help, const char* type, double value) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
             name + " ";
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.17g\n", value);
      out += buf;
    };
    gauge("neardup_documents", "Live documents in the store.", "gauge", double(s.documents));
    gauge("neardup_segments", "Segment files.", "gauge", double(s.segments));
    gauge("neardup_memtable_entries", "Entries not yet in a segment.", "gauge",
          double(s.memtable_entries));
    gauge("neardup_disk_bytes", "Bytes of segment files and the log.", "gauge",
          double(s.disk_bytes));
    gauge("neardup_wal_syncs_total", "fdatasync calls on the log.", "counter", double(s.wal_syncs));
    gauge("neardup_writes_total", "Adds and removes acknowledged.", "counter", double(s.writes));
    gauge("neardup_flushes_total", "Memtable flushes.", "counter", double(s.flushes));
    gauge("neardup_compactions_total", "Compactions finished.", "counter", double(s.compactions));
    const HealthView health = HealthOf(*store);
    gauge("neardup_store_healthy", "1 if the store takes writes, 0 if degraded or closed.", "gauge",
          health.state == "ok" ? 1 : 0);
    gauge("neardup_store_write_errors_total", "Failed store writes (log, segment, MANIFEST).",
          "counter", double(health.write_errors));
    gauge("neardup_store_recoveries_total", "Times store writes worked again after a failure.",
          "counter", double(health.recoveries));
    size_t open_connections;
    {
      std::lock_guard<std::mutex> lock(connections_mutex);
      open_connections = connections.size();
    }
    gauge("neardup_http_open_connections", "Open client connections.", "gauge",
          double(open_connections));
    gauge("neardup_http_connections_total", "Client connections accepted.", "counter",
          double(connections_total.load()));
    gauge("neardup_http_timeouts_total",
          "Connections closed for exceeding the request or idle deadline.", "counter",
          double(timeouts_total.load()));
    gauge("neardup_http_incomplete_requests_total",
          "Requests whose headers never completed (malformed or oversized headers, answered by "
          "the HTTP layer, or the client left or timed out).",
          "counter", double(incomplete_total.load()));
    gauge("neardup_http_aborted_requests_total",
          "Requests dropped before a reply (the client left, or its body was cut off).", "counter",
          double(aborted_total.load()));
    gauge("neardup_http_body_bytes_total", "Request body bytes received.", "counter",
          double(body_bytes_total.load()));
    gauge("neardup_http_overloaded_total",
          "Requests refused with 503 because the worker queue was full.", "counter",
          double(overloaded_total.load()));
    out +=
        "# HELP neardup_http_requests_total HTTP responses by endpoint and status class "
        "(endpoint \"none\": unknown path or method).\n"
        "# TYPE neardup_http_requests_total counter\n";
    for (int e = 0; e < kEndpointCount; ++e) {
      for (int c = 1; c <= 5; ++c) {
        uint64_t n = metrics[e].by_class[c].load();
        if (n == 0) continue;
        out += std::string("neardup_http_requests_total{endpoint=\"") + kEndpointNames[e] +
               "\",code=\"" + std::to_string(c) + "xx\"} " + std::to_string(n) + "\n";
      }
    }
    out +=
        "# HELP neardup_http_request_duration_seconds Request time from the request line to the "
        "reply.\n"
        "# TYPE neardup_http_request_duration_seconds histogram\n";
    for (int e = 0; e < kEndpointCount; ++e) {
      const std::string label = std::string("endpoint=\"") + kEndpointNames[e] + "\"";
      uint64_t cumulative = 0;
      char le[32];
      for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
        cumulative += metrics[e].buckets[b].load();
        std::snprintf(le, sizeof(le), "%g", kLatencyBuckets[b]);
        out += "neardup_http_request_duration_seconds_bucket{" + label + ",le=\"" + le + "\"} " +
               std::to_string(cumulative) + "\n";
      }
      const uint64_t count = metrics[e].count.load();
      out += "neardup_http_request_duration_seconds_bucket{" + label + ",le=\"+Inf\"} " +
             std::to_string(count) + "\n";
      char sum[64];
      std::snprintf(sum, sizeof(sum), "%.6f", double(metrics[e].micros_sum.load()) / 1e6);
      out += "neardup_http_request_duration_seconds_sum{" + label + "} " + sum + "\n";
      out += "neardup_http_request_duration_seconds_count{" + label + "} " + std::to_string(count) +
             "\n";
    }
    reply->status = 200;
    reply->body = std::move(out);
    reply->content_type = "text/plain; version=0.0.4";
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Server>> Server::Create(DocumentStore* store,
                                               const Fingerprinter* fingerprinter,
                                               ServerOptions options) {
  if (store == nullptr) return Status::InvalidArgument("server: no store");
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument("server: port " + std::to_string(options.port) +
                                   " is outside [0, 65535]");
  }
  if (options.threads < 0 || options.workers < 0 || options.max_connections < 0 ||
      options.request_timeout_seconds <= 0 || options.idle_timeout_seconds <= 0 ||
      options.shutdown_timeout_seconds < 0 || options.listen_backlog <= 0) {
    return Status::InvalidArgument(
        "server: thread, worker, connection and timeout options must not be negative (timeouts "
        "and the listen backlog must be positive)");
  }
  const RequestLimits& limits = options.limits;
  if ((limits.bits != 64 && limits.bits != 128) || limits.max_query_k < 0 ||
      limits.max_query_k > limits.bits || limits.default_k < 0 ||
      limits.default_k > limits.max_query_k) {
    return Status::InvalidArgument(
        "server: request limits need bits 64 or 128 and 0 <= default_k <= max_query_k <= bits");
  }
  auto impl = std::make_unique<Impl>();
  impl->store = store;
  impl->fingerprinter = fingerprinter;
  impl->options = std::move(options);
  impl->store_indexed_k = store->Stats().indexed_k;
  if (!impl->options.token.empty()) {
    impl->token = std::make_unique<TokenChecker>(impl->options.token);
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() {
  if (impl_->daemon != nullptr) MHD_stop_daemon(impl_->daemon);
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
}

Status Server::Bind() {
  const std::string& host = impl_->options.host;
  const std::string where = host + ":" + std::to_string(impl_->options.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  const std::string port = std::to_string(impl_->options.port);
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &addresses); rc != 0) {
    return Status::IoError(where + ": cannot resolve the address: " + gai_strerror(rc));
  }
  std::string error = "no usable address";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR only lets a restarted server bind over TIME_WAIT connections; on Linux it
    // never lets two sockets listen on one port (that is SO_REUSEPORT, deliberately not set).
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 ||
        ::listen(fd, impl_->options.listen_backlog) != 0) {
      error = errno == EADDRINUSE ? "address in use" : std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
    impl_->bound_port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    impl_->listen_fd = fd;
    break;
  }
  freeaddrinfo(addresses);
  if (impl_->listen_fd < 0) return Status::IoError(where + ": cannot listen: " + error);
  return Status::Ok();
}

int Server::port() const { return impl_->bound_port; }

Status Server::Run() {
  Impl* impl = impl_.get();
  if (impl->listen_fd < 0) NEARDUP_RETURN_IF_ERROR(Bind());
  const ServerOptions& o = impl->options;
  const unsigned threads = static_cast<unsigned>(o.threads > 0 ? o.threads : DefaultThreadCount());
  unsigned max_connections = static_cast<unsigned>(o.max_connections);
  if (max_connections == 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    const rlim_t reserve = 64;  // store files, log, pipes
    max_connections = limit.rlim_cur > reserve * 2 ? unsigned(limit.rlim_cur - reserve) : 64;
  }
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_LISTEN_SOCKET, impl->listen_fd, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, static_cast<intptr_t>(max_connections), nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, o.idle_timeout_seconds, nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(o.connection_memory_bytes),
       nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&Impl::Completed), impl},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&Impl::ConnectionEvent), impl},
      {MHD_OPTION_URI_LOG_CALLBACK, reinterpret_cast<intptr_t>(&Impl::UriLog), impl},
  };
  if (threads > 1) items.push_back({MHD_OPTION_THREAD_POOL_SIZE, threads, nullptr});
  items.push_back({MHD_OPTION_END, 0, nullptr});
  const int workers = o.workers > 0 ? o.workers : std::max(32, 8 * DefaultThreadCount());
  impl->workers = std::make_unique<WorkerPool>(workers, o.max_queued_requests);
  impl->daemon = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0,
                                  nullptr, nullptr, &Impl::Access, impl, MHD_OPTION_ARRAY,
                                  items.data(), MHD_OPTION_END);
  if (impl->daemon == nullptr) {
    return Status::IoError("port " + std::to_string(impl->bound_port) +
                           ": cannot start the HTTP service");
  }
  impl->watchdog = std::thread([impl] { impl->WatchdogLoop(); });
  {
    std::unique_lock<std::mutex> lock(impl->stop_mutex);
    impl->stop_cv.wait(lock, [impl] { return impl->stop_requested; });
  }
  // Drain: stop accepting (the listening socket is closed, so new connections are refused), let
  // in-flight requests finish for at most the shutdown timeout, then close every connection.
  const MHD_socket listen = MHD_quiesce_daemon(impl->daemon);
  if (listen != MHD_INVALID_SOCKET) ::close(listen);
  impl->listen_fd = -1;
  const auto deadline = Clock::now() + std::chrono::seconds(o.shutdown_timeout_seconds);
  while (impl->in_flight.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Jobs already on a worker finish (each is one store call) and resume their connections, so
  // no connection is left suspended when the daemon stops.
  impl->workers->Stop();
  MHD_stop_daemon(impl->daemon);
  impl->daemon = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl->stop_mutex);
    impl->watchdog_done = true;
  }
  impl->stop_cv.notify_all();
  impl->watchdog.join();
  return Status::Ok();
}

void Server::Stop() {
  impl_->stopping.store(true);
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    impl_->stop_requested = true;
  }
  impl_->stop_cv.notify_all();
}

long RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return static_cast<long>(limit.rlim_cur);
}

}  // namespace neardup::service
