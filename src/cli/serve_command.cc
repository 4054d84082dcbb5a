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
#include "cli/option_flags.h"
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
  StoreFlags store;              // a new store's rule and design; memtable and log bounds
  RegistryFlags server_flags;    // the server's limits (the registry's kServerScope)
  bool no_text = false;
  bool no_verify = false;
  bool token_given = false, group_commit_given = false;  // the flags were given
};

int Run(ServeArgs& args) {
  // Flags that contradict each other are usage errors, never one silently ignored.
  if (args.token_given && !args.token_file.empty()) {
    PrintError("give --token-file or --token, not both");
    return kExitUsage;
  }
  if (args.group_commit_given && args.sync != "group") {
    PrintError("--group-commit-ms is the window of --sync group, not of --sync " + args.sync);
    return kExitUsage;
  }
  {
    OptionValues given(OptionNaming::kFlag);
    Status status = args.server_flags.Collect(&given);
    if (status.ok()) status = service::ApplyServerOptions(given, &args.server);
    if (!status.ok()) {
      PrintError(status);
      return kExitUsage;
    }
  }
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
  options.sync_mode = args.sync == "every"  ? SyncMode::kEveryWrite
                      : args.sync == "none" ? SyncMode::kNone
                                            : SyncMode::kGroupCommit;
  options.group_commit_interval_ms = args.group_commit_ms;
  options.verify_checksums_on_open = !args.no_verify;
  if (Status status = args.store.Apply(&options); !status.ok()) {
    PrintError(status);
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
    if (args.no_text) {
      PrintError(args.dir +
                 " is a dedup-rule store, which takes texts only: --no-text applies to a "
                 "simhash-rule store");
      (void)(*store)->Close();
      return kExitUsage;
    }
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

// The server's registry options, in the order of --help.
constexpr std::string_view kNetworkKeys[] = {"host", "port", "poll_threads", "workers"};
constexpr std::string_view kAuthKeys[] = {"auth_reads"};
constexpr std::string_view kLimitKeys[] = {"max_body_bytes",          "max_query_body_bytes",
                                           "max_response_bytes",      "max_buffered_bytes",
                                           "malloc_arenas",           "max_batch",
                                           "request_timeout_seconds", "idle_timeout_seconds",
                                           "max_connections",         "shutdown_timeout_seconds"};

RunFunction Setup(CLI::App* app) {
  auto args = std::make_shared<ServeArgs>();
  app->add_option("dir", args->dir, "store directory (created if missing)")->required();
  args->server_flags.DeclareKeys(app, kNetworkKeys);
  app->add_option("--token-file", args->token_file,
                  "read the bearer token required for writes from the first line of a file "
                  "(preferred; a CRLF line end is stripped with a warning)");
  CLI::Option* token =
      app->add_option("--token", args->server.token,
                      "bearer token on the command line (visible in `ps`: prefer --token-file or "
                      "$NEARDUP_TOKEN, which is used when neither option is given)");
  args->server_flags.DeclareKeys(app, kAuthKeys);
  app->add_option("--sync", args->sync,
                  "every (fsync per write batch), group (fsync every --group-commit-ms, "
                  "default) or none (no fsync: not power-loss safe)")
      ->check(CLI::IsMember({"every", "group", "none"}));
  CLI::Option* group_commit = app->add_option("--group-commit-ms", args->group_commit_ms,
                                              "group commit window (--sync group)")
                                  ->check(CLI::Range(0, 1000));
  args->fingerprint.Add(app);  // a new store records them; an existing store refuses others
  args->store.Declare(app,
                      StoreFlags::kCreation);  // for a new store; an existing one refuses others
  args->store.Declare(app, StoreFlags::kWriting);
  args->server_flags.DeclareKeys(app, kLimitKeys);
  app->add_flag("--no-text", args->no_text, "do not load the text fingerprinter");
  app->add_flag("--no-verify", args->no_verify,
                "skip the whole-file segment checksums at open (headers are still checked)");
  app->footer(
      "Examples:\n"
      "  neardup serve store/ --port 8080 --token-file token.txt\n"
      "  neardup serve store/ --memory-budget 128/fp --expected-size 1e8\n"
      "  NEARDUP_TOKEN=... neardup serve store/ --host 0.0.0.0 --sync every");
  return [args, token, group_commit]() {
    args->token_given = token->count() > 0;
    args->group_commit_given = group_commit->count() > 0;
    return Run(*args);
  };
}

CommandRegistrar registrar("serve", "serve a store over HTTP/JSON (see docs/api.md)", Setup);

}  // namespace
}  // namespace neardup::cli
