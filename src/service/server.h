// The neardup HTTP/1.1 + JSON service over a DocumentStore (cpp-httplib): add, check-and-add,
// query, get, delete, stats, /healthz and Prometheus /metrics. See docs/api.md.
//
// Internal header (part of the `neardup` binary). A Server is driven by one thread calling Run();
// Stop() may be called from any thread (e.g. a signal handler thread) and makes Run() return once
// in-flight requests are done. Request handlers run concurrently on the server's thread pool.
#ifndef NEARDUP_SERVICE_SERVER_H_
#define NEARDUP_SERVICE_SERVER_H_

#include <memory>
#include <string>

#include "neardup/fingerprinter.h"
#include "neardup/status.h"
#include "neardup/store.h"
#include "service/request_parser.h"

namespace neardup::service {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 picks a free port (see Server::port())
  int threads = 0;  // request threads; 0 = DefaultThreadCount()
  // If non-empty, every write needs "Authorization: Bearer <token>" (and reads too if
  // auth_reads).
  std::string token;
  bool auth_reads = false;
  size_t max_body_bytes = 64u << 20;
  int read_timeout_seconds = 10;
  int write_timeout_seconds = 10;
  int keep_alive_timeout_seconds = 5;
  RequestLimits limits;
};

class Server {
 public:
  // `store` and `fingerprinter` must outlive the server; `fingerprinter` may be null (text
  // requests then fail with 501).
  Server(DocumentStore* store, const Fingerprinter* fingerprinter, ServerOptions options);
  ~Server();

  // Binds the listening socket. IoError naming host:port on failure.
  Status Bind();
  int port() const;
  // Serves until Stop(). Returns the listen loop's status.
  Status Run();
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup::service

#endif  // NEARDUP_SERVICE_SERVER_H_
