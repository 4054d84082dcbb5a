// `neardup index create|add|query|get|remove|stats|compact|recover DIR`: the persistent store from
// the command line (the same directory `neardup serve` and the library open).
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "cli/store_flags.h"
#include "common/json_writer.h"
#include "common/parallel.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/store.h"
#include "store/stats_json.h"

namespace neardup::cli {
namespace {

struct IndexArgs {
  std::string dir;
  FingerprintFlags fingerprint_flags;  // the same fingerprint flags as every other command
  int max_k = 3;
  std::string memory_budget = "128/fp";
  double expected_documents = 1e7;
  InputFlags input;  // the same reading flags as every other command
  std::string metadata_field = "metadata";
  std::string fingerprint_field = "fingerprint";
  std::string sync = "every";
  size_t batch = 10000;
  size_t memtable_limit = size_t{1} << 20;
  uint64_t wal_flush_bytes = StoreOptions().wal_flush_bytes;
  bool compact = true;
  std::string fingerprint;
  std::string text;
  int k = 3;
  size_t limit = 0;
  std::vector<std::string> ids;
  bool no_verify = false;
};

int Fail(const Status& status) {
  PrintError(status);
  return kExitFailure;
}

Result<std::unique_ptr<DocumentStore>> OpenExisting(const IndexArgs& args, SyncMode sync,
                                                    bool read_only = false) {
  StoreOptions options;
  options.create_if_missing = false;
  options.read_only = read_only;
  options.sync_mode = sync;
  options.verify_checksums_on_open = !args.no_verify;
  auto store = DocumentStore::Open(args.dir, options);
  if (store.ok()) WarnIfLogTailDropped(**store);
  return store;
}

// Opens an existing store for adding or querying text: *fingerprint gets the fingerprint options
// the store recorded (a fingerprint flag given must agree with them).
Result<std::unique_ptr<DocumentStore>> OpenExistingForText(const IndexArgs& args,
                                                           StoreOptions options,
                                                           FingerprintOptions* fingerprint) {
  options.create_if_missing = false;
  options.verify_checksums_on_open = !args.no_verify;
  return OpenStoreWithFingerprintOptions(args.dir, options, args.fingerprint_flags, fingerprint);
}

void PrintDocument(const StoredDocument& doc, bool with_distance) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("id").String(doc.id).Key("fingerprint").String(ToHex(doc.fingerprint));
  if (with_distance) w.Key("distance").Int(doc.distance);
  w.Key("metadata").Metadata(doc.metadata).EndObject();
  std::puts(out.c_str());
}

int RunCreate(const IndexArgs& args) {
  StoreOptions options;
  options.error_if_exists = true;
  options.indexed_k = args.max_k;
  options.expected_size = args.expected_documents;
  Result<MemoryBudget> budget = ParseMemoryBudget(args.memory_budget);
  if (!budget.ok()) return Fail(budget.status().WithContext("--memory-budget"));
  options.memory_budget = *budget;
  FingerprintOptions fingerprint;
  Status valid = args.fingerprint_flags.ToOptions(&fingerprint);
  if (valid.ok())
    valid = Fingerprinter::Create(fingerprint).status();  // fails early, naming the file
  if (!valid.ok()) return Fail(valid);
  auto store =
      CreateStoreWithFingerprintOptions(args.dir, options, args.fingerprint_flags, &fingerprint);
  if (!store.ok()) return Fail(store.status());
  const StoreStats stats = (*store)->Stats();
  Status status = (*store)->Close();
  if (!status.ok()) return Fail(status);
  std::fprintf(stderr,
               "neardup: index create: created %s (%d-bit, max_k %d); index design for %.4g "
               "documents within %s: %s (%.1f B/fp); fingerprint options: %s\n",
               args.dir.c_str(), stats.bits, args.max_k, args.expected_documents,
               budget->ToString().c_str(), stats.index_design.c_str(),
               stats.index_bytes_per_fingerprint, stats.fingerprint_options.c_str());
  return kExitOk;
}

// Reads documents through the one DocumentReader (the same inputs, flags and skip-and-count
// behaviour as every other command) and adds them in batches. A record may carry a fingerprint
// (hex) instead of text, and metadata: any JSON value, stored as its compact JSON text.
int RunAdd(const IndexArgs& args) {
  // Bulk loading: big memtable, no background compaction while adding, one compaction at the end.
  StoreOptions options;
  options.create_if_missing = false;
  options.sync_mode = args.sync == "none" ? SyncMode::kNone : SyncMode::kEveryWrite;
  options.memtable_limit = args.memtable_limit;
  options.wal_flush_bytes = args.wal_flush_bytes;
  options.compaction_trigger = 0;
  std::vector<std::string> inputs = args.input.inputs;
  if (inputs.empty()) inputs.push_back("-");
  DocumentReaderOptions reader_options;
  args.input.ToReaderOptions(&reader_options);
  reader_options.allow_invalid_utf8_text = args.fingerprint_flags.replace_invalid;
  reader_options.metadata_field = args.metadata_field;
  reader_options.fingerprint_field = args.fingerprint_field;
  WarningPrinter warnings;
  reader_options.on_warning = warnings.Callback();
  auto reader = DocumentReader::Open(inputs, reader_options);
  if (!reader.ok()) return Fail(reader.status());
  FingerprintOptions fingerprint_options;
  auto opened = OpenExistingForText(args, options, &fingerprint_options);
  if (!opened.ok()) return Fail(opened.status());
  DocumentStore& store = **opened;
  const StoreStats initial = store.Stats();
  std::unique_ptr<Fingerprinter> fingerprinter;
  std::vector<Document> batch;
  std::map<std::string, uint64_t> failed;  // records read but not added, by reason
  size_t added = 0;
  size_t replaced = 0;  // of `added`: documents that replaced a stored one with the same id
  auto skip = [&](const Document& doc, const std::string& reason,
                  const std::string& why) -> Status {
    if (args.input.strict) return Status::InvalidArgument(doc.location + ": " + why);
    ++failed[reason];
    warnings.Callback()(doc.location + ": " + why + " (skipped)");
    return Status::Ok();
  };
  auto flush = [&]() -> Status {
    std::vector<Fingerprint> fps(batch.size());
    std::vector<Status> errors(batch.size());
    bool need_text = false;
    for (const Document& doc : batch) need_text |= doc.fingerprint.empty();
    if (need_text && !fingerprinter) {
      auto created = Fingerprinter::Create(fingerprint_options);
      if (!created.ok()) return created.status();
      fingerprinter = std::move(*created);
    }
    ParallelFor(batch.size(), args.input.threads, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        Result<Fingerprint> fp = batch[i].fingerprint.empty()
                                     ? fingerprinter->Compute(batch[i].text)
                                     : ParseFingerprint(batch[i].fingerprint);
        if (fp.ok() && fp->bits != initial.bits) {
          fp = Status::InvalidArgument("a " + std::to_string(fp->bits) + "-bit fingerprint in a " +
                                       std::to_string(initial.bits) + "-bit store");
        }
        if (fp.ok()) {
          fps[i] = *fp;
        } else {
          errors[i] = fp.status();
        }
      }
    });
    std::vector<DocumentInput> documents;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!errors[i].ok()) {
        NEARDUP_RETURN_IF_ERROR(skip(
            batch[i], batch[i].fingerprint.empty() ? "cannot_fingerprint" : "invalid_fingerprint",
            errors[i].message()));
        continue;
      }
      if (batch[i].id.size() > options.max_id_bytes) {
        NEARDUP_RETURN_IF_ERROR(skip(batch[i], "id_too_large",
                                     "id of " + std::to_string(batch[i].id.size()) +
                                         " bytes, more than " +
                                         std::to_string(options.max_id_bytes)));
        continue;
      }
      if (batch[i].metadata.size() > options.max_metadata_bytes) {
        NEARDUP_RETURN_IF_ERROR(skip(batch[i], "metadata_too_large",
                                     "metadata of " + std::to_string(batch[i].metadata.size()) +
                                         " bytes, more than " +
                                         std::to_string(options.max_metadata_bytes)));
        continue;
      }
      documents.push_back({batch[i].id, fps[i], batch[i].metadata});
    }
    // A document whose id is stored already (or comes earlier in this batch) replaces that one.
    std::set<std::string_view> in_batch;
    for (const DocumentInput& document : documents) {
      if (!in_batch.insert(document.id).second || store.Get(document.id).ok()) ++replaced;
    }
    NEARDUP_RETURN_IF_ERROR(store.AddBatch(documents));
    added += documents.size();
    batch.clear();
    return Status::Ok();
  };
  Document doc;
  for (;;) {
    auto got = (*reader)->Next(&doc);
    if (!got.ok()) return Fail(got.status());
    if (!*got) break;
    batch.push_back(std::move(doc));
    if (batch.size() >= args.batch) {
      Status status = flush();
      if (!status.ok()) return Fail(status);
    }
  }
  Status status = flush();
  if (status.ok()) status = store.Flush();
  if (status.ok() && args.compact) status = store.Compact();
  if (status.ok()) status = store.Close();
  if (!status.ok()) return Fail(status);
  std::map<std::string, uint64_t> skipped = (*reader)->skipped();
  for (const auto& [reason, count] : failed) skipped[reason] += count;
  WarningPrinter::PrintTotals(skipped, (*reader)->fallbacks());
  if (added == 0) return Fail(NothingRead(skipped));
  std::fprintf(stderr, "neardup: index add: added %s to %s (%s new, %s replaced)\n",
               Count(added, "document").c_str(), args.dir.c_str(),
               std::to_string(added - replaced).c_str(), Count(replaced, "document").c_str());
  return kExitOk;
}

int RunQuery(const IndexArgs& args) {
  FingerprintOptions fingerprint_options;
  StoreOptions read_only;  // a query never writes: it works while `neardup serve` has the store
  read_only.read_only = true;
  auto opened = OpenExistingForText(args, read_only, &fingerprint_options);
  if (!opened.ok()) return Fail(opened.status());
  DocumentStore& store = **opened;
  Fingerprint fp;
  if (!args.fingerprint.empty()) {
    auto parsed = ParseFingerprint(args.fingerprint);
    if (!parsed.ok()) return Fail(parsed.status().WithContext("--fingerprint"));
    fp = *parsed;
  } else {
    auto fingerprinter = Fingerprinter::Create(fingerprint_options);
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
  auto opened = OpenExisting(args, SyncMode::kEveryWrite, /*read_only=*/true);
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

// Removes each id, reporting every one: "removed ID" on stdout, or the error on stderr (exit 1
// if any failed; the others are still removed).
int RunRemove(const IndexArgs& args) {
  auto opened = OpenExisting(args, SyncMode::kEveryWrite);
  if (!opened.ok()) return Fail(opened.status());
  int code = kExitOk;
  size_t removed = 0;
  for (const std::string& id : args.ids) {
    Status status = (*opened)->Remove(id);
    if (!status.ok()) {
      Fail(status);
      code = kExitFailure;
    } else {
      std::printf("removed %s\n", id.c_str());
      ++removed;
    }
  }
  Status status = (*opened)->Close();
  if (!status.ok()) return Fail(status);
  std::fprintf(stderr, "neardup: index remove: removed %s of %zu\n",
               Count(removed, "document").c_str(), args.ids.size());
  return code;
}

int RunStats(const IndexArgs& args) {
  StoreOptions options;  // read-only: stats never write to the store
  options.read_only = true;
  options.verify_checksums_on_open = !args.no_verify;
  auto opened = DocumentStore::Open(args.dir, options);
  if (!opened.ok()) return Fail(opened.status());
  WarnIfLogTailDropped(**opened);
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
    std::fprintf(stderr, "neardup: index recover: %s\n", message.c_str());
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
  args->fingerprint_flags.Add(create);  // recorded in the MANIFEST; add and query then use them
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
      "add",
      "Add documents: JSONL records {\"id\", \"text\" or \"fingerprint\", \"metadata\"}, text "
      "files, directories, - for standard input (read like every other command)");
  dir_option(add);
  args->input.Add(add);
  args->fingerprint_flags.Add(add);
  add->add_option("--metadata-field", args->metadata_field,
                  "JSONL field stored as the document's metadata (any JSON value, kept verbatim)");
  add->add_option("--fingerprint-field", args->fingerprint_field,
                  "JSONL field holding a ready fingerprint (hex); such records need no text");
  add->add_option("--sync", args->sync, "every (fsync each batch) or none (bulk load)")
      ->check(CLI::IsMember({"every", "none"}));
  add->add_option("--batch", args->batch, "Documents per atomic batch")
      ->check(CLI::Range(1, 1000000));
  add->add_option("--memtable-limit", args->memtable_limit, "Entries per segment while loading");
  add->add_option("--wal-flush-bytes", args->wal_flush_bytes,
                  "flush to a segment when the log reaches this many bytes (bounds the replay at "
                  "the next open; 0 = no bound)")
      ->capture_default_str();
  add->add_flag("!--no-compact", args->compact, "Leave the segments unmerged after loading");
  add->footer(
      "Examples:\n"
      "  neardup index add store/ corpus.jsonl.gz more/\n"
      "  neardup index add store/ --id-field meta.url --text-field body < docs.jsonl\n"
      "  echo '{\"id\":\"u1\",\"fingerprint\":\"f773be40a3f0a3e5\",\"metadata\":{\"a\":1}}' | "
      "neardup index add store/");
  CLI::App* query = app->add_subcommand("query", "Find stored documents within k");
  dir_option(query);
  auto* fp_opt = query->add_option("--fingerprint", args->fingerprint, "Query fingerprint (hex)");
  auto* text_opt = query->add_option("--text", args->text, "Query text");
  fp_opt->excludes(text_opt);
  args->fingerprint_flags.Add(query);
  query->add_option("-k,--max-distance", args->k, "largest Hamming distance of a result")
      ->check(CLI::Range(0, 128));
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
  app->footer(
      "Examples:\n"
      "  neardup index create store/ --max-k 3\n"
      "  neardup index add store/ corpus.jsonl\n"
      "  neardup index query store/ --text \"some text\" -k 3");
  return [=]() -> int {
    if (create->parsed()) return RunCreate(*args);
    if (add->parsed()) return RunAdd(*args);
    if (query->parsed()) {
      if (args->fingerprint.empty() && args->text.empty()) {
        PrintError("index query: give --fingerprint or --text");
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
