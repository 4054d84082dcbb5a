// HTTP handlers, authentication, error mapping and Prometheus metrics of the neardup service;
// see server.h and docs/api.md.
#include "service/server.h"

#include <httplib.h>
#include <simdjson.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>

#include "common/json_writer.h"
#include "common/parallel.h"
#include "store/stats_json.h"

namespace neardup::service {
namespace {

enum Endpoint { kAdd, kCheck, kQuery, kGet, kDelete, kStats, kHealth, kMetrics, kEndpointCount };
constexpr std::array<const char*, kEndpointCount> kEndpointNames = {
    "add", "check", "query", "get", "delete", "stats", "healthz", "metrics"};
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

void SetJson(httplib::Response& res, int status, std::string body) {
  res.status = status;
  res.set_content(std::move(body), "application/json");
}

std::string ErrorJson(std::string_view code, std::string_view message) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("error").BeginObject().Key("code").String(code).Key("message").String(
      message);
  w.EndObject().EndObject();
  return out;
}

void SetError(httplib::Response& res, const Status& status) {
  SetJson(res, HttpStatusFor(status.code()),
          ErrorJson(StatusCodeName(status.code()), status.message()));
}

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

}  // namespace

struct Server::Impl {
  DocumentStore* store;
  const Fingerprinter* fingerprinter;
  ServerOptions options;
  httplib::Server http;
  int bound_port = -1;
  std::atomic<bool> stopping{false};
  std::array<EndpointMetrics, kEndpointCount> metrics;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  bool Authorized(const httplib::Request& req, bool write) const {
    if (options.token.empty() || (!write && !options.auth_reads)) return true;
    const std::string expected = "Bearer " + options.token;
    const std::string& got = req.get_header_value("Authorization");
    // Constant-time comparison.
    if (got.size() != expected.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < got.size(); ++i)
      diff |= static_cast<unsigned char>(got[i] ^ expected[i]);
    return diff == 0;
  }

  // Wraps a handler with authentication, error handling and metrics.
  httplib::Server::Handler Wrap(
      Endpoint endpoint, bool write,
      std::function<void(const httplib::Request&, httplib::Response&)> fn) {
    return [this, endpoint, write, fn = std::move(fn)](const httplib::Request& req,
                                                       httplib::Response& res) {
      const auto start = std::chrono::steady_clock::now();
      if (!Authorized(req, write)) {
        res.set_header("WWW-Authenticate", "Bearer");
        SetJson(res, 401, ErrorJson("Unauthenticated", "missing or wrong bearer token"));
      } else {
        fn(req, res);
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EndpointMetrics& m = metrics[endpoint];
      m.by_class[std::min(5, std::max(0, res.status / 100))].fetch_add(1,
                                                                       std::memory_order_relaxed);
      for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
        if (seconds <= kLatencyBuckets[b]) {
          m.buckets[b].fetch_add(1, std::memory_order_relaxed);
          break;
        }
      }
      m.count.fetch_add(1, std::memory_order_relaxed);
      m.micros_sum.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
    };
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

  void HandleAdd(const httplib::Request& req, httplib::Response& res) {
    Result<AddRequest> request = ParseAddRequest(req.body, options.limits);
    if (!request.ok()) return SetError(res, request.status());
    std::vector<Fingerprint> fps(request->documents.size());
    for (size_t i = 0; i < fps.size(); ++i) {
      const DocumentRequest& doc = request->documents[i];
      Result<Fingerprint> fp =
          Resolve(doc.text, doc.fingerprint, "documents[" + std::to_string(i) + "].");
      if (!fp.ok()) return SetError(res, fp.status());
      fps[i] = *fp;
    }
    std::vector<DocumentInput> inputs;
    inputs.reserve(fps.size());
    for (size_t i = 0; i < fps.size(); ++i) {
      const DocumentRequest& doc = request->documents[i];
      inputs.push_back({doc.id, fps[i], doc.metadata_json});
    }
    Status status = store->AddBatch(inputs);
    if (!status.ok()) return SetError(res, status);
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("added").Uint(inputs.size()).Key("fingerprints").BeginArray();
    for (const Fingerprint& fp : fps) w.String(ToHex(fp));
    w.EndArray().EndObject();
    SetJson(res, 200, std::move(out));
  }

  void HandleCheck(const httplib::Request& req, httplib::Response& res) {
    Result<CheckRequest> request = ParseCheckRequest(req.body, options.limits);
    if (!request.ok()) return SetError(res, request.status());
    const DocumentRequest& doc = request->document;
    Result<Fingerprint> fp = Resolve(doc.text, doc.fingerprint, "");
    if (!fp.ok()) return SetError(res, fp.status());
    CheckResult result;
    if (request->add == AddMode::kNever) {
      Result<std::vector<StoredDocument>> found = store->Search(*fp, request->k);
      if (!found.ok()) return SetError(res, found.status());
      for (StoredDocument& d : *found) {
        if (d.id != doc.id) result.duplicates.push_back(std::move(d));
      }
    } else {
      Result<CheckResult> checked = store->CheckAndAdd({doc.id, *fp, doc.metadata_json}, request->k,
                                                       request->add == AddMode::kAlways);
      if (!checked.ok()) return SetError(res, checked.status());
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
    SetJson(res, 200, std::move(out));
  }

  void Query(const QueryRequest& request, httplib::Response& res) {
    Result<Fingerprint> fp = Resolve(request.text, request.fingerprint, "");
    if (!fp.ok()) return SetError(res, fp.status());
    Result<std::vector<StoredDocument>> found = store->Search(*fp, request.k, request.limit);
    if (!found.ok()) return SetError(res, found.status());
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("fingerprint").String(ToHex(*fp)).Key("k").Int(request.k);
    w.Key("results").BeginArray();
    for (const StoredDocument& d : *found) WriteDocument(w, d, true);
    w.EndArray().EndObject();
    SetJson(res, 200, std::move(out));
  }

  static std::optional<std::string> Param(const httplib::Request& req, const char* name) {
    if (!req.has_param(name)) return std::nullopt;
    return req.get_param_value(name);
  }

  void HandleQueryGet(const httplib::Request& req, httplib::Response& res) {
    for (const auto& [name, value] : req.params) {
      if (name != "fingerprint" && name != "text" && name != "k" && name != "limit") {
        return SetError(res, Status::InvalidArgument(name + ": unknown parameter"));
      }
    }
    Result<QueryRequest> request =
        ParseQueryParams(Param(req, "fingerprint"), Param(req, "text"), Param(req, "k"),
                         Param(req, "limit"), options.limits);
    if (!request.ok()) return SetError(res, request.status());
    Query(*request, res);
  }

  void HandleQueryPost(const httplib::Request& req, httplib::Response& res) {
    Result<QueryRequest> request = ParseQueryRequest(req.body, options.limits);
    if (!request.ok()) return SetError(res, request.status());
    Query(*request, res);
  }

  // The id from /v1/documents/<id> (URL-decoded by httplib) or ?id=.
  static Result<std::string> IdOf(const httplib::Request& req) {
    if (req.matches.size() > 1 && req.matches[1].length() > 0) return std::string(req.matches[1]);
    if (req.has_param("id")) return req.get_param_value("id");
    return Status::InvalidArgument("id: missing (use /v1/documents/<id> or ?id=)");
  }

  void HandleGet(const httplib::Request& req, httplib::Response& res) {
    Result<std::string> id = IdOf(req);
    if (!id.ok()) return SetError(res, id.status());
    Result<StoredDocument> doc = store->Get(*id);
    if (!doc.ok()) return SetError(res, doc.status());
    std::string out;
    JsonWriter w(&out);
    WriteDocument(w, *doc, false);
    SetJson(res, 200, std::move(out));
  }

  void HandleDelete(const httplib::Request& req, httplib::Response& res) {
    Result<std::string> id = IdOf(req);
    if (!id.ok()) return SetError(res, id.status());
    Status status = store->Remove(*id);
    if (!status.ok()) return SetError(res, status);
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("id").String(*id).Key("deleted").Bool(true).EndObject();
    SetJson(res, 200, std::move(out));
  }

  void HandleStats(httplib::Response& res) {
    const StoreStats s = store->Stats();
    std::string out;
    JsonWriter w(&out);
    w.BeginObject();
    WriteStoreStatsFields(s, &w);
    w.Key("uptime_seconds")
        .Double(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    w.EndObject();
    SetJson(res, 200, std::move(out));
  }

  void HandleMetrics(httplib::Response& res) {
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
    out +=
        "# HELP neardup_http_requests_total HTTP requests by endpoint and status class.\n"
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
        "# HELP neardup_http_request_duration_seconds Request handling time.\n"
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
    res.status = 200;
    res.set_content(std::move(out), "text/plain; version=0.0.4");
  }
};

Server::Server(DocumentStore* store, const Fingerprinter* fingerprinter, ServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->store = store;
  impl_->fingerprinter = fingerprinter;
  impl_->options = std::move(options);
  Impl* impl = impl_.get();
  httplib::Server& http = impl->http;
  const int threads = impl->options.threads > 0 ? impl->options.threads : DefaultThreadCount();
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(impl->options.max_body_bytes);
  http.set_read_timeout(impl->options.read_timeout_seconds, 0);
  http.set_write_timeout(impl->options.write_timeout_seconds, 0);
  http.set_keep_alive_timeout(impl->options.keep_alive_timeout_seconds);
  http.set_keep_alive_max_count(1000000);
  http.set_tcp_nodelay(true);

  using Req = httplib::Request;
  using Res = httplib::Response;
  http.Post("/v1/documents",
            impl->Wrap(kAdd, true, [impl](const Req& q, Res& r) { impl->HandleAdd(q, r); }));
  http.Post("/v1/check",
            impl->Wrap(kCheck, true, [impl](const Req& q, Res& r) { impl->HandleCheck(q, r); }));
  http.Post("/v1/query", impl->Wrap(kQuery, false,
                                    [impl](const Req& q, Res& r) { impl->HandleQueryPost(q, r); }));
  http.Get("/v1/query",
           impl->Wrap(kQuery, false, [impl](const Req& q, Res& r) { impl->HandleQueryGet(q, r); }));
  http.Get("/v1/documents",
           impl->Wrap(kGet, false, [impl](const Req& q, Res& r) { impl->HandleGet(q, r); }));
  http.Get(R"(/v1/documents/(.+))",
           impl->Wrap(kGet, false, [impl](const Req& q, Res& r) { impl->HandleGet(q, r); }));
  http.Delete("/v1/documents", impl->Wrap(kDelete, true, [impl](const Req& q, Res& r) {
    impl->HandleDelete(q, r);
  }));
  http.Delete(R"(/v1/documents/(.+))", impl->Wrap(kDelete, true, [impl](const Req& q, Res& r) {
    impl->HandleDelete(q, r);
  }));
  http.Get("/v1/stats",
           impl->Wrap(kStats, false, [impl](const Req&, Res& r) { impl->HandleStats(r); }));
  http.Get("/healthz", impl->Wrap(kHealth, false, [](const Req&, Res& r) {
    SetJson(r, 200, R"({"status":"ok"})");
  }));
  http.Get("/metrics",
           impl->Wrap(kMetrics, false, [impl](const Req&, Res& r) { impl->HandleMetrics(r); }));

  // Any error response without a body (unknown route, 413 from the body limit, ...) gets one.
  http.set_error_handler([](const Req& req, Res& res) {
    if (!res.body.empty()) return;
    std::string message;
    if (res.status == 404) {
      message = "no such endpoint: " + req.method + " " + req.path;
    } else if (res.status == 413) {
      message = "request body too large";
    } else if (res.status == 405) {
      message = "method not allowed";
    } else {
      message = "HTTP error " + std::to_string(res.status);
    }
    res.set_content(ErrorJson(res.status == 404 ? "NotFound" : "HttpError", message),
                    "application/json");
  });
  http.set_exception_handler([](const Req&, Res& res, std::exception_ptr) {
    SetJson(res, 500, ErrorJson("Internal", "unexpected exception while handling the request"));
  });
}

Server::~Server() = default;

Status Server::Bind() {
  const std::string& host = impl_->options.host;
  if (impl_->options.port == 0) {
    impl_->bound_port = impl_->http.bind_to_any_port(host);
  } else {
    impl_->bound_port =
        impl_->http.bind_to_port(host, impl_->options.port) ? impl_->options.port : -1;
  }
  if (impl_->bound_port < 0) {
    return Status::IoError(host + ":" + std::to_string(impl_->options.port) +
                           ": cannot bind (in use, or bad address)");
  }
  return Status::Ok();
}

int Server::port() const { return impl_->bound_port; }

Status Server::Run() {
  if (impl_->bound_port < 0) NEARDUP_RETURN_IF_ERROR(Bind());
  if (!impl_->http.listen_after_bind() && !impl_->stopping.load()) {
    return Status::IoError("listen loop on port " + std::to_string(impl_->bound_port) + " failed");
  }
  return Status::Ok();
}

void Server::Stop() {
  impl_->stopping.store(true);
  impl_->http.stop();
}

}  // namespace neardup::service
