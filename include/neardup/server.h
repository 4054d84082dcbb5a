// The neardup HTTP/1.1 + JSON service over a DocumentStore (Asio and Boost.Beast's strict HTTP
// parser, event-driven): add,
// check-and-add, query, get, delete, stats, /healthz and Prometheus /metrics. See docs/api.md.
//
// The public face of the neardup::service library (libneardup_service, behind `neardup serve`;
// find_package(neardup) then target_link_libraries(... neardup::service)). Connections are
// multiplexed with epoll over a small pool of polling threads, so an idle or slow client costs a
// socket and a little memory, never a thread. Cheap bounded requests (health, metrics, stats,
// gets, fingerprint queries with k <= the store's indexed_k) are answered on the polling threads;
// text, writes and scans run on a separate worker pool while their connection is suspended. A
// Server is driven by one thread calling Run(); Stop() may be called from any thread (e.g. a signal
// handler thread) and makes Run() return after draining in-flight requests for at most
// `shutdown_timeout_seconds`.
#ifndef NEARDUP_SERVER_H_
#define NEARDUP_SERVER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "neardup/export.h"
#include "neardup/fingerprinter.h"
#include "neardup/options.h"
#include "neardup/sketch.h"
#include "neardup/status.h"
#include "neardup/store.h"

namespace neardup::service {

// What a request may ask for and carry.
struct RequestLimits {
  // Width of the fingerprints requests carry: the store's. Server::Create sets it when unset and
  // refuses another value.
  std::optional<int> bits;
  // Largest k a query or check may ask for (<= bits; the store's bits when unset).
  std::optional<int> max_query_k;
  int MaxQueryK() const { return max_query_k.value_or(bits.value_or(64)); }
  int default_k = 3;
  size_t max_batch = 10000;  // documents per add request
  size_t max_id_bytes = 2048;
  size_t max_metadata_bytes = 4096;  // of the metadata's verbatim JSON text
  size_t max_text_bytes = 1 << 20;
  size_t max_limit = 10000;  // results per query or check (`limit`)
  size_t default_limit = 100;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 picks a free port (see Server::port())
  int threads = 0;  // polling threads (epoll, /healthz, /metrics); 0 = DefaultThreadCount()
  // Threads running text, write and scan handlers; 0 = max(32, 8 x DefaultThreadCount()). A write
  // holds its worker through its fsync, never a polling thread.
  int workers = 0;
  // Requests waiting for a worker; more get 503.
  size_t max_queued_requests = 4096;
  // If non-empty, every write needs "Authorization: Bearer <token>" (and reads too if
  // auth_reads). Decided from the headers, before any body byte is read.
  std::string token;
  bool auth_reads = false;
  // Decoded body bytes (after chunked framing and gzip/deflate); more is refused with 413 as
  // soon as the limit is crossed.
  size_t max_body_bytes = 64u << 20;
  // The same for reads (query, get, stats, health, metrics), which need small bodies: a query's
  // gzip body is refused once its inflated bytes pass this, whoever sends it.
  size_t max_query_body_bytes = 1u << 20;
  // Bytes of one reply's JSON. A result list (query results, check duplicates) that would pass it
  // is cut, and the reply says "truncated": true.
  size_t max_response_bytes = 16u << 20;
  // Bytes held across all connections for request bodies being read, replies waiting for slow
  // readers, and the working memory of searches in progress (reserved as `limit` documents at the
  // id and metadata limits); a request that would take more gets 503 (retry later). With
  // max_response_bytes this bounds what slow or hostile clients can make the server hold.
  size_t max_buffered_bytes = 256u << 20;
  // Whole-request deadline: from the request line to the last response byte (headers, body,
  // handling and sending). A connection past it is closed.
  int request_timeout_seconds = 30;
  // A keep-alive connection without traffic for this long is closed.
  int idle_timeout_seconds = 60;
  // Open connections; more wait in the listen backlog. 0 = the open-file limit minus a reserve.
  int max_connections = 0;
  int listen_backlog = 4096;
  // Bytes of a request's line and header fields (larger: 414/431). The whole head must arrive
  // within request_timeout_seconds of its first byte, however slowly it is sent.
  size_t connection_memory_bytes = 32u << 10;
  // glibc malloc arenas (M_ARENA_MAX) set by Run(); 0 leaves glibc's default (8 per core). Fewer
  // arenas return memory freed after a burst instead of keeping it spread over one per thread.
  int malloc_arenas = 2;
  // After Stop(): in-flight requests get this long to finish, then every connection is closed.
  int shutdown_timeout_seconds = 5;
  RequestLimits limits;
};

class NEARDUP_EXPORT Server {
 public:
  // `store` and `fingerprinter` must outlive the server; `fingerprinter` may be null (text
  // requests then fail with 501). The request limits' width and largest k come from the store
  // when unset. InvalidArgument for a null store, out-of-range options, limits for another width
  // than the store's, or a fingerprinter whose fingerprints differ from the store's (another
  // width, or other options than the ones the store recorded).
  // For a kDedup store (DocumentStore::LshOptions()) use the overload below.
  static Result<std::unique_ptr<Server>> Create(DocumentStore* store,
                                                const Fingerprinter* fingerprinter,
                                                ServerOptions options);
  // The same with a DocumentSketcher (made with the store's LshOptions()): texts are
  // fingerprinted and sketched by it, so checks and text queries apply a kDedup store's rule.
  static Result<std::unique_ptr<Server>> Create(DocumentStore* store,
                                                const DocumentSketcher& sketcher,
                                                ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket exclusively (no SO_REUSEPORT). IoError naming host:port on
  // failure, e.g. "127.0.0.1:8080: address in use".
  Status Bind();
  int port() const;
  // Serves until Stop(), then drains and closes. Returns the status of starting the service.
  Status Run();
  void Stop();

 private:
  struct NEARDUP_HIDDEN Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Sets the fields of `options` named by the option registry's server options given in `values`
// (kServerScope of neardup/options.h: port, max_body_bytes, request_timeout ...; values of other
// scopes are ignored); the others keep their values. token_file reads the token from the file's
// first line (a CRLF line end stripped). Values were checked when set, so this fails only for
// token given with token_file or an unreadable or bad token file (InvalidArgument naming it), or
// for an option the registry knows and this function does not (Internal).
NEARDUP_EXPORT Status ApplyServerOptions(const OptionValues& values, ServerOptions* options);

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
NEARDUP_EXPORT long RaiseOpenFileLimit();

}  // namespace neardup::service

#endif  // NEARDUP_SERVER_H_
