// Damaged files of a dedup-rule store (format version 3, with the sketch section): a flipped byte
// in the sketch section is named at open; with the whole-file checksum skipped (--no-verify)
// every check still returns a Status, never a crash (run under ASan in CI); `neardup index
// recover` (RecoverStore) keeps intact segments whole with their sketches, keeps a damaged
// segment's readable entries (without sketches when its sketch section is damaged, counted in
// sketches_lost), and restores the rule from a segment when the MANIFEST is lost; afterwards the
// rule finds every document that kept its sketch.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "neardup/sketch.h"
#include "neardup/store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

std::string TextOf(int n) {
  std::mt19937_64 words(static_cast<uint64_t>(n));
  std::string text = "damage " + std::to_string(n);
  for (int i = 0; i < 30; ++i) text += " x" + std::to_string(words() % 3000);
  return text;
}
std::string IdOf(int n) { return "doc-" + std::to_string(n); }

class StoreDedupDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_dedup_damage_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    options_.memtable_limit = 100;
    options_.compaction_trigger = 0;
    options_.sync_mode = SyncMode::kNone;
    // Two segments (docs 0..199), then docs 200..229 left in the log by a child that exits
    // without closing.
    {
      auto store = DocumentStore::Open(dir_, options_);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      // Sketches as the store resolved its rule (the LSH plan, and unit sets with `edited` on).
      auto sketcher = DocumentSketcher::Create(FingerprintOptions{}, *(*store)->LshOptions(),
                                               (*store)->SketchesNeedUnits());
      ASSERT_TRUE(sketcher.ok()) << sketcher.status().ToString();
      sketcher_ = std::move(*sketcher);
      for (int i = 0; i < 200; ++i) ASSERT_TRUE(Add(**store, i).ok());
      ASSERT_TRUE((*store)->Close().ok());
    }
    pid_t child = ::fork();
    if (child == 0) {
      StoreOptions logged = options_;
      logged.sync_mode = SyncMode::kEveryWrite;
      auto store = DocumentStore::Open(dir_, logged);
      if (!store.ok()) ::_exit(2);
      for (int i = 200; i < 230; ++i) {
        if (!Add(**store, i).ok()) ::_exit(3);
      }
      ::_exit(0);
    }
    int wstatus = 0;
    ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
    ASSERT_EQ(WEXITSTATUS(wstatus), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Status Add(DocumentStore& store, int n) {
    Fingerprint fp;
    DocumentSketch sketch;
    NEARDUP_RETURN_IF_ERROR(sketcher_->Sketch(TextOf(n), &fp, &sketch));
    const std::string id = IdOf(n);
    DocumentInput doc{id, fp, ""};
    doc.sketch = &sketch;
    return store.Add(doc);
  }
  // Whether the rule finds document n as an exact duplicate of its text (nullopt: the check
  // failed with a Status).
  std::optional<bool> Finds(DocumentStore& store, int n) {
    DocumentSketch sketch;
    DocumentInput probe{"probe", {}, ""};
    EXPECT_TRUE(sketcher_->Sketch(TextOf(n), &probe.fingerprint, &sketch).ok());
    probe.sketch = &sketch;
    CheckOptions lookup;
    lookup.add = AddMode::kNever;
    auto checked = store.CheckBatch(std::span<const DocumentInput>(&probe, 1), lookup);
    if (!checked.ok()) return std::nullopt;
    for (const StoredDocument& d : (*checked)[0].duplicates) {
      if (d.id == IdOf(n) && d.reason == DuplicateReason::kExact) return true;
    }
    return false;
  }
  int CountFound(DocumentStore& store, int begin, int end) {
    int found = 0;
    for (int i = begin; i < end; ++i) found += Finds(store, i).value_or(false) ? 1 : 0;
    return found;
  }
  std::vector<std::string> Segments() {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().string().ends_with(".ndseg")) out.push_back(entry.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // [begin, end) of a segment's sketch section (header offset 112, up to the 16-byte footer).
  static std::pair<uint64_t, uint64_t> SketchSection(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(112);
    uint64_t offset = 0;
    in.read(reinterpret_cast<char*>(&offset), 8);
    return {offset, fs::file_size(path) - 16};
  }
  static void XorByte(const std::string& path, uint64_t offset, char mask) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c;
    f.read(&c, 1);
    c = static_cast<char>(c ^ mask);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }

  std::string dir_;
  StoreOptions options_;
  std::unique_ptr<DocumentSketcher> sketcher_;
};

TEST_F(StoreDedupDamageTest, IntactStoreFindsEverything) {
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(CountFound(**store, 0, 230), 230);
  EXPECT_EQ(Segments().size(), 2u);
}

TEST_F(StoreDedupDamageTest, DamagedSketchSectionIsNamedOrAnsweredWithoutACrash) {
  const std::vector<std::string> segments = Segments();
  ASSERT_EQ(segments.size(), 2u);
  const auto [begin, end] = SketchSection(segments[1]);
  ASSERT_GT(end, begin);
  std::mt19937_64 rng(5);
  for (int round = 0; round < 40; ++round) {
    // Damage a byte of the sketch section (the trailer included, now and then).
    const uint64_t at = round % 8 == 7 ? end - 1 - rng() % 96 : begin + rng() % (end - begin);
    const char mask = static_cast<char>(1 + rng() % 255);
    XorByte(segments[1], at, mask);
    auto verified = DocumentStore::Open(dir_, options_);
    ASSERT_FALSE(verified.ok()) << "round " << round;
    EXPECT_EQ(verified.status().code(), StatusCode::kCorruption);
    EXPECT_NE(verified.status().message().find(fs::path(segments[1]).filename().string()),
              std::string::npos)
        << verified.status().message();
    StoreOptions unverified = options_;
    unverified.verify_checksums_on_open = false;
    auto store = DocumentStore::Open(dir_, unverified);
    if (store.ok()) {
      // Wrong answers are possible, a crash or an out-of-bounds read is not.
      for (int i = 0; i < 230; i += 9) (void)Finds(**store, i);
      EXPECT_EQ(CountFound(**store, 0, 100), 100);  // the other segment is intact
      ASSERT_TRUE((*store)->Close().ok());
    }
    XorByte(segments[1], at, mask);  // undo
  }
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
}

TEST_F(StoreDedupDamageTest, RecoverKeepsSketchesWhereTheyAreIntact) {
  const std::vector<std::string> segments = Segments();
  ASSERT_EQ(segments.size(), 2u);
  // Damage the second segment's sketch section: its entries survive without sketches.
  const auto [begin, end] = SketchSection(segments[1]);
  XorByte(segments[1], begin + (end - begin) / 3, 0x5A);
  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->segments_kept, 1u);
  EXPECT_EQ(report->segments_salvaged, 1u);
  EXPECT_EQ(report->entries_lost, 0u);
  EXPECT_EQ(report->sketches_lost, 100u);
  EXPECT_EQ(report->documents, 230u);
  EXPECT_TRUE(fs::exists(segments[1] + ".corrupt"));
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Stats().rule, StoreRule::kDedup);
  EXPECT_EQ(CountFound(**store, 0, 100), 100);   // the intact segment, with its sketches
  EXPECT_EQ(CountFound(**store, 100, 200), 0);   // kept without sketches
  EXPECT_EQ(CountFound(**store, 200, 230), 30);  // the log
  for (int i = 100; i < 200; ++i) EXPECT_TRUE((*store)->Get(IdOf(i)).ok()) << i;
  // Adding their texts again restores the rule for them.
  for (int i = 100; i < 200; ++i) ASSERT_TRUE(Add(**store, i).ok());
  EXPECT_EQ(CountFound(**store, 0, 230), 230);
}

TEST_F(StoreDedupDamageTest, RecoverRestoresTheRuleWithoutTheManifest) {
  {
    std::ofstream manifest(dir_ + "/MANIFEST", std::ios::binary | std::ios::trunc);
    manifest << "garbage";
  }
  auto refused = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->documents, 230u);
  EXPECT_EQ(report->sketches_lost, 0u);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const StoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.rule, StoreRule::kDedup);
  EXPECT_EQ(stats.lsh.threshold, 0.5);
  // The default rule's plan (41 x 3: down to the `edited` reason's floor), and that reason on: the
  // sets hold 20-bit unit sets (its threshold is not in the segments: the default, which it was).
  EXPECT_EQ(stats.lsh.parameters->bands, 41);
  EXPECT_EQ(stats.pair_rule.edited_threshold, 0.8);
  EXPECT_EQ(stats.verification_form, "narrowed32-elias-fano+units20");
  EXPECT_EQ(CountFound(**store, 0, 230), 230);
}

TEST_F(StoreDedupDamageTest, TruncatedSegmentIsSalvagedAndTheRestStillFound) {
  const std::vector<std::string> segments = Segments();
  fs::resize_file(segments[0], fs::file_size(segments[0]) / 2);
  auto refused = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(refused.ok());
  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->segments_salvaged, 1u);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(CountFound(**store, 100, 230), 130);
}

}  // namespace
}  // namespace neardup
