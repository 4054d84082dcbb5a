// Corrupt-file tests of the store: truncated or bit-flipped segment, log and MANIFEST files give a
// clear error naming the file; a torn log tail is truncated (reported and kept aside, see
// store_log_bounds_test.cc); RecoverStore (`neardup index recover`) salvages everything intact and
// the store opens again.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "neardup/store.h"
#include "simhash_store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

Fingerprint FpOf(int n) { return Fingerprint::From64(uint64_t(n) * 0x9E3779B97F4A7C15ull + 7); }
std::string IdOf(int n) { return "doc-" + std::to_string(n); }

class StoreCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_corrupt_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    options_.memtable_limit = 100;
    options_.compaction_trigger = 0;
    // Two segments (docs 0..199) via Close, then docs 200..229 left in the log by a child that
    // exits without closing (as if killed).
    {
      auto store = DocumentStore::Open(dir_, options_);
      ASSERT_TRUE(store.ok());
      for (int i = 0; i < 200; ++i) ASSERT_TRUE((*store)->Add({IdOf(i), FpOf(i), "m"}).ok());
      ASSERT_TRUE((*store)->Close().ok());
    }
    pid_t child = ::fork();
    if (child == 0) {
      auto store = DocumentStore::Open(dir_, options_);
      if (!store.ok()) ::_exit(2);
      for (int i = 200; i < 230; ++i) {
        if (!(*store)->Add({IdOf(i), FpOf(i), "log"}).ok()) ::_exit(3);
      }
      ::_exit(0);
    }
    int wstatus = 0;
    ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
    ASSERT_EQ(WEXITSTATUS(wstatus), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> Files(const std::string& suffix) {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().string().ends_with(suffix)) out.push_back(entry.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static void FlipByte(const std::string& path, size_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5A);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }
  int CountPresent(DocumentStore& store, int begin, int end) {
    int present = 0;
    for (int i = begin; i < end; ++i) {
      auto doc = store.Get(IdOf(i));
      if (doc.ok()) {
        EXPECT_EQ(doc->fingerprint, FpOf(i));
        ++present;
      }
    }
    return present;
  }
  std::string dir_;
  StoreOptions options_ = testing_store::SimHashStoreOptions();  // bare fingerprints
};

TEST_F(StoreCorruptionTest, IntactStoreOpensWithEverything) {
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(CountPresent(**store, 0, 230), 230);
}

TEST_F(StoreCorruptionTest, FlippedSegmentByteIsNamedAndRecovered) {
  auto segments = Files(".ndseg");
  ASSERT_EQ(segments.size(), 2u);
  FlipByte(segments[1], fs::file_size(segments[1]) / 2);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_NE(store.status().message().find(fs::path(segments[1]).filename().string()),
            std::string::npos)
      << store.status().message();

  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->segments_kept, 1u);
  EXPECT_EQ(report->segments_salvaged, 1u);
  EXPECT_TRUE(fs::exists(segments[1] + ".corrupt"));
  auto reopened = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  // The intact segment and the log are whole; the damaged segment's readable entries are back.
  EXPECT_EQ(CountPresent(**reopened, 200, 230), 30);
  EXPECT_GE(CountPresent(**reopened, 0, 200), 100);
}

TEST_F(StoreCorruptionTest, TruncatedSegmentIsNamedAndRecovered) {
  auto segments = Files(".ndseg");
  ASSERT_EQ(segments.size(), 2u);
  fs::resize_file(segments[0], fs::file_size(segments[0]) / 3);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_NE(store.status().message().find(fs::path(segments[0]).filename().string()),
            std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find("truncated"), std::string::npos);
  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto reopened = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(CountPresent(**reopened, 200, 230), 30);
  const int from_other_segment = CountPresent(**reopened, 0, 200);
  EXPECT_GE(from_other_segment, 100);  // the intact segment at least
  EXPECT_EQ(report->documents, static_cast<uint64_t>(from_other_segment + 30));
}

TEST_F(StoreCorruptionTest, TornLogTailIsTruncatedOnOpen) {
  auto logs = Files(".ndwal");
  ASSERT_EQ(logs.size(), 1u);
  fs::resize_file(logs[0], fs::file_size(logs[0]) - 5);  // cut into the last record
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(CountPresent(**store, 0, 229), 229);
  EXPECT_FALSE((*store)->Get(IdOf(229)).ok());  // the torn record is gone, whole
  // And the log keeps working after the truncation.
  ASSERT_TRUE((*store)->Add({IdOf(229), FpOf(229), "again"}).ok());
  ASSERT_TRUE((*store)->Close().ok());
  auto reopened = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->Get(IdOf(229))->metadata, "again");
}

TEST_F(StoreCorruptionTest, DamageInsideTheLogIsNamedAndRecovered) {
  auto logs = Files(".ndwal");
  ASSERT_EQ(logs.size(), 1u);
  // Header is 32 bytes; flip a byte inside the first record's payload.
  FlipByte(logs[0], 32 + 20);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_NE(store.status().message().find(fs::path(logs[0]).filename().string()), std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find("offset 32"), std::string::npos);
  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_GT(report->wal_bytes_dropped, 0u);
  auto reopened = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(CountPresent(**reopened, 0, 200), 200);  // segments untouched
  EXPECT_EQ(CountPresent(**reopened, 200, 230), 0);  // the log stopped at its first record
  EXPECT_TRUE(fs::exists(logs[0] + ".corrupt"));
}

TEST_F(StoreCorruptionTest, DamagedManifestIsNamedAndRecovered) {
  const std::string manifest = dir_ + "/MANIFEST";
  FlipByte(manifest, 20);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_NE(store.status().message().find("MANIFEST"), std::string::npos);
  auto report = RecoverStore(dir_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto reopened = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(CountPresent(**reopened, 0, 230), 230);
}

TEST_F(StoreCorruptionTest, MissingManifestWithDataRefusesToStartEmpty) {
  fs::remove(dir_ + "/MANIFEST");
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("recover"), std::string::npos);
  ASSERT_TRUE(RecoverStore(dir_).ok());
  auto reopened = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(CountPresent(**reopened, 0, 230), 230);
}

TEST_F(StoreCorruptionTest, WrongMagicAndVersionAreReported) {
  auto segments = Files(".ndseg");
  FlipByte(segments[0], 0);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("bad magic"), std::string::npos)
      << store.status().message();
}

TEST_F(StoreCorruptionTest, RecoverCommandLineSalvages) {
  auto segments = Files(".ndseg");
  FlipByte(segments[0], fs::file_size(segments[0]) - 100);
  const std::string command =
      std::string(NEARDUP_BINARY) + " index recover " + dir_ + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::string stats = std::string(NEARDUP_BINARY) + " index stats " + dir_ + " > /dev/null";
  EXPECT_EQ(std::system(stats.c_str()), 0);
  auto reopened = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(CountPresent(**reopened, 100, 230), 130);
}

}  // namespace
}  // namespace neardup
