// `neardup index recover` (RecoverStore) keeps only entries it can vouch for (issue 24): in a
// damaged segment every salvaged entry is checked against the store's limits, its id against the
// id hash the segment keeps, and its fingerprint against the index section's copy; what fails is
// counted in entries_lost, never written back as a document. Before, a 4-byte flip in the blob
// area came back as a document whose id was 23 kB of other records' bytes, and a 1-byte flip in
// the fingerprints array as a wrong fingerprint.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "neardup/store.h"
#include "simhash_store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

Fingerprint FpOf(int n) { return Fingerprint::From64(uint64_t(n) * 0x9E3779B97F4A7C15ull + 7); }
std::string IdOf(int n) { return "doc-" + std::to_string(n); }

class StoreRecoverChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_recover_checks_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    options_.compaction_trigger = 0;
    auto store = DocumentStore::Open(dir_, options_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int i = 0; i < kDocs; ++i) {
      const std::string id = IdOf(i);
      const std::string metadata = std::string(200, 'm') + std::to_string(i);
      ASSERT_TRUE((*store)->Add({id, FpOf(i), metadata}).ok());
    }
    ASSERT_TRUE((*store)->Close().ok());  // one segment, empty log
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().extension() == ".ndseg") segment_ = entry.path().string();
    }
    ASSERT_FALSE(segment_.empty());
    std::ifstream in(segment_, std::ios::binary);
    bytes_.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  void TearDown() override { fs::remove_all(dir_); }

  uint64_t U64(size_t at) const {
    uint64_t v;
    std::memcpy(&v, bytes_.data() + at, 8);
    return v;
  }
  void Save() const { std::ofstream(segment_, std::ios::binary | std::ios::trunc) << bytes_; }
  // Recovers, reopens and returns every document (id -> fingerprint) with the report.
  std::map<std::string, Fingerprint> RecoverAndRead(RecoveryReport* report) {
    auto recovered = RecoverStore(dir_);
    EXPECT_TRUE(recovered.ok()) << recovered.status().ToString();
    if (!recovered.ok()) return {};
    *report = *recovered;
    auto store = DocumentStore::Open(dir_, options_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    std::map<std::string, Fingerprint> docs;
    if (!store.ok()) return docs;
    for (int i = 0; i < kDocs; ++i) {
      auto doc = (*store)->Get(IdOf(i));
      if (doc.ok()) docs[doc->id] = doc->fingerprint;
    }
    EXPECT_EQ((*store)->Stats().documents, docs.size()) << "a document with another id came back";
    return docs;
  }

  static constexpr int kDocs = 50;
  std::string dir_;
  std::string segment_;
  std::string bytes_;
  StoreOptions options_ = testing_store::SimHashStoreOptions();  // bare fingerprints
};

TEST_F(StoreRecoverChecksTest, FlippedRecordLengthInTheBlobIsLostNotKept) {
  // Entry 7's record: its id_len grows by 0x900 (2304), so its "id" runs over later records
  // (still inside the blob) and is longer than the 2048-byte id limit.
  const uint64_t offsets = U64(48), blob = U64(56);
  const uint64_t record = blob + (U64(offsets + 7 * 8) & ~(uint64_t{1} << 63));
  bytes_[record + 1] ^= 0x09;
  Save();
  RecoveryReport report;
  const auto docs = RecoverAndRead(&report);
  for (const std::string& message : report.messages) std::printf("recover: %s\n", message.c_str());
  EXPECT_GE(report.entries_lost, 1u);
  EXPECT_EQ(docs.size() + report.entries_lost, size_t(kDocs));
  for (const auto& [id, fp] : docs) EXPECT_LE(id.size(), 16u) << "garbage id kept";
  bool named = false;
  for (const std::string& message : report.messages) {
    named |= message.find("over the id/metadata limits") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

TEST_F(StoreRecoverChecksTest, FlippedIdByteFailsItsHash) {
  const uint64_t offsets = U64(48), blob = U64(56);
  const uint64_t record = blob + (U64(offsets + 3 * 8) & ~(uint64_t{1} << 63));
  bytes_[record + 8 + 2] ^= 0x01;  // a byte inside entry 3's id: "doc-N" becomes "dnc-N"
  Save();
  RecoveryReport report;
  const auto docs = RecoverAndRead(&report);
  EXPECT_EQ(report.entries_lost, 1u);
  EXPECT_EQ(docs.size(), size_t(kDocs - 1));
}

TEST_F(StoreRecoverChecksTest, FlippedFingerprintIsLostNotKeptWrong) {
  const uint64_t fingerprints = U64(40);
  bytes_[fingerprints + 11 * 8 + 3] ^= 0x10;  // one bit of entry 11's fingerprint
  Save();
  RecoveryReport report;
  const auto docs = RecoverAndRead(&report);
  EXPECT_EQ(report.entries_lost, 1u);
  EXPECT_EQ(docs.size(), size_t(kDocs - 1));
  // Every fingerprint kept is the one that was written.
  for (int i = 0; i < kDocs; ++i) {
    auto it = docs.find(IdOf(i));
    if (it != docs.end()) {
      EXPECT_EQ(it->second, FpOf(i)) << IdOf(i);
    }
  }
}

// Segment version 3: each entry has a checksum of its own, so damage in its metadata (which no
// other copy covers) is caught too.
TEST_F(StoreRecoverChecksTest, FlippedMetadataByteFailsItsEntryChecksum) {
  const uint64_t offsets = U64(48), blob = U64(56);
  const uint64_t record = blob + (U64(offsets + 5 * 8) & ~(uint64_t{1} << 63));
  uint32_t id_len;
  std::memcpy(&id_len, bytes_.data() + record, 4);
  bytes_[record + 8 + id_len + 10] ^= 0x20;  // a byte inside entry 5's metadata
  Save();
  RecoveryReport report;
  const auto docs = RecoverAndRead(&report);
  EXPECT_EQ(report.entries_lost, 1u);
  EXPECT_EQ(docs.size(), size_t(kDocs - 1));
  bool named = false;
  for (const std::string& message : report.messages) {
    named |= message.find("1 failing their entry checksum") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

// With the index section unreadable there is no second copy of the fingerprints: in version 3 the
// entry checksum still catches a flipped one (version 2 kept it unchecked).
TEST_F(StoreRecoverChecksTest, FlippedFingerprintBesideAnUnreadableIndexFailsItsEntryChecksum) {
  const uint64_t fingerprints = U64(40), index_section = U64(80);
  bytes_[index_section] ^= 0xFF;              // the index section's own header
  bytes_[fingerprints + 11 * 8 + 3] ^= 0x10;  // one bit of entry 11's fingerprint
  Save();
  RecoveryReport report;
  const auto docs = RecoverAndRead(&report);
  EXPECT_EQ(report.entries_lost, 1u);
  EXPECT_EQ(docs.size(), size_t(kDocs - 1));
  for (int i = 0; i < kDocs; ++i) {
    auto it = docs.find(IdOf(i));
    if (it != docs.end()) {
      EXPECT_EQ(it->second, FpOf(i)) << IdOf(i);
    }
  }
  bool named = false, unchecked = false;
  for (const std::string& message : report.messages) {
    named |= message.find("1 failing their entry checksum") != std::string::npos;
    unchecked |= message.find("kept unchecked") != std::string::npos;
  }
  EXPECT_TRUE(named);
  EXPECT_FALSE(unchecked);
}

}  // namespace
}  // namespace neardup
