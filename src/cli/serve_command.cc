// `neardup serve DIR`: runs the HTTP/JSON near-duplicate service over a persistent store until
// SIGTERM/SIGINT, then lets in-flight requests finish (at most --shutdown-timeout), flushes the
// store and exits 0.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "cli/store_flags.h"
#include "neardup/fingerprinter.h"
#include "neardup/server.h"
#include "neardup/sketch.h"
#include "neardup/store.h"
#include "service/http_input.h"

namespace neardup::cli {
namespace {

// Whether `host` is a loopback address (only this machine can connect).
bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

struct ServeArgs {
  std::string dir;
  service::ServerOptions server;
  std::string token_file;
  std::string sync = "group";
  int group_commit_ms = 2;
  FingerprintFlags fingerprint;  // recorded by a new store; an existing store uses its own
  RuleFlags rule;                // the same
  int max_k = -1;                // -1 (not given): the store's (3 for a new store)
  std::string memory_budget = "128/fp";
  double expected_documents = 1e7;
  size_t memtable_limit = 65536;
  uint64_t wal_flush_bytes = StoreOptions().wal_flush_bytes;
  bool no_text = false;
  bool no_verify = false;
};

int Run(ServeArgs& args) {
  // Block the shutdown signals in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  if (!args.token_file.empty()) {
    std::ifstream in(args.token_file, std::ios::binary);
    std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) {
      PrintError(args.token_file + ": cannot read the token file");
      return kExitUsage;
    }
    bool stripped_cr = false;
    Result<std::string> token = service::TokenFromFileContents(contents, &stripped_cr);
    if (!token.ok()) {
      PrintError(args.token_file + ": " + token.status().message());
      return kExitUsage;
    }
    if (stripped_cr) {
      PrintWarning(args.token_file +
                   ": removed a trailing carriage return (CRLF line end) from the token");
    }
    args.server.token = std::move(*token);
  } else if (args.server.token.empty()) {
    if (const char* env = std::getenv("NEARDUP_TOKEN")) args.server.token = env;
  } else {
    PrintWarning(
        "--token is visible to every user in the process list; prefer --token-file or "
        "$NEARDUP_TOKEN");
  }
  if (args.server.token.empty() && !IsLoopbackHost(args.server.host)) {
    PrintWarning("no token: anyone who can reach " + args.server.host +
                 " may add and remove documents unauthenticated; set --token-file or "
                 "$NEARDUP_TOKEN, or bind to 127.0.0.1");
  }
  const long open_files = service::RaiseOpenFileLimit();

  StoreOptions options;
  if (args.max_k >= 0) options.indexed_k = args.max_k;
  options.expected_size = args.expected_documents;
  Result<MemoryBudget> budget = ParseMemoryBudget(args.memory_budget);
  if (!budget.ok()) {
    PrintError("--memory-budget: " + budget.status().message());
    return kExitUsage;
  }
  options.memory_budget = *budget;
  options.memtable_limit = args.memtable_limit;
  options.wal_flush_bytes = args.wal_flush_bytes;
  options.sync_mode = args.sync == "every"  ? SyncMode::kEveryWrite
                      : args.sync == "none" ? SyncMode::kNone
                                            : SyncMode::kGroupCommit;
  options.group_commit_interval_ms = args.group_commit_ms;
  options.verify_checksums_on_open = !args.no_verify;
  if (Status status = args.rule.Apply(&options); !status.ok()) {
    std::fprintf(stderr, "neardup serve: %s\n", status.message().c_str());
    return kExitUsage;
  }
  FingerprintOptions fingerprint_options;
  auto store =
      OpenStoreWithFingerprintOptions(args.dir, options, args.fingerprint, &fingerprint_options);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitFailure;
  }
  const StoreStats stats = (*store)->Stats();
  std::string rule = "simhash (fingerprints within k)";
  if (stats.rule == StoreRule::kDedup) {
    char buffer[256];
    std::snprintf(buffer, sizeof(buffer),
                  "dedup (threshold %g, %d bands of %d rows, bucket window %u, containment %g "
                  "(>= %g shingles, >= %g of the larger))",
                  stats.lsh.threshold, stats.lsh.parameters.value_or(LshParameters{}).bands,
                  stats.lsh.parameters.value_or(LshParameters{}).rows, stats.lsh.bucket_window,
                  stats.pair_rule.containment_threshold, stats.pair_rule.containment_min_shingles,
                  stats.pair_rule.containment_min_ratio);
    rule = buffer;
  }
  std::fprintf(stderr,
               "neardup serve: %s: rule %s; %d-bit, max_k %d, index design: %s (%.0f B/fp); "
               "fingerprint options: %s\n",
               args.dir.c_str(), rule.c_str(), stats.bits, stats.indexed_k,
               stats.index_design.c_str(), stats.index_bytes_per_fingerprint,
               FingerprintOptionsToString(fingerprint_options).c_str());
  std::unique_ptr<Fingerprinter> fingerprinter;
  std::unique_ptr<DocumentSketcher> sketcher;
  if (stats.rule == StoreRule::kDedup) {
    // A dedup-rule store takes texts only: the sketcher is its text pipeline (--no-text would
    // leave the server unable to add or check anything).
    auto created = SketcherForStore(**store, fingerprint_options);
    if (!created.ok()) {
      std::fprintf(stderr, "neardup serve: %s\n", created.status().ToString().c_str());
      return kExitFailure;
    }
    sketcher = std::move(*created);
  } else if (!args.no_text) {
    auto created = Fingerprinter::Create(fingerprint_options);
    if (!created.ok()) {
      PrintWarning("text fingerprinting disabled: " + created.status().message());
    } else {
      fingerprinter = std::move(*created);
    }
  }
  // The request limits' width and largest k come from the store (Server::Create).
  auto created = sketcher != nullptr
                     ? service::Server::Create(store->get(), *sketcher, args.server)
                     : service::Server::Create(store->get(), fingerprinter.get(), args.server);
  if (!created.ok()) {
    PrintError(created.status());
    return kExitFailure;
  }
  service::Server& server = **created;
  Status status = server.Bind();
  if (!status.ok()) {
    PrintError(status);
    return kExitFailure;
  }
  std::printf(
      "neardup serve: listening on http://%s:%d (%llu documents, opened in %.3f s, open-file "
      "limit %ld)\n",
      args.server.host.c_str(), server.port(), static_cast<unsigned long long>(stats.documents),
      stats.open_seconds, open_files);
  std::fflush(stdout);

  std::thread waiter([&] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (signal_number != 0) server.Stop();
  });
  waiter.detach();  // exits with the process if the server stops for another reason
  status = server.Run();
  Status closed = (*store)->Close();
  if (!status.ok() || !closed.ok()) {
    PrintError(!status.ok() ? status : closed);
    return kExitFailure;
  }
  std::fprintf(stderr, "neardup serve: shut down cleanly\n");
  return kExitOk;
}

RunFunction Setup(CLI::App* app) {
  auto args = std::make_shared<ServeArgs>();
  app->add_option("dir", args->dir, "store directory (created if missing)")->required();
  app->add_option("--host", args->server.host, "address to bind")->capture_default_str();
  app->add_option("--port", args->server.port, "port (0 = any free port)")->capture_default_str();
  app->add_option("--poll-threads", args->server.threads,
                  "polling threads (0 = nproc): read requests, answer /healthz and /metrics; "
                  "connections are multiplexed, so this does not bound the number of clients")
      ->check(ThreadCount());
  app->add_option("--workers", args->server.workers,
                  "threads running text, write and scan handlers (0 = max(32, 8 x nproc)); a write "
                  "holds one through its fsync, and concurrent writes share one fsync")
      ->check(ThreadCount());
  app->add_option("--token-file", args->token_file,
                  "read the bearer token required for writes from the first line of a file "
                  "(preferred; a CRLF line end is stripped with a warning)");
  app->add_option("--token", args->server.token,
                  "bearer token on the command line (visible in `ps`: prefer --token-file or "
                  "$NEARDUP_TOKEN, which is used when neither option is given)");
  app->add_flag("--auth-reads", args->server.auth_reads, "require the token for reads too");
  app->add_option("--sync", args->sync,
                  "every (fsync per write batch), group (fsync every --group-commit-ms, "
                  "default) or none (no fsync: not power-loss safe)")
      ->check(CLI::IsMember({"every", "group", "none"}));
  app->add_option("--group-commit-ms", args->group_commit_ms, "group commit window")
      ->check(CLI::Range(0, 1000));
  args->fingerprint.Add(app);  // a new store records them; an existing store refuses others
  args->rule.Declare(app);     // the same
  app->add_option("--max-k", args->max_k,
                  "largest k the index tables of a new store serve (default 3); an existing "
                  "store refuses another")
      ->check(CLI::Range(0, 15));
  app->add_option("--memory-budget", args->memory_budget,
                  "index memory budget of a new store: bytes (640M, 1.5G) or bytes per "
                  "fingerprint (128/fp); the planner picks the fastest design within it")
      ->capture_default_str();
  app->add_option("--expected-documents", args->expected_documents,
                  "documents a new store is planned for")
      ->capture_default_str();
  app->add_option("--memtable-limit", args->memtable_limit, "entries before a flush to a segment");
  app->add_option("--wal-flush-bytes", args->wal_flush_bytes,
                  "flush the memtable to a segment when the log reaches this many bytes (bounds "
                  "the log, so the replay at the next start; 0 = no bound)")
      ->capture_default_str();
  app->add_option("--max-body-bytes", args->server.max_body_bytes,
                  "request body limit of writes, counted after chunked framing and gzip/deflate "
                  "decoding")
      ->capture_default_str();
  app->add_option("--max-query-body-bytes", args->server.max_query_body_bytes,
                  "request body limit of reads (query, get, stats), counted while inflating")
      ->capture_default_str();
  app->add_option("--max-response-bytes", args->server.max_response_bytes,
                  "bytes of one reply: longer result lists are cut (\"truncated\": true)")
      ->capture_default_str();
  app->add_option("--max-buffered-bytes", args->server.max_buffered_bytes,
                  "bytes held across all connections for request bodies and unsent replies; past "
                  "it requests get 503")
      ->capture_default_str();
  app->add_option("--malloc-arenas", args->server.malloc_arenas,
                  "glibc malloc arenas (M_ARENA_MAX; 0 = glibc's default of 8 per core): fewer "
                  "return the memory of a burst to the system")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app->add_option("--max-batch", args->server.limits.max_batch, "documents per add request");
  app->add_option("--request-timeout,--timeout", args->server.request_timeout_seconds,
                  "whole-request deadline in seconds: request line, headers, body and reply")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app->add_option("--idle-timeout", args->server.idle_timeout_seconds,
                  "close a keep-alive connection without traffic for this many seconds")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app->add_option("--max-connections", args->server.max_connections,
                  "open connections (0 = the open-file limit minus 64)")
      ->check(CLI::Range(0, 1 << 24));
  app->add_option("--shutdown-timeout", args->server.shutdown_timeout_seconds,
                  "on SIGTERM/SIGINT, seconds to let in-flight requests finish before closing "
                  "every connection")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  app->add_flag("--no-text", args->no_text, "do not load the text fingerprinter");
  app->add_flag("--no-verify", args->no_verify,
                "skip the whole-file segment checksums at open (headers are still checked)");
  app->footer(
      "Examples:\n"
      "  neardup serve store/ --port 8080 --token-file token.txt\n"
      "  neardup serve store/ --memory-budget 128/fp --expected-documents 1e8\n"
      "  NEARDUP_TOKEN=... neardup serve store/ --host 0.0.0.0 --sync every");
  return [args]() { return Run(*args); };
}

CommandRegistrar registrar("serve", "serve a store over HTTP/JSON (see docs/api.md)", Setup);

}  // namespace
}  // namespace neardup::cli
