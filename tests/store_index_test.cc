// The store's index against the brute-force oracle: segments and memtable holding skewed
// fingerprints (long shared prefixes, shared blocks, exact duplicates), with replacements and
// removals, for every k; damaged segments opened without checksum verification never crash a
// query (issue 13's SIGSEGV in the table directory); recovery counts documents of a missing
// segment; a store refuses options it was not created with.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <vector>

#include "neardup/brute_force_index.h"
#include "neardup/store.h"
#include "simhash_store.h"
#include "store/segment.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  std::string dir = (fs::temp_directory_path() /
                     ("neardup_store_index_" + std::to_string(::getpid()) + "_" + name))
                        .string();
  fs::remove_all(dir);
  return dir;
}

std::string IdOf(uint64_t n) { return "https://example.org/" + std::to_string(n); }
uint64_t NumberOf(const std::string& id) { return std::stoull(id.substr(id.rfind('/') + 1)); }

Fingerprint Random(std::mt19937_64& rng, int bits) {
  return bits == 64 ? Fingerprint::From64(rng()) : Fingerprint::From128(rng(), rng());
}

Fingerprint FlipBits(Fingerprint fp, int d, std::mt19937_64& rng) {
  for (int flipped = 0; flipped < d;) {
    const int b = static_cast<int>(rng() % fp.bits);
    uint64_t& word = b < 64 ? fp.lo : fp.hi;
    const uint64_t mask = uint64_t{1} << (b % 64);
    if (fp.bits == 64 && b >= 64) continue;
    word ^= mask;
    ++flipped;
  }
  return fp;
}

// Skewed data: random fingerprints, a cluster sharing the 40 leading bits, a cluster sharing one
// 16-bit block, exact duplicates under different ids, near copies of anchors.
std::vector<Fingerprint> SkewedFingerprints(int bits, size_t n, std::mt19937_64& rng) {
  std::vector<Fingerprint> out;
  const Fingerprint prefix = Random(rng, bits);
  const Fingerprint block = Random(rng, bits);
  for (size_t i = 0; i < n; ++i) {
    Fingerprint fp = Random(rng, bits);
    switch (i % 5) {
      case 0:  // shares the top 40 bits of `prefix`
        if (bits == 64) {
          fp.lo = (prefix.lo & ~((uint64_t{1} << 24) - 1)) | (fp.lo & ((uint64_t{1} << 24) - 1));
        } else {
          fp.hi = prefix.hi;
          fp.lo = (prefix.lo & ~((uint64_t{1} << 40) - 1)) | (fp.lo & ((uint64_t{1} << 40) - 1));
        }
        break;
      case 1:  // shares bits 16..31 with `block`
        fp.lo = (fp.lo & ~(uint64_t{0xFFFF} << 16)) | (block.lo & (uint64_t{0xFFFF} << 16));
        break;
      case 2:  // an exact duplicate of an earlier one
        if (!out.empty()) fp = out[rng() % out.size()];
        break;
      case 3:  // a near copy of an earlier one
        if (!out.empty()) fp = FlipBits(out[rng() % out.size()], 1 + rng() % 4, rng);
        break;
      default:
        break;
    }
    out.push_back(fp);
  }
  return out;
}

void ExpectSameAnswers(DocumentStore& store, const BruteForceIndex& oracle, const Fingerprint& q,
                       int k, const std::string& what) {
  auto got = store.Search(q, k);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto want = oracle.Search(q, k);
  ASSERT_TRUE(want.ok());
  std::vector<std::pair<uint64_t, int>> a, b;
  for (const StoredDocument& d : *got) a.push_back({NumberOf(d.id), d.distance});
  for (const Neighbor& n : *want) b.push_back({n.id, n.distance});
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  ASSERT_EQ(a, b) << what << ", k=" << k;
}

class StoreOracleTest : public ::testing::TestWithParam<int> {};

TEST_P(StoreOracleTest, SkewedSegmentsAndMemtableMatchBruteForce) {
  const int bits = GetParam();
  const std::string dir = TestDir("oracle" + std::to_string(bits));
  std::mt19937_64 rng(bits);
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.bits = bits;
  options.memtable_limit = 700;  // several segments plus a memtable
  options.sync_mode = SyncMode::kNone;
  options.compaction_trigger = 0;
  options.expected_size = 4000;
  auto opened = DocumentStore::Open(dir, options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  DocumentStore& store = **opened;
  const std::vector<Fingerprint> fps = SkewedFingerprints(bits, 4000, rng);
  std::map<uint64_t, Fingerprint> live;
  for (uint64_t i = 0; i < fps.size(); ++i) {
    ASSERT_TRUE(store.Add({IdOf(i), fps[i], ""}).ok());
    live[i] = fps[i];
    // Some replacements (the old version is in an older segment) and removals.
    if (i % 97 == 50) {
      const uint64_t victim = rng() % i;
      if (live.count(victim)) {
        ASSERT_TRUE(store.Remove(IdOf(victim)).ok());
        live.erase(victim);
      }
    }
    if (i % 89 == 40) {
      const uint64_t target = rng() % i;
      const Fingerprint moved = FlipBits(fps[rng() % fps.size()], rng() % 3, rng);
      ASSERT_TRUE(store.Add({IdOf(target), moved, "moved"}).ok());
      live[target] = moved;
    }
  }
  ASSERT_GE(store.Stats().segments, 4u);
  ASSERT_GT(store.Stats().memtable_entries, 0u);
  auto oracle_owner = BruteForceIndex::Create(bits).value();
  BruteForceIndex& oracle = *oracle_owner;
  for (const auto& [n, fp] : live) ASSERT_TRUE(oracle.Add(n, fp).ok());
  ASSERT_EQ(store.Stats().documents, live.size());

  auto check_all = [&](const std::string& what) {
    std::mt19937_64 qrng(7);
    for (int i = 0; i < 150; ++i) {
      Fingerprint q =
          i % 3 == 2 ? Random(qrng, bits) : FlipBits(fps[qrng() % fps.size()], qrng() % 5, qrng);
      for (int k = 0; k <= 5; ++k) ExpectSameAnswers(store, oracle, q, k, what);  // 4, 5 scan
    }
  };
  check_all("segments + memtable");
  ASSERT_TRUE(store.Compact().ok());
  check_all("after compaction");
  ASSERT_TRUE(store.Close().ok());
  auto reopened = DocumentStore::Open(dir, testing_store::SimHashStoreOptions());
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  std::mt19937_64 qrng(9);
  for (int i = 0; i < 100; ++i) {
    Fingerprint q = FlipBits(fps[qrng() % fps.size()], qrng() % 4, qrng);
    for (int k = 0; k <= 3; ++k) ExpectSameAnswers(**reopened, oracle, q, k, "reopened");
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Widths, StoreOracleTest, ::testing::Values(64, 128));

uint64_t LoadU64At(const std::string& bytes, size_t offset) {
  uint64_t v;
  std::memcpy(&v, bytes.data() + offset, 8);
  return v;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Issue 13: with --no-verify, a damaged segment crashed a query (SIGSEGV reading the table
// directory). Every damage below is in the index section of the only segment; each run opens the
// store without checksum verification and, when it opens, queries it at every k and reads every
// document. Under ASan any out-of-bounds read fails the test.
TEST(StoreDamageTest, DamagedSegmentWithoutVerifyNeverCrashesAQuery) {
  const std::string dir = TestDir("damage");
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.compaction_trigger = 0;
  options.expected_size = 3000;
  options.sync_mode = SyncMode::kNone;
  std::mt19937_64 rng(13);
  std::vector<Fingerprint> fps = SkewedFingerprints(64, 3000, rng);
  {
    auto store = DocumentStore::Open(dir, options);
    ASSERT_TRUE(store.ok());
    for (uint64_t i = 0; i < fps.size(); ++i)
      ASSERT_TRUE((*store)->Add({IdOf(i), fps[i], "m"}).ok());
    ASSERT_TRUE((*store)->Close().ok());  // one segment
  }
  std::string segment;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".ndseg") segment = entry.path().string();
  ASSERT_FALSE(segment.empty());
  const std::string original = ReadAll(segment);
  const size_t index_begin = LoadU64At(original, 80);  // header: index section offset
  const size_t index_size = LoadU64At(original, 88);
  ASSERT_GT(index_size, 1000u);
  ASSERT_LE(index_begin + index_size, original.size());
  StoreOptions no_verify;
  no_verify.rule = StoreRule::kSimHash;  // bare fingerprints
  no_verify.verify_checksums_on_open = false;
  int opened_runs = 0, queries = 0;
  for (int run = 0; run < 60; ++run) {
    std::string damaged = original;
    // Overwrite 1..40 aligned 32-bit words past the index header with large or random values:
    // directory entries, row numbers, keys and ids.
    const int words = 1 + static_cast<int>(rng() % 40);
    for (int w = 0; w < words; ++w) {
      const size_t pos = index_begin + 256 + (rng() % ((index_size - 256) / 4)) * 4;
      const uint32_t value = rng() % 2 ? 0xFFFFFFF0u - static_cast<uint32_t>(rng() % 16)
                                       : static_cast<uint32_t>(rng());
      std::memcpy(damaged.data() + pos, &value, 4);
    }
    WriteAll(segment, damaged);
    auto store = DocumentStore::Open(dir, no_verify);
    if (!store.ok()) continue;  // a damaged header is refused: fine
    ++opened_runs;
    for (int i = 0; i < 100; ++i) {
      const Fingerprint q = FlipBits(fps[rng() % fps.size()], rng() % 4, rng);
      for (int k : {0, 1, 2, 3, 6}) {
        auto hits = (*store)->Search(q, k);
        ++queries;
        if (hits.ok()) {
          for (const StoredDocument& d : *hits) EXPECT_LE(d.distance, k);
        }
      }
    }
    for (uint64_t i = 0; i < fps.size(); i += 7) (void)(*store)->Get(IdOf(i));
    (void)(*store)->Close();
  }
  EXPECT_GT(opened_runs, 30) << "the damage should mostly hit arrays, not headers";
  std::printf("damaged segment runs opened without verification: %d of 60, %d queries\n",
              opened_runs, queries);
  // With verification on, the damage is caught at open.
  StoreOptions verify;
  verify.rule = StoreRule::kSimHash;  // bare fingerprints
  EXPECT_EQ(DocumentStore::Open(dir, verify).status().code(), StatusCode::kCorruption);
  WriteAll(segment, original);
  fs::remove_all(dir);
}

TEST(StoreRecoverTest, MissingSegmentCountsItsDocumentsAsLost) {
  const std::string dir = TestDir("missing");
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.memtable_limit = 100;
  options.compaction_trigger = 0;
  {
    auto store = DocumentStore::Open(dir, options);
    ASSERT_TRUE(store.ok());
    for (uint64_t i = 0; i < 250; ++i)
      ASSERT_TRUE(
          (*store)->Add({IdOf(i), Fingerprint::From64(i * 0x9E3779B97F4A7C15ull), ""}).ok());
    ASSERT_TRUE((*store)->Close().ok());  // segments of 100, 100 and 50
  }
  std::vector<std::string> segments;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".ndseg") segments.push_back(entry.path().string());
  std::sort(segments.begin(), segments.end());
  ASSERT_EQ(segments.size(), 3u);
  fs::remove(segments[1]);  // 100 documents gone
  auto report = RecoverStore(dir);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->documents, 150u);
  EXPECT_EQ(report->entries_lost, 100u);
  auto reopened = DocumentStore::Open(dir, options);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->Stats().documents, 150u);
  fs::remove_all(dir);
}

TEST(StoreOptionsTest, IncompatibleOptionsAreRefusedWithBothValues) {
  const std::string dir = TestDir("compat");
  StoreOptions create;
  create.rule = StoreRule::kSimHash;  // bare fingerprints
  create.fingerprint_options = "profile=neardup bits=64 shingle=1";
  create.memory_budget = MemoryBudget{0, 64};
  {
    auto store = DocumentStore::Open(dir, create);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->Stats().fingerprint_options, create.fingerprint_options);
    EXPECT_NE((*store)->Stats().index_design.find("4 blocks"), std::string::npos)
        << (*store)->Stats().index_design;
  }
  auto refused = [&](StoreOptions options, const std::string& expected) {
    auto store = DocumentStore::Open(dir, options);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(store.status().message().find(expected), std::string::npos)
        << store.status().message();
    EXPECT_NE(store.status().message().find(dir), std::string::npos);
  };
  StoreOptions wrong_bits;
  wrong_bits.rule = StoreRule::kSimHash;  // bare fingerprints
  wrong_bits.bits = 128;
  refused(wrong_bits, "64-bit fingerprints, not 128");
  StoreOptions wrong_k;
  wrong_k.rule = StoreRule::kSimHash;  // bare fingerprints
  wrong_k.indexed_k = 5;
  refused(wrong_k, "indexed_k 3, not 5");
  StoreOptions wrong_fp;
  wrong_fp.rule = StoreRule::kSimHash;  // bare fingerprints
  wrong_fp.fingerprint_options = "profile=yanyiwu";
  refused(wrong_fp, "profile=yanyiwu");
  StoreOptions wrong_design;
  wrong_design.rule = StoreRule::kSimHash;  // bare fingerprints
  PlanRequest request;
  request.expected_size = 1e7;
  request.memory_budget = {};
  wrong_design.design = *PlanIndex(request);
  refused(wrong_design, "index design");
  // Unspecified options take the store's; a budget only matters at creation.
  StoreOptions same;
  same.rule = StoreRule::kSimHash;  // bare fingerprints
  same.fingerprint_options = create.fingerprint_options;
  same.memory_budget = MemoryBudget{0, 0};
  auto store = DocumentStore::Open(dir, same);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_NE((*store)->Stats().index_design.find("4 blocks"), std::string::npos);
  ASSERT_TRUE((*store)->Close().ok());
  fs::remove_all(dir);
}

TEST(StoreOptionsTest, RecordedFingerprintOptionsMustBeReadable) {
  const std::string dir = TestDir("recorded");
  StoreOptions unreadable;
  unreadable.fingerprint_options = "profile=neardup shingles=1";  // no such option
  auto refused = DocumentStore::Open(dir, unreadable);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("shingles"), std::string::npos);
  StoreOptions mismatch;
  mismatch.bits = 64;
  mismatch.fingerprint_options = "bits=128";
  EXPECT_EQ(DocumentStore::Open(dir, mismatch).status().code(), StatusCode::kInvalidArgument);
  // Without a width of its own, the store takes the recorded options' width.
  StoreOptions wide;
  wide.fingerprint_options = "bits=128 tokenizer=char";
  auto store = DocumentStore::Open(dir, wide);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Stats().bits, 128);
  ASSERT_TRUE((*store)->Close().ok());
  fs::remove_all(dir);
}

// Segment::Find's search of the sorted id hashes equals std::lower_bound on uniform, skewed and
// repetitive arrays, for keys present, absent and at both ends.
TEST(LowerBoundUniformTest, EqualsLowerBound) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    const size_t n = round < 20 ? static_cast<size_t>(round) : 1 + rng() % 3000;
    std::vector<uint64_t> a(n);
    const int kind = round % 4;
    for (uint64_t& v : a) {
      if (kind == 0) v = rng();                        // uniform
      if (kind == 1) v = rng() >> (rng() % 64);        // skewed to small values
      if (kind == 2) v = rng() % 5;                    // long runs of equal values
      if (kind == 3) v = ~uint64_t{0} - rng() % 1000;  // crowded at the top
    }
    std::sort(a.begin(), a.end());
    std::vector<uint64_t> keys = {0, 1, ~uint64_t{0}, ~uint64_t{0} - 1};
    for (int i = 0; i < 50; ++i) keys.push_back(rng() >> (rng() % 64));
    for (size_t i = 0; i < n && i < 50; ++i) keys.push_back(a[rng() % n]);
    for (uint64_t key : keys) {
      EXPECT_EQ(store::LowerBoundUniform(a.data(), n, key) - a.data(),
                std::lower_bound(a.begin(), a.end(), key) - a.begin())
          << "n " << n << " kind " << kind << " key " << key;
    }
  }
}

TEST(MemoryBudgetTest, ParsesBytesAndBytesPerFingerprint) {
  EXPECT_EQ(ParseMemoryBudget("640000000")->bytes, 640000000);
  EXPECT_EQ(ParseMemoryBudget("1.5G")->bytes, 1.5 * 1024 * 1024 * 1024);
  EXPECT_EQ(ParseMemoryBudget("128/fp")->bytes_per_fingerprint, 128);
  EXPECT_EQ(ParseMemoryBudget("64B/fp")->bytes_per_fingerprint, 64);
  EXPECT_EQ(ParseMemoryBudget("unlimited")->TotalFor(1e9), 0);
  EXPECT_EQ(ParseMemoryBudget("128/fp")->TotalFor(1e6), 128e6);
  for (const char* bad : {"", "abc", "-5", "12X", "/fp", "1e400"}) {
    auto parsed = ParseMemoryBudget(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("memory budget"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace neardup
