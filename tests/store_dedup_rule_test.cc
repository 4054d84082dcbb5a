// The dedup rule in the store (issue 19): a kDedup DocumentStore answers "is this a duplicate" the
// way `neardup dedup` does. Checked here: each reason (exact, whitespace, near-duplicate) with the
// verified Jaccard JudgePair computes; the store's decision equals JudgePair's on many pairs;
// streaming a corpus through CheckBatch one document at a time gives exactly RunDedup's duplicate
// components (hot buckets beyond the bucket window included); batch order and atomicity; the
// answers survive flushes, compactions, reopening and log replay; the bucket window bounds a hot
// bucket; bad input is refused. Uses the repository's sample corpus (no ../shared needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "neardup/dedup.h"
#include "neardup/document_reader.h"
#include "neardup/sketch.h"
#include "neardup/store.h"
#include "planted_corpus.h"
#include "store/manifest.h"
#include "store/store_format.h"
#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using namespace testing_corpus;  // NOLINT: SampleTexts, PlantedCorpus, ...

std::string TempDir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("neardup_dedup_rule_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir.string();
}

// Copies the segments of the store in `from` into `to`, numbered after `to`'s own files (1000 +
// their number), removes `from`, and returns how many were copied (-1 when `from` is unreadable).
int MoveSegmentsBeside(const std::string& from, const std::string& to) {
  auto files = store::ListDataFiles(from);
  if (!files.ok()) return -1;
  int copied = 0;
  for (const std::string& name : *files) {
    bool is_segment = false;
    uint64_t number = 0;
    if (!store::ParseFileName(name, &is_segment, &number) || !is_segment) continue;
    fs::copy_file(store::JoinPath(from, name),
                  store::JoinPath(to, store::SegmentFileName(1000 + number)));
    ++copied;
  }
  fs::remove_all(from);
  return copied;
}

// A recovery report's messages, a line each.
std::string Messages(const RecoveryReport& report) {
  std::string messages;
  for (const std::string& m : report.messages) messages += m + "\n";
  return messages;
}

// Removes the MANIFEST of the store in `dir` (a failure when it has none) and recovers the store
// from its files alone, as `neardup index recover` does.
Result<RecoveryReport> RecoverWithoutTheManifest(const std::string& dir) {
  if (!fs::remove(store::JoinPath(dir, store::kManifestName))) {
    ADD_FAILURE() << "no MANIFEST in " << dir;
  }
  return RecoverStore(dir);
}

// Rewrites the MANIFEST of the (empty) store in `dir` as verification form 2, as the release
// before 20-bit unit sets wrote it; false when it cannot be read.
bool RecordFormTwo(const std::string& dir) {
  auto manifest = store::ReadManifest(dir);
  if (!manifest.ok() || !manifest->rule) return false;
  manifest->rule->verification_form = store::kShingleAndUnitSetForm;
  std::ofstream out(store::JoinPath(dir, store::kManifestName), std::ios::binary | std::ios::trunc);
  out << store::EncodeManifest(*manifest);
  return static_cast<bool>(out);
}

class StoreDedupRuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Opens the store and, for a dedup-rule store, sketches texts as its resolved rule says
  // (SketchFor): the LSH plan depends on the whole rule (41 x 3 with the default `edited`
  // reason, 30 x 3 without it), so a sketcher made from default options would not fit.
  std::unique_ptr<DocumentStore> Open(StoreOptions options = {}) {
    auto store = DocumentStore::Open(dir_, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    if ((*store)->LshOptions()) SketchFor(**store);
    return std::move(*store);
  }

  // Sketches texts with the LSH options of `store` (its resolved plan) and the unit sets its rule
  // may need.
  void SketchFor(const DocumentStore& store) {
    auto sketcher = DocumentSketcher::Create(
        FingerprintOptions{}, *store.LshOptions(), store.SketchesNeedUnits(),
        store.SketchesNeedUnits() ? store.SketchUnitBits() : ShingleSimilarity::kUnitBits);
    ASSERT_TRUE(sketcher.ok()) << sketcher.status().ToString();
    sketcher_ = std::move(*sketcher);
  }

  // One document of `text` (its sketch kept alive in sketches_).
  DocumentInput Doc(const std::string& id, const std::string& text) {
    sketches_.push_back(std::make_unique<DocumentSketch>());
    ids_.push_back(std::make_unique<std::string>(id));
    DocumentInput doc;
    doc.id = *ids_.back();
    Status status = sketcher_->Sketch(text, &doc.fingerprint, sketches_.back().get());
    EXPECT_TRUE(status.ok()) << status.ToString();
    doc.sketch = sketches_.back().get();
    return doc;
  }

  CheckResult Check(DocumentStore& store, const std::string& id, const std::string& text,
                    AddMode add) {
    DocumentInput doc = Doc(id, text);
    CheckOptions options;
    options.add = add;
    auto results = store.CheckBatch(std::span<const DocumentInput>(&doc, 1), options);
    EXPECT_TRUE(results.ok()) << results.status().ToString();
    return results.ok() ? (*results)[0] : CheckResult{};
  }

  std::string dir_;
  std::unique_ptr<DocumentSketcher> sketcher_;
  std::vector<std::unique_ptr<DocumentSketch>> sketches_;
  std::vector<std::unique_ptr<std::string>> ids_;
};

const std::string kText =
    "The quick brown fox jumps over the lazy dog while the farmer watches from the porch and "
    "the children play in the field behind the old red barn near the river bend";

TEST_F(StoreDedupRuleTest, EachReasonWithTheVerifiedJaccard) {
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Stats().rule, StoreRule::kDedup);
  // The default rule: LSH planned down to the `edited` reason's floor, 0.45.
  EXPECT_EQ(store->Stats().lsh.parameters->bands, 41);
  EXPECT_EQ(store->Stats().pair_rule.edited_threshold, 0.8);
  EXPECT_TRUE(Check(*store, "a", kText, AddMode::kIfNew).added);

  CheckResult exact = Check(*store, "b", kText, AddMode::kNever);
  ASSERT_EQ(exact.duplicates.size(), 1u);
  EXPECT_EQ(exact.duplicates[0].id, "a");
  EXPECT_EQ(exact.duplicates[0].reason, DuplicateReason::kExact);
  EXPECT_EQ(exact.duplicates[0].similarity, 1.0);
  EXPECT_EQ(exact.duplicates[0].distance, 0);
  EXPECT_FALSE(exact.added);

  CheckResult spaced = Check(*store, "c", Respace(kText), AddMode::kNever);
  ASSERT_EQ(spaced.duplicates.size(), 1u);
  EXPECT_EQ(spaced.duplicates[0].reason, DuplicateReason::kWhitespace);

  const std::string edited = kText + " today";
  CheckResult near = Check(*store, "d", edited, AddMode::kNever);
  ASSERT_EQ(near.duplicates.size(), 1u);
  EXPECT_EQ(near.duplicates[0].reason, DuplicateReason::kNearDuplicate);
  DedupOptions dedup;
  auto judged = JudgePair(kText, edited, dedup);
  ASSERT_TRUE(judged.ok());
  EXPECT_TRUE(judged->duplicate);
  EXPECT_DOUBLE_EQ(near.duplicates[0].similarity.value_or(-1), judged->jaccard);

  CheckResult other = Check(*store, "e",
                            "An entirely different sentence about databases, "
                            "storage engines and write-ahead logs in C++",
                            AddMode::kIfNew);
  EXPECT_TRUE(other.duplicates.empty());
  EXPECT_TRUE(other.added);
  EXPECT_EQ(store->Stats().documents, 2u);  // kNever wrote nothing
}

// The store's decision on a pair equals JudgePair's (dedup's rule) on pairs of every similarity.
TEST_F(StoreDedupRuleTest, DecisionsEqualJudgePair) {
  std::mt19937_64 rng(7);
  const std::vector<std::string> texts = SampleTexts(60);
  ASSERT_GE(texts.size(), 100u);
  DedupOptions dedup;
  size_t duplicates = 0, pairs = 0;
  auto store = Open();
  ASSERT_TRUE(store);
  std::vector<std::string> others;
  for (size_t i = 0; i + 1 < texts.size(); ++i) {
    const double rate = static_cast<double>(i % 10) / 12.0;  // 0 .. 0.75 of the words replaced
    others.push_back(i % 4 == 3 ? texts[i + 1] : SubstituteWords(texts[i], rate, rng));
    Check(*store, "a" + std::to_string(i), texts[i], AddMode::kAlways);
  }
  for (size_t i = 0; i + 1 < texts.size(); ++i) {
    CheckResult result = Check(*store, "b", others[i], AddMode::kNever);
    const std::string a = "a" + std::to_string(i);
    auto found = std::find_if(result.duplicates.begin(), result.duplicates.end(),
                              [&](const StoredDocument& d) { return d.id == a; });
    auto judged = JudgePair(texts[i], others[i], dedup);
    ASSERT_TRUE(judged.ok());
    ++pairs;
    EXPECT_EQ(found != result.duplicates.end(), judged->duplicate) << "pair " << i;
    if (judged->duplicate && found != result.duplicates.end()) {
      ++duplicates;
      if (found->reason == DuplicateReason::kNearDuplicate) {
        EXPECT_DOUBLE_EQ(found->similarity.value_or(-1), judged->jaccard);
      }
    }
  }
  EXPECT_GT(duplicates, pairs / 5);
  EXPECT_LT(duplicates, pairs);
}

// Streaming a corpus through the store, one document at a time with AddMode::kAlways, links the
// same documents as RunDedup: the duplicate components are identical, hot buckets included.
TEST_F(StoreDedupRuleTest, StreamingEqualsBatch) {
  const Corpus corpus = PlantedCorpus(500, 150);
  const std::string file = dir_ + ".jsonl";
  {
    std::ofstream out(file, std::ios::binary);
    for (size_t i = 0; i < corpus.ids.size(); ++i) {
      out << testing_files::JsonLine(corpus.ids[i], corpus.texts[i]);
    }
  }
  StoreOptions options;
  options.memtable_limit = 97;  // the stream crosses flushes and compactions
  options.compaction_trigger = 3;
  options.sync_mode = SyncMode::kNone;
  auto store = Open(options);
  ASSERT_TRUE(store);
  std::vector<std::pair<std::string, std::string>> streamed;
  for (size_t i = 0; i < corpus.ids.size(); ++i) {
    CheckResult result = Check(*store, corpus.ids[i], corpus.texts[i], AddMode::kAlways);
    for (const StoredDocument& d : result.duplicates) streamed.push_back({corpus.ids[i], d.id});
  }
  DedupOptions dedup;
  dedup.threads = 2;
  auto report = RunDedup({file}, dedup);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::vector<std::pair<std::string, std::string>> batch;
  for (const DuplicatePair& pair : report->pairs) {
    batch.push_back({report->documents[pair.a].id, report->documents[pair.b].id});
  }
  const auto s = Components(streamed), b = Components(batch);
  EXPECT_GT(b.size(), 20u);
  EXPECT_EQ(s, b) << "streamed " << s.size() << " components, batch " << b.size();
  EXPECT_GT(report->lsh_stats.oversized_buckets, 0u);  // the hot bucket exceeded the window
  fs::remove(file);
}

TEST_F(StoreDedupRuleTest, BatchIsCheckedInOrderAndAtomically) {
  auto store = Open();
  ASSERT_TRUE(store);
  std::vector<DocumentInput> docs = {Doc("x1", kText), Doc("x2", kText + " again"),
                                     Doc("x3", "Nothing like the others: a note about rivers")};
  CheckOptions options;
  auto results = store->CheckBatch(docs, options);
  ASSERT_TRUE(results.ok());
  EXPECT_TRUE((*results)[0].added);
  EXPECT_TRUE((*results)[0].duplicates.empty());
  ASSERT_EQ((*results)[1].duplicates.size(), 1u);  // the earlier document of the batch
  EXPECT_EQ((*results)[1].duplicates[0].id, "x1");
  EXPECT_FALSE((*results)[1].added);
  EXPECT_TRUE((*results)[2].added);
  EXPECT_EQ(store->Stats().documents, 2u);
  // kNever: a lookup; the batch's documents do not see each other, nothing is written.
  options.add = AddMode::kNever;
  std::vector<DocumentInput> lookups = {Doc("y1", "A brand new text about mountains and snow"),
                                        Doc("y2", "A brand new text about mountains and snow")};
  results = store->CheckBatch(lookups, options);
  ASSERT_TRUE(results.ok());
  EXPECT_TRUE((*results)[1].duplicates.empty());
  EXPECT_EQ(store->Stats().documents, 2u);
}

// Two writers racing with near-identical pages: exactly one is admitted.
TEST_F(StoreDedupRuleTest, RacingNearDuplicatesAreAdmittedOnce) {
  StoreOptions options;
  options.sync_mode = SyncMode::kGroupCommit;
  auto store = Open(options);
  ASSERT_TRUE(store);
  const std::vector<std::string> texts = SampleTexts(10);  // unrelated to each other
  ASSERT_GE(texts.size(), 20u);
  int rounds = 0;
  for (int round = 0; round < 20; ++round) {
    const std::string& text = texts[round];
    if (!Check(*store, "probe", text, AddMode::kNever).duplicates.empty()) continue;
    ++rounds;
    std::vector<DocumentInput> docs;
    for (int t = 0; t < 4; ++t) {
      docs.push_back(Doc("r" + std::to_string(round) + "_" + std::to_string(t),
                         t % 2 == 0 ? text : text + "!"));
    }
    std::atomic<int> added{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        auto result = store->CheckAndAdd(docs[t], 3, false);
        EXPECT_TRUE(result.ok()) << result.status().ToString();
        if (result.ok() && result->added) ++added;
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(added.load(), 1) << "round " << round;
  }
  EXPECT_GE(rounds, 15);
}

// The same answers from the memtable, from segments after flushes and compactions, after a reopen
// and after replaying the log.
TEST_F(StoreDedupRuleTest, AnswersSurviveFlushCompactionReopenAndReplay) {
  const std::vector<std::string> texts = SampleTexts(40);
  std::mt19937_64 rng(3);
  auto answers = [&](DocumentStore& store) {
    std::vector<std::string> out;
    for (size_t i = 0; i < texts.size(); i += 3) {
      CheckResult r = Check(store, "q", SubstituteWords(texts[i], 0.03, rng), AddMode::kNever);
      std::string line;
      for (const StoredDocument& d : r.duplicates) {
        line += d.id + ":" + DuplicateReasonName(d.reason) + ":" +
                std::to_string(d.similarity.value_or(-1)) + " ";
      }
      out.push_back(line);
    }
    return out;
  };
  StoreOptions options;
  options.compaction_trigger = 0;
  std::vector<std::string> in_memory;
  const std::string copy = dir_ + "_copy";
  {
    auto store = Open(options);
    ASSERT_TRUE(store);
    for (size_t i = 0; i < texts.size(); ++i) {
      Check(*store, "d" + std::to_string(i), texts[i], AddMode::kAlways);
    }
    rng.seed(3);
    in_memory = answers(*store);
    // A copy of the directory as a crash would leave it: the log holds everything, no segment.
    fs::remove_all(copy);
    fs::copy(dir_, copy);
    fs::remove(copy + "/LOCK");
  }
  {
    auto replayed = DocumentStore::Open(copy, options);
    ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
    rng.seed(3);
    EXPECT_EQ(answers(**replayed), in_memory);
    ASSERT_TRUE((*replayed)->Flush().ok());
    rng.seed(3);
    EXPECT_EQ(answers(**replayed), in_memory);  // from a segment
    for (size_t i = 0; i < 5; ++i) {            // more segments, then one
      Check(**replayed, "z" + std::to_string(i), "filler text number " + std::to_string(i),
            AddMode::kAlways);
      ASSERT_TRUE((*replayed)->Flush().ok());
    }
    ASSERT_TRUE((*replayed)->Compact().ok());
    EXPECT_EQ((*replayed)->Stats().segments, 1u);
    rng.seed(3);
    EXPECT_EQ(answers(**replayed), in_memory);
    ASSERT_TRUE((*replayed)->Close().ok());
  }
  {
    auto reopened = DocumentStore::Open(copy, options);
    ASSERT_TRUE(reopened.ok());
    rng.seed(3);
    EXPECT_EQ(answers(**reopened), in_memory);
  }
  fs::remove_all(copy);
}

// A bucket holding many more documents than the window: a check looks at the newest `window` of
// each band's bucket and the oldest `window` with the same whitespace-free hash, in whatever
// layers (memtable, segments) they are.
TEST_F(StoreDedupRuleTest, TheBucketWindowBoundsAHotBucket) {
  StoreOptions options;
  options.memtable_limit = 30;
  options.compaction_trigger = 2;
  options.sync_mode = SyncMode::kNone;
  options.lsh = MinHashLshOptions{};
  options.lsh->bucket_window = 16;
  auto store = Open(options);  // and its sketcher
  ASSERT_TRUE(store);
  for (int i = 0; i < 200; ++i) {
    char id[16];
    std::snprintf(id, sizeof(id), "c%03d", i);
    Check(*store, id, kText, AddMode::kAlways);
  }
  ASSERT_TRUE(store->Flush().ok());
  CheckResult result = Check(*store, "probe", kText, AddMode::kNever);
  std::set<std::string> found;
  for (const StoredDocument& d : result.duplicates) found.insert(d.id);
  std::set<std::string> expected;
  for (int i = 0; i < 16; ++i) {
    char id[16];
    std::snprintf(id, sizeof(id), "c%03d", i);  // the oldest with the same text hash
    expected.insert(id);
    std::snprintf(id, sizeof(id), "c%03d", 199 - i);  // the newest of the buckets
    expected.insert(id);
  }
  EXPECT_EQ(found, expected);
}

TEST_F(StoreDedupRuleTest, BadInputIsRefusedAndNothingIsWritten) {
  auto store = Open();
  ASSERT_TRUE(store);
  DocumentInput bare{"bare", Fingerprint::From64(42), ""};
  Status refused = store->Add(bare);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--rule simhash"), std::string::npos) << refused.ToString();
  // A sketch made with other LSH parameters.
  MinHashLshOptions other;
  other.threshold = 0.8;
  auto foreign = DocumentSketcher::Create(FingerprintOptions{}, other);
  ASSERT_TRUE(foreign.ok());
  DocumentSketch sketch;
  DocumentInput doc{"f", {}, ""};
  ASSERT_TRUE((*foreign)->Sketch(kText, &doc.fingerprint, &sketch).ok());
  doc.sketch = &sketch;
  EXPECT_EQ(store->Add(doc).code(), StatusCode::kInvalidArgument);
  // A batch with one bad document writes nothing.
  std::vector<DocumentInput> batch = {Doc("ok", kText), doc};
  EXPECT_EQ(store->CheckBatch(batch, CheckOptions{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Stats().documents, 0u);
  ASSERT_TRUE(store->Close().ok());
  // Reopening with another rule or threshold is refused, naming both.
  StoreOptions simhash;
  simhash.rule = StoreRule::kSimHash;
  auto wrong = DocumentStore::Open(dir_, simhash);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("dedup rule, not simhash"), std::string::npos)
      << wrong.status().ToString();
  StoreOptions threshold;
  threshold.lsh = other;
  wrong = DocumentStore::Open(dir_, threshold);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("threshold 0.5"), std::string::npos)
      << wrong.status().ToString();
}

// A text without shingles (nothing left but markup or punctuation once normalised) has no band
// keys: it is a duplicate only of exact and whitespace-only copies. A one-word text is one shingle.
TEST_F(StoreDedupRuleTest, TextsWithoutShinglesMatchOnlyByTheirHashes) {
  auto store = Open();
  ASSERT_TRUE(store);
  DocumentSketch sketch;
  Fingerprint fp;
  const Status status = sketcher_->Sketch("<b>!!!</b> ...", &fp, &sketch);
  if (status.ok()) {  // the fingerprinter may refuse a text without features instead
    EXPECT_TRUE(sketch.band_keys.empty());
    EXPECT_TRUE(sketch.shingles.empty());
    EXPECT_TRUE(Check(*store, "p1", "<b>!!!</b> ...", AddMode::kAlways).added);
    CheckResult copy = Check(*store, "p2", "<b>!!!</b> ...", AddMode::kNever);
    ASSERT_EQ(copy.duplicates.size(), 1u);
    EXPECT_EQ(copy.duplicates[0].reason, DuplicateReason::kExact);
    EXPECT_TRUE(Check(*store, "p3", "<i>?!?</i>", AddMode::kNever).duplicates.empty());
  }
  EXPECT_TRUE(Check(*store, "one", "hello", AddMode::kAlways).added);
  CheckResult cased = Check(*store, "two", "Hello", AddMode::kNever);
  ASSERT_EQ(cased.duplicates.size(), 1u);
  EXPECT_EQ(cased.duplicates[0].reason, DuplicateReason::kNearDuplicate);
  EXPECT_EQ(cased.duplicates[0].similarity, 1.0);
}

// Writers and readers at once while memtables are sealed, flushed in the background and
// compacted: a document acknowledged once is found by the rule at every moment after (from the
// memtable, the sealed memtable being flushed, or a segment).
TEST_F(StoreDedupRuleTest, ReadsSeeEveryAcknowledgedDocumentDuringFlushesAndCompactions) {
  StoreOptions options;
  options.memtable_limit = 40;
  options.compaction_trigger = 3;
  options.sync_mode = SyncMode::kNone;
  auto store = Open(options);
  ASSERT_TRUE(store);
  auto text_of = [](int n) {
    std::mt19937_64 words(static_cast<uint64_t>(n) + 1000);
    std::string text = "concurrent " + std::to_string(n);
    for (int i = 0; i < 25; ++i) text += " c" + std::to_string(words() % 3000);
    return text;
  };
  std::atomic<int> acknowledged{0};
  std::atomic<bool> stop{false};
  std::atomic<int> misses{0}, checks{0};
  std::thread writer([&] {
    // Readers stop when the writer does, also when one of its assertions ends it early (else they
    // would wait for it forever).
    struct StopReaders {
      std::atomic<bool>* stop;
      ~StopReaders() { *stop = true; }
    } stop_readers{&stop};
    for (int n = 0; n < 600; ++n) {
      DocumentSketch sketch;
      DocumentInput doc;
      const std::string id = "w" + std::to_string(n);
      doc.id = id;
      EXPECT_TRUE(sketcher_->Sketch(text_of(n), &doc.fingerprint, &sketch).ok());
      doc.sketch = &sketch;
      ASSERT_TRUE(store->Add(doc).ok());
      acknowledged = n + 1;
    }
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937 rng(r);
      while (!stop) {
        const int known = acknowledged.load();
        if (known == 0) continue;
        const int n = static_cast<int>(rng() % known);
        DocumentSketch sketch;
        DocumentInput probe;
        EXPECT_TRUE(sketcher_->Sketch(text_of(n), &probe.fingerprint, &sketch).ok());
        probe.sketch = &sketch;
        CheckOptions lookup;
        lookup.add = AddMode::kNever;
        auto result = store->CheckBatch(std::span<const DocumentInput>(&probe, 1), lookup);
        ASSERT_TRUE(result.ok());
        bool found = false;
        for (const StoredDocument& d : (*result)[0].duplicates) {
          found |= d.id == "w" + std::to_string(n) && d.reason == DuplicateReason::kExact;
        }
        if (!found) ++misses;
        ++checks;
      }
    });
  }
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(misses.load(), 0) << "of " << checks.load() << " checks";
  EXPECT_GT(store->Stats().flushes, 5u);
  EXPECT_GT(store->Stats().compactions, 0u);
}

// A check-and-add (kIfNew) of a document whose duplicate is stored is answered without a place in
// the commit queue: the same duplicates, limit and truncation as a lookup, nothing written, and
// no log sync; a new document still goes through the queue and is added; a closed store refuses.
// A batch whose documents all have stored duplicates writes nothing (no log write, no sync) and
// answers what a lookup would; one new document sends the whole batch through the queue, where the
// later documents are also checked against it.
TEST_F(StoreDedupRuleTest, ABatchOfDocumentsThatAllHaveStoredDuplicatesWritesNothing) {
  StoreOptions options;
  options.sync_mode = SyncMode::kEveryWrite;
  auto store = Open(options);
  ASSERT_TRUE(store);
  EXPECT_TRUE(Check(*store, "a", kText, AddMode::kIfNew).added);
  const StoreStats before = store->Stats();
  std::vector<DocumentInput> dups = {Doc("c", kText + " today"), Doc("d", kText),
                                     Doc("e", "again " + kText)};
  CheckOptions if_new;
  if_new.add = AddMode::kIfNew;
  CheckOptions never;
  never.add = AddMode::kNever;
  auto found = store->CheckBatch(dups, if_new);
  auto lookup = store->CheckBatch(dups, never);
  ASSERT_TRUE(found.ok() && lookup.ok());
  for (size_t i = 0; i < dups.size(); ++i) {
    EXPECT_FALSE((*found)[i].added);
    ASSERT_EQ((*found)[i].duplicates.size(), 1u) << i;
    EXPECT_EQ((*found)[i].duplicates[0].id, "a");
    EXPECT_EQ((*found)[i].duplicates[0].reason, (*lookup)[i].duplicates[0].reason);
    EXPECT_EQ((*found)[i].duplicates[0].similarity, (*lookup)[i].duplicates[0].similarity);
  }
  EXPECT_EQ(store->Stats().writes, before.writes);
  EXPECT_EQ(store->Stats().wal_syncs, before.wal_syncs);
  // A new document in the middle: it is added, the later copy of it duplicates it, the stored
  // duplicates are not added. One write of one document, one sync.
  const std::string other =
      "Write-ahead logs make a store durable: each batch is appended and synced before it is "
      "acknowledged, and a crash replays what was synced";
  std::vector<DocumentInput> mixed = {Doc("c", kText + " today"), Doc("f", other),
                                      Doc("g", other + " again")};
  auto decided = store->CheckBatch(mixed, if_new);
  ASSERT_TRUE(decided.ok()) << decided.status().ToString();
  EXPECT_FALSE((*decided)[0].added);
  EXPECT_TRUE((*decided)[1].added);
  EXPECT_TRUE((*decided)[1].duplicates.empty());
  EXPECT_FALSE((*decided)[2].added);
  ASSERT_EQ((*decided)[2].duplicates.size(), 1u);
  EXPECT_EQ((*decided)[2].duplicates[0].id, "f");
  EXPECT_EQ(store->Stats().writes, before.writes + 1);
  EXPECT_EQ(store->Stats().wal_syncs, before.wal_syncs + 1);
  EXPECT_EQ(store->Stats().documents, 2u);
  // A bad document is named, whichever path the batch would take.
  std::vector<DocumentInput> bad = {Doc("c", kText), Doc("", kText)};
  auto refused = store->CheckBatch(bad, if_new);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("document 1"), std::string::npos)
      << refused.status().ToString();
}

TEST_F(StoreDedupRuleTest, ACheckThatFindsADuplicateWritesNothing) {
  StoreOptions options;
  options.sync_mode = SyncMode::kEveryWrite;
  auto store = Open(options);
  ASSERT_TRUE(store);
  EXPECT_TRUE(Check(*store, "a", kText, AddMode::kIfNew).added);
  EXPECT_TRUE(Check(*store, "b", kText + " again", AddMode::kAlways).added);
  const StoreStats before = store->Stats();
  CheckResult lookup = Check(*store, "c", kText + " today", AddMode::kNever);
  CheckResult found = Check(*store, "c", kText + " today", AddMode::kIfNew);
  ASSERT_EQ(found.duplicates.size(), 2u);
  EXPECT_FALSE(found.added);
  EXPECT_FALSE(found.replaced);
  ASSERT_EQ(lookup.duplicates.size(), found.duplicates.size());
  for (size_t i = 0; i < found.duplicates.size(); ++i) {
    EXPECT_EQ(found.duplicates[i].id, lookup.duplicates[i].id);
    EXPECT_EQ(found.duplicates[i].reason, lookup.duplicates[i].reason);
    EXPECT_EQ(found.duplicates[i].similarity, lookup.duplicates[i].similarity);
  }
  DocumentInput doc = Doc("c", kText + " today");
  CheckOptions limited;
  limited.add = AddMode::kIfNew;
  limited.limit = 1;
  auto cut = store->CheckBatch(std::span<const DocumentInput>(&doc, 1), limited);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ((*cut)[0].duplicates.size(), 1u);
  EXPECT_TRUE((*cut)[0].truncated);
  const StoreStats after = store->Stats();
  EXPECT_EQ(after.writes, before.writes);
  EXPECT_EQ(after.wal_syncs, before.wal_syncs);
  EXPECT_EQ(after.documents, 2u);
  // A document without a duplicate is added through the queue (one write, one sync).
  EXPECT_TRUE(Check(*store, "d", "Nothing like the others: a note on write-ahead logs and fsync",
                    AddMode::kIfNew)
                  .added);
  EXPECT_EQ(store->Stats().writes, before.writes + 1);
  EXPECT_EQ(store->Stats().wal_syncs, before.wal_syncs + 1);
  // An id is still required, as for any add.
  DocumentInput no_id = Doc("", kText);
  CheckOptions if_new;
  if_new.add = AddMode::kIfNew;
  EXPECT_EQ(store->CheckBatch(std::span<const DocumentInput>(&no_id, 1), if_new).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(store->Close().ok());
  EXPECT_FALSE(store->CheckBatch(std::span<const DocumentInput>(&doc, 1), if_new).ok());
}

// A text of `n` distinct words, and a contained copy: its first `prefix` words with `replaced` of
// them (spread out) changed, so a fraction of its shingles lies outside the larger text.
std::string Words(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += (i ? " " : "") + std::string("word") + std::to_string(i);
  return text;
}
std::string ContainedCopy(int prefix, int replaced) {
  std::string text;
  for (int i = 0; i < prefix; ++i) {
    const bool change = replaced > 0 && i % (prefix / replaced) == prefix / replaced / 2 &&
                        i / (prefix / replaced) < replaced;
    text += (i ? " " : "") + std::string(change ? "other" : "word") + std::to_string(i);
  }
  return text;
}

// The containment options are part of the recorded rule (MANIFEST version 4): a store created with
// containment 0.95 answers with 0.95 after reopening (a pair contained at ~0.92 is no duplicate,
// one contained at ~0.99 is), whatever the code's defaults; another value given at open is refused.
TEST_F(StoreDedupRuleTest, TheContainmentOptionsAreRecorded) {
  const std::string large = Words(120), at_92 = ContainedCopy(80, 2), at_99 = ContainedCopy(80, 0);
  DedupOptions judge;
  judge.lsh.threshold = 0.8;
  auto pair_92 = JudgePair(at_92, large, judge);
  auto pair_99 = JudgePair(at_99, large, judge);
  ASSERT_TRUE(pair_92.ok() && pair_99.ok());
  // The pairs this test needs: contained between 0.9 and 0.95 (and past 0.95), size guard met,
  // Jaccard below the threshold 0.8 (so only `contained` can accept them).
  ASSERT_GE(pair_92->containment, 0.9);
  ASSERT_LT(pair_92->containment, 0.95);
  ASSERT_GE(pair_99->containment, 0.95);
  ASSERT_TRUE(pair_92->size_guard && pair_99->size_guard);
  ASSERT_LT(pair_92->jaccard, 0.8);
  ASSERT_LT(pair_99->jaccard, 0.8);
  EXPECT_EQ(pair_92->reason, DuplicateReason::kContained);  // dedup's defaults: 0.9

  StoreOptions create;
  create.lsh = MinHashLshOptions{};
  create.lsh->threshold = 0.8;
  create.containment_threshold = 0.95;
  create.containment_min_shingles = 20;
  {
    auto store = Open(create);
    ASSERT_TRUE(store);
    SketchFor(*store);
    EXPECT_TRUE(Check(*store, "large", large, AddMode::kIfNew).added);
    ASSERT_TRUE(store->Close().ok());
  }
  auto store = Open();
  ASSERT_TRUE(store);
  const PairRuleOptions rule = store->Stats().pair_rule;
  EXPECT_EQ(rule.jaccard_threshold, 0.8);
  EXPECT_EQ(rule.containment_threshold, 0.95);
  EXPECT_EQ(rule.containment_min_shingles, 20);
  EXPECT_EQ(rule.containment_min_ratio, 0.6);
  EXPECT_TRUE(Check(*store, "92", at_92, AddMode::kNever).duplicates.empty());
  CheckResult contained = Check(*store, "99", at_99, AddMode::kNever);
  ASSERT_EQ(contained.duplicates.size(), 1u);
  EXPECT_EQ(contained.duplicates[0].reason, DuplicateReason::kContained);
  EXPECT_DOUBLE_EQ(contained.duplicates[0].similarity.value_or(-1), pair_99->containment);
  store.reset();

  // A value given at open must be the recorded one.
  StoreOptions other;
  other.containment_threshold = 0.9;
  auto refused = DocumentStore::Open(dir_, other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("containment threshold 0.95, not 0.9"),
            std::string::npos)
      << refused.status().ToString();
  other.containment_threshold = 0.95;
  EXPECT_TRUE(DocumentStore::Open(dir_, other).ok());

  // The same pair in a store of dedup's defaults (0.9) is `contained`: the candidate is found.
  fs::remove_all(dir_);
  StoreOptions defaults;
  defaults.lsh = create.lsh;
  auto plain = Open(defaults);
  ASSERT_TRUE(plain);
  SketchFor(*plain);
  EXPECT_EQ(plain->Stats().pair_rule.containment_threshold, 0.9);
  EXPECT_TRUE(Check(*plain, "large", large, AddMode::kIfNew).added);
  CheckResult found = Check(*plain, "92", at_92, AddMode::kNever);
  ASSERT_EQ(found.duplicates.size(), 1u);
  EXPECT_EQ(found.duplicates[0].reason, DuplicateReason::kContained);
}

// A version-3 MANIFEST (written before the containment options were recorded) opens with the
// values such stores answered with, 0.9 / 30 / 0.6, whatever the code's defaults; its next
// MANIFEST write records them (version 4). Made here from a version-4 store created with another
// size guard (500 shingles) by dropping exactly the three fields.
TEST_F(StoreDedupRuleTest, AVersion3ManifestAnswersWithTheContainmentItWasAnsweredWith) {
  const std::string large = Words(120), at_92 = ContainedCopy(80, 2);
  StoreOptions create;
  create.lsh = MinHashLshOptions{};
  create.lsh->threshold = 0.8;
  create.containment_min_shingles = 500;  // the contained copy (78 shingles) is too small
  create.edited_threshold = 0;            // as every store of version 3 (before the reason)
  {
    auto store = Open(create);
    ASSERT_TRUE(store);
    SketchFor(*store);
    EXPECT_TRUE(Check(*store, "large", large, AddMode::kIfNew).added);
    EXPECT_TRUE(Check(*store, "92", at_92, AddMode::kNever).duplicates.empty());
    ASSERT_TRUE(store->Close().ok());
  }
  const std::string path = store::JoinPath(dir_, store::kManifestName);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint32_t version;
  std::memcpy(&version, bytes.data() + 8, 4);
  ASSERT_EQ(version, 4u);
  version = 3;
  std::memcpy(bytes.data() + 8, &version, 4);
  bytes.erase(bytes.size() - 8 - 24);  // the three f64 fields and the checksum
  const uint64_t checksum = store::Checksum(bytes);
  bytes.append(reinterpret_cast<const char*>(&checksum), 8);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  {
    auto store = Open();
    ASSERT_TRUE(store);
    const PairRuleOptions rule = store->Stats().pair_rule;
    EXPECT_EQ(rule.containment_threshold, 0.9);
    EXPECT_EQ(rule.containment_min_shingles, 30);
    EXPECT_EQ(rule.containment_min_ratio, 0.6);
    CheckResult found = Check(*store, "92", at_92, AddMode::kIfNew);
    ASSERT_EQ(found.duplicates.size(), 1u);
    EXPECT_EQ(found.duplicates[0].reason, DuplicateReason::kContained);
    ASSERT_TRUE(store->Add(Doc("more", "a text about something else entirely, long enough")).ok());
    ASSERT_TRUE(store->Flush().ok());  // writes the MANIFEST again
    ASSERT_TRUE(store->Close().ok());
  }
  auto reread = store::ReadManifest(dir_);
  ASSERT_TRUE(reread.ok()) << reread.status().ToString();
  EXPECT_EQ(reread->version, 4);
  ASSERT_TRUE(reread->rule);
  EXPECT_EQ(reread->rule->containment_threshold, 0.9);
  EXPECT_EQ(reread->rule->containment_min_shingles, 30);
  EXPECT_EQ(reread->rule->containment_min_ratio, 0.6);
}

// A recorded containment option out of range (a damaged MANIFEST whose checksum still holds) is a
// clear Corruption at open, naming the file and the option; never a crash.
TEST_F(StoreDedupRuleTest, ARecordedContainmentOutOfRangeIsAnOpenError) {
  {
    auto store = Open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Close().ok());
  }
  auto manifest = store::ReadManifest(dir_);
  ASSERT_TRUE(manifest.ok() && manifest->rule);
  const store::Manifest good = *manifest;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Damage {
    double threshold, min_shingles, ratio;
    const char* named;
  } damages[] = {{1.5, 30, 0.6, "containment_threshold"},
                 {nan, 30, 0.6, "containment_threshold"},
                 {0.9, -1, 0.6, "containment_min_shingles"},
                 {0.9, std::numeric_limits<double>::infinity(), 0.6, "containment_min_shingles"},
                 {0.9, 30, 2, "containment_min_ratio"}};
  for (const Damage& damage : damages) {
    store::Manifest bad = good;
    bad.rule->containment_threshold = damage.threshold;
    bad.rule->containment_min_shingles = damage.min_shingles;
    bad.rule->containment_min_ratio = damage.ratio;
    {
      std::ofstream out(store::JoinPath(dir_, store::kManifestName),
                        std::ios::binary | std::ios::trunc);
      out << store::EncodeManifest(bad);
    }
    StoreOptions read_only;
    read_only.read_only = true;
    for (const StoreOptions& options : {StoreOptions{}, read_only}) {
      auto opened = DocumentStore::Open(dir_, options);
      ASSERT_FALSE(opened.ok()) << damage.named;
      EXPECT_EQ(opened.status().code(), StatusCode::kCorruption);
      EXPECT_NE(opened.status().message().find("MANIFEST rule fields out of range"),
                std::string::npos)
          << opened.status().ToString();
      EXPECT_NE(opened.status().message().find(damage.named), std::string::npos)
          << opened.status().ToString();
    }
  }
  {
    std::ofstream out(store::JoinPath(dir_, store::kManifestName),
                      std::ios::binary | std::ios::trunc);
    out << store::EncodeManifest(good);
  }
  EXPECT_TRUE(DocumentStore::Open(dir_, StoreOptions{}).ok());
}

// `index recover` keeps the recorded containment options when the MANIFEST is readable; without
// it (segments do not record them) it writes those of a version-3 MANIFEST and says so.
TEST_F(StoreDedupRuleTest, RecoverKeepsTheContainmentOptions) {
  StoreOptions create;
  create.containment_threshold = 0.95;
  create.containment_min_ratio = 0.7;
  {
    auto store = Open(create);
    ASSERT_TRUE(store);
    EXPECT_TRUE(Check(*store, "a", kText, AddMode::kIfNew).added);
    ASSERT_TRUE(store->Flush().ok());
    ASSERT_TRUE(store->Close().ok());
  }
  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  {
    auto store = Open();
    ASSERT_TRUE(store);
    EXPECT_EQ(store->Stats().pair_rule.containment_threshold, 0.95);
    EXPECT_EQ(store->Stats().pair_rule.containment_min_ratio, 0.7);
    EXPECT_EQ(Check(*store, "b", kText, AddMode::kNever).duplicates.size(), 1u);
  }
  {
    std::ofstream manifest(store::JoinPath(dir_, store::kManifestName),
                           std::ios::binary | std::ios::trunc);
    manifest << "garbage";
  }
  report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::string messages = Messages(*report);
  EXPECT_NE(messages.find("containment options are not recorded there"), std::string::npos)
      << messages;
  // The store was made with the default rule: its sets hold unit sets, so `edited` is on.
  EXPECT_NE(messages.find("the sets hold 20-bit unit sets, so the edited reason was on"),
            std::string::npos)
      << messages;
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Stats().pair_rule.containment_threshold, 0.9);
  EXPECT_EQ(store->Stats().pair_rule.containment_min_shingles, 30);
  EXPECT_EQ(store->Stats().pair_rule.containment_min_ratio, 0.6);
  EXPECT_EQ(store->Stats().pair_rule.edited_threshold, 0.8);
  EXPECT_EQ(Check(*store, "b", kText, AddMode::kNever).duplicates.size(), 1u);
}

// A new store's containment options are checked (range) before anything is written.
TEST_F(StoreDedupRuleTest, BadContainmentOptionsAreRefusedAtCreation) {
  StoreOptions bad;
  bad.containment_min_ratio = 1.5;
  auto refused = DocumentStore::Open(dir_, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("containment_min_ratio"), std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(fs::exists(store::JoinPath(dir_, store::kManifestName)));
  StoreOptions simhash;
  simhash.rule = StoreRule::kSimHash;
  simhash.containment_threshold = 0.9;
  EXPECT_EQ(DocumentStore::Open(dir_, simhash).status().code(), StatusCode::kInvalidArgument);
}

// A text of `n` distinct words, and a copy with every `every`-th word replaced: a lightly edited
// copy, whose shingle Jaccard falls by three shingles a replaced word while its unit (word) set
// loses one word.
std::string DistinctWords(int n, int every, const std::string& word = "token") {
  std::string text;
  for (int i = 0; i < n; ++i) {
    const bool replaced = every > 0 && i % every == every / 2;
    text += (i ? " " : "") + (replaced ? "changed" : word) + std::to_string(i);
  }
  return text;
}

// The `edited` reason in the store (issue 25): recorded at creation (MANIFEST version 5, unit sets
// stored after the shingle sets), answered as JudgePair answers, after log replay, flush and
// compaction too; another value at open is refused, as is a sketch without units.
TEST_F(StoreDedupRuleTest, TheEditedReasonIsRecordedAndAnswered) {
  const std::string original = DistinctWords(300, 0), copy = DistinctWords(300, 12);
  DedupOptions judge;
  judge.lsh.threshold = 0.8;
  judge.edited_threshold = 0.7;
  judge.edited_min_jaccard = 0.3;
  auto judged = JudgePair(copy, original, judge);
  ASSERT_TRUE(judged.ok()) << judged.status().ToString();
  ASSERT_EQ(judged->reason, DuplicateReason::kEdited);
  ASSERT_LT(judged->jaccard, 0.8);
  judge.edited_threshold = 0;
  ASSERT_FALSE(JudgePair(copy, original, judge)->duplicate);

  StoreOptions create;
  create.lsh = MinHashLshOptions{};
  create.lsh->threshold = 0.8;
  create.edited_threshold = 0.7;
  create.edited_min_jaccard = 0.3;
  create.compaction_trigger = 0;
  {
    auto store = Open(create);
    ASSERT_TRUE(store);
    EXPECT_TRUE(store->SketchesNeedUnits());
    SketchFor(*store);
    EXPECT_TRUE(Check(*store, "original", original, AddMode::kIfNew).added);
    EXPECT_TRUE(Check(*store, "other", Words(200), AddMode::kIfNew).added);
    CheckResult stored = Check(*store, "copy", copy, AddMode::kNever);
    ASSERT_EQ(stored.duplicates.size(), 1u);
    EXPECT_EQ(stored.duplicates[0].reason, DuplicateReason::kEdited);
    // Within one batch, against an earlier document of the batch (not yet in the memtable).
    std::vector<DocumentInput> batch = {Doc("b1", DistinctWords(300, 0, "item")),
                                        Doc("b2", DistinctWords(300, 12, "item"))};
    auto decided = store->CheckBatch(batch, CheckOptions{});
    ASSERT_TRUE(decided.ok()) << decided.status().ToString();
    EXPECT_TRUE((*decided)[0].added);
    ASSERT_EQ((*decided)[1].duplicates.size(), 1u);
    EXPECT_EQ((*decided)[1].duplicates[0].id, "b1");
    EXPECT_EQ((*decided)[1].duplicates[0].reason, DuplicateReason::kEdited);
    // A sketch made without units is refused, not judged without them.
    auto bare = DocumentSketcher::Create(FingerprintOptions{}, *store->LshOptions());
    ASSERT_TRUE(bare.ok());
    DocumentSketch sketch;
    DocumentInput doc;
    doc.id = "bare";
    ASSERT_TRUE((*bare)->Sketch(copy, &doc.fingerprint, &sketch).ok());
    doc.sketch = &sketch;
    auto refused = store->CheckBatch(std::span<const DocumentInput>(&doc, 1), CheckOptions{});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("unit set"), std::string::npos);
    // So is one with unit sets of another width than the store's (20 bits: form 3).
    EXPECT_EQ(store->SketchUnitBits(), ShingleSimilarity::kUnitBits);
    auto wide = DocumentSketcher::Create(FingerprintOptions{}, *store->LshOptions(), true, 32);
    ASSERT_TRUE(wide.ok());
    ASSERT_TRUE((*wide)->Sketch(copy, &doc.fingerprint, &sketch).ok());
    refused = store->CheckBatch(std::span<const DocumentInput>(&doc, 1), CheckOptions{});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("32-bit elements, this store's"), std::string::npos)
        << refused.status().ToString();
    ASSERT_TRUE(store->Close().ok());
  }
  auto manifest = store::ReadManifest(dir_);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(manifest->version, 5);
  ASSERT_TRUE(manifest->rule);
  EXPECT_EQ(manifest->rule->verification_form, store::kShingleAndUnit20SetForm);
  // Reopened (the log replayed), flushed to a segment, compacted: the same answer.
  for (int step = 0; step < 3; ++step) {
    auto store = Open();
    ASSERT_TRUE(store);
    const StoreStats stats = store->Stats();
    EXPECT_EQ(stats.pair_rule.edited_threshold, 0.7);
    EXPECT_EQ(stats.pair_rule.edited_min_jaccard, 0.3);
    EXPECT_EQ(stats.verification_form, "narrowed32-elias-fano+units20");
    SketchFor(*store);
    if (step == 1) {
      ASSERT_TRUE(store->Flush().ok());
    }
    if (step == 2) {
      ASSERT_TRUE(store->Compact().ok());
    }
    CheckResult found = Check(*store, "copy", copy, AddMode::kNever);
    ASSERT_EQ(found.duplicates.size(), 1u) << "step " << step;
    EXPECT_EQ(found.duplicates[0].id, "original");
    EXPECT_EQ(found.duplicates[0].reason, DuplicateReason::kEdited);
    EXPECT_GE(found.duplicates[0].similarity.value_or(-1), 0.7);
    CheckResult exact = Check(*store, "probe", original, AddMode::kNever);
    ASSERT_EQ(exact.duplicates.size(), 1u);
    EXPECT_EQ(exact.duplicates[0].reason, DuplicateReason::kExact);
  }
  // `neardup index recover` keeps the rule (from the MANIFEST) and the unit sets.
  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  {
    auto store = Open();
    ASSERT_TRUE(store);
    EXPECT_EQ(store->Stats().pair_rule.edited_threshold, 0.7);
    SketchFor(*store);
    CheckResult found = Check(*store, "copy", copy, AddMode::kNever);
    ASSERT_EQ(found.duplicates.size(), 1u);
    EXPECT_EQ(found.duplicates[0].reason, DuplicateReason::kEdited);
  }
  // Another value at open is refused, naming the option.
  StoreOptions other;
  other.edited_threshold = 0.5;
  auto refused = DocumentStore::Open(dir_, other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("edited threshold 0.7, not 0.5"), std::string::npos)
      << refused.status().ToString();

  // A store created with the reason off (edited_threshold 0, as every store made before the
  // reason was on by default) keeps MANIFEST version 4 and its sets alone, answers the pair
  // `none`, and refuses to be opened with the reason on.
  fs::remove_all(dir_);
  StoreOptions off;
  off.lsh = create.lsh;
  off.edited_threshold = 0;
  {
    auto plain = Open(off);
    ASSERT_TRUE(plain);
    EXPECT_FALSE(plain->SketchesNeedUnits());
    EXPECT_EQ(plain->Stats().pair_rule.edited_threshold, 0);
    SketchFor(*plain);
    EXPECT_TRUE(Check(*plain, "original", original, AddMode::kIfNew).added);
    EXPECT_TRUE(Check(*plain, "copy", copy, AddMode::kNever).duplicates.empty());
  }
  EXPECT_EQ(store::ReadManifest(dir_)->version, 4);
  StoreOptions on;
  on.edited_threshold = 0.7;
  refused = DocumentStore::Open(dir_, on);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("edited threshold 0, not 0.7"), std::string::npos)
      << refused.status().ToString();
  on.edited_threshold = 0;
  EXPECT_TRUE(DocumentStore::Open(dir_, on).ok());
  // Opened with the default options (the reason on at 0.8 for a new store), it answers with its
  // recorded rule, off, and is added to, flushed and compacted without its rule rewritten.
  {
    auto plain = Open(StoreOptions{});
    ASSERT_TRUE(plain);
    EXPECT_FALSE(plain->SketchesNeedUnits());
    EXPECT_EQ(plain->Stats().pair_rule.edited_threshold, 0);
    EXPECT_EQ(plain->Stats().verification_form, "narrowed32-elias-fano");
    EXPECT_TRUE(Check(*plain, "copy", copy, AddMode::kNever).duplicates.empty());
    EXPECT_TRUE(Check(*plain, "other", Words(200), AddMode::kIfNew).added);
    ASSERT_TRUE(plain->Flush().ok());
    ASSERT_TRUE(plain->Compact().ok());
    EXPECT_TRUE(Check(*plain, "copy", copy, AddMode::kNever).duplicates.empty());
    ASSERT_TRUE(plain->Close().ok());
  }
  auto manifest_after = store::ReadManifest(dir_);
  ASSERT_TRUE(manifest_after.ok()) << manifest_after.status().ToString();
  EXPECT_EQ(manifest_after->version, 4);
  ASSERT_TRUE(manifest_after->rule);
  EXPECT_EQ(manifest_after->rule->edited_threshold, 0);
  EXPECT_EQ(manifest_after->rule->verification_form, store::kShingleSetForm);
  // An explicitly given default value is another value: refused, naming both.
  on.edited_threshold = 0.8;
  refused = DocumentStore::Open(dir_, on);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("edited threshold 0, not 0.8"), std::string::npos)
      << refused.status().ToString();
}

// Without the MANIFEST, recovery reads whether the `edited` reason was on from the sets (segments
// do not record its options): a store whose sets hold unit sets gets the reason on with the
// defaults (its own threshold is lost; the report says so), one whose sets do not gets it off, so
// the recorded rule never contradicts the sets; both answer an edited copy as they say.
TEST_F(StoreDedupRuleTest, RecoverWithoutTheManifestReadsTheEditedReasonFromTheSets) {
  // Every 12th of 300 words replaced: shingle Jaccard ~0.6, units 0.85; below the 0.8 threshold,
  // so only `edited` accepts the pair.
  const std::string original = DistinctWords(300, 0), copy = DistinctWords(300, 12);
  for (const double edited : {0.7, 0.0}) {
    SCOPED_TRACE(edited);
    fs::remove_all(dir_);
    StoreOptions create;
    create.lsh = MinHashLshOptions{};
    create.lsh->threshold = 0.8;
    create.edited_threshold = edited;
    {
      auto store = Open(create);
      ASSERT_TRUE(store);
      EXPECT_TRUE(Check(*store, "original", original, AddMode::kIfNew).added);
      EXPECT_TRUE(Check(*store, "other", Words(200), AddMode::kIfNew).added);
      ASSERT_TRUE(store->Flush().ok());
      EXPECT_TRUE(Check(*store, "logged", DistinctWords(150, 0, "logged"), AddMode::kIfNew)
                      .added);  // in the log
      ASSERT_TRUE(store->Close().ok());
    }
    auto report = RecoverWithoutTheManifest(dir_);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->documents, 3u);
    const std::string messages = Messages(*report);
    auto manifest = store::ReadManifest(dir_);
    ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
    ASSERT_TRUE(manifest->rule);
    auto store = Open();  // the default options
    ASSERT_TRUE(store);
    if (edited > 0) {
      EXPECT_NE(messages.find("the sets hold 20-bit unit sets, so the edited reason was on; its "
                              "threshold "
                              "is not known: set to the default, 0.8 (shingle Jaccard >= 0.45)"),
                std::string::npos)
          << messages;
      EXPECT_EQ(manifest->version, 5);
      EXPECT_EQ(manifest->rule->verification_form, store::kShingleAndUnit20SetForm);
      EXPECT_EQ(store->Stats().pair_rule.edited_threshold, 0.8);
      EXPECT_EQ(store->Stats().pair_rule.edited_min_jaccard, 0.45);
      CheckResult found = Check(*store, "copy", copy, AddMode::kNever);
      ASSERT_EQ(found.duplicates.size(), 1u);
      EXPECT_EQ(found.duplicates[0].id, "original");
      EXPECT_EQ(found.duplicates[0].reason, DuplicateReason::kEdited);
    } else {
      EXPECT_NE(messages.find("the sets hold no unit sets, so the edited reason: off"),
                std::string::npos)
          << messages;
      EXPECT_EQ(manifest->version, 4);
      EXPECT_EQ(manifest->rule->verification_form, store::kShingleSetForm);
      EXPECT_EQ(store->Stats().pair_rule.edited_threshold, 0);
      EXPECT_TRUE(Check(*store, "copy", copy, AddMode::kNever).duplicates.empty());
    }
    // Every document is still found by its own text, whichever form.
    EXPECT_EQ(Check(*store, "probe", original, AddMode::kNever).duplicates.size(), 1u);
    EXPECT_EQ(
        Check(*store, "probe2", DistinctWords(150, 0, "logged"), AddMode::kNever).duplicates.size(),
        1u);
  }
}

// Sets of both kinds in one directory (never written by one store: here a segment of another store
// with the same LSH plan but the reason off, put beside a store's own): recovery without the
// MANIFEST records the reason off and drops the unit sets, counting them, so the recorded rule
// still matches every set; every document is kept and found by its text.
TEST_F(StoreDedupRuleTest, RecoverWithoutTheManifestOfMixedSetsTurnsTheEditedReasonOff) {
  const std::string original = DistinctWords(300, 0), copy = DistinctWords(300, 12);
  StoreOptions create;
  create.lsh = MinHashLshOptions{};
  create.lsh->threshold = 0.8;
  create.lsh->parameters = LshParameters{41, 3};  // the same plan either way: the rules agree
  const std::string other_dir = dir_ + "_other";
  fs::remove_all(other_dir);
  for (const double edited : {0.0, 0.7}) {
    create.edited_threshold = edited;
    const std::string dir = edited > 0 ? dir_ : other_dir;
    auto store = DocumentStore::Open(dir, create);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    SketchFor(**store);
    const std::string id = edited > 0 ? "original" : "foreign";
    const std::string text = edited > 0 ? original : DistinctWords(200, 0, "foreign");
    EXPECT_TRUE(Check(**store, id, text, AddMode::kIfNew).added);
    ASSERT_TRUE((*store)->Flush().ok());
    ASSERT_TRUE((*store)->Close().ok());
  }
  // The other store's segment, under a number after the store's own files, and no MANIFEST.
  ASSERT_EQ(MoveSegmentsBeside(other_dir, dir_), 1);
  auto report = RecoverWithoutTheManifest(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->documents, 2u);
  const std::string messages = Messages(*report);
  EXPECT_NE(messages.find("the sets of 1 documents hold unit sets and those of 1 do not: the "
                          "edited reason off, the unit sets dropped"),
            std::string::npos)
      << messages;
  auto manifest = store::ReadManifest(dir_);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  ASSERT_TRUE(manifest->rule);
  EXPECT_EQ(manifest->version, 4);
  EXPECT_EQ(manifest->rule->verification_form, store::kShingleSetForm);
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Stats().pair_rule.edited_threshold, 0);
  CheckResult exact = Check(*store, "probe", original, AddMode::kNever);
  ASSERT_EQ(exact.duplicates.size(), 1u);
  EXPECT_EQ(exact.duplicates[0].id, "original");
  EXPECT_EQ(
      Check(*store, "probe2", DistinctWords(200, 0, "foreign"), AddMode::kNever).duplicates.size(),
      1u);
  EXPECT_TRUE(Check(*store, "copy", copy, AddMode::kNever).duplicates.empty());
}

// Unit sets of both widths in one directory (never written by one store: here a segment of a store
// of 32-bit unit sets, verification form 2, put beside a default store's own, of 20-bit ones):
// recovery without the MANIFEST records the reason off and drops the unit sets, counting each
// width, so the recorded rule matches every set; every document is kept with its shingle set and
// found by its text, a near copy at the verified Jaccard.
TEST_F(StoreDedupRuleTest, RecoverWithoutTheManifestOfBothUnitWidthsTurnsTheEditedReasonOff) {
  const std::string original = DistinctWords(300, 0), foreign = DistinctWords(200, 0, "foreign");
  // The edited reason at its default, 0.8; near duplicates at 0.8 (as in the tests above, so that
  // a lightly edited copy is a duplicate only by `edited`), one plan for both stores.
  StoreOptions create;
  create.lsh = MinHashLshOptions{};
  create.lsh->threshold = 0.8;
  create.lsh->parameters = LshParameters{41, 3};
  const std::string other_dir = dir_ + "_other";
  fs::remove_all(other_dir);
  {
    auto store = DocumentStore::Open(other_dir, create);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Close().ok());
  }
  ASSERT_TRUE(RecordFormTwo(other_dir));  // nothing stored yet
  for (const bool own : {false, true}) {
    auto store = DocumentStore::Open(own ? dir_ : other_dir, create);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_EQ((*store)->SketchUnitBits(), own ? ShingleSimilarity::kUnitBits : 32);
    SketchFor(**store);
    EXPECT_TRUE(
        Check(**store, own ? "original" : "foreign", own ? original : foreign, AddMode::kIfNew)
            .added);
    ASSERT_TRUE((*store)->Flush().ok());
    // Before: a lightly edited copy (every 12th word replaced) is a duplicate by `edited` alone.
    CheckResult edited =
        Check(**store, "edited", own ? DistinctWords(300, 12) : DistinctWords(200, 12, "foreign"),
              AddMode::kNever);
    ASSERT_EQ(edited.duplicates.size(), 1u);
    EXPECT_EQ(edited.duplicates[0].reason, DuplicateReason::kEdited);
    ASSERT_TRUE((*store)->Close().ok());
  }
  // The other store's segment, under a number after the store's own files, and no MANIFEST.
  ASSERT_EQ(MoveSegmentsBeside(other_dir, dir_), 1);
  auto report = RecoverWithoutTheManifest(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->documents, 2u);
  EXPECT_EQ(report->segments_kept, 2u);
  EXPECT_EQ(report->entries_lost, 0u);
  EXPECT_EQ(report->sketches_lost, 0u);
  const std::string messages = Messages(*report);
  EXPECT_NE(messages.find("the sets of 1 documents hold 20-bit unit sets and those of 1 32-bit "
                          "ones: the edited reason off, the unit sets dropped"),
            std::string::npos)
      << messages;
  auto manifest = store::ReadManifest(dir_);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  ASSERT_TRUE(manifest->rule);
  EXPECT_EQ(manifest->version, 4);
  EXPECT_EQ(manifest->rule->verification_form, store::kShingleSetForm);
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Stats().documents, 2u);
  EXPECT_EQ(store->Stats().pair_rule.edited_threshold, 0);
  EXPECT_EQ(store->Stats().verification_form, "narrowed32-elias-fano");
  EXPECT_FALSE(store->SketchesNeedUnits());
  auto shingler =
      ShingleSimilarity::Create(FingerprintOptions{}.normalize.traditional_to_simplified);
  ASSERT_TRUE(shingler.ok());
  // Each document, from either width's segment: found by its own text, a near copy (every 50th
  // word replaced: shingle Jaccard ~0.89) at the Jaccard of the texts' shingle sets, and a lightly
  // edited copy (every 12th: ~0.6, which only `edited` would accept) not at all.
  struct Stored {
    std::string id, word;
    int n;
  };
  for (const auto& [id, word, n] :
       {Stored{"original", "token", 300}, {"foreign", "foreign", 200}}) {
    SCOPED_TRACE(id);
    const std::string text = DistinctWords(n, 0, word), near = DistinctWords(n, 50, word);
    CheckResult exact = Check(*store, "probe", text, AddMode::kNever);
    ASSERT_EQ(exact.duplicates.size(), 1u);
    EXPECT_EQ(exact.duplicates[0].id, id);
    EXPECT_EQ(exact.duplicates[0].reason, DuplicateReason::kExact);
    auto jaccard = (*shingler)->VerifiedJaccard(text, near);
    ASSERT_TRUE(jaccard.ok());
    EXPECT_GT(*jaccard, 0.8);
    EXPECT_LT(*jaccard, 1);
    CheckResult found = Check(*store, "near", near, AddMode::kNever);
    ASSERT_EQ(found.duplicates.size(), 1u);
    EXPECT_EQ(found.duplicates[0].id, id);
    EXPECT_EQ(found.duplicates[0].reason, DuplicateReason::kNearDuplicate);
    EXPECT_EQ(found.duplicates[0].similarity.value_or(-1), *jaccard);
    EXPECT_TRUE(
        Check(*store, "edited", DistinctWords(n, 12, word), AddMode::kNever).duplicates.empty());
  }
}

// A store created with 32-bit unit sets (verification form 2, before they were 20 bits wide)
// keeps answering with them: it says so (SketchUnitBits 32, stats "+units"), refuses sketches of
// 20-bit unit sets, naming itself, and its edited similarity is the 32-bit unit Jaccard, in the
// memtable, after a flush, a compaction, a reopen and `index recover` without its MANIFEST; the
// MANIFEST keeps form 2.
TEST_F(StoreDedupRuleTest, AStoreOfThirtyTwoBitUnitSetsKeepsAnsweringWithThem) {
  auto shingler =
      ShingleSimilarity::Create(FingerprintOptions{}.normalize.traditional_to_simplified);
  ASSERT_TRUE(shingler.ok());
  auto unit_jaccard = [&](const std::string& a, const std::string& b, int bits) {
    std::vector<uint64_t> units;
    std::vector<uint32_t> na, nb;
    EXPECT_TRUE((*shingler)->Units(a, &units).ok());
    ShingleSimilarity::NarrowUnits(units, &na, bits);
    EXPECT_TRUE((*shingler)->Units(b, &units).ok());
    ShingleSimilarity::NarrowUnits(units, &nb, bits);
    return ShingleSimilarity::Jaccard32(na, nb);
  };
  // A pair whose 20-bit unit Jaccard differs from its 32-bit one (a collision among its ~600
  // units: a few percent of word choices), so the width the store answers with shows.
  std::string original, copy;
  for (int i = 0; i < 400 && original.empty(); ++i) {
    const std::string word = "w" + std::to_string(i) + "x";
    const std::string a = DistinctWords(300, 0, word), b = DistinctWords(300, 12, word);
    if (unit_jaccard(a, b, 32) != unit_jaccard(a, b, ShingleSimilarity::kUnitBits)) {
      original = a;
      copy = b;
    }
  }
  ASSERT_FALSE(original.empty());
  const double j32 = unit_jaccard(original, copy, 32);
  StoreOptions create;
  create.lsh = MinHashLshOptions{};
  create.lsh->threshold = 0.8;
  create.edited_threshold = 0.7;
  create.edited_min_jaccard = 0.3;
  create.compaction_trigger = 0;
  {
    auto store = Open(create);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Close().ok());
  }
  ASSERT_TRUE(RecordFormTwo(dir_));  // nothing stored yet
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    if (step == 4) {
      // Without its MANIFEST, recovery reads the width from the sets: form 2 again (the edited
      // threshold, not recorded in the sets, becomes the default 0.8, which the pair reaches).
      auto report = RecoverWithoutTheManifest(dir_);
      ASSERT_TRUE(report.ok()) << report.status().ToString();
      const std::string messages = Messages(*report);
      EXPECT_NE(messages.find("the sets hold 32-bit unit sets, so the edited reason was on"),
                std::string::npos)
          << messages;
    }
    auto store = Open();
    ASSERT_TRUE(store);
    EXPECT_TRUE(store->SketchesNeedUnits());
    EXPECT_EQ(store->SketchUnitBits(), 32);
    EXPECT_EQ(store->Stats().verification_form, "narrowed32-elias-fano+units");
    if (step == 0) {
      // A sketch of 20-bit unit sets is refused, naming the store and the widths.
      auto narrow = DocumentSketcher::Create(FingerprintOptions{}, *store->LshOptions(), true);
      ASSERT_TRUE(narrow.ok());
      DocumentSketch sketch;
      DocumentInput doc;
      doc.id = "narrow";
      ASSERT_TRUE((*narrow)->Sketch(copy, &doc.fingerprint, &sketch).ok());
      doc.sketch = &sketch;
      auto refused = store->CheckBatch(std::span<const DocumentInput>(&doc, 1), CheckOptions{});
      ASSERT_FALSE(refused.ok());
      EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(refused.status().message().find("20-bit elements, this store's (" + dir_ + ") 32"),
                std::string::npos)
          << refused.status().ToString();
      SketchFor(*store);
      EXPECT_TRUE(Check(*store, "original", original, AddMode::kIfNew).added);
    }
    SketchFor(*store);
    if (step == 1) {
      ASSERT_TRUE(store->Flush().ok());
    }
    if (step == 2) {
      EXPECT_TRUE(Check(*store, "other", Words(200), AddMode::kIfNew).added);
      ASSERT_TRUE(store->Flush().ok());
      ASSERT_TRUE(store->Compact().ok());
    }
    CheckResult found = Check(*store, "copy", copy, AddMode::kNever);
    ASSERT_EQ(found.duplicates.size(), 1u);
    EXPECT_EQ(found.duplicates[0].id, "original");
    EXPECT_EQ(found.duplicates[0].reason, DuplicateReason::kEdited);
    EXPECT_EQ(found.duplicates[0].similarity.value_or(-1), j32);
    ASSERT_TRUE(store->Close().ok());
    auto recorded = store::ReadManifest(dir_);
    ASSERT_TRUE(recorded.ok() && recorded->rule);
    EXPECT_EQ(recorded->rule->verification_form, store::kShingleAndUnitSetForm);
  }
}

// A version-5 MANIFEST whose edited options are out of range, or whose verification form does not
// match them, is Corruption at open, naming what is wrong.
TEST_F(StoreDedupRuleTest, ARecordedEditedRuleOutOfRangeIsAnOpenError) {
  StoreOptions create;
  create.edited_threshold = 0.7;
  {
    auto store = Open(create);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Close().ok());
  }
  auto manifest = store::ReadManifest(dir_);
  ASSERT_TRUE(manifest.ok() && manifest->rule);
  const store::Manifest good = *manifest;
  struct Damage {
    double threshold, min_jaccard;
    uint32_t form;
    const char* named;
  } damages[] = {{1.5, 0.45, store::kShingleAndUnit20SetForm, "edited_threshold"},
                 {0.7, 0, store::kShingleAndUnit20SetForm, "edited_min_jaccard"},
                 {0.7, 0.45, store::kShingleSetForm, "out of range"},
                 {0.7, 0.45, 4, "out of range"}};
  for (const Damage& damage : damages) {
    store::Manifest bad = good;
    bad.rule->edited_threshold = damage.threshold;
    bad.rule->edited_min_jaccard = damage.min_jaccard;
    bad.rule->verification_form = damage.form;
    {
      std::ofstream out(store::JoinPath(dir_, store::kManifestName),
                        std::ios::binary | std::ios::trunc);
      out << store::EncodeManifest(bad);
    }
    auto opened = DocumentStore::Open(dir_, StoreOptions{});
    ASSERT_FALSE(opened.ok()) << damage.named;
    EXPECT_EQ(opened.status().code(), StatusCode::kCorruption);
    EXPECT_NE(opened.status().message().find("MANIFEST rule fields out of range"),
              std::string::npos)
        << opened.status().ToString();
    EXPECT_NE(opened.status().message().find(damage.named), std::string::npos)
        << opened.status().ToString();
  }
  {
    std::ofstream out(store::JoinPath(dir_, store::kManifestName),
                      std::ios::binary | std::ios::trunc);
    out << store::EncodeManifest(good);
  }
  EXPECT_TRUE(DocumentStore::Open(dir_, StoreOptions{}).ok());
}

TEST_F(StoreDedupRuleTest, BadEditedOptionsAreRefusedAtCreation) {
  StoreOptions bad;
  bad.edited_threshold = 1.5;
  auto refused = DocumentStore::Open(dir_, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("edited"), std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(fs::exists(store::JoinPath(dir_, store::kManifestName)));
  StoreOptions simhash;
  simhash.rule = StoreRule::kSimHash;
  simhash.edited_threshold = 0.7;
  EXPECT_EQ(DocumentStore::Open(dir_, simhash).status().code(), StatusCode::kInvalidArgument);
}

// Streaming with the `edited` reason on links the same documents as RunDedup with it: the planted
// corpus plus lightly edited copies (12 % of the words replaced), some of which only `edited`
// accepts.
TEST_F(StoreDedupRuleTest, StreamingEqualsBatchWithTheEditedReason) {
  Corpus corpus = PlantedCorpus(300, 40);
  std::mt19937_64 rng(25);
  const std::vector<std::string> base = SampleTexts(150);
  for (size_t i = 0; i < base.size(); i += 2) {
    corpus.ids.push_back("d" + std::to_string(i));
    corpus.texts.push_back(SubstituteWords(base[i], 0.12, rng));
  }
  const std::string file = dir_ + ".jsonl";
  {
    std::ofstream out(file, std::ios::binary);
    for (size_t i = 0; i < corpus.ids.size(); ++i) {
      out << testing_files::JsonLine(corpus.ids[i], corpus.texts[i]);
    }
  }
  StoreOptions options;
  options.memtable_limit = 97;  // the stream crosses flushes and compactions
  options.compaction_trigger = 3;
  options.sync_mode = SyncMode::kNone;
  options.edited_threshold = 0.7;
  auto store = Open(options);
  ASSERT_TRUE(store);
  SketchFor(*store);
  std::vector<std::pair<std::string, std::string>> streamed;
  size_t streamed_edited = 0;
  for (size_t i = 0; i < corpus.ids.size(); ++i) {
    CheckResult result = Check(*store, corpus.ids[i], corpus.texts[i], AddMode::kAlways);
    for (const StoredDocument& d : result.duplicates) {
      streamed.push_back({corpus.ids[i], d.id});
      streamed_edited += d.reason == DuplicateReason::kEdited;
    }
  }
  DedupOptions dedup;
  dedup.threads = 2;
  dedup.edited_threshold = 0.7;
  auto report = RunDedup({file}, dedup);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::vector<std::pair<std::string, std::string>> batch;
  for (const DuplicatePair& pair : report->pairs) {
    batch.push_back({report->documents[pair.a].id, report->documents[pair.b].id});
  }
  EXPECT_GT(report->pairs_by_reason["edited"], 0u);
  EXPECT_GT(streamed_edited, 0u);
  const auto s = Components(streamed), b = Components(batch);
  EXPECT_GT(b.size(), 20u);
  EXPECT_EQ(s, b) << "streamed " << s.size() << " components, batch " << b.size();
  // Without the reason, fewer documents are linked: it found pairs of its own.
  dedup.edited_threshold = 0;
  auto without = RunDedup({file}, dedup);
  ASSERT_TRUE(without.ok());
  EXPECT_LT(without->pairs.size(), report->pairs.size());
  fs::remove(file);
}

}  // namespace
}  // namespace neardup
