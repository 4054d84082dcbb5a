// A store written in on-disk format version 1 (MANIFEST v1 and segments with the store's own
// pigeonhole tables, docs/storage_format.md before the one index engine): Open refuses it with a
// hint to `neardup index recover` and touches nothing; RecoverStore rewrites it in the current
// format with every document, replacement, removal and logged write, and the result answers
// searches like the brute-force oracle. The v1 files are written here byte by byte from that
// specification.
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "neardup/brute_force_index.h"
#include "neardup/store.h"
#include "simhash_store.h"
#include "store/file_system.h"
#include "store/wal.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  std::string dir = (fs::temp_directory_path() /
                     ("neardup_old_format_" + std::to_string(::getpid()) + "_" + name))
                        .string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Put32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void Put64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void Set32(std::string* out, size_t at, uint32_t v) { std::memcpy(out->data() + at, &v, 4); }
void Set64(std::string* out, size_t at, uint64_t v) { std::memcpy(out->data() + at, &v, 8); }
void Pad8(std::string* out) { out->resize((out->size() + 7) & ~size_t{7}, '\0'); }
uint32_t LoadU32Bytes(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  if (at + 4 <= bytes.size()) std::memcpy(&v, bytes.data() + at, 4);
  return v;
}
uint64_t LoadU64Bytes(const std::string& bytes, size_t at) {
  uint64_t v = 0;
  if (at + 8 <= bytes.size()) std::memcpy(&v, bytes.data() + at, 8);
  return v;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct V1Entry {
  std::string id;
  uint64_t fp = 0;  // 64-bit store
  std::string metadata;
  bool tombstone = false;
};

// MANIFEST version 1: magic, version, bits, max_k, reserved, next_file, wal_number, live_docs,
// n_segments, segments, XXH3-64 of everything before.
std::string ManifestV1(int max_k, uint64_t next_file, uint64_t wal, uint64_t live,
                       const std::vector<uint64_t>& segments) {
  std::string out("NDUPMAN\0", 8);
  Put32(&out, 1);
  Put32(&out, 64);
  Put32(&out, static_cast<uint32_t>(max_k));
  Put32(&out, 0);
  Put64(&out, next_file);
  Put64(&out, wal);
  Put64(&out, live);
  Put64(&out, segments.size());
  for (uint64_t s : segments) Put64(&out, s);
  Put64(&out, XXH3_64bits(out.data(), out.size()));
  return out;
}

// Segment version 1 (64-bit): 128-byte header, fingerprints, record offsets, records, id hashes
// (entries in ascending XXH3-64(id) order), max_k + 1 pigeonhole tables (directory of the top D
// bits of block t, entry numbers, fingerprint copies), footer (whole-file XXH3-64, "NDSEGEND").
std::string SegmentV1(std::vector<V1Entry> entries, int max_k) {
  auto hash = [](const std::string& id) { return XXH3_64bits(id.data(), id.size()); };
  std::sort(entries.begin(), entries.end(),
            [&](const V1Entry& a, const V1Entry& b) { return hash(a.id) < hash(b.id); });
  const uint64_t n = entries.size();
  std::vector<uint32_t> live;
  for (uint32_t i = 0; i < n; ++i)
    if (!entries[i].tombstone) live.push_back(i);
  std::string out(128, '\0');
  std::memcpy(out.data(), "NDUPSEG\0", 8);
  Set32(&out, 8, 1);
  Set32(&out, 12, 64);
  Set32(&out, 16, static_cast<uint32_t>(max_k));
  Set32(&out, 20, static_cast<uint32_t>(max_k + 1));
  Set64(&out, 24, n);
  Set64(&out, 32, live.size());
  Set64(&out, 40, out.size());
  for (const V1Entry& e : entries) Put64(&out, e.fp);
  Set64(&out, 48, out.size());
  std::string blob;
  for (const V1Entry& e : entries) {
    Put64(&out, blob.size() | (e.tombstone ? uint64_t{1} << 63 : 0));
    Put32(&blob, static_cast<uint32_t>(e.id.size()));
    Put32(&blob, static_cast<uint32_t>(e.metadata.size()));
    blob += e.id;
    blob += e.metadata;
  }
  Pad8(&blob);
  Set64(&out, 56, out.size());
  Set64(&out, 64, blob.size());
  out += blob;
  Set64(&out, 72, out.size());
  for (const V1Entry& e : entries) Put64(&out, hash(e.id));
  Set64(&out, 88, out.size());
  const int tables = max_k + 1;
  for (int t = 0; t < tables; ++t) {
    const int start = t * 64 / tables, length = (t + 1) * 64 / tables - start;
    const int d =
        std::min({16, length, std::max(4, static_cast<int>(std::bit_width(live.size())))});
    auto key = [&](uint64_t fp) {
      return static_cast<uint32_t>((fp << start) >> (64 - d));  // MSB-first bit numbering
    };
    std::vector<uint32_t> order = live;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return key(entries[a].fp) < key(entries[b].fp);
    });
    std::vector<uint32_t> dir((size_t{1} << d) + 1, 0);
    for (uint32_t e : order) ++dir[key(entries[e].fp) + 1];
    for (size_t b = 1; b < dir.size(); ++b) dir[b] += dir[b - 1];
    for (uint32_t v : dir) Put32(&out, v);
    Pad8(&out);
    for (uint32_t e : order) Put32(&out, e);
    Pad8(&out);
    for (uint32_t e : order) Put64(&out, entries[e].fp);
  }
  Set64(&out, 96, out.size() + 16);
  Set64(&out, 120, XXH3_64bits(out.data(), 120));
  Put64(&out, XXH3_64bits(out.data(), out.size()));
  out.append("NDSEGEND", 8);
  return out;
}

std::string IdOf(int n) { return "https://example.org/old/" + std::to_string(n); }

TEST(StoreOldFormatTest, VersionOneIsRefusedWithAHintThenRecoveredWhole) {
  const std::string dir = TestDir("v1");
  std::mt19937_64 rng(2024);
  // What the v1 store holds, newest layer last: segment 1 (ids 0..59), segment 2 (ids 60..89, a
  // replacement of id 4, a tombstone for id 3), the log (id 100 added, id 5 removed).
  std::map<std::string, std::pair<uint64_t, std::string>> expected;
  std::vector<V1Entry> first, second;
  for (int i = 0; i < 60; ++i) {
    // Every third document is a near copy (1..3 bits) of the previous one.
    const uint64_t fp =
        i % 3 == 2 ? first.back().fp ^ (uint64_t{1} << (rng() % 64)) ^ (uint64_t{1} << (rng() % 64))
                   : rng();
    first.push_back({IdOf(i), fp, "{\"n\":" + std::to_string(i) + "}", false});
  }
  for (int i = 60; i < 90; ++i) second.push_back({IdOf(i), rng(), "", false});
  const uint64_t replaced = first[4].fp ^ 0x7;
  second.push_back({IdOf(4), replaced, "{\"replaced\":true}", false});
  second.push_back({IdOf(3), 0, "", true});
  for (const V1Entry& e : first) expected[e.id] = {e.fp, e.metadata};
  for (const V1Entry& e : second) {
    if (e.tombstone)
      expected.erase(e.id);
    else
      expected[e.id] = {e.fp, e.metadata};
  }
  const uint64_t logged = rng();
  expected[IdOf(100)] = {logged, "{\"logged\":1}"};
  expected.erase(IdOf(5));

  WriteBytes(dir + "/seg-000001.ndseg", SegmentV1(first, 3));
  WriteBytes(dir + "/seg-000002.ndseg", SegmentV1(second, 3));
  {
    // The log format is still version 1: written with today's writer.
    auto wal = store::WalWriter::Create(store::FileSystem::Default(), dir, 3, 64);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    std::string ops;
    store::WalOp add;
    add.type = store::WalOpType::kAdd;
    add.id = IdOf(100);
    add.fingerprint = Fingerprint::From64(logged);
    add.metadata = "{\"logged\":1}";
    store::AppendWalOp(add, &ops);
    store::WalOp remove;
    remove.type = store::WalOpType::kRemove;
    remove.id = IdOf(5);
    store::AppendWalOp(remove, &ops);
    ASSERT_TRUE((*wal)->Append(store::EncodeWalRecord(2, ops)).ok());
    ASSERT_TRUE((*wal)->Sync().ok());
  }
  // live_docs counts the segments' live documents once shadowing is applied: 60 + 30 - 1.
  WriteBytes(dir + "/MANIFEST", ManifestV1(3, 4, 3, 89, {1, 2}));

  // Open refuses, says why and what to run, and changes nothing in the directory.
  std::map<std::string, std::string> before;
  for (const auto& entry : fs::directory_iterator(dir))
    before[entry.path().filename().string()] = ReadBytes(entry.path().string());
  for (bool read_only : {false, true}) {
    StoreOptions options;
    options.rule = StoreRule::kSimHash;  // bare fingerprints
    options.read_only = read_only;
    auto refused = DocumentStore::Open(dir, options);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("MANIFEST version 1"), std::string::npos)
        << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("neardup index recover"), std::string::npos)
        << refused.status().ToString();
  }
  std::map<std::string, std::string> after;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename() != "LOCK")
      after[entry.path().filename().string()] = ReadBytes(entry.path().string());
  before.erase("LOCK");
  EXPECT_EQ(after, before);

  // Recovery rewrites it whole: nothing lost, nothing set aside as damaged.
  auto report = RecoverStore(dir);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->documents, expected.size());
  EXPECT_EQ(report->entries_lost, 0u);
  EXPECT_EQ(report->segments_kept, 2u);
  EXPECT_EQ(report->segments_salvaged, 0u);
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_NE(entry.path().extension(), ".corrupt") << entry.path();

  auto store = DocumentStore::Open(dir, testing_store::SimHashStoreOptions());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Stats().documents, expected.size());
  EXPECT_EQ((*store)->Stats().indexed_k, 3);
  auto oracle_owner = BruteForceIndex::Create(64).value();
  BruteForceIndex& oracle = *oracle_owner;
  std::map<uint64_t, std::string> id_of_number;
  uint64_t number = 0;
  for (const auto& [id, doc] : expected) {
    auto got = (*store)->Get(id);
    ASSERT_TRUE(got.ok()) << id << ": " << got.status().ToString();
    EXPECT_EQ(got->fingerprint, Fingerprint::From64(doc.first)) << id;
    EXPECT_EQ(got->metadata, doc.second) << id;
    ASSERT_TRUE(oracle.Add(number, Fingerprint::From64(doc.first)).ok());
    id_of_number[number++] = id;
  }
  for (const char* gone : {"3", "5"}) {
    auto got = (*store)->Get(std::string("https://example.org/old/") + gone);
    EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << gone;
  }
  // Every stored fingerprint and a near copy of it, at every k the tables serve.
  for (const auto& [id, doc] : expected) {
    for (uint64_t q : {doc.first, doc.first ^ 0x30}) {
      for (int k = 0; k <= 3; ++k) {
        auto got = (*store)->Search(Fingerprint::From64(q), k);
        ASSERT_TRUE(got.ok());
        auto want = oracle.Search(Fingerprint::From64(q), k);
        ASSERT_TRUE(want.ok());
        std::vector<std::string> a, b;
        for (const StoredDocument& d : *got) a.push_back(d.id);
        for (const Neighbor& n : *want) b.push_back(id_of_number[n.id]);
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b) << id << " k=" << k;
      }
    }
  }
  ASSERT_TRUE((*store)->Close().ok());
  fs::remove_all(dir);
}

// A store of format version 2 (MANIFEST v2, segments v2: the simhash rule, before the duplicate
// rule was recorded) opens as a simhash-rule store and answers as before; its next flush writes
// version-3 files beside the version-2 segment, and everything still reads. Version 2 differs from
// a version-3 simhash store only in the version fields and the MANIFEST's rule record, so the v2
// files are made here from a fresh v3 store by rewriting exactly those bytes.
TEST(StoreOldFormatTest, AVersion2StoreKeepsWorking) {
  const std::string dir = TestDir("v2");
  std::mt19937_64 rng(11);
  std::map<std::string, uint64_t> expected;
  {
    StoreOptions create = testing_store::SimHashStoreOptions();
    create.sync_mode = SyncMode::kNone;
    auto store = DocumentStore::Open(dir, create);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int i = 0; i < 300; ++i) {
      // Every tenth a near copy of the first, so searches find several.
      const uint64_t fp =
          i > 0 && i % 10 == 0 ? expected.begin()->second ^ (uint64_t{1} << (i % 64)) : rng();
      const std::string id = "v2/" + std::to_string(i);
      ASSERT_TRUE((*store)->Add({id, Fingerprint::From64(fp), ""}).ok());
      expected[id] = fp;
    }
    ASSERT_TRUE((*store)->Close().ok());
  }
  // Downgrade: every segment's version to 2 (header and footer checksums recomputed), the
  // MANIFEST's version to 2 without its rule record.
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    std::string bytes = ReadBytes(entry.path().string());
    if (name.rfind("seg-", 0) == 0) {
      ASSERT_EQ(LoadU32Bytes(bytes, 8), 3u);
      Set32(&bytes, 8, 2);
      // Version 2 has no entry_checks array (between the id hashes and the index section).
      const uint64_t checks = LoadU64Bytes(bytes, 104), index_offset = LoadU64Bytes(bytes, 80);
      ASSERT_GT(checks, 0u);
      ASSERT_EQ(LoadU64Bytes(bytes, 112), 0u);  // a simhash store has no sketch section
      const uint64_t removed = index_offset - checks;
      bytes.erase(checks, removed);
      Set64(&bytes, 80, index_offset - removed);
      Set64(&bytes, 96, bytes.size());
      Set64(&bytes, 104, 0);
      Set64(&bytes, 120, XXH3_64bits(bytes.data(), 120));
      Set64(&bytes, bytes.size() - 16, XXH3_64bits(bytes.data(), bytes.size() - 16));
      WriteBytes(entry.path().string(), bytes);
    } else if (name == "MANIFEST") {
      ASSERT_EQ(LoadU32Bytes(bytes, 8), 4u);
      Set32(&bytes, 8, 2);
      // The checksum and the rule record (kind 0; with the containment options since version 4).
      bytes.resize(bytes.size() - 8 - 36 - 24);
      Put64(&bytes, XXH3_64bits(bytes.data(), bytes.size()));
      WriteBytes(entry.path().string(), bytes);
    }
  }
  auto answers = [&](DocumentStore& store) {
    std::vector<std::string> out;
    for (const auto& [id, fp] : expected) {
      auto got = store.Search(Fingerprint::From64(fp), 3);
      EXPECT_TRUE(got.ok());
      std::string line;
      for (const StoredDocument& d : *got) line += d.id + "/" + std::to_string(d.distance) + " ";
      out.push_back(line);
    }
    return out;
  };
  std::vector<std::string> before;
  {
    StoreOptions options;
    options.compaction_trigger = 0;
    auto store = DocumentStore::Open(dir, options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->Stats().rule, StoreRule::kSimHash);
    EXPECT_EQ((*store)->Stats().documents, 300u);
    before = answers(**store);
    EXPECT_EQ(before.size(), 300u);
    // The brute-force answer for one of them.
    EXPECT_NE(before[0].find(expected.begin()->first + "/0"), std::string::npos) << before[0];
    ASSERT_TRUE((*store)->Add({"v3/new", Fingerprint::From64(rng()), ""}).ok());
    ASSERT_TRUE((*store)->Flush().ok());  // a version-3 segment beside the version-2 one
    ASSERT_TRUE((*store)->Close().ok());
  }
  EXPECT_EQ(LoadU32Bytes(ReadBytes(dir + "/MANIFEST"), 8), 4u);  // written as the current version
  std::set<uint32_t> versions;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("seg-", 0) == 0) {
      versions.insert(LoadU32Bytes(ReadBytes(entry.path().string()), 8));
    }
  }
  EXPECT_EQ(versions, (std::set<uint32_t>{2, 3}));
  {
    auto store = DocumentStore::Open(dir, StoreOptions{});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ(answers(**store), before);
    ASSERT_TRUE((*store)->Compact().ok());
    EXPECT_EQ(answers(**store), before);
    EXPECT_EQ((*store)->Stats().documents, 301u);
    ASSERT_TRUE((*store)->Close().ok());
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace neardup
