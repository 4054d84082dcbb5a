// Tests of the public dedup stages (neardup/dedup_stages.h, neardup/hamming_join.h): each stage
// applied bucket by bucket or partition by partition gives what the single-process path gives,
// whatever the order of the records.
#include "neardup/dedup_stages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "neardup/brute_force_index.h"
#include "neardup/hamming_join.h"

namespace neardup {
namespace {

std::vector<Fingerprint> RandomFingerprints(int bits, size_t n, size_t clusters, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Fingerprint> fps;
  std::vector<Fingerprint> centres;
  for (size_t c = 0; c < clusters; ++c) {
    centres.push_back(bits == 64 ? Fingerprint::From64(rng()) : Fingerprint::From128(rng(), rng()));
  }
  for (size_t i = 0; i < n; ++i) {
    Fingerprint fp = centres[rng() % clusters];
    for (int flips = static_cast<int>(rng() % 6); flips > 0; --flips) {
      const int bit = static_cast<int>(rng() % bits);
      if (bit < 64) {
        fp.lo ^= uint64_t{1} << bit;
      } else {
        fp.hi ^= uint64_t{1} << (bit - 64);
      }
    }
    fps.push_back(fp);
  }
  return fps;
}

std::vector<NeighborPair> BruteForcePairs(const std::vector<Fingerprint>& fps, int k) {
  std::vector<NeighborPair> pairs;
  for (uint64_t a = 0; a < fps.size(); ++a)
    for (uint64_t b = a + 1; b < fps.size(); ++b)
      if (HammingDistance(fps[a], fps[b]) <= k)
        pairs.push_back({a, b, HammingDistance(fps[a], fps[b])});
  return pairs;
}

TEST(HammingJoinTest, BucketByBucketEqualsSelfJoinAndBruteForce) {
  for (int bits : {64, 128}) {
    for (int k : {0, 3, 6}) {
      SCOPED_TRACE(::testing::Message() << bits << " bits, k " << k);
      const std::vector<Fingerprint> fps = RandomFingerprints(bits, 1500, 40, 7 * bits + k);
      auto join = HammingJoin::Create(bits, k, 1e6);  // planned for another size: same pairs
      ASSERT_TRUE(join.ok()) << join.status().ToString();
      const std::vector<NeighborPair> expected = BruteForcePairs(fps, k);
      EXPECT_EQ(join->SelfJoin(fps, 2), expected);

      // The buckets (table, key), shuffled into 3 partitions by a hash, each joined alone.
      std::vector<uint64_t> keys;
      join->Keys(fps, &keys);
      ASSERT_EQ(keys.size(), fps.size() * join->tables());
      std::map<std::pair<size_t, uint64_t>, std::vector<uint64_t>> buckets;
      for (size_t i = 0; i < fps.size(); ++i)
        for (size_t t = 0; t < join->tables(); ++t) {
          EXPECT_EQ(keys[i * join->tables() + t], join->Key(t, fps[i]));
          buckets[{t, keys[i * join->tables() + t]}].push_back(i);
        }
      std::vector<NeighborPair> found;
      for (auto& [bucket, members] : buckets) {
        std::shuffle(members.begin(), members.end(), std::mt19937_64(bucket.second));
        std::vector<Fingerprint> member_fps;
        for (uint64_t d : members) member_fps.push_back(fps[d]);
        join->BucketPairs(bucket.first, members, member_fps, &found);
      }
      std::sort(found.begin(), found.end());
      EXPECT_EQ(found, expected);  // each pair once over all buckets
    }
  }
  EXPECT_FALSE(HammingJoin::Create(64, 17, 100).ok());
  EXPECT_FALSE(HammingJoin::Create(96, 3, 100).ok());
}

TEST(LshBucketRecordPairsTest, RecordsInAnyOrderGiveTheTablesPairs) {
  std::mt19937_64 rng(3);
  const int bands = 6;
  BandKeyTable table(bands);
  std::vector<uint64_t> buckets, documents;
  for (uint64_t d = 0; d < 3000; ++d) {
    std::vector<uint32_t> keys(bands);
    for (int b = 0; b < bands; ++b) keys[b] = static_cast<uint32_t>(rng() % 400);  // many ties
    if (d % 17 == 0) {
      table.Append({});  // no keys: in no bucket
      continue;
    }
    table.Append(keys);
    for (int b = 0; b < bands; ++b) {
      buckets.push_back(LshBucketKey(b, keys[b]));
      documents.push_back(d);
    }
  }
  LshJoinStats table_stats;
  const std::vector<LshPair> expected = LshCandidatePairs(table, 8, 2, &table_stats);
  std::vector<size_t> order(buckets.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint64_t> shuffled_buckets, shuffled_documents;
  for (size_t i : order) {
    shuffled_buckets.push_back(buckets[i]);
    shuffled_documents.push_back(documents[i]);
  }
  LshJoinStats stats;
  EXPECT_EQ(LshBucketRecordPairs(shuffled_buckets, shuffled_documents, 8, &stats), expected);
  EXPECT_EQ(stats.records, table_stats.records);
  EXPECT_EQ(stats.buckets, table_stats.buckets);
  EXPECT_EQ(stats.oversized_buckets, table_stats.oversized_buckets);
  EXPECT_EQ(stats.largest_bucket, table_stats.largest_bucket);
  EXPECT_EQ(stats.bucket_pairs, table_stats.bucket_pairs);
  EXPECT_EQ(stats.candidate_pairs, expected.size());
}

TEST(FirstOfEqualHashPairsTest, PairsEachDocumentWithTheFirstOfItsHash) {
  const std::vector<uint64_t> hashes = {5, 7, 5, 9, 7, 5};
  const std::vector<uint64_t> documents = {4, 1, 0, 3, 8, 2};
  const std::vector<LshPair> expected = {{0, 2}, {0, 4}, {1, 8}};
  EXPECT_EQ(FirstOfEqualHashPairs(hashes, documents), expected);
  EXPECT_TRUE(FirstOfEqualHashPairs({}, {}).empty());
}

TEST(MergeCandidatePairsTest, DistinctUnionWithTheSourcesOfEachPair) {
  const std::vector<uint64_t> lsh = {1, 5, 9}, simhash = {5, 7}, whitespace = {9};
  const CandidateRun runs[] = {
      {lsh, kLshCandidate}, {simhash, kSimHashCandidate}, {whitespace, kWhitespaceCandidate}};
  std::vector<uint64_t> pairs;
  std::vector<uint8_t> sources;
  MergeCandidatePairs(runs, &pairs, &sources);
  EXPECT_EQ(pairs, (std::vector<uint64_t>{1, 5, 7, 9}));
  EXPECT_EQ(sources,
            (std::vector<uint8_t>{kLshCandidate, kLshCandidate | kSimHashCandidate,
                                  kSimHashCandidate, kLshCandidate | kWhitespaceCandidate}));
  EXPECT_FALSE(PairNeedsShingles(kWhitespaceCandidate, 1, 2, 3, 4));
  EXPECT_FALSE(PairNeedsShingles(kLshCandidate, 1, 2, 1, 2));  // exact duplicates
  EXPECT_TRUE(PairNeedsShingles(kLshCandidate, 1, 2, 1, 3));
}

TEST(DecidePairsTest, EachPairDecidedByThePairRuleWhateverTheThreads) {
  const std::string base =
      "The committee met on Tuesday to review the budget for the coming year and agreed to fund "
      "the new library, the repairs to the bridge over the river and a study of the bus routes "
      "that serve the northern villages, after a long debate about the cost of each project.";
  const std::vector<std::string> texts = {
      base,
      base,                                              // exact copy
      "  " + base + "\n",                                // whitespace-only difference
      base + " The mayor thanked everyone for coming.",  // near duplicate
      "An unrelated note about compilers, linkers and the order of static initialisers.",
      "Le comite s'est reuni mardi pour examiner le budget de l'annee a venir.",
  };
  auto shingler = ShingleSimilarity::Create(true);
  ASSERT_TRUE(shingler.ok());
  std::vector<DocumentFacts> facts(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_TRUE(ComputeDocumentFacts(texts[i], **shingler, &facts[i]).ok());
  }
  auto rule = PairRule::Create(ResolvePairRule(DedupOptions()));
  ASSERT_TRUE(rule.ok());
  std::vector<PairDocument> left, right;
  for (size_t a = 0; a < texts.size(); ++a) {
    for (size_t b = 0; b < texts.size(); ++b) {
      left.push_back(facts[a].view());
      right.push_back(facts[b].view());
    }
  }
  std::set<DuplicateReason> reasons;
  for (int threads : {1, 3, 0}) {
    std::vector<PairDecision> decisions;
    DecidePairs(*rule, left, right, threads, &decisions);
    ASSERT_EQ(decisions.size(), left.size());
    for (size_t i = 0; i < left.size(); ++i) {
      const PairDecision expected = rule->Decide(left[i], right[i]);
      EXPECT_EQ(decisions[i].reason, expected.reason) << i;
      EXPECT_EQ(decisions[i].similarity, expected.similarity) << i;
      EXPECT_EQ(decisions[i].jaccard, expected.jaccard) << i;
      EXPECT_EQ(decisions[i].containment, expected.containment) << i;
      reasons.insert(decisions[i].reason);
    }
  }
  // The pairs cover every outcome that does not need a containment set-up.
  EXPECT_EQ(reasons.count(DuplicateReason::kExact), 1u);
  EXPECT_EQ(reasons.count(DuplicateReason::kWhitespace), 1u);
  EXPECT_EQ(reasons.count(DuplicateReason::kNearDuplicate), 1u);
  EXPECT_EQ(reasons.count(DuplicateReason::kNone), 1u);
  std::vector<PairDecision> none;
  DecidePairs(*rule, {}, {}, 0, &none);
  EXPECT_TRUE(none.empty());
  // PairMeasure::kFast (dedup's verification): DecideFast, the same reasons and similarities of
  // the accepted pairs.
  for (int threads : {1, 0}) {
    std::vector<PairDecision> fast;
    DecidePairs(*rule, left, right, threads, &fast, PairMeasure::kFast);
    ASSERT_EQ(fast.size(), left.size());
    for (size_t i = 0; i < left.size(); ++i) {
      const PairDecision expected = rule->DecideFast(left[i], right[i]);
      EXPECT_EQ(fast[i].reason, expected.reason) << i;
      EXPECT_EQ(fast[i].similarity, expected.similarity) << i;
      EXPECT_EQ(fast[i].measured, expected.measured) << i;
      if (fast[i].duplicate()) {
        EXPECT_EQ(fast[i].similarity, rule->Decide(left[i], right[i]).similarity) << i;
      }
    }
  }
}

TEST(DocumentColumnsTest, SameFactsAsRunDedupFromOneNormalisation) {
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog near the river bank today.",
      "The quick brown fox jumps over the lazy dog near the river bank today!",
      "<p>The  quick brown fox</p> jumps over the lazy dog near the river bank today.",
      "今天天气很好，我们一起去公园散步吧，顺便看看湖边的风景。",
      std::string("bad \xff utf-8"),
      "a",
  };
  const auto dir = std::filesystem::path(::testing::TempDir()) / "dedup_stages_columns";
  std::filesystem::create_directories(dir);
  const std::string input = (dir / "docs.jsonl").string();
  {
    std::ofstream out(input);
    for (size_t i = 0; i < texts.size(); ++i) {
      std::string escaped;
      for (char c : texts[i]) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
      out << "{\"id\":\"" << i << "\",\"text\":\"" << escaped << "\"}\n";
    }
  }
  for (KeepPolicy keep : {KeepPolicy::kFirst, KeepPolicy::kLongest}) {
    DedupOptions options;
    options.keep = keep;
    options.reader.allow_invalid_utf8_text = true;  // the fingerprinter decides, as in the pass
    auto pass = DocumentPass::Create(options);
    ASSERT_TRUE(pass.ok()) << pass.status().ToString();
    std::vector<std::string_view> views(texts.begin(), texts.end());
    DocumentColumns columns;
    ComputeDocumentColumns(**pass, views, /*with_sets=*/true, 2, &columns);
    ASSERT_EQ(columns.size(), texts.size());
    EXPECT_EQ(columns.bands, (*pass)->bands());
    ASSERT_EQ(columns.set_offsets.size(), texts.size() + 1);

    auto report = RunDedup({input}, options);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    size_t next = 0;  // RunDedup keeps the documents that could be fingerprinted
    for (size_t i = 0; i < texts.size(); ++i) {
      if (!columns.status[i].ok()) continue;
      ASSERT_LT(next, report->documents.size());
      const DedupDocument& doc = report->documents[next++];
      EXPECT_EQ(doc.fingerprint, columns.fingerprints[i]) << i;
      EXPECT_EQ(doc.text_bytes, columns.text_bytes[i]) << i;
      EXPECT_EQ(doc.normalized_bytes, columns.normalized_bytes[i]) << i;
      EXPECT_EQ(doc.content_hash, columns.content_hashes[i]) << i;
      EXPECT_EQ(doc.squeezed_hash, columns.squeezed_hashes[i]) << i;
      // The set is the shingler's, narrowed.
      std::vector<uint64_t> wide;
      std::vector<uint32_t> narrow;
      ASSERT_TRUE((*pass)->shingler().Shingles(texts[i], &wide).ok());
      ShingleSimilarity::Narrow(wide, &narrow);
      EXPECT_EQ(std::vector<uint32_t>(columns.set_values.begin() + columns.set_offsets[i],
                                      columns.set_values.begin() + columns.set_offsets[i + 1]),
                narrow)
          << i;
      // The keys are the MinHash of those shingles.
      std::vector<uint32_t> keys(columns.bands);
      const bool has = (*pass)->lsh().BandKeysOf(wide, keys);
      EXPECT_EQ(has, columns.has_keys[i] != 0) << i;
      if (has) {
        EXPECT_EQ(keys, std::vector<uint32_t>(columns.band_keys.begin() + i * columns.bands,
                                              columns.band_keys.begin() + (i + 1) * columns.bands))
            << i;
      }
    }
    EXPECT_EQ(next, report->documents.size());
    EXPECT_FALSE(columns.status[4].ok());  // invalid UTF-8: the fingerprinter refuses it
  }
}

// The boilerplate weights' sketch of a run, from the input's size (dedup and neardup.dask alike):
// a quarter of the input rounded up to a power of two, at most boilerplate_sketch_bytes (512 MiB);
// only above four times that much input is one document in s (a power of two, at most 64)
// counted.
TEST(FrequencySketchForTest, SizeAndSamplingFollowTheInputSize) {
  DedupOptions options;
  options.boilerplate = true;
  struct Case {
    uint64_t input_bytes;
    size_t bytes;
    uint32_t sample_every;
  } cases[] = {{0, size_t{512} << 20, 1},
               {1000, 64 << 10, 1},
               {1 << 20, 256 << 10, 1},
               {uint64_t{64} << 20, 16 << 20, 1},
               {(uint64_t{64} << 20) + 1, 32 << 20, 1},
               {uint64_t{200} << 20, 64 << 20, 1},
               {uint64_t{1400} << 20, size_t{512} << 20, 1},  // 1M documents of 1.4 KB
               {uint64_t{2} << 30, size_t{512} << 20, 1},
               {(uint64_t{2} << 30) + 1, size_t{512} << 20, 2},
               {uint64_t{14} << 30, size_t{512} << 20, 8},  // 10M documents
               {uint64_t{1} << 40, size_t{512} << 20, 64}};
  for (const Case& c : cases) {
    const ShingleFrequencies sketch = FrequencySketchFor(c.input_bytes, options);
    EXPECT_EQ(sketch.memory_bytes(), c.bytes) << c.input_bytes;
    EXPECT_EQ(sketch.sample_every(), c.sample_every) << c.input_bytes;
    EXPECT_EQ(sketch.seed(), ShingleFrequencies::kDefaultSeed);
    EXPECT_EQ(sketch.counted_documents(), 0u);
  }
  options.boilerplate_sketch_bytes = 1 << 20;  // the cap
  EXPECT_EQ(FrequencySketchFor(uint64_t{200} << 20, options).memory_bytes(), size_t{1} << 20);
  EXPECT_EQ(FrequencySketchFor(uint64_t{200} << 20, options).sample_every(), 64u);
  EXPECT_EQ(FrequencySketchFor(uint64_t{4} << 20, options).sample_every(), 1u);
  EXPECT_EQ(FrequencySketchFor((uint64_t{4} << 20) + 1, options).sample_every(), 2u);
}

}  // namespace
}  // namespace neardup
