// `neardup index create|add|query|get|remove|stats|compact|recover DIR`: the persistent store from
// the command line (the same directory `neardup serve` and the library open).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "cli/store_flags.h"
#include "common/json_writer.h"
#include "common/parallel.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/output_file.h"
#include "neardup/sketch.h"
#include "neardup/store.h"
#include "store/stats_json.h"

namespace neardup::cli {
namespace {

struct IndexArgs {
  std::string dir;
  FingerprintFlags fingerprint_flags;  // the same fingerprint flags as every other command
  StoreFlags store;  // create: the rule and index design; add: memtable and log bounds
  InputFlags input;  // the same reading flags as every other command
  std::string metadata_field = "metadata";
  std::string fingerprint_field = "fingerprint";
  size_t batch = 10000;
  bool compact = true;
  std::string check;   // add: "" (bulk add), "if-new" or "always" (check each document)
  std::string output;  // query INPUT...: the output directory (empty: clusters on stdout)
  bool force = false;
  std::string fingerprint;
  std::string text;
  int k = 3;
  bool k_given = false;  // query: -k was given (a dedup-rule store's text queries refuse it)
  size_t limit = 0;
  std::vector<std::string> ids;
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

// A duplicate found by a check, as /v1/check writes it.
void WriteDuplicate(JsonWriter& w, const StoredDocument& doc) {
  w.BeginObject().Key("id").String(doc.id).Key("fingerprint").String(ToHex(doc.fingerprint));
  w.Key("reason").String(DuplicateReasonName(doc.reason)).Key("similarity");
  if (doc.similarity) {
    w.Double(*doc.similarity);
  } else {
    w.Null();
  }
  w.Key("distance").Int(doc.distance).Key("metadata").Metadata(doc.metadata).EndObject();
}

// Documents read in one batch and what the text pipeline made of them (in parallel).
struct TextBatch {
  std::vector<Document> docs;
  std::vector<Fingerprint> fps;
  std::vector<DocumentSketch> sketches;
  std::vector<Status> errors;

  void Clear() {
    docs.clear();
    fps.clear();
    sketches.clear();
    errors.clear();
  }
  // Fingerprints (and, with a sketcher, sketches) documents [begin, end).
  void Process(size_t begin, size_t end, const Fingerprinter* fingerprinter,
               const DocumentSketcher* sketcher, int store_bits) {
    for (size_t i = begin; i < end; ++i) {
      const Document& doc = docs[i];
      if (!doc.fingerprint.empty()) {
        if (sketcher != nullptr) {
          errors[i] = Status::InvalidArgument(
              "a bare fingerprint: this store applies the dedup rule, which needs the text "
              "(create the store with --rule simhash to store fingerprints)");
          continue;
        }
        Result<Fingerprint> fp = ParseFingerprint(doc.fingerprint);
        if (fp.ok() && fp->bits != store_bits) {
          fp = Status::InvalidArgument("a " + std::to_string(fp->bits) + "-bit fingerprint in a " +
                                       std::to_string(store_bits) + "-bit store");
        }
        if (fp.ok()) {
          fps[i] = *fp;
        } else {
          errors[i] = fp.status();
        }
        continue;
      }
      if (sketcher != nullptr) {
        errors[i] = sketcher->Sketch(doc.text, &fps[i], &sketches[i]);
        continue;
      }
      Result<Fingerprint> fp = fingerprinter->Compute(doc.text);
      if (fp.ok()) {
        fps[i] = *fp;
      } else {
        errors[i] = fp.status();
      }
    }
  }
  void Size() {
    fps.assign(docs.size(), Fingerprint{});
    sketches.resize(docs.size());
    errors.assign(docs.size(), Status::Ok());
  }
};

// Reads, fingerprints/sketches and hands on documents in batches as a pipeline: while the workers
// process batch n, the calling thread hands batch n - 1 to `consume` (the one write path) and
// reads batch n + 1.
class TextPipeline {
 public:
  // Texts go to `sketcher` (a dedup-rule store) or to the Fingerprinter made by
  // `fingerprint_options` when a batch first holds a text (records with a ready fingerprint need
  // none, nor its dictionaries).
  TextPipeline(DocumentReader* reader, size_t batch_size, int threads,
               const FingerprintOptions& fingerprint_options, const DocumentSketcher* sketcher,
               int bits)
      : reader_(reader),
        batch_size_(batch_size),
        threads_(threads),
        fingerprint_options_(fingerprint_options),
        sketcher_(sketcher),
        bits_(bits) {}

  Status Run(const std::function<Status(TextBatch&)>& consume) {
    TextBatch batches[3];
    TextBatch* next = &batches[0];
    TextBatch* current = &batches[1];
    TextBatch* previous = &batches[2];
    NEARDUP_RETURN_IF_ERROR(Read(current));
    bool have_previous = false;
    while (!current->docs.empty() || have_previous) {
      Status consumed, read;
      current->Size();
      NEARDUP_RETURN_IF_ERROR(EnsureFingerprinter(*current));
      auto process = [&](size_t begin, size_t end) {
        current->Process(begin, end, fingerprinter_.get(), sketcher_, bits_);
      };
      auto alongside = [&] {
        if (have_previous) consumed = consume(*previous);
        next->Clear();
        read = Read(next);
      };
      if (current->docs.empty()) {
        alongside();
      } else if (threads_ == 1) {
        process(0, current->docs.size());
        alongside();
      } else {
        ParallelForAlongside(current->docs.size(), threads_, process, 16, alongside);
      }
      NEARDUP_RETURN_IF_ERROR(consumed);
      NEARDUP_RETURN_IF_ERROR(read);
      have_previous = !current->docs.empty();
      std::swap(previous, current);
      std::swap(current, next);
    }
    return Status::Ok();
  }

 private:
  Status EnsureFingerprinter(const TextBatch& batch) {
    if (sketcher_ != nullptr || fingerprinter_) return Status::Ok();
    bool text = false;
    for (const Document& doc : batch.docs) text |= doc.fingerprint.empty();
    if (!text) return Status::Ok();
    auto created = Fingerprinter::Create(fingerprint_options_);
    if (!created.ok()) return created.status();
    fingerprinter_ = std::move(*created);
    return Status::Ok();
  }
  Status Read(TextBatch* batch) {
    Document doc;
    while (batch->docs.size() < batch_size_) {
      auto got = reader_->Next(&doc);
      if (!got.ok()) return got.status();
      if (!*got) break;
      batch->docs.push_back(std::move(doc));
    }
    return Status::Ok();
  }

  DocumentReader* reader_;
  size_t batch_size_;
  int threads_;
  FingerprintOptions fingerprint_options_;
  std::unique_ptr<Fingerprinter> fingerprinter_;
  const DocumentSketcher* sketcher_;
  int bits_;
};

// `index add`'s memtable while bulk loading (--memtable-limit's default here).
constexpr size_t kBulkMemtableLimit = size_t{1} << 18;

int RunCreate(const IndexArgs& args) {
  StoreOptions options;
  options.error_if_exists = true;
  FingerprintOptions fingerprint;
  // Contradictory flags (--rule simhash --threshold 0.6) are a usage error, as in every command.
  Status given = args.store.Apply(&options);
  if (given.ok()) given = args.fingerprint_flags.ToOptions(&fingerprint);
  if (!given.ok()) {
    PrintError(given);
    return kExitUsage;
  }
  // Fails early, naming the file (an IDF table, a jieba directory).
  if (Status valid = Fingerprinter::Create(fingerprint).status(); !valid.ok()) return Fail(valid);
  auto store =
      CreateStoreWithFingerprintOptions(args.dir, options, args.fingerprint_flags, &fingerprint);
  if (!store.ok()) return Fail(store.status());
  const StoreStats stats = (*store)->Stats();
  Status status = (*store)->Close();
  if (!status.ok()) return Fail(status);
  std::string rule = "simhash";
  if (stats.rule == StoreRule::kDedup) {
    char buffer[160];
    std::snprintf(buffer, sizeof(buffer),
                  "dedup, threshold %g, %d bands of %d rows, containment %g (>= %g shingles, "
                  ">= %g of the larger)",
                  stats.lsh.threshold, stats.lsh.parameters.value_or(LshParameters{}).bands,
                  stats.lsh.parameters.value_or(LshParameters{}).rows,
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
  std::fprintf(
      stderr,
      "neardup: index create: created %s (rule %s; %d-bit, indexed_k %d); index design for "
      "%.4g documents within %s: %s (%.1f B/fp); fingerprint options: %s\n",
      args.dir.c_str(), rule.c_str(), stats.bits, stats.indexed_k, options.expected_size,
      options.memory_budget.ToString().c_str(), stats.index_design.c_str(),
      stats.index_bytes_per_fingerprint, stats.fingerprint_options.c_str());
  return kExitOk;
}

// The writes of `index add` as batches come: the one write path, each batch one atomic store call
// (AddBatch, or with --check a batch check that adds what duplicates nothing, each document also
// checked against the earlier ones of the batch), and the counts.
class BatchAdder {
 public:
  BatchAdder(const IndexArgs& args, const StoreOptions& options, DocumentStore* store,
             const DocumentSketcher* sketcher, WarningPrinter* warnings)
      : args_(args), options_(options), store_(store), sketcher_(sketcher), warnings_(warnings) {}

  Status Consume(TextBatch& batch) {
    std::vector<DocumentInput> documents;
    std::vector<const Document*> sources;
    NEARDUP_RETURN_IF_ERROR(Admit(batch, &documents, &sources));
    return args_.check.empty() ? Add(documents) : Check(documents, sources);
  }

  // Without --check: the documents that replaced a stored one, from the store's live count before
  // and after (this process is the store's only writer, under its lock, and only adds: each added
  // document either raised the count by one or replaced a live one). A per-document Get cost ~8 %
  // of a bulk load's CPU.
  void CountReplaced(uint64_t documents_before, uint64_t documents_after) {
    if (!args_.check.empty()) return;
    replaced_ = added_ - std::min<uint64_t>(added_, documents_after - documents_before);
  }

  const std::map<std::string, uint64_t>& failed() const { return failed_; }
  size_t added() const { return added_; }
  size_t replaced() const { return replaced_; }
  size_t duplicates() const { return duplicates_; }

 private:
  // A record read but not added: counted by reason and warned about (--strict: an error).
  Status Skip(const Document& doc, const std::string& reason, const std::string& why) {
    if (args_.input.strict()) return Status::InvalidArgument(doc.location + ": " + why);
    ++failed_[reason];
    warnings_->Callback()(doc.location + ": " + why + " (skipped)");
    return Status::Ok();
  }

  // The documents of `batch` the store can take (fingerprinted, id and metadata within bounds).
  Status Admit(TextBatch& batch, std::vector<DocumentInput>* documents,
               std::vector<const Document*>* sources) {
    for (size_t i = 0; i < batch.docs.size(); ++i) {
      const Document& doc = batch.docs[i];
      if (!batch.errors[i].ok()) {
        NEARDUP_RETURN_IF_ERROR(Skip(doc,
                                     doc.fingerprint.empty() ? "cannot_fingerprint"
                                     : sketcher_ != nullptr  ? "fingerprint_without_text"
                                                             : "invalid_fingerprint",
                                     batch.errors[i].message()));
        continue;
      }
      if (doc.id.size() > options_.max_id_bytes) {
        NEARDUP_RETURN_IF_ERROR(Skip(doc, "id_too_large",
                                     "id of " + std::to_string(doc.id.size()) +
                                         " bytes, more than " +
                                         std::to_string(options_.max_id_bytes)));
        continue;
      }
      if (doc.metadata.size() > options_.max_metadata_bytes) {
        NEARDUP_RETURN_IF_ERROR(Skip(doc, "metadata_too_large",
                                     "metadata of " + std::to_string(doc.metadata.size()) +
                                         " bytes, more than " +
                                         std::to_string(options_.max_metadata_bytes)));
        continue;
      }
      DocumentInput input{doc.id, batch.fps[i], doc.metadata};
      if (sketcher_ != nullptr) input.sketch = &batch.sketches[i];
      documents->push_back(input);
      sources->push_back(&doc);
    }
    return Status::Ok();
  }

  // Without --check: every document is added; one whose id is stored already (or comes earlier
  // in this batch) replaces that one (counted at the end by CountReplaced, not looked up here).
  Status Add(const std::vector<DocumentInput>& documents) {
    NEARDUP_RETURN_IF_ERROR(store_->AddBatch(documents));
    added_ += documents.size();
    return Status::Ok();
  }

  // --check: the store's rule on each document; those with duplicates printed as JSONL.
  Status Check(const std::vector<DocumentInput>& documents,
               const std::vector<const Document*>& sources) {
    CheckOptions check;
    check.add = args_.check == "always" ? AddMode::kAlways : AddMode::kIfNew;
    auto results = store_->CheckBatch(documents, check);
    if (!results.ok()) return results.status();
    for (size_t i = 0; i < results->size(); ++i) {
      const CheckResult& result = (*results)[i];
      added_ += result.added ? 1 : 0;
      replaced_ += result.replaced ? 1 : 0;
      if (result.duplicates.empty()) continue;
      ++duplicates_;
      std::string out;
      JsonWriter w(&out);
      w.BeginObject().Key("id").String(sources[i]->id).Key("location").String(sources[i]->location);
      w.Key("added").Bool(result.added).Key("duplicates").BeginArray();
      for (const StoredDocument& d : result.duplicates) WriteDuplicate(w, d);
      w.EndArray().EndObject();
      std::puts(out.c_str());
    }
    return Status::Ok();
  }

  const IndexArgs& args_;
  const StoreOptions& options_;
  DocumentStore* store_;
  const DocumentSketcher* sketcher_;
  WarningPrinter* warnings_;
  std::map<std::string, uint64_t> failed_;  // records read but not added, by reason
  size_t added_ = 0, duplicates_ = 0;
  size_t replaced_ = 0;  // of `added_`: documents that replaced a stored one with the same id
};

// The reader of `index add`'s inputs (standard input when none), with its metadata and
// fingerprint fields.
Result<std::unique_ptr<DocumentReader>> OpenAddInputs(const IndexArgs& args,
                                                      WarningPrinter* warnings) {
  std::vector<std::string> inputs = args.input.inputs;
  if (inputs.empty()) inputs.push_back("-");
  DocumentReaderOptions reader_options;
  NEARDUP_RETURN_IF_ERROR(args.input.ToReaderOptions(&reader_options, &args.fingerprint_flags));
  reader_options.metadata_field = args.metadata_field;
  reader_options.fingerprint_field = args.fingerprint_field;
  reader_options.on_warning = warnings->Callback();
  return DocumentReader::Open(inputs, reader_options);
}

// Reads documents through the one DocumentReader (the same inputs, flags and skip-and-count
// behaviour as every other command) and adds them in batches. A record may carry a fingerprint
// (hex) instead of text, and metadata: any JSON value, stored as its compact JSON text.
int RunAdd(const IndexArgs& args) {
  // Bulk loading: a big memtable, flushed in the background while reading goes on; the
  // size-tiered background compaction keeps the segments few while adding (each document is
  // rewritten about log2(documents / memtable) times); then, unless --no-compact, one merge of
  // all (it needs room for a second copy of the store for a moment) when this run added at least
  // as many documents as the store held, so the merge costs at most about twice the input: a few
  // documents added to a large store do not rewrite it (`index compact` merges all on demand).
  StoreOptions options;
  options.create_if_missing = false;
  options.memtable_limit = kBulkMemtableLimit;
  if (Status given = args.store.Apply(&options); !given.ok()) {
    PrintError(given);
    return kExitUsage;
  }
  WarningPrinter warnings;
  auto reader = OpenAddInputs(args, &warnings);
  if (!reader.ok()) return Fail(reader.status());
  FingerprintOptions fingerprint_options;
  auto opened = OpenExistingForText(args, options, &fingerprint_options);
  if (!opened.ok()) return Fail(opened.status());
  DocumentStore& store = **opened;
  const StoreStats initial = store.Stats();
  auto sketcher = SketcherForStore(store, fingerprint_options);
  if (!sketcher.ok()) return Fail(sketcher.status());
  BatchAdder adder(args, options, &store, sketcher->get(), &warnings);
  TextPipeline pipeline(reader->get(), args.batch, args.input.threads(), fingerprint_options,
                        sketcher->get(), initial.bits);
  Status status = pipeline.Run([&adder](TextBatch& batch) { return adder.Consume(batch); });
  if (status.ok()) adder.CountReplaced(initial.documents, store.Stats().documents);
  if (status.ok()) status = store.Flush();
  const bool merge_all = args.compact && adder.added() >= initial.documents;
  if (status.ok() && merge_all) status = store.Compact();
  if (status.ok()) status = store.Close();
  if (!status.ok()) return Fail(status);
  std::map<std::string, uint64_t> skipped = (*reader)->skipped();
  for (const auto& [reason, count] : adder.failed()) skipped[reason] += count;
  WarningPrinter::PrintTotals(skipped, (*reader)->fallbacks());
  if (adder.added() == 0 && adder.duplicates() == 0) return Fail(NothingRead(skipped));
  std::fprintf(stderr, "neardup: index add: added %s to %s (%s new, %s replaced)",
               Count(adder.added(), "document").c_str(), args.dir.c_str(),
               std::to_string(adder.added() - adder.replaced()).c_str(),
               Count(adder.replaced(), "document").c_str());
  if (!args.check.empty()) {
    std::fprintf(stderr, "; %s duplicated stored ones",
                 Count(adder.duplicates(), "document").c_str());
  }
  std::fputc('\n', stderr);
  if (args.compact && !merge_all) {
    std::fprintf(stderr,
                 "neardup: index add: no final merge: %s added to a store of %s (it merges all "
                 "when a run adds at least as many as the store held; `neardup index compact %s` "
                 "merges all now)\n",
                 Count(adder.added(), "document").c_str(),
                 Count(initial.documents, "document").c_str(), args.dir.c_str());
  }
  return kExitOk;
}

// -k given to a text query of a dedup-rule store, whose rule is no Hamming distance: a usage error.
int RefuseDistance(const IndexArgs& args) {
  PrintError("index query: " + args.dir +
             " is a dedup-rule store: its text queries apply its rule (Jaccard threshold), not "
             "-k (which applies to --fingerprint and to simhash-rule stores)");
  return kExitUsage;
}

// A text or fingerprint query: the store's rule for a text in a dedup-rule store (a check that
// adds nothing), else the fingerprints within -k.
int RunQueryOne(const IndexArgs& args) {
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
  } else if (store.LshOptions().has_value()) {
    if (args.k_given) return RefuseDistance(args);
    auto sketcher = SketcherForStore(store, fingerprint_options);
    if (!sketcher.ok()) return Fail(sketcher.status());
    DocumentSketch sketch;
    DocumentInput input;
    Status status = (*sketcher)->Sketch(args.text, &input.fingerprint, &sketch);
    if (!status.ok()) return Fail(status.WithContext("--text"));
    input.sketch = &sketch;
    CheckOptions check;
    check.add = AddMode::kNever;
    auto results = store.CheckBatch(std::span<const DocumentInput>(&input, 1), check);
    if (!results.ok()) return Fail(results.status());
    std::vector<StoredDocument>& found = (*results)[0].duplicates;
    if (args.limit > 0 && found.size() > args.limit) found.resize(args.limit);
    for (const StoredDocument& doc : found) {
      std::string out;
      JsonWriter w(&out);
      WriteDuplicate(w, doc);
      std::puts(out.c_str());
    }
    return kExitOk;
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

// The answers of `index query DIR INPUT...` as they come: per stored document matched, the input
// documents whose best match it is; keep.txt and remove.txt lines; counts.
class CorpusQuery {
 public:
  CorpusQuery(const IndexArgs& args, DocumentStore* store, const DocumentSketcher* sketcher,
              WarningPrinter* warnings)
      : args_(args), store_(store), sketcher_(sketcher), warnings_(warnings) {}

  // Checks one batch against the store (adding nothing); a document that could not be
  // fingerprinted is skipped with a warning (--strict: an error).
  Status Consume(TextBatch& batch) {
    std::vector<DocumentInput> documents;
    std::vector<const Document*> sources;
    for (size_t i = 0; i < batch.docs.size(); ++i) {
      const Document& doc = batch.docs[i];
      if (!batch.errors[i].ok()) {
        if (args_.input.strict()) return batch.errors[i].WithContext(doc.location);
        ++failed_[doc.fingerprint.empty() ? "cannot_fingerprint" : "invalid_fingerprint"];
        warnings_->Callback()(doc.location + ": " + batch.errors[i].message() + " (skipped)");
        continue;
      }
      DocumentInput input{doc.id, batch.fps[i], {}};
      if (sketcher_ != nullptr) input.sketch = &batch.sketches[i];
      documents.push_back(input);
      sources.push_back(&doc);
    }
    CheckOptions check;
    check.add = AddMode::kNever;
    check.k = args_.k;
    auto results = store_->CheckBatch(documents, check);
    if (!results.ok()) return results.status();
    for (size_t i = 0; i < results->size(); ++i) {
      ++checked_;
      const std::vector<StoredDocument>& found = (*results)[i].duplicates;
      if (found.empty()) {
        keep_ += sources[i]->id + "\n";
        continue;
      }
      ++removed_;
      remove_ += sources[i]->id + "\n";
      const StoredDocument& best = found[0];  // sorted best first
      auto& cluster = clusters_[best.id];
      cluster.first = best;
      cluster.second.push_back(
          {sources[i]->id, sources[i]->location, sources[i]->text.size(), best});
    }
    return Status::Ok();
  }

  // clusters.jsonl: one line per stored document matched (kept, in the store), its matches
  // removed.
  std::string ClustersJsonl() const {
    std::string lines;
    uint64_t cluster_id = 0;
    for (const auto& [stored_id, cluster] : clusters_) {
      JsonWriter w(&lines);
      w.BeginObject().Key("cluster").Uint(cluster_id++).Key("size").Uint(cluster.second.size() + 1);
      w.Key("kept").BeginObject().Key("id").String(stored_id).Key("in_store").Bool(true);
      w.Key("fingerprint")
          .String(ToHex(cluster.first.fingerprint))
          .Key("metadata")
          .Metadata(cluster.first.metadata);
      w.EndObject().Key("removed").BeginArray();
      for (const Member& m : cluster.second) {
        w.BeginObject().Key("id").String(m.id).Key("location").String(m.location);
        w.Key("bytes").Uint(m.bytes).Key("distance").Int(m.match.distance);
        w.Key("reason").String(DuplicateReasonName(m.match.reason)).Key("similarity");
        if (m.match.similarity) {
          w.Double(*m.match.similarity);
        } else {
          w.Null();
        }
        w.EndObject();
      }
      w.EndArray().EndObject();
      lines += "\n";
    }
    return lines;
  }

  // summary.json: the store, the counts and the skipped records by reason.
  std::string SummaryJson(const StoreStats& stats,
                          const std::map<std::string, uint64_t>& skipped) const {
    std::string summary;
    JsonWriter w(&summary);
    w.BeginObject().Key("store").String(args_.dir).Key("rule").String(StoreRuleName(stats.rule));
    w.Key("store_documents").Uint(stats.documents).Key("documents").Uint(checked_);
    w.Key("removed").Uint(removed_).Key("clusters").Uint(clusters_.size());
    w.Key("skipped").BeginObject();
    for (const auto& [reason, count] : skipped) w.Key(reason).Uint(count);
    w.EndObject().EndObject();
    summary += "\n";
    return summary;
  }

  const std::map<std::string, uint64_t>& failed() const { return failed_; }
  const std::string& keep() const { return keep_; }
  const std::string& remove() const { return remove_; }
  uint64_t checked() const { return checked_; }
  uint64_t removed() const { return removed_; }

 private:
  struct Member {
    std::string id, location;
    uint64_t bytes;
    StoredDocument match;
  };
  const IndexArgs& args_;
  DocumentStore* store_;
  const DocumentSketcher* sketcher_;
  WarningPrinter* warnings_;
  std::map<std::string, std::pair<StoredDocument, std::vector<Member>>> clusters_;
  std::string keep_, remove_;
  std::map<std::string, uint64_t> failed_;  // records read but not checked, by reason
  uint64_t checked_ = 0, removed_ = 0;
};

// The output files of a corpus query, in the order written.
constexpr const char* kQueryOutputs[] = {"clusters.jsonl", "keep.txt", "remove.txt",
                                         "summary.json"};

// Creates -o DIR and refuses output files that exist (without --force) or are inputs, before the
// run.
Status PrepareQueryOutputs(const std::string& dir, const OutputFileOptions& options) {
  if (dir.empty()) return Status::Ok();
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::IoError(dir + ": cannot create the output directory");
  }
  for (const char* name : kQueryOutputs) {
    NEARDUP_RETURN_IF_ERROR(CheckOutputPath(dir + "/" + name, options));
  }
  return Status::Ok();
}

// `index query DIR INPUT...`: checks a corpus against the store without adding anything. Each
// document duplicating stored ones joins the cluster of its best match (highest similarity, then
// id) as a removed member; keep.txt lists the others. Outputs as `neardup dedup`'s.
int RunQueryCorpus(const IndexArgs& args) {
  DocumentReaderOptions reader_options;
  if (Status read = args.input.ToReaderOptions(&reader_options, &args.fingerprint_flags);
      !read.ok()) {
    return Fail(read);
  }
  WarningPrinter warnings;
  reader_options.on_warning = warnings.Callback();
  auto reader = DocumentReader::Open(args.input.inputs, reader_options);
  if (!reader.ok()) return Fail(reader.status());
  OutputFileOptions output_options;
  output_options.force = args.force;
  output_options.inputs = (*reader)->files();
  if (Status prepared = PrepareQueryOutputs(args.output, output_options); !prepared.ok()) {
    return Fail(prepared);
  }
  StoreOptions options;
  options.read_only = true;
  FingerprintOptions fingerprint_options;
  auto opened = OpenExistingForText(args, options, &fingerprint_options);
  if (!opened.ok()) return Fail(opened.status());
  DocumentStore& store = **opened;
  const StoreStats stats = store.Stats();
  if (stats.rule == StoreRule::kDedup && args.k_given) return RefuseDistance(args);
  auto sketcher = SketcherForStore(store, fingerprint_options);
  if (!sketcher.ok()) return Fail(sketcher.status());
  CorpusQuery query(args, &store, sketcher->get(), &warnings);
  TextPipeline pipeline(reader->get(), args.batch, args.input.threads(), fingerprint_options,
                        sketcher->get(), stats.bits);
  Status status = pipeline.Run([&query](TextBatch& batch) { return query.Consume(batch); });
  if (!status.ok()) return Fail(status);
  std::map<std::string, uint64_t> skipped = (*reader)->skipped();
  for (const auto& [reason, count] : query.failed()) skipped[reason] += count;
  WarningPrinter::PrintTotals(skipped, (*reader)->fallbacks());
  if (query.checked() == 0) return Fail(NothingRead(skipped));
  const std::string lines = query.ClustersJsonl();
  if (args.output.empty()) {
    std::fputs(lines.c_str(), stdout);
    std::fprintf(stderr, "neardup: index query: %s checked against %s: %s duplicate stored ones\n",
                 Count(query.checked(), "document").c_str(), args.dir.c_str(),
                 std::to_string(query.removed()).c_str());
    return kExitOk;
  }
  const std::string contents[] = {lines, query.keep(), query.remove(),
                                  query.SummaryJson(stats, skipped)};
  for (size_t i = 0; i < 4; ++i) {
    Status written =
        WriteOutputFile(args.output + "/" + kQueryOutputs[i], contents[i], output_options);
    if (!written.ok()) return Fail(written);
  }
  std::fprintf(stderr,
               "neardup: index query: %s checked against %s: %s duplicate stored ones "
               "(outputs in %s)\n",
               Count(query.checked(), "document").c_str(), args.dir.c_str(),
               std::to_string(query.removed()).c_str(), args.output.c_str());
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
  if (Status given = args.store.Apply(&options); !given.ok()) {  // --no-verify
    PrintError(given);
    return kExitUsage;
  }
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
      .Key("sketches_lost")
      .Uint(report->sketches_lost)
      .EndObject();
  std::puts(out.c_str());
  return kExitOk;
}

void AddDirOption(CLI::App* sub, IndexArgs* args) {
  sub->add_option("dir", args->dir, "Store directory")->required();
}

CLI::App* SetupCreate(CLI::App* app, IndexArgs* args) {
  CLI::App* create = app->add_subcommand("create", "Create an empty store");
  AddDirOption(create, args);
  args->fingerprint_flags.Add(create);  // recorded in the MANIFEST; add and query then use them
  args->store.Declare(create, StoreFlags::kCreation);
  return create;
}

CLI::App* SetupAdd(CLI::App* app, IndexArgs* args) {
  CLI::App* add = app->add_subcommand(
      "add",
      "Add documents: JSONL records {\"id\", \"text\" or \"fingerprint\", \"metadata\"}, text "
      "files, directories, - for standard input (read like every other command)");
  AddDirOption(add, args);
  args->input.Add(add);
  args->fingerprint_flags.Add(add);
  add->add_option("--metadata-field", args->metadata_field,
                  "JSONL field stored as the document's metadata (any JSON value, kept verbatim)");
  add->add_option("--fingerprint-field", args->fingerprint_field,
                  "JSONL field holding a ready fingerprint (hex); such records need no text");
  add->add_option("--batch", args->batch, "Documents per atomic batch")
      ->check(CLI::Range(1, 1000000));
  args->store.Declare(add, StoreFlags::kWriting);
  args->store.ShowDefault("memtable_limit", std::to_string(kBulkMemtableLimit));
  add->add_flag("!--no-compact", args->compact,
                "skip the final merge of all segments, made by default when this run adds at "
                "least as many documents as the store held (the background compaction still "
                "keeps them few; the merge needs room for a second copy of the store)");
  add->add_option("--check", args->check,
                  "check each document with the store's rule (against the store and the earlier "
                  "documents of its batch) and print those with duplicates as JSONL; if-new adds "
                  "only the others, always adds every one (default: add without checking)")
      ->check(CLI::IsMember({"if-new", "always"}));
  add->footer(
      "Examples:\n"
      "  neardup index add store/ corpus.jsonl.gz more/\n"
      "  neardup index add store/ --id-field meta.url --text-field body < docs.jsonl\n"
      "  echo '{\"id\":\"u1\",\"fingerprint\":\"f773be40a3f0a3e5\",\"metadata\":{\"a\":1}}' | "
      "neardup index add store/");
  return add;
}

// `index query`'s options that belong to one of its two forms (--text/--fingerprint, or INPUT...).
struct QueryFlags {
  CLI::App* query = nullptr;
  CLI::Option* output = nullptr;
  CLI::Option* force = nullptr;
  CLI::Option* batch = nullptr;
  CLI::Option* k = nullptr;
  CLI::Option* limit = nullptr;
};

QueryFlags SetupQuery(CLI::App* app, IndexArgs* args) {
  QueryFlags flags;
  CLI::App* query = flags.query = app->add_subcommand(
      "query",
      "Find the stored duplicates of a text (the store's rule), the fingerprints within k, or "
      "check a corpus (INPUT...) against the store without adding it");
  AddDirOption(query, args);
  auto* fp_opt = query->add_option("--fingerprint", args->fingerprint, "Query fingerprint (hex)");
  auto* text_opt = query->add_option("--text", args->text, "Query text");
  fp_opt->excludes(text_opt);
  args->fingerprint_flags.Add(query);
  args->input.Add(query);
  flags.output = query->add_option(
      "-o,--output", args->output,
      "with INPUT...: write clusters.jsonl, keep.txt, remove.txt and summary.json "
      "here (default: clusters on standard output)");
  flags.force = query->add_flag("-f,--force", args->force,
                                "replace existing output files (never an input file)");
  flags.batch = query->add_option("--batch", args->batch, "Documents checked per store call")
                    ->check(CLI::Range(1, 1000000));
  flags.k = query
                ->add_option(
                    "-k,--max-distance", args->k,
                    "largest Hamming distance of a result (a simhash-rule store, or --fingerprint)")
                ->check(CLI::Range(0, 128));
  flags.limit = query->add_option("--limit", args->limit,
                                  "Most results of --text or --fingerprint (0 = all)");
  return flags;
}

// `index query`: one text or fingerprint, or a corpus. A flag of the other form is a usage error,
// never silently ignored.
int RunQuery(IndexArgs& args, const QueryFlags& flags) {
  const bool one = !args.fingerprint.empty() || !args.text.empty();
  if (one == !args.input.inputs.empty()) {
    PrintError("index query: give --fingerprint, --text or INPUT... (one of them)");
    return kExitUsage;
  }
  OptionValues reading(OptionNaming::kFlag);
  if (Status read = args.input.Values(&reading); !read.ok()) {
    PrintError(read);
    return kExitUsage;
  }
  if (one && !reading.values().empty()) {
    PrintError("index query: " + reading.NameOf(reading.values().begin()->first) +
               " reads INPUT...; --text and --fingerprint read no file");
    return kExitUsage;
  }
  args.k_given = flags.k->count() > 0;
  for (CLI::Option* option : {flags.output, flags.force, flags.batch, flags.limit}) {
    if (option->count() > 0 && (option == flags.limit) != one) {
      PrintError("index query: " + option->get_name() + " applies to " +
                 (one ? "a corpus query (INPUT...)" : "--text and --fingerprint") + " only");
      return kExitUsage;
    }
  }
  return one ? RunQueryOne(args) : RunQueryCorpus(args);
}

RunFunction Setup(CLI::App* app) {
  auto args = std::make_shared<IndexArgs>();
  app->require_subcommand(1);
  CLI::App* create = SetupCreate(app, args.get());
  CLI::App* add = SetupAdd(app, args.get());
  const QueryFlags query = SetupQuery(app, args.get());
  CLI::App* get = app->add_subcommand("get", "Print documents by id");
  AddDirOption(get, args.get());
  get->add_option("ids", args->ids, "External ids")->required();
  CLI::App* remove = app->add_subcommand("remove", "Remove documents by id");
  AddDirOption(remove, args.get());
  remove->add_option("ids", args->ids, "External ids")->required();
  CLI::App* stats = app->add_subcommand("stats", "Print store statistics (JSON)");
  AddDirOption(stats, args.get());
  args->store.Declare(stats, StoreFlags::kOpening);
  CLI::App* compact = app->add_subcommand("compact", "Flush and merge all segments");
  AddDirOption(compact, args.get());
  CLI::App* recover = app->add_subcommand(
      "recover", "Salvage what is intact in a damaged store (damaged files become *.corrupt)");
  AddDirOption(recover, args.get());
  app->footer(
      "Examples:\n"
      "  neardup index create store/ --indexed-k 3\n"
      "  neardup index add store/ corpus.jsonl\n"
      "  neardup index query store/ --text \"some text\"\n"
      "  neardup index query store/ this_week.jsonl -o out/");
  return [=]() -> int {
    if (create->parsed()) return RunCreate(*args);
    if (add->parsed()) return RunAdd(*args);
    if (query.query->parsed()) return RunQuery(*args, query);
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
