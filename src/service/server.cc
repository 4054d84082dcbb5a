// The neardup service's API over the HTTP transport (http_transport.h): routing, auth and body
// limits decided from the head, the worker pool for store-touching handlers, the handlers, the
// response byte cap, error mapping and Prometheus metrics; see server.h and docs/api.md.
#include "neardup/server.h"

#include <malloc.h>
#include <netdb.h>
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

#include "common/json_writer.h"
#include "common/parallel.h"
#include "service/http_input.h"
#include "service/http_transport.h"
#include "service/request_parser.h"
#include "store/stats_json.h"

namespace neardup::service {
namespace {

using Clock = std::chrono::steady_clock;

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

void WriteDocument(JsonWriter& w, const StoredDocument& doc, bool with_distance) {
  w.BeginObject().Key("id").String(doc.id).Key("fingerprint").String(ToHex(doc.fingerprint));
  if (with_distance) w.Key("distance").Int(doc.distance);
  w.Key("metadata").Metadata(doc.metadata);  // raw JSON, or a string for older bytes
  w.EndObject();
}

// A duplicate found by a check (or a text query of a kDedup store): why, how similar, how far.
void WriteDuplicate(JsonWriter& w, const StoredDocument& doc) {
  w.BeginObject().Key("id").String(doc.id).Key("fingerprint").String(ToHex(doc.fingerprint));
  w.Key("reason").String(DuplicateReasonName(doc.reason));
  w.Key("similarity");
  if (doc.similarity) {
    w.Double(*doc.similarity);
  } else {
    w.Null();
  }
  w.Key("distance").Int(doc.distance);
  w.Key("metadata").Metadata(doc.metadata);  // raw JSON, or a string for older bytes
  w.EndObject();
}

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

// The JSON of a list of documents, built up to a byte budget: a document that would take the
// answer past `max_bytes` is left out, and the answer says `"truncated": true`.
class ResponseBudget {
 public:
  explicit ResponseBudget(size_t max_bytes) : max_bytes_(max_bytes) {}
  // Appends `doc` to `out` (an open JSON array) unless it would pass the budget; false if not.
  // as_duplicate: the document as a check's duplicate (reason, similarity, distance).
  bool Append(std::string* out, const StoredDocument& doc, bool with_distance,
              bool as_duplicate = false) {
    if (truncated_) return false;
    const size_t before = out->size();
    JsonWriter w(out);
    if (any_) out->push_back(',');
    if (as_duplicate) {
      WriteDuplicate(w, doc);
    } else {
      WriteDocument(w, doc, with_distance);
    }
    if (out->size() > max_bytes_) {
      out->resize(before);
      truncated_ = true;
      return false;
    }
    any_ = true;
    return true;
  }
  bool truncated() const { return truncated_; }
  // The next Append starts a new JSON array (one budget across the arrays of a batch reply).
  void NewArray() { any_ = false; }

 private:
  size_t max_bytes_;
  bool truncated_ = false;
  bool any_ = false;
};

// One metric in Prometheus' text format: its HELP and TYPE lines and its value.
void AppendMetric(std::string* out, const char* name, const char* help, const char* type,
                  double value) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
          name + " ";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g\n", value);
  *out += buf;
}

}  // namespace

struct Server::Impl : HttpApplication {
  DocumentStore* store;
  const Fingerprinter* fingerprinter;
  // Texts of a kDedup store are sketched with the store's LSH options (null: fingerprints only).
  const DocumentSketcher* sketcher = nullptr;
  ServerOptions options;
  std::unique_ptr<TokenChecker> token;
  int listen_fd = -1;
  int bound_port = -1;
  Clock::time_point started = Clock::now();

  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stop_requested = false;
  std::atomic<bool> stopping{false};

  std::unique_ptr<HttpTransport> transport;
  std::unique_ptr<WorkerPool> workers;
  int store_indexed_k = 0;  // queries up to this k use the permuted tables (answered inline)
  std::atomic<uint64_t> overloaded_total{0};

  std::array<EndpointMetrics, kEndpointCount> metrics;
  std::atomic<uint64_t> incomplete_total{0};  // request started, never reached a handler
  std::atomic<uint64_t> aborted_total{0};     // admitted, connection lost before a reply
  std::atomic<uint64_t> truncated_total{0};   // replies cut at limit or max_response_bytes

  // ---- HttpApplication ------------------------------------------------------------------------

  void Finished(const HttpRequest* request, int status, RequestOutcome outcome) override {
    if (outcome == RequestOutcome::kIncomplete) {
      incomplete_total.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (outcome == RequestOutcome::kAborted) {
      aborted_total.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const int endpoint =
        request != nullptr && request->endpoint >= 0 ? request->endpoint : kUnrouted;
    const double seconds =
        request != nullptr ? std::chrono::duration<double>(Clock::now() - request->start).count()
                           : 0;
    EndpointMetrics& m = metrics[endpoint];
    m.by_class[std::min(5, std::max(0, status / 100))].fetch_add(1, std::memory_order_relaxed);
    for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
      if (seconds <= kLatencyBuckets[b]) {
        m.buckets[b].fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    m.count.fetch_add(1, std::memory_order_relaxed);
    m.micros_sum.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
  }

  static std::optional<std::string> Arg(const HttpRequest& c, const char* name) {
    return c.Param(name);
  }

  // Routes the request; sets `write` (needs the token) and the endpoint. False: 404/405 reply set.
  bool Route(std::string_view method, std::string_view url, HttpRequest* request, bool* write,
             Reply* reply) {
    constexpr std::string_view kDocs = "/v1/documents";
    const bool get = method == "GET", post = method == "POST", del = method == "DELETE";
    request->endpoint = kUnrouted;
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

  // The head only: routing, auth and body limits, before any body byte is read. Writes get
  // max_body_bytes; reads (which need small bodies) max_query_body_bytes, applied while inflating.
  bool Admit(HttpRequest* request, Reply* reply) override {
    bool write = false;
    if (!Route(request->method, request->target.path, request, &write, reply)) return false;
    if (request->HeaderCount("authorization") > 1) {
      reply->Error(400, "InvalidArgument", "Authorization: given more than once");
      return false;
    }
    if (token != nullptr && (write || options.auth_reads)) {
      const std::optional<std::string> value = request->Header("authorization");
      if (!value.has_value() || !token->Matches(*value)) {
        reply->Error(401, "Unauthenticated", "missing or wrong bearer token");
        reply->www_authenticate = true;
        return false;
      }
    }
    const size_t limit = write ? options.max_body_bytes : options.max_query_body_bytes;
    const char* limit_name = write ? "max_body_bytes" : "max_query_body_bytes";
    if (const auto length = request->Header("content-length")) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long n = std::strtoull(length->c_str(), &end, 10);
      if (errno == ERANGE || n > limit) {
        reply->Error(413, "ResourceExhausted",
                     "body: Content-Length " + *length + " exceeds the limit of " +
                         std::to_string(limit) + " bytes (the server's " + limit_name + ")");
        return false;
      }
    }
    const Status init =
        request->body.Init(request->Header("content-encoding").value_or(""), limit, limit_name);
    if (!init.ok()) {
      reply->Error(415, "Unsupported", init.message());
      return false;
    }
    return true;
  }

  void Handle(std::shared_ptr<HttpRequest> request, std::function<void(Reply)> done) override {
    if (workers == nullptr || RunsInline(*request)) {
      Reply reply;
      Dispatch(*request, &reply);
      return done(std::move(reply));
    }
    // Store work runs on a worker; the connection waits (no polling thread is held).
    auto shared_done = std::make_shared<std::function<void(Reply)>>(std::move(done));
    const bool submitted = workers->TrySubmit([this, request, shared_done] {
      jobs_running.fetch_add(1);
      Reply reply;
      Dispatch(*request, &reply);
      // Searches (check, query) may have gone through many documents' ids and metadata.
      const bool large = reply.body.size() > kTrimAfterBytes || request->endpoint == kCheck ||
                         request->endpoint == kQuery;
      (*shared_done)(std::move(reply));
      if (large) large_since_trim.store(true);
      jobs_running.fetch_sub(1);
    });
    if (!submitted) {
      overloaded_total.fetch_add(1, std::memory_order_relaxed);
      Reply reply;
      reply.Error(503, "Unavailable", "server overloaded: too many requests waiting, retry later");
      (*shared_done)(std::move(reply));
    }
  }

  // A large answer leaves many small freed blocks (its documents' ids and metadata) in malloc's
  // arenas, which glibc keeps; malloc_trim hands their whole pages back to the system.
  static constexpr size_t kTrimAfterBytes = 1u << 20;
  std::atomic<int> jobs_running{0};
  std::atomic<bool> large_since_trim{false};
  // Once a second, if searches or large answers ran since the last trim and the workers are idle
  // now, malloc_trim (a few milliseconds, on this thread, never on a request's path).
  void TrimLoop() {
    std::unique_lock<std::mutex> lock(stop_mutex);
    while (!stop_cv.wait_for(lock, std::chrono::seconds(1), [this] { return trim_done; })) {
      if (jobs_running.load() == 0 && large_since_trim.exchange(false)) ::malloc_trim(0);
    }
  }
  bool trim_done = false;  // guarded by stop_mutex
  std::thread trimmer;

  static constexpr size_t kInlineQueryBodyBytes = 512;
  // Whether a request is cheap and bounded enough to answer on the polling thread, skipping the
  // hand-off to a worker: health, metrics, stats, gets, and fingerprint queries that the permuted
  // tables answer (k <= the store's indexed_k). Text (fingerprinting), writes (fsync) and scans go
  // to the workers.
  bool RunsInline(const HttpRequest& c) const {
    switch (c.endpoint) {
      case kHealth:
      case kMetrics:
      case kStats:
      case kGet:
      case kUnrouted:
        return true;
      case kQuery: {
        const std::string& body = c.body.body();
        if (Arg(c, "fingerprint") || Arg(c, "text") || body.empty()) {
          if (Arg(c, "text") || !Arg(c, "fingerprint")) return false;
          const std::optional<std::string> k = Arg(c, "k");
          return !k.has_value() || (k->size() <= 2 && std::atoi(k->c_str()) <= store_indexed_k);
        }
        // A one-fingerprint body is small; a larger one (a text, or a batch of fingerprints that
        // would hold this thread for milliseconds) goes to a worker without being parsed twice.
        if (body.size() > kInlineQueryBodyBytes) return false;
        Result<QueryRequest> query = ParseQueryRequest(body, options.limits);
        return query.ok() && query->fingerprint.has_value() && query->k <= store_indexed_k;
      }
      default:
        return false;
    }
  }

  // ---- handlers -------------------------------------------------------------------------------

  void Dispatch(const HttpRequest& c, Reply* reply) {
    const std::string& body = c.body.body();
    switch (c.endpoint) {
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
        return HandleGet(c, reply);
      case kDelete:
        return HandleDelete(c, reply);
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

  // The store inputs of request documents: each text fingerprinted and, for a kDedup store,
  // sketched. `sketches` must outlive the inputs. `batch`: name fields documents[i].
  Status Inputs(const std::vector<const DocumentRequest*>& docs, bool batch,
                std::vector<DocumentInput>* inputs, std::vector<DocumentSketch>* sketches) const {
    inputs->resize(docs.size());
    sketches->resize(docs.size());
    for (size_t i = 0; i < docs.size(); ++i) {
      const DocumentRequest& doc = *docs[i];
      const std::string field = batch ? "documents[" + std::to_string(i) + "]." : "";
      DocumentInput& input = (*inputs)[i];
      input.id = doc.id;
      input.metadata = doc.metadata_json;
      if (doc.text.has_value() && sketcher != nullptr) {
        Status status = sketcher->Sketch(*doc.text, &input.fingerprint, &(*sketches)[i]);
        if (!status.ok()) return status.WithContext(field + "text");
        input.sketch = &(*sketches)[i];
        continue;
      }
      Result<Fingerprint> fp = Resolve(doc.text, doc.fingerprint, field);
      if (!fp.ok()) return fp.status();
      input.fingerprint = *fp;
    }
    return Status::Ok();
  }

  void HandleAdd(const std::string& body, Reply* reply) {
    Result<AddRequest> request = ParseAddRequest(body, options.limits);
    if (!request.ok()) return reply->Error(request.status());
    std::vector<const DocumentRequest*> docs;
    for (const DocumentRequest& doc : request->documents) docs.push_back(&doc);
    std::vector<DocumentInput> inputs;
    std::vector<DocumentSketch> sketches;
    if (Status status = Inputs(docs, true, &inputs, &sketches); !status.ok()) {
      return reply->Error(status);
    }
    std::vector<Fingerprint> fps;
    for (const DocumentInput& input : inputs) fps.push_back(input.fingerprint);
    Status status = store->AddBatch(inputs);
    if (!status.ok()) return reply->Error(status);
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("added").Uint(inputs.size()).Key("fingerprints").BeginArray();
    for (const Fingerprint& fp : fps) w.String(ToHex(fp));
    w.EndArray().EndObject();
    reply->Json(200, std::move(out));
  }

  // Working memory of a search answering up to `results` documents, reserved from the buffer
  // budget for as long as the handler runs (worst case: every document at the id and metadata
  // limits), so that concurrent large searches cannot take more than max_buffered_bytes between
  // them. nullopt (and a 503 reply) if the budget is spent.
  class SearchReservation {
   public:
    SearchReservation(HttpTransport* transport, size_t bytes)
        : transport_(transport),
          bytes_(transport != nullptr && transport->Reserve(bytes) ? bytes : 0),
          ok_(transport == nullptr || bytes_ > 0) {}
    ~SearchReservation() {
      if (bytes_ > 0) transport_->Release(bytes_);
    }
    bool ok() const { return ok_; }

   private:
    HttpTransport* transport_;
    size_t bytes_;
    bool ok_;
  };
  size_t SearchBytes(size_t results) const {
    return (results + 2) * (options.limits.max_id_bytes + options.limits.max_metadata_bytes + 128);
  }
  static void Busy(Reply* reply) {
    reply->Error(503, "Unavailable",
                 "server busy: large searches in progress hold the buffer budget "
                 "(max_buffered_bytes), retry later");
  }

  void HandleCheck(const std::string& body, Reply* reply) {
    Result<CheckRequest> request = ParseCheckRequest(body, options.limits);
    if (!request.ok()) return reply->Error(request.status());
    std::vector<const DocumentRequest*> docs;
    if (request->batch) {
      for (const DocumentRequest& doc : request->documents) docs.push_back(&doc);
    } else {
      docs.push_back(&request->document);
    }
    std::vector<DocumentInput> inputs;
    std::vector<DocumentSketch> sketches;
    if (Status status = Inputs(docs, request->batch, &inputs, &sketches); !status.ok()) {
      return reply->Error(status);
    }
    CheckOptions check;
    check.k = request->k;
    check.limit = request->limit;
    check.add = request->add == AddMode::kNever    ? neardup::AddMode::kNever
                : request->add == AddMode::kAlways ? neardup::AddMode::kAlways
                                                   : neardup::AddMode::kIfNew;
    // A search's results are held in memory until written: the buffer budget bounds them.
    SearchReservation reservation(transport.get(), SearchBytes(request->limit));
    if (!reservation.ok()) return Busy(reply);
    Result<std::vector<CheckResult>> results = store->CheckBatch(inputs, check);
    if (!results.ok()) return reply->Error(results.status());
    std::string out;
    JsonWriter w(&out);
    // The duplicates of each document are cut at `limit` by the store (CheckOptions::limit), and
    // the whole reply at max_response_bytes; either is reported as "truncated".
    ResponseBudget budget(options.max_response_bytes);
    auto write_result = [&](const DocumentInput& input, const CheckResult& result) {
      w.BeginObject()
          .Key("id")
          .String(input.id)
          .Key("fingerprint")
          .String(ToHex(input.fingerprint));
      w.Key("duplicate").Bool(!result.duplicates.empty());
      w.Key("added").Bool(result.added).Key("replaced").Bool(result.replaced);
      w.Key("duplicates").BeginArray();
      budget.NewArray();
      size_t written = 0;
      for (const StoredDocument& d : result.duplicates) {
        if (!budget.Append(&out, d, true, /*as_duplicate=*/true)) break;
        ++written;
      }
      const bool truncated = result.truncated || written < result.duplicates.size();
      if (truncated) truncated_total.fetch_add(1, std::memory_order_relaxed);
      w.EndArray().Key("truncated").Bool(truncated).EndObject();
    };
    if (!request->batch) {
      write_result(inputs[0], (*results)[0]);
    } else {
      w.BeginObject().Key("results").BeginArray();
      for (size_t i = 0; i < inputs.size(); ++i) write_result(inputs[i], (*results)[i]);
      w.EndArray().EndObject();
    }
    reply->Json(200, std::move(out));
  }

  // Writes `docs` (with distances) into the open JSON array at the end of `out`: at most `limit`
  // of them, and no more than fit in max_response_bytes. True if some were left out.
  bool WriteResults(const std::vector<StoredDocument>& docs, size_t limit, std::string* out) {
    ResponseBudget budget(options.max_response_bytes);
    size_t written = 0;
    for (const StoredDocument& d : docs) {
      if (written == limit || !budget.Append(out, d, true)) break;
      ++written;
    }
    const bool truncated = written < docs.size();
    if (truncated) truncated_total.fetch_add(1, std::memory_order_relaxed);
    return truncated;
  }

  // The batch form: each fingerprint searched with the same k and limit, answered in order as
  // {"k", "results": [{"fingerprint", "results", "truncated"}, ...]}. One max_response_bytes budget
  // covers the whole reply; a query whose documents do not fit says "truncated".
  void QueryBatch(const QueryRequest& request, Reply* reply) {
    SearchReservation reservation(transport.get(), SearchBytes(request.limit));
    if (!reservation.ok()) return Busy(reply);
    std::string out;
    out.reserve(request.fingerprints.size() * 160);
    JsonWriter w(&out);
    w.BeginObject().Key("k").Int(request.k).Key("results").BeginArray();
    ResponseBudget budget(options.max_response_bytes);
    for (const Fingerprint& fp : request.fingerprints) {
      Result<std::vector<StoredDocument>> found = store->Search(fp, request.k, request.limit + 1);
      if (!found.ok()) return reply->Error(found.status());
      w.BeginObject().Key("fingerprint").String(ToHex(fp)).Key("results").BeginArray();
      budget.NewArray();
      size_t written = 0;
      for (const StoredDocument& d : *found) {
        if (written == request.limit || !budget.Append(&out, d, true)) break;
        ++written;
      }
      const bool truncated = written < found->size();
      if (truncated) truncated_total.fetch_add(1, std::memory_order_relaxed);
      w.EndArray().Key("truncated").Bool(truncated).EndObject();
    }
    w.EndArray().EndObject();
    reply->Json(200, std::move(out));
  }

  void Query(const QueryRequest& request, Reply* reply) {
    if (request.batch) return QueryBatch(request, reply);
    if (request.text.has_value() && sketcher != nullptr) {
      // A kDedup store answers a text with its rule: a check that adds nothing.
      DocumentSketch sketch;
      DocumentInput input;
      if (Status status = sketcher->Sketch(*request.text, &input.fingerprint, &sketch);
          !status.ok()) {
        return reply->Error(status.WithContext("text"));
      }
      input.sketch = &sketch;
      CheckOptions check;
      check.add = neardup::AddMode::kNever;
      check.limit = request.limit;
      SearchReservation reservation(transport.get(), SearchBytes(request.limit));
      if (!reservation.ok()) return Busy(reply);
      Result<std::vector<CheckResult>> results =
          store->CheckBatch(std::span<const DocumentInput>(&input, 1), check);
      if (!results.ok()) return reply->Error(results.status());
      const CheckResult& result = (*results)[0];
      std::string out;
      JsonWriter w(&out);
      w.BeginObject().Key("fingerprint").String(ToHex(input.fingerprint));
      w.Key("rule").String("dedup").Key("results").BeginArray();
      ResponseBudget budget(options.max_response_bytes);
      size_t written = 0;
      for (const StoredDocument& d : result.duplicates) {
        if (!budget.Append(&out, d, true, /*as_duplicate=*/true)) break;
        ++written;
      }
      const bool truncated = result.truncated || written < result.duplicates.size();
      if (truncated) truncated_total.fetch_add(1, std::memory_order_relaxed);
      w.EndArray().Key("truncated").Bool(truncated).EndObject();
      return reply->Json(200, std::move(out));
    }
    Result<Fingerprint> fp = Resolve(request.text, request.fingerprint, "");
    if (!fp.ok()) return reply->Error(fp.status());
    SearchReservation reservation(transport.get(), SearchBytes(request.limit));
    if (!reservation.ok()) return Busy(reply);
    Result<std::vector<StoredDocument>> found = store->Search(*fp, request.k, request.limit + 1);
    if (!found.ok()) return reply->Error(found.status());
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("fingerprint").String(ToHex(*fp)).Key("k").Int(request.k);
    w.Key("results").BeginArray();
    const bool truncated = WriteResults(*found, request.limit, &out);
    w.EndArray().Key("truncated").Bool(truncated).EndObject();
    reply->Json(200, std::move(out));
  }

  void HandleQueryGet(const HttpRequest& c, Reply* reply) {
    for (const auto& [name, value] : c.target.params) {
      if (name != "fingerprint" && name != "text" && name != "k" && name != "limit") {
        return reply->Error(Status::InvalidArgument(name + ": unknown parameter"));
      }
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
  static Result<std::string> IdOf(const HttpRequest& c) {
    if (!c.path_id.empty()) return c.path_id;
    if (auto id = Arg(c, "id"); id.has_value() && !id->empty()) return *id;
    return Status::InvalidArgument("id: missing (use /v1/documents/<id> or ?id=)");
  }

  void HandleGet(const HttpRequest& c, Reply* reply) {
    Result<std::string> id = IdOf(c);
    if (!id.ok()) return reply->Error(id.status());
    Result<StoredDocument> doc = store->Get(*id);
    if (!doc.ok()) return reply->Error(doc.status());
    std::string out;
    JsonWriter w(&out);
    WriteDocument(w, *doc, false);
    reply->Json(200, std::move(out));
  }

  void HandleDelete(const HttpRequest& c, Reply* reply) {
    Result<std::string> id = IdOf(c);
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
    const StoreHealth health = store->Health();
    const bool ok = health.state == StoreState::kOk;
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("status").String(StoreStateName(health.state));
    if (!ok) w.Key("reason").String(health.reason);
    w.Key("write_errors").Uint(health.write_errors).Key("recoveries").Uint(health.recoveries);
    w.EndObject();
    reply->Json(ok ? 200 : 503, std::move(out));
  }

  // GET /metrics: the store's, the transport's and the requests' figures in Prometheus' text
  // format.
  void HandleMetrics(Reply* reply) {
    std::string out;
    AppendStoreMetrics(&out);
    AppendTransportMetrics(&out);
    AppendRequestCounts(&out);
    AppendLatencyHistograms(&out);
    reply->status = 200;
    reply->body = std::move(out);
    reply->content_type = "text/plain; version=0.0.4";
  }

  // The store's sizes, work counters and health.
  void AppendStoreMetrics(std::string* out) {
    const StoreStats s = store->Stats();
    AppendMetric(out, "neardup_documents", "Live documents in the store.", "gauge",
                 double(s.documents));
    AppendMetric(out, "neardup_segments", "Segment files.", "gauge", double(s.segments));
    AppendMetric(out, "neardup_memtable_entries", "Entries not yet in a segment.", "gauge",
                 double(s.memtable_entries));
    AppendMetric(out, "neardup_disk_bytes", "Bytes of segment files and the log.", "gauge",
                 double(s.disk_bytes));
    AppendMetric(out, "neardup_wal_syncs_total", "fdatasync calls on the log.", "counter",
                 double(s.wal_syncs));
    AppendMetric(out, "neardup_writes_total", "Adds and removes acknowledged.", "counter",
                 double(s.writes));
    AppendMetric(out, "neardup_flushes_total", "Memtable flushes.", "counter", double(s.flushes));
    AppendMetric(out, "neardup_compactions_total", "Compactions finished.", "counter",
                 double(s.compactions));
    AppendMetric(
        out, "neardup_store_wal_dropped_bytes",
        "Bytes of a damaged or torn last log record dropped when the store was opened (kept "
        "aside as *.corrupt; see /v1/stats wal_dropped).",
        "gauge", double(s.wal_dropped_bytes));
    const StoreHealth health = store->Health();
    AppendMetric(out, "neardup_store_healthy",
                 "1 if the store takes writes, 0 if degraded or closed.", "gauge",
                 health.state == StoreState::kOk ? 1 : 0);
    AppendMetric(out, "neardup_store_write_errors_total",
                 "Failed store writes (log, segment, MANIFEST).", "counter",
                 double(health.write_errors));
    AppendMetric(out, "neardup_store_recoveries_total",
                 "Times store writes worked again after a failure.", "counter",
                 double(health.recoveries));
  }

  // The HTTP transport's connections, refusals and buffers, and the server's drop counters.
  void AppendTransportMetrics(std::string* out) {
    const TransportCounters& t = transport->counters();
    AppendMetric(out, "neardup_http_open_connections", "Open client connections.", "gauge",
                 double(t.open_connections.load()));
    AppendMetric(out, "neardup_http_connections_total", "Client connections accepted.", "counter",
                 double(t.connections_total.load()));
    AppendMetric(
        out, "neardup_http_timeouts_total",
        "Connections closed for exceeding the request deadline (from a request's first byte "
        "to its reply's last).",
        "counter", double(t.timeouts_total.load()));
    AppendMetric(
        out, "neardup_http_incomplete_requests_total",
        "Requests whose head never completed or was refused as malformed (the client left, "
        "timed out, or sent an ambiguous or oversized head).",
        "counter", double(incomplete_total.load()));
    AppendMetric(
        out, "neardup_http_malformed_requests_total",
        "Request heads refused before routing (400 ambiguous framing, 414, 431, 501 transfer "
        "coding); the connection is closed.",
        "counter", double(t.malformed_total.load()));
    AppendMetric(out, "neardup_http_aborted_requests_total",
                 "Requests dropped before a reply (the client left, or its body was cut off).",
                 "counter", double(aborted_total.load()));
    AppendMetric(out, "neardup_http_body_bytes_total", "Request body bytes received.", "counter",
                 double(t.body_bytes_total.load()));
    AppendMetric(out, "neardup_http_buffered_bytes",
                 "Bytes held for request bodies being read and replies not yet written.", "gauge",
                 double(t.buffered_bytes.load()));
    AppendMetric(out, "neardup_http_buffer_full_total",
                 "Requests refused with 503 because max_buffered_bytes was reached.", "counter",
                 double(t.buffer_full_total.load()));
    AppendMetric(out, "neardup_http_truncated_replies_total",
                 "Replies whose result list was cut at its limit or at max_response_bytes.",
                 "counter", double(truncated_total.load()));
    AppendMetric(out, "neardup_http_overloaded_total",
                 "Requests refused with 503 because the worker queue was full.", "counter",
                 double(overloaded_total.load()));
  }

  // Responses by endpoint and status class (the classes seen).
  void AppendRequestCounts(std::string* out) {
    *out +=
        "# HELP neardup_http_requests_total HTTP responses by endpoint and status class "
        "(endpoint \"none\": unknown path or method).\n"
        "# TYPE neardup_http_requests_total counter\n";
    for (int e = 0; e < kEndpointCount; ++e) {
      for (int c = 1; c <= 5; ++c) {
        uint64_t n = metrics[e].by_class[c].load();
        if (n == 0) continue;
        *out += std::string("neardup_http_requests_total{endpoint=\"") + kEndpointNames[e] +
                "\",code=\"" + std::to_string(c) + "xx\"} " + std::to_string(n) + "\n";
      }
    }
  }

  // Each endpoint's request time histogram.
  void AppendLatencyHistograms(std::string* out) {
    *out +=
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
        *out += "neardup_http_request_duration_seconds_bucket{" + label + ",le=\"" + le + "\"} " +
                std::to_string(cumulative) + "\n";
      }
      const uint64_t count = metrics[e].count.load();
      *out += "neardup_http_request_duration_seconds_bucket{" + label + ",le=\"+Inf\"} " +
              std::to_string(count) + "\n";
      char sum[64];
      std::snprintf(sum, sizeof(sum), "%.6f", double(metrics[e].micros_sum.load()) / 1e6);
      *out += "neardup_http_request_duration_seconds_sum{" + label + "} " + sum + "\n";
      *out += "neardup_http_request_duration_seconds_count{" + label + "} " +
              std::to_string(count) + "\n";
    }
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Server>> Server::Create(DocumentStore* store,
                                               const DocumentSketcher& sketcher,
                                               ServerOptions options) {
  auto server = Create(store, &sketcher.fingerprinter(), std::move(options));
  if (server.ok()) (*server)->impl_->sketcher = &sketcher;
  return server;
}

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
  // The limits follow the store: its width, and at most its width for k.
  const StoreStats stats = store->Stats();
  RequestLimits& limits = options.limits;
  if (limits.bits && *limits.bits != stats.bits) {
    return Status::InvalidArgument("server: request limits for " + std::to_string(*limits.bits) +
                                   "-bit fingerprints, the store holds " +
                                   std::to_string(stats.bits) + "-bit ones");
  }
  limits.bits = stats.bits;
  if (!limits.max_query_k) limits.max_query_k = stats.bits;
  if (*limits.max_query_k < 0 || *limits.max_query_k > stats.bits || limits.default_k < 0 ||
      limits.default_k > *limits.max_query_k) {
    return Status::InvalidArgument(
        "server: request limits need 0 <= default_k <= max_query_k <= bits (" +
        std::to_string(stats.bits) + ")");
  }
  if (fingerprinter != nullptr) {
    // Text is fingerprinted as the store's fingerprints were, or not at all.
    const FingerprintOptions& used = fingerprinter->options();
    if (used.bits != stats.bits) {
      return Status::InvalidArgument("server: the fingerprinter makes " +
                                     std::to_string(used.bits) + "-bit fingerprints, the store " +
                                     "holds " + std::to_string(stats.bits) + "-bit ones");
    }
    if (!stats.fingerprint_options.empty() &&
        FingerprintOptionsToString(used) != stats.fingerprint_options) {
      return Status::InvalidArgument(
          "server: the fingerprinter's options \"" + FingerprintOptionsToString(used) +
          "\" are not the store's \"" + stats.fingerprint_options + "\"");
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->store = store;
  impl->fingerprinter = fingerprinter;
  impl->options = std::move(options);
  impl->store_indexed_k = stats.indexed_k;
  if (!impl->options.token.empty()) {
    impl->token = std::make_unique<TokenChecker>(impl->options.token);
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() {
  if (impl_->transport != nullptr) impl_->transport->Stop();
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
  // Idle memory after a burst: glibc gives each thread that allocates its own arena, so memory
  // freed by many workers stays spread over many arenas. Two arenas measured as fast under load
  // and return to a small RSS (docs/api.md "Memory"); replies above 1 MiB are mmapped, so a large
  // reply's memory goes back to the system when it is freed.
  if (o.malloc_arenas > 0) {
    ::mallopt(M_ARENA_MAX, o.malloc_arenas);
    ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  }
  const int workers = o.workers > 0 ? o.workers : std::max(32, 8 * DefaultThreadCount());
  impl->workers = std::make_unique<WorkerPool>(workers, o.max_queued_requests);
  TransportOptions transport;
  transport.threads = static_cast<int>(threads);
  transport.max_connections = max_connections;
  transport.request_timeout_seconds = o.request_timeout_seconds;
  transport.idle_timeout_seconds = o.idle_timeout_seconds;
  transport.max_head_bytes = o.connection_memory_bytes;
  transport.max_buffered_bytes = o.max_buffered_bytes;
  impl->transport = std::make_unique<HttpTransport>(impl, transport);
  NEARDUP_RETURN_IF_ERROR(impl->transport->Start(impl->listen_fd));
  impl->listen_fd = -1;  // the transport owns it now
  impl->trimmer = std::thread([impl] { impl->TrimLoop(); });
  {
    std::unique_lock<std::mutex> lock(impl->stop_mutex);
    impl->stop_cv.wait(lock, [impl] { return impl->stop_requested; });
  }
  // Drain: stop accepting (the listening socket is closed, so new connections are refused), close
  // idle connections, let in-flight requests finish for at most the shutdown timeout, then close
  // every connection.
  impl->transport->Quiesce();
  const auto deadline = Clock::now() + std::chrono::seconds(o.shutdown_timeout_seconds);
  while (impl->transport->in_flight() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Jobs already on a worker finish (each is one store call) and hand their replies back.
  impl->workers->Stop();
  impl->transport->Stop();
  {
    std::lock_guard<std::mutex> lock(impl->stop_mutex);
    impl->trim_done = true;
  }
  impl->stop_cv.notify_all();
  impl->trimmer.join();
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
