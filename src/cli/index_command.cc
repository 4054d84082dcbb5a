// `neardup index create|add|query|get|remove|stats|compact|recover DIR`: the persistent store from
// the command line (the same directory `neardup serve` and the library open).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "common/json_writer.h"
#include "common/parallel.h"
#include "neardup/fingerprinter.h"
#include "neardup/store.h"
#include "service/request_parser.h"
#include "store/stats_json.h"

namespace neardup::cli {
namespace {

struct IndexArgs {
  std::string dir;
  int bits = 64;
  int max_k = 3;
  std::string memory_budget = "128/fp";
  double expected_documents = 1e7;
  std::string input = "-";
  std::string sync = "every";
  size_t batch = 10000;
  size_t memtable_limit = size_t{1} << 20;
  bool compact = true;
  std::string fingerprint;
  std::string text;
  int k = 3;
  size_t limit = 0;
  std::vector<std::string> ids;
  bool no_verify = false;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "neardup index: %s\n", status.ToString().c_str());
  return kExitFailure;
}

Result<std::unique_ptr<DocumentStore>> OpenExisting(const IndexArgs& args, SyncMode sync) {
  StoreOptions options;
  options.create_if_missing = false;
  options.sync_mode = sync;
  options.verify_checksums_on_open = !args.no_verify;
  return DocumentStore::Open(args.dir, options);
}

void PrintDocument(const StoredDocument& doc, bool with_distance) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("id").String(doc.id).Key("fingerprint").String(ToHex(doc.fingerprint));
  if (with_distance) w.Key("distance").Int(doc.distance);
  w.Key("metadata").String(doc.metadata).EndObject();
  std::puts(out.c_str());
}

int RunCreate(const IndexArgs& args) {
  StoreOptions options;
  options.error_if_exists = true;
  options.bits = args.bits;
  options.max_k = args.max_k;
  options.expected_documents = args.expected_documents;
  Result<MemoryBudget> budget = ParseMemoryBudget(args.memory_budget);
  if (!budget.ok()) return Fail(budget.status().WithContext("--memory-budget"));
  options.index_memory_budget = *budget;
  auto store = DocumentStore::Open(args.dir, options);
  if (!store.ok()) return Fail(store.status());
  const StoreStats stats = (*store)->Stats();
  Status status = (*store)->Close();
  if (!status.ok()) return Fail(status);
  std::fprintf(stderr,
               "created %s (%d-bit, max_k %d); index design for %.4g documents within %s: %s "
               "(%.1f B/fp)\n",
               args.dir.c_str(), args.bits, args.max_k, args.expected_documents,
               budget->ToString().c_str(), stats.index_design.c_str(),
               stats.index_bytes_per_fingerprint);
  return kExitOk;
}

// Reads JSONL documents ({"id", "text"|"fingerprint", "metadata"}) and adds them in batches.
int RunAdd(const IndexArgs& args) {
  // Bulk loading: big memtable, no background compaction while adding, one compaction at the end.
  StoreOptions options;
  options.create_if_missing = false;
  options.sync_mode = args.sync == "none" ? SyncMode::kNone : SyncMode::kEveryWrite;
  options.memtable_limit = args.memtable_limit;
  options.compaction_trigger = 0;
  auto opened = DocumentStore::Open(args.dir, options);
  if (!opened.ok()) return Fail(opened.status());
  DocumentStore& store = **opened;
  const StoreStats initial = store.Stats();
  std::unique_ptr<Fingerprinter> fingerprinter;
  service::RequestLimits limits;
  limits.bits = initial.bits;
  limits.max_text_bytes = size_t{64} << 20;
  std::istream* in = &std::cin;
  std::ifstream file;
  if (args.input != "-") {
    file.open(args.input);
    if (!file) return Fail(Status::NotFound(args.input + ": cannot open"));
    in = &file;
  }
  const std::string name = args.input == "-" ? "<stdin>" : args.input;
  std::vector<service::DocumentRequest> batch;
  size_t line_number = 0, added = 0;
  auto flush = [&]() -> Status {
    std::vector<Fingerprint> fps(batch.size());
    std::vector<Status> errors(batch.size());
    bool need_text = false;
    for (const auto& doc : batch) need_text |= doc.text.has_value();
    if (need_text && !fingerprinter) {
      FingerprintOptions fo;
      fo.bits = initial.bits;
      auto created = Fingerprinter::Create(fo);
      if (!created.ok()) return created.status();
      fingerprinter = std::move(*created);
    }
    ParallelFor(batch.size(), 0, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        if (batch[i].fingerprint) {
          fps[i] = *batch[i].fingerprint;
        } else {
          auto fp = fingerprinter->Compute(*batch[i].text);
          if (fp.ok())
            fps[i] = *fp;
          else
            errors[i] = fp.status();
        }
      }
    });
    std::vector<DocumentInput> inputs;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!errors[i].ok()) return errors[i].WithContext("document \"" + batch[i].id + "\"");
      inputs.push_back({batch[i].id, fps[i], batch[i].metadata_json});
    }
    NEARDUP_RETURN_IF_ERROR(store.AddBatch(inputs));
    added += inputs.size();
    batch.clear();
    return Status::Ok();
  };
  std::string line;
  while (std::getline(*in, line)) {
    ++line_number;
    if (line.empty()) continue;
    auto request = service::ParseAddRequest(line, limits);
    if (!request.ok()) {
      return Fail(request.status().WithContext(name + ":" + std::to_string(line_number)));
    }
    for (auto& doc : request->documents) batch.push_back(std::move(doc));
    if (batch.size() >= args.batch) {
      Status status = flush();
      if (!status.ok()) return Fail(status.WithContext(name + ":" + std::to_string(line_number)));
    }
  }
  Status status = flush();
  if (status.ok()) status = store.Flush();
  if (status.ok() && args.compact) status = store.Compact();
  if (status.ok()) status = store.Close();
  if (!status.ok()) return Fail(status);
  std::fprintf(stderr, "added %zu documents to %s\n", added, args.dir.c_str());
  return kExitOk;
}

int RunQuery(const IndexArgs& args) {
  auto opened = OpenExisting(args, SyncMode::kEveryWrite);
  if (!opened.ok()) return Fail(opened.status());
  DocumentStore& store = **opened;
  Fingerprint fp;
  if (!args.fingerprint.empty()) {
    auto parsed = ParseFingerprint(args.fingerprint);
    if (!parsed.ok()) return Fail(parsed.status().WithContext("--fingerprint"));
    fp = *parsed;
  } else {
    FingerprintOptions fo;
    fo.bits = store.Stats().bits;
    auto fingerprinter = Fingerprinter::Create(fo);
    if (!fingerprinter.ok()) return Fail(fingerprinter.status());
    auto computed = (*fingerprinter)->Compute(args.text);
    if (!computed.ok()) return Fail(computed.status().WithContext("--text"));
    fp = *computed;
  }
  auto found = store.Search(fp, args.k, args.limit);
  if (!found.ok()) return Fail(found.status());
  for (const StoredDocument& doc : *found) PrintDocument(doc, true);
  return kExitOk;
}

int RunGet(const IndexArgs& args) {
  auto opened = OpenExisting(args, SyncMode::kEveryWrite);
  if (!opened.ok()) return Fail(opened.status());
  int code = kExitOk;
  for (const std::string& id : args.ids) {
    auto doc = (*opened)->Get(id);
    if (!doc.ok()) {
      Fail(doc.status());
      code = kExitFailure;
      continue;
    }
    PrintDocument(*doc, false);
  }
  return code;
}

int RunRemove(const IndexArgs& args) {
  auto opened = OpenExisting(args, SyncMode::kEveryWrite);
  if (!opened.ok()) return Fail(opened.status());
  int code = kExitOk;
  for (const std::string& id : args.ids) {
    Status status = (*opened)->Remove(id);
    if (!status.ok()) {
      Fail(status);
      code = kExitFailure;
    }
  }
  Status status = (*opened)->Close();
  if (!status.ok()) return Fail(status);
  return code;
}

int RunStats(const IndexArgs& args) {
  StoreOptions options;  // read-only: stats never write to the store
  options.read_only = true;
  options.verify_checksums_on_open = !args.no_verify;
  auto opened = DocumentStore::Open(args.dir, options);
  if (!opened.ok()) return Fail(opened.status());
  const StoreStats s = (*opened)->Stats();
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  WriteStoreStatsFields(s, &w);
  w.EndObject();
  std::puts(out.c_str());
  return kExitOk;
}

int RunCompact(const IndexArgs& args) {
  auto opened = OpenExisting(args, SyncMode::kEveryWrite);
  if (!opened.ok()) return Fail(opened.status());
  Status status = (*opened)->Flush();
  if (status.ok()) status = (*opened)->Compact();
  if (status.ok()) status = (*opened)->Close();
  if (!status.ok()) return Fail(status);
  return kExitOk;
}

int RunRecover(const IndexArgs& args) {
  auto report = RecoverStore(args.dir);
  if (!report.ok()) return Fail(report.status());
  for (const std::string& message : report->messages) {
    std::fprintf(stderr, "recover: %s\n", message.c_str());
  }
  std::string out;
  JsonWriter w(&out);
  w.BeginObject()
      .Key("documents")
      .Uint(report->documents)
      .Key("segments_kept")
      .Uint(report->segments_kept)
      .Key("segments_salvaged")
      .Uint(report->segments_salvaged)
      .Key("entries_lost")
      .Uint(report->entries_lost)
      .Key("wal_records_kept")
      .Uint(report->wal_records_kept)
      .Key("wal_bytes_dropped")
      .Uint(report->wal_bytes_dropped)
      .EndObject();
  std::puts(out.c_str());
  return kExitOk;
}

RunFunction Setup(CLI::App* app) {
  auto args = std::make_shared<IndexArgs>();
  app->require_subcommand(1);
  auto dir_option = [&](CLI::App* sub) {
    sub->add_option("dir", args->dir, "Store directory")->required();
  };
  CLI::App* create = app->add_subcommand("create", "Create an empty store");
  dir_option(create);
  create->add_option("--bits", args->bits, "Fingerprint width: 64 or 128")
      ->check(CLI::IsMember({64, 128}));
  create->add_option("--max-k", args->max_k, "Largest k served by the permuted tables")
      ->check(CLI::Range(0, 15));
  create
      ->add_option("--memory-budget", args->memory_budget,
                   "Index memory budget: bytes (640M, 1.5G) or bytes per fingerprint (128/fp); "
                   "the planner picks the fastest design within it")
      ->capture_default_str();
  create
      ->add_option("--expected-documents", args->expected_documents,
                   "Documents the index design is planned for")
      ->capture_default_str();
  CLI::App* add = app->add_subcommand(
      "add", "Add JSONL documents {\"id\", \"text\"|\"fingerprint\", \"metadata\"}");
  dir_option(add);
  add->add_option("input", args->input, "JSONL file, or - for standard input");
  add->add_option("--sync", args->sync, "every (fsync each batch) or none (bulk load)")
      ->check(CLI::IsMember({"every", "none"}));
  add->add_option("--batch", args->batch, "Documents per atomic batch")
      ->check(CLI::Range(1, 1000000));
  add->add_option("--memtable-limit", args->memtable_limit, "Entries per segment while loading");
  add->add_flag("!--no-compact", args->compact, "Leave the segments unmerged after loading");
  CLI::App* query = app->add_subcommand("query", "Find stored documents within k");
  dir_option(query);
  auto* fp_opt = query->add_option("--fingerprint", args->fingerprint, "Query fingerprint (hex)");
  auto* text_opt = query->add_option("--text", args->text, "Query text");
  fp_opt->excludes(text_opt);
  query->add_option("-k", args->k, "Hamming distance")->check(CLI::Range(0, 128));
  query->add_option("--limit", args->limit, "Most results (0 = all)");
  CLI::App* get = app->add_subcommand("get", "Print documents by id");
  dir_option(get);
  get->add_option("ids", args->ids, "External ids")->required();
  CLI::App* remove = app->add_subcommand("remove", "Remove documents by id");
  dir_option(remove);
  remove->add_option("ids", args->ids, "External ids")->required();
  CLI::App* stats = app->add_subcommand("stats", "Print store statistics (JSON)");
  dir_option(stats);
  stats->add_flag("--no-verify", args->no_verify, "Skip whole-file segment checksums at open");
  CLI::App* compact = app->add_subcommand("compact", "Flush and merge all segments");
  dir_option(compact);
  CLI::App* recover = app->add_subcommand(
      "recover", "Salvage what is intact in a damaged store (damaged files become *.corrupt)");
  dir_option(recover);
  return [=]() -> int {
    if (create->parsed()) return RunCreate(*args);
    if (add->parsed()) return RunAdd(*args);
    if (query->parsed()) {
      if (args->fingerprint.empty() && args->text.empty()) {
        std::fputs("neardup index query: give --fingerprint or --text\n", stderr);
        return kExitUsage;
      }
      return RunQuery(*args);
    }
    if (get->parsed()) return RunGet(*args);
    if (remove->parsed()) return RunRemove(*args);
    if (stats->parsed()) return RunStats(*args);
    if (compact->parsed()) return RunCompact(*args);
    if (recover->parsed()) return RunRecover(*args);
    return kExitUsage;
  };
}

CommandRegistrar registrar("index", "Create, fill, query and repair a persistent store", Setup);

}  // namespace
}  // namespace neardup::cli
