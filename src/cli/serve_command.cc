// `neardup serve DIR`: runs the HTTP/JSON near-duplicate service over a persistent store until
// SIGTERM/SIGINT, then lets in-flight requests finish (at most --shutdown-timeout), flushes the
// store and exits 0.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
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
  FingerprintFlags fingerprint;  // recorded by a new store; an existing store uses its own
  StoreFlags store;              // a new store's rule and design; sync, memtable and log bounds
  RegistryFlags server_flags;    // the server's limits and token (the registry's kServerScope)
  RegistryFlags command_flags;   // serve's own switch: --no-text
};

// The server's options from the flags (usage errors: contradictory flags, an unreadable token
// file). The token file is read here, not by ApplyServerOptions, to warn about a CRLF line end.
Status ApplyServerFlags(ServeArgs& args, bool* token_given) {
  OptionValues given(OptionNaming::kFlag);
  NEARDUP_RETURN_IF_ERROR(args.server_flags.Collect(&given));
  *token_given = given.Has("token");
  if (given.Has("token_file") && !given.Has("token")) {
    const std::string path = std::get<std::string>(*given.Find("token_file"));
    bool stripped_cr = false;
    Result<std::string> token = service::ReadTokenFile(path, &stripped_cr);
    if (!token.ok()) return token.status();
    if (stripped_cr) {
      PrintWarning(path + ": removed a trailing carriage return (CRLF line end) from the token");
    }
    given.Erase("token_file");
    args.server.token = std::move(*token);
  }
  return service::ApplyServerOptions(given, &args.server);
}

// $NEARDUP_TOKEN when neither flag gave a token; warns about a token in the process list and
// about no token on a non-loopback address.
void ChooseToken(ServeArgs& args, bool token_given) {
  if (token_given && !args.server.token.empty()) {
    PrintWarning(
        "--token is visible to every user in the process list; prefer --token-file or "
        "$NEARDUP_TOKEN");
  } else if (args.server.token.empty()) {
    if (const char* env = std::getenv("NEARDUP_TOKEN")) args.server.token = env;
  }
  if (args.server.token.empty() && !IsLoopbackHost(args.server.host)) {
    PrintWarning("no token: anyone who can reach " + args.server.host +
                 " may add and remove documents unauthenticated; set --token-file or "
                 "$NEARDUP_TOKEN, or bind to 127.0.0.1");
  }
}

// The start-up line: the store's rule, width, table radius, index design and fingerprint options.
void PrintStoreLine(const std::string& dir, const StoreStats& stats,
                    const FingerprintOptions& fingerprint_options) {
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
    if (stats.pair_rule.edited_threshold > 0) {
      std::snprintf(buffer, sizeof(buffer), ", edited %g (shingle Jaccard >= %g)",
                    stats.pair_rule.edited_threshold, stats.pair_rule.edited_min_jaccard);
      rule += buffer;
    } else {
      rule += ", edited off";  // recorded so (--edited 0, or a store made before it was on)
    }
  }
  std::fprintf(stderr,
               "neardup serve: %s: rule %s; %d-bit, indexed_k %d, index design: %s (%.0f B/fp); "
               "fingerprint options: %s\n",
               dir.c_str(), rule.c_str(), stats.bits, stats.indexed_k, stats.index_design.c_str(),
               stats.index_bytes_per_fingerprint,
               FingerprintOptionsToString(fingerprint_options).c_str());
}

// How the server turns texts into what the store takes: a dedup-rule store's sketcher, or a
// simhash-rule store's fingerprinter (none with --no-text, or when it cannot be built: warned).
struct TextPipelines {
  std::unique_ptr<Fingerprinter> fingerprinter;
  std::unique_ptr<DocumentSketcher> sketcher;
};

// kExitOk with *out set, else the exit code (the error printed).
int MakeTextPipelines(const ServeArgs& args, const DocumentStore& store, StoreRule rule,
                      const FingerprintOptions& fingerprint_options, TextPipelines* out) {
  const bool no_text = args.command_flags.Given("no_text");
  if (rule == StoreRule::kDedup) {
    // A dedup-rule store takes texts only: the sketcher is its text pipeline (--no-text would
    // leave the server unable to add or check anything).
    if (no_text) {
      PrintError(args.dir +
                 " is a dedup-rule store, which takes texts only: --no-text applies to a "
                 "simhash-rule store");
      return kExitUsage;
    }
    auto created = SketcherForStore(store, fingerprint_options);
    if (!created.ok()) {
      std::fprintf(stderr, "neardup serve: %s\n", created.status().ToString().c_str());
      return kExitFailure;
    }
    out->sketcher = std::move(*created);
  } else if (!no_text) {
    auto created = Fingerprinter::Create(fingerprint_options);
    if (!created.ok()) {
      PrintWarning("text fingerprinting disabled: " + created.status().message());
    } else {
      out->fingerprinter = std::move(*created);
    }
  }
  return kExitOk;
}

// Runs the bound server until SIGTERM/SIGINT (blocked in every thread, awaited by one), then
// closes the store.
int ServeUntilSignal(service::Server& server, DocumentStore& store, const sigset_t& signals) {
  std::thread waiter([&server, signals] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (signal_number != 0) server.Stop();
  });
  waiter.detach();  // exits with the process if the server stops for another reason
  Status status = server.Run();
  Status closed = store.Close();
  if (!status.ok() || !closed.ok()) {
    PrintError(!status.ok() ? status : closed);
    return kExitFailure;
  }
  std::fprintf(stderr, "neardup serve: shut down cleanly\n");
  return kExitOk;
}

int Run(ServeArgs& args) {
  // Flags that contradict each other are usage errors, never one silently ignored.
  bool token_given = false;
  if (Status status = ApplyServerFlags(args, &token_given); !status.ok()) {
    PrintError(status);
    return kExitUsage;
  }
  StoreOptions options;
  options.sync_mode = SyncMode::kGroupCommit;  // serve's default (--sync)
  if (Status applied = args.store.Apply(&options); !applied.ok()) {
    PrintError(applied);
    return kExitUsage;
  }
  // Block the shutdown signals in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ChooseToken(args, token_given);
  const long open_files = service::RaiseOpenFileLimit();

  FingerprintOptions fingerprint_options;
  auto store =
      OpenStoreWithFingerprintOptions(args.dir, options, args.fingerprint, &fingerprint_options);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitFailure;
  }
  const StoreStats stats = (*store)->Stats();
  PrintStoreLine(args.dir, stats, fingerprint_options);
  TextPipelines text;
  if (int code = MakeTextPipelines(args, **store, stats.rule, fingerprint_options, &text);
      code != kExitOk) {
    (void)(*store)->Close();
    return code;
  }
  // The request limits' width and largest k come from the store (Server::Create).
  auto created = text.sketcher != nullptr
                     ? service::Server::Create(store->get(), *text.sketcher, args.server)
                     : service::Server::Create(store->get(), text.fingerprinter.get(), args.server);
  if (!created.ok()) {
    PrintError(created.status());
    return kExitFailure;
  }
  service::Server& server = **created;
  if (Status status = server.Bind(); !status.ok()) {
    PrintError(status);
    return kExitFailure;
  }
  std::printf(
      "neardup serve: listening on http://%s:%d (%llu documents, opened in %.3f s, open-file "
      "limit %ld)\n",
      args.server.host.c_str(), server.port(), static_cast<unsigned long long>(stats.documents),
      stats.open_seconds, open_files);
  std::fflush(stdout);
  return ServeUntilSignal(server, **store, signals);
}

// The server's registry options, in the order of --help.
constexpr std::string_view kNetworkKeys[] = {"host", "port", "poll_threads", "workers"};
constexpr std::string_view kAuthKeys[] = {"token_file", "token", "auth_reads"};
constexpr std::string_view kLimitKeys[] = {"max_body_bytes",          "max_query_body_bytes",
                                           "max_response_bytes",      "max_buffered_bytes",
                                           "malloc_arenas",           "max_batch",
                                           "request_timeout_seconds", "idle_timeout_seconds",
                                           "max_connections",         "shutdown_timeout_seconds"};
constexpr std::string_view kServeKeys[] = {"no_text"};

RunFunction Setup(CLI::App* app) {
  auto args = std::make_shared<ServeArgs>();
  app->add_option("dir", args->dir, "store directory (created if missing)")->required();
  args->server_flags.DeclareKeys(app, kNetworkKeys);
  args->server_flags.DeclareKeys(app, kAuthKeys);
  args->fingerprint.Add(app);  // a new store records them; an existing store refuses others
  // For a new store; an existing one refuses others.
  args->store.Declare(app, StoreFlags::kCreation);
  args->store.Declare(app, StoreFlags::kWriting);
  args->store.ShowDefault("sync", "group");
  args->server_flags.DeclareKeys(app, kLimitKeys);
  args->command_flags.DeclareKeys(app, kServeKeys);
  args->store.Declare(app, StoreFlags::kOpening);
  app->footer(
      "Examples:\n"
      "  neardup serve store/ --port 8080 --token-file token.txt\n"
      "  neardup serve store/ --memory-budget 128/fp --expected-size 1e8\n"
      "  NEARDUP_TOKEN=... neardup serve store/ --host 0.0.0.0 --sync every");
  return [args]() { return Run(*args); };
}

CommandRegistrar registrar("serve", "serve a store over HTTP/JSON (see docs/api.md)", Setup);

}  // namespace
}  // namespace neardup::cli
