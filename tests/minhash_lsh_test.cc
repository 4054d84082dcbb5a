// Tests of the MinHash LSH candidate stage (neardup/minhash_lsh.h): the S-curve arithmetic and the
// choice of bands and rows, the recall of planted pairs at known Jaccard against the formula, the
// candidate pairs against exact oracles, the bucket rule, and determinism across thread counts.
#include "neardup/minhash_lsh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "index/lsh_band_pairs.h"
#include "neardup/shingles.h"
#include "neardup/text.h"

namespace neardup {
namespace {

TEST(LshArithmeticTest, SCurveHandChecked) {
  // b = 2, r = 2, J = 0.5: 1 - (1 - 0.25)^2 = 1 - 0.5625 = 0.4375.
  EXPECT_DOUBLE_EQ(LshCandidateProbability(0.5, {2, 2}), 0.4375);
  // b = 30, r = 3, J = 0.5: 1 - (7/8)^30; (7/8)^30 = exp(30 ln 0.875) = exp(-4.005942)
  // = e^-4 * e^-0.005942 = 0.0183156 * 0.9940758 = 0.0182071.
  EXPECT_NEAR(LshCandidateProbability(0.5, {30, 3}), 0.9817929, 1e-6);
  // b = 1: the band probability itself; J = 1 always, J = 0 never.
  EXPECT_NEAR(LshCandidateProbability(0.3, {1, 4}), 0.0081, 1e-12);
  EXPECT_EQ(LshCandidateProbability(1.0, {30, 3}), 1.0);
  EXPECT_EQ(LshCandidateProbability(0.0, {30, 3}), 0.0);
  // Clamped outside [0, 1]; increasing in J.
  EXPECT_EQ(LshCandidateProbability(1.5, {4, 4}), 1.0);
  double previous = 0;
  for (int j = 1; j <= 8; ++j) {  // above 0.8 the value rounds to 1 in double precision
    double p = LshCandidateProbability(j / 10.0, {30, 3});
    EXPECT_GT(p, previous);
    previous = p;
  }
}

TEST(LshArithmeticTest, ChooseParameters) {
  // 0.5: rows 4 would need 61 bands (244 > 128 values); rows 3 needs 30 (P = 0.9818 >= 0.98).
  auto half = ChooseLshParameters(0.5);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(*half, (LshParameters{30, 3}));
  // 0.8: 0.8^7 = 0.2097, (1 - 0.2097)^17 = 0.0183 <= 0.02 while 16 bands give 0.0232; rows 8 would
  // need 22 bands (176 > 128).
  auto high = ChooseLshParameters(0.8);
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(*high, (LshParameters{17, 7}));
  for (double t : {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}) {
    auto p = ChooseLshParameters(t);
    ASSERT_TRUE(p.ok());
    EXPECT_LE(p->signature_size(), 128);
    EXPECT_GE(LshCandidateProbability(t, *p), 0.98) << t;
    EXPECT_LT(LshCandidateProbability(t, {p->bands - 1, p->rows}), 0.98) << t;  // fewest bands
  }
  EXPECT_FALSE(ChooseLshParameters(0).ok());
  EXPECT_FALSE(ChooseLshParameters(1).ok());
  MinHashLshOptions options;
  options.parameters = LshParameters{5, 0};  // rows missing
  EXPECT_FALSE(ResolveLshParameters(options).ok());
  options.parameters->rows = 2;
  EXPECT_EQ(*ResolveLshParameters(options), (LshParameters{5, 2}));
}

TEST(LshArithmeticTest, ExpectedCandidatePairs) {
  // J = 0: only 32-bit key collisions, C(1000, 2) * (1 - (1 - 2^-32)^30) ~ 499500 * 30 / 2^32.
  EXPECT_NEAR(ExpectedCandidatePairs(1000, {30, 3}, 0.0), 499500.0 * 30 / 4294967296.0, 1e-6);
  // J = 0.5: C(n, 2) * P(0.5) (the collision term is negligible).
  EXPECT_NEAR(ExpectedCandidatePairs(1000, {30, 3}, 0.5) / 499500.0, 0.9817929, 1e-6);
  // Quadratic in n.
  EXPECT_NEAR(
      ExpectedCandidatePairs(2e6, {30, 3}, 0.01) / ExpectedCandidatePairs(1e6, {30, 3}, 0.01), 4.0,
      1e-5);
  EXPECT_EQ(ExpectedCandidatePairs(1, {30, 3}, 0.5), 0.0);
}

TEST(BucketRuleTest, WindowPairsAndCounts) {
  std::vector<LshPair> pairs;
  BucketPairs(std::vector<uint64_t>{3, 5, 9}, 64, &pairs);
  EXPECT_EQ(pairs, (std::vector<LshPair>{{3, 5}, {3, 9}, {5, 9}}));
  pairs.clear();
  BucketPairs(std::vector<uint64_t>{1, 2, 3, 4, 5}, 2, &pairs);
  EXPECT_EQ(pairs, (std::vector<LshPair>{{1, 2}, {1, 3}, {2, 3}, {2, 4}, {3, 4}, {3, 5}, {4, 5}}));
  for (uint64_t m : {0, 1, 2, 3, 10, 65, 66, 1000}) {
    for (uint32_t w : {1u, 2u, 64u}) {
      std::vector<uint64_t> members(m);
      for (uint64_t i = 0; i < m; ++i) members[i] = 7 * i;
      pairs.clear();
      BucketPairs(members, w, &pairs);
      EXPECT_EQ(pairs.size(), BucketPairCount(m, w)) << m << " " << w;
    }
  }
}

// A random set of `size` 64-bit values.
std::vector<uint64_t> RandomSet(std::mt19937_64& random, size_t size) {
  std::vector<uint64_t> set(size);
  for (auto& v : set) v = random();
  std::sort(set.begin(), set.end());
  return set;
}

// Two sets of `size` values sharing `common`: Jaccard common / (2 size - common).
std::pair<std::vector<uint64_t>, std::vector<uint64_t>> PlantedPair(std::mt19937_64& random,
                                                                    size_t size, size_t common) {
  std::vector<uint64_t> a = RandomSet(random, size);
  std::vector<uint64_t> b(a.begin(), a.begin() + common);
  for (size_t i = common; i < size; ++i) b.push_back(random());
  std::sort(b.begin(), b.end());
  return {a, b};
}

TEST(MinHashLshTest, EmptySetHasNoSignature) {
  auto lsh = MinHashLsh::Create({});
  ASSERT_TRUE(lsh.ok());
  std::vector<uint32_t> signature{1, 2};
  EXPECT_FALSE(lsh->Signature({}, &signature));
  EXPECT_TRUE(signature.empty());
  // A single shingle fills every position (densification) with the same value.
  std::vector<uint64_t> one{42};
  ASSERT_TRUE(lsh->Signature(one, &signature));
  ASSERT_EQ(signature.size(), 90u);
  EXPECT_EQ(std::count(signature.begin(), signature.end(), signature[0]), 90);
  // Order and repeats of the input do not matter.
  std::vector<uint32_t> x, y;
  ASSERT_TRUE(lsh->Signature(std::vector<uint64_t>{5, 9, 1, 9}, &x));
  ASSERT_TRUE(lsh->Signature(std::vector<uint64_t>{1, 5, 9}, &y));
  EXPECT_EQ(x, y);
}

// Planted pairs at known Jaccard: the signature agreement rate estimates J, and the fraction of
// pairs that become candidates matches 1 - (1 - J^r)^b within 4 binomial standard deviations.
// Short sets (more bins than shingles, densification at work) and long ones are both checked.
TEST(MinHashLshTest, PlantedPairsRecallMatchesFormula) {
  auto lsh = MinHashLsh::Create({});  // threshold 0.5: 30 bands x 3 rows
  ASSERT_TRUE(lsh.ok());
  const LshParameters p = lsh->parameters();
  std::mt19937_64 random(20261122);
  const int trials = 3000;
  for (size_t size : {40u, 400u}) {
    for (double target : {0.2, 0.35, 0.5, 0.7}) {
      const size_t common = static_cast<size_t>(std::lround(2 * size * target / (1 + target)));
      const double jaccard = static_cast<double>(common) / static_cast<double>(2 * size - common);
      int candidates = 0;
      double agreement = 0;
      std::vector<uint32_t> sa, sb, ka(p.bands), kb(p.bands);
      for (int t = 0; t < trials; ++t) {
        auto [a, b] = PlantedPair(random, size, common);
        ASSERT_TRUE(lsh->Signature(a, &sa));
        ASSERT_TRUE(lsh->Signature(b, &sb));
        int same = 0;
        for (size_t i = 0; i < sa.size(); ++i) same += sa[i] == sb[i];
        agreement += static_cast<double>(same) / sa.size();
        lsh->BandKeys(sa, ka);
        lsh->BandKeys(sb, kb);
        candidates += MinHashLsh::SharedBands(ka, kb) > 0;
      }
      const double expected = LshCandidateProbability(jaccard, p);
      const double sigma = std::sqrt(expected * (1 - expected) / trials);
      EXPECT_NEAR(static_cast<double>(candidates) / trials, expected, 4 * sigma + 1e-9)
          << "size " << size << " J " << jaccard;
      // Per-position agreement: mean of trials * 90 Bernoulli(J) (positions are at most weakly
      // dependent, so the binomial sigma over all positions is the scale).
      const double position_sigma = std::sqrt(jaccard * (1 - jaccard) / (trials * sa.size()));
      EXPECT_NEAR(agreement / trials, jaccard, 6 * position_sigma)
          << "size " << size << " J " << jaccard;
    }
  }
}

// A small random corpus: clusters of edited copies of random base sets over a small vocabulary
// (so unrelated documents share shingles too).
std::vector<std::vector<uint64_t>> RandomCorpus(uint64_t seed, size_t bases, size_t copies) {
  std::mt19937_64 random(seed);
  std::vector<std::vector<uint64_t>> corpus;
  for (size_t i = 0; i < bases; ++i) {
    std::vector<uint64_t> base;
    const size_t size = 20 + random() % 200;
    for (size_t k = 0; k < size; ++k) base.push_back(random() % 5000);
    corpus.push_back(base);
    for (size_t c = 0; c < copies; ++c) {
      std::vector<uint64_t> copy = base;
      const double edit = (random() % 60) / 100.0;
      for (auto& v : copy) {
        if ((random() % 1000) < edit * 1000) v = random() % 5000;
      }
      corpus.push_back(copy);
    }
  }
  for (auto& set : corpus) {
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
  }
  return corpus;
}

BandKeyTable Keys(const MinHashLsh& lsh, const std::vector<std::vector<uint64_t>>& corpus) {
  BandKeyTable table(lsh.parameters().bands);
  std::vector<uint32_t> keys(lsh.parameters().bands);
  for (const auto& set : corpus) {
    if (lsh.BandKeysOf(set, keys)) {
      table.Append(keys);
    } else {
      table.Append({});
    }
  }
  return table;
}

TEST(LshCandidatePairsTest, MatchesOraclesOnRandomCorpora) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    auto corpus = RandomCorpus(seed, 60, 4);
    corpus.push_back({});  // a document without shingles is in no bucket
    auto lsh = MinHashLsh::Create({});
    ASSERT_TRUE(lsh.ok());
    const int bands = lsh->parameters().bands;
    BandKeyTable table = Keys(*lsh, corpus);
    LshJoinStats stats;
    std::vector<LshPair> found = LshCandidatePairs(table, 1u << 20, 2, &stats);
    // Oracle 1 (exactness of the join): with an unbounded window, the candidates are exactly the
    // pairs sharing at least one band key.
    std::vector<LshPair> sharing;
    const size_t n = corpus.size();
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        if (!table.has_keys(a) || !table.has_keys(b)) continue;
        bool share = false;
        for (int band = 0; band < bands && !share; ++band)
          share = table.key(band, a) == table.key(band, b);
        if (share) sharing.push_back({a, b});
      }
    }
    EXPECT_EQ(found, sharing) << "seed " << seed;
    EXPECT_EQ(stats.candidate_pairs, found.size());
    // Oracle 2 (exact all-pairs Jaccard): pairs at J >= 0.8 are all found (miss probability
    // < 1e-9 each); of the pairs at J >= 0.5 at least the formula's rate minus 4 sigma.
    std::set<std::pair<uint64_t, uint64_t>> found_set;
    for (const LshPair& pair : found) found_set.insert({pair.a, pair.b});
    size_t high = 0, high_found = 0, mid = 0, mid_found = 0;
    double mid_expected = 0, mid_variance = 0;
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        const double j = ShingleSimilarity::Jaccard(corpus[a], corpus[b]);
        const bool hit = found_set.count({a, b}) > 0;
        if (j >= 0.8 && !corpus[a].empty()) {
          ++high;
          high_found += hit;
        } else if (j >= 0.5) {
          ++mid;
          mid_found += hit;
          const double p = LshCandidateProbability(j, lsh->parameters());
          mid_expected += p;
          mid_variance += p * (1 - p);
        }
      }
    }
    EXPECT_GT(high, 50u);
    EXPECT_EQ(high_found, high) << "seed " << seed;
    EXPECT_GT(mid, 20u);
    EXPECT_GE(static_cast<double>(mid_found), mid_expected - 4 * std::sqrt(mid_variance) - 1)
        << "seed " << seed;
    // Oracle 3 (the bucket rule): with a window of 2, the pairs are exactly BucketPairs over each
    // band's buckets, merged.
    std::set<LshPair> expected_windowed;
    for (int band = 0; band < bands; ++band) {
      std::map<uint32_t, std::vector<uint64_t>> buckets;
      for (size_t d = 0; d < n; ++d) {
        if (table.has_keys(d)) buckets[table.key(band, d)].push_back(d);
      }
      std::vector<LshPair> pairs;
      for (const auto& [key, members] : buckets) BucketPairs(members, 2, &pairs);
      expected_windowed.insert(pairs.begin(), pairs.end());
    }
    std::vector<LshPair> windowed = LshCandidatePairs(table, 2, 2);
    EXPECT_EQ(windowed, std::vector<LshPair>(expected_windowed.begin(), expected_windowed.end()));
  }
}

TEST(LshCandidatePairsTest, SameResultForEveryThreadCount) {
  // Large enough for the radix-sort path (>= 4096 records per band) and a few big buckets.
  auto corpus = RandomCorpus(99, 1500, 5);
  for (int i = 0; i < 300; ++i) corpus.push_back(corpus[7]);  // a bucket of 300+ copies
  auto lsh = MinHashLsh::Create({});
  ASSERT_TRUE(lsh.ok());
  BandKeyTable table = Keys(*lsh, corpus);
  LshJoinStats one_stats;
  const std::vector<LshPair> one = LshCandidatePairs(table, 64, 1, &one_stats);
  EXPECT_GT(one_stats.oversized_buckets, 0u);
  EXPECT_GE(one_stats.largest_bucket, 300u);
  EXPECT_TRUE(std::is_sorted(one.begin(), one.end()));
  for (int threads : {2, 3, 8, 0}) {
    LshJoinStats stats;
    EXPECT_EQ(LshCandidatePairs(table, 64, threads, &stats), one) << threads;
    EXPECT_EQ(stats.bucket_pairs, one_stats.bucket_pairs);
    EXPECT_EQ(stats.buckets, one_stats.buckets);
  }
  // The oversized bucket costs about window pairs per member, not a quadratic number.
  EXPECT_LT(one.size(), 2000000u);
}

TEST(LshBandPairRunsTest, KeySlicesOfALargeBandGiveTheBucketRule) {
  // 600,000 documents: enough for the records to be built in 8 key slices. Keys spread over
  // the whole 32-bit range, ~3 documents per key plus one key shared by 500 documents (an
  // oversized bucket); every 17th document has no keys.
  const size_t n = 600000;
  std::mt19937_64 random(42);
  std::vector<uint32_t> keys(n);
  std::vector<bool> has_keys(n);
  for (size_t d = 0; d < n; ++d) {
    keys[d] = static_cast<uint32_t>(random() % 200000) * 2654435761u;
    has_keys[d] = d % 17 != 0;
  }
  for (size_t d = 1000; d < n; d += n / 500) keys[d] = 0xfedcba98u;
  // Oracle: group (key, document) with a comparison sort, the bucket rule on each group.
  std::vector<std::pair<uint32_t, uint64_t>> grouped;
  for (size_t d = 0; d < n; ++d) {
    if (has_keys[d]) grouped.emplace_back(keys[d], d);
  }
  std::sort(grouped.begin(), grouped.end());
  std::vector<LshPair> expected_pairs;
  std::vector<uint64_t> members;
  for (size_t i = 0; i < grouped.size();) {
    size_t j = i;
    members.clear();
    while (j < grouped.size() && grouped[j].first == grouped[i].first) {
      members.push_back(grouped[j++].second);
    }
    BucketPairs(members, 64, &expected_pairs);
    i = j;
  }
  std::vector<uint64_t> expected;
  for (const LshPair& pair : expected_pairs) expected.push_back(pair.a << 32 | pair.b);
  std::sort(expected.begin(), expected.end());
  ASSERT_GT(expected.size(), 500000u);

  std::vector<uint64_t> whole, records, scratch;
  LshJoinStats stats;
  LshBandPairs(keys, has_keys, 64, &whole, &stats, &records, &scratch);
  EXPECT_EQ(whole, expected);
  EXPECT_EQ(stats.records, grouped.size());
  EXPECT_EQ(stats.oversized_buckets, 1u);
  EXPECT_GE(stats.largest_bucket, 450u);  // 500 less those without keys
  // The records buffer held one slice, not the whole band.
  EXPECT_LT(records.capacity(), n / 4);

  std::vector<uint64_t> merged, pairs;
  LshJoinStats run_stats;
  size_t runs = 0;
  LshBandPairRuns(
      keys, has_keys, 64, 100000,
      [&](std::span<const uint64_t> run) {
        EXPECT_TRUE(std::is_sorted(run.begin(), run.end()));
        EXPECT_LE(run.size(), 100000u);
        merged.insert(merged.end(), run.begin(), run.end());
        ++runs;
      },
      &run_stats, &pairs, &records, &scratch);
  std::sort(merged.begin(), merged.end());
  EXPECT_EQ(merged, expected);
  EXPECT_EQ(runs, (expected.size() + 99999) / 100000);
  EXPECT_EQ(run_stats.bucket_pairs, stats.bucket_pairs);
}

TEST(LshBandPairRunsTest, BoundedRunsMergeToTheWholeBand) {
  // Enough records for the radix sorts (>= 4096) and an oversized bucket, so that a band yields
  // many more pairs than one run holds.
  auto corpus = RandomCorpus(5, 1500, 5);
  for (int i = 0; i < 300; ++i) corpus.push_back(corpus[11]);
  corpus.push_back({});
  auto lsh = MinHashLsh::Create({});
  ASSERT_TRUE(lsh.ok());
  BandKeyTable table = Keys(*lsh, corpus);
  for (int band : {0, 7, lsh->parameters().bands - 1}) {
    std::vector<uint64_t> whole, records, scratch;
    LshJoinStats whole_stats;
    LshBandPairs(table.band_keys(band), table.has_keys_bits(), 64, &whole, &whole_stats, &records,
                 &scratch);
    ASSERT_GT(whole.size(), 20000u) << band;
    ASSERT_TRUE(std::is_sorted(whole.begin(), whole.end()));
    for (size_t max_run : {size_t{1}, size_t{1000}, size_t{4096}, whole.size(), whole.size() + 1}) {
      std::vector<std::vector<uint64_t>> runs;
      std::vector<uint64_t> pairs;
      LshJoinStats stats;
      LshBandPairRuns(
          table.band_keys(band), table.has_keys_bits(), 64, max_run,
          [&](std::span<const uint64_t> run) { runs.emplace_back(run.begin(), run.end()); }, &stats,
          &pairs, &records, &scratch);
      std::vector<uint64_t> merged;
      for (const auto& run : runs) {
        EXPECT_LE(run.size(), max_run);
        EXPECT_TRUE(std::is_sorted(run.begin(), run.end()));
        merged.insert(merged.end(), run.begin(), run.end());
      }
      EXPECT_EQ(runs.size(), (whole.size() + max_run - 1) / max_run) << max_run;
      std::sort(merged.begin(), merged.end());
      // Disjoint runs: no pair twice, and together exactly the whole band's pairs.
      EXPECT_EQ(std::adjacent_find(merged.begin(), merged.end()), merged.end()) << max_run;
      EXPECT_EQ(merged, whole) << "band " << band << ", runs of " << max_run;
      EXPECT_EQ(stats.bucket_pairs, whole_stats.bucket_pairs);
      EXPECT_EQ(stats.buckets, whole_stats.buckets);
      EXPECT_EQ(stats.records, whole_stats.records);
    }
  }
}

TEST(ShingleVerificationTest, VerifiedJaccardIsTheNarrowedJaccard) {
  auto similarity = ShingleSimilarity::Create(true);
  ASSERT_TRUE(similarity.ok());
  const std::string a = "the quick brown fox jumps over the lazy dog and runs far away";
  const std::string b = "the quick brown fox jumps over the lazy cat and runs far away";
  std::vector<uint64_t> wa, wb;
  ASSERT_TRUE((*similarity)->Shingles(a, &wa).ok());
  ASSERT_TRUE((*similarity)->Shingles(b, &wb).ok());
  std::vector<uint32_t> na, nb;
  ShingleSimilarity::Narrow(wa, &na);
  ShingleSimilarity::Narrow(wb, &nb);
  auto verified = (*similarity)->VerifiedJaccard(a, b);
  ASSERT_TRUE(verified.ok());
  EXPECT_DOUBLE_EQ(*verified, ShingleSimilarity::Jaccard32(na, nb));
  EXPECT_DOUBLE_EQ(*verified, ShingleSimilarity::Jaccard(wa, wb));  // no 32-bit collision here
  EXPECT_NEAR(*verified, 8.0 / 14.0, 1e-12);  // 11 word 3-grams each, 3 differ: 8 / (11 + 11 - 8)
}

TEST(ShingleVerificationTest, ShinglesOfNormalizedTextAreTheSame) {
  auto similarity = ShingleSimilarity::Create(true);
  ASSERT_TRUE(similarity.ok());
  auto normalizer = TextNormalizer::Create((*similarity)->normalize_options());
  ASSERT_TRUE(normalizer.ok());
  for (std::string text : {"<p>The QUICK brown fox</p> jumps &amp; over the lazy dog",
                           "這是一個關於簡體中文和繁體中文的測試句子",
                           "ｆｕｌｌ　ｗｉｄｔｈ text here", "", "!!!", "one"}) {
    std::vector<uint64_t> direct, shared;
    ASSERT_TRUE((*similarity)->Shingles(text, &direct).ok());
    std::string normal;
    ASSERT_TRUE((*normalizer)->Normalize(text, &normal).ok());
    ShingleSimilarity::ShinglesOfNormalized(normal, &shared);
    EXPECT_EQ(direct, shared) << text;
  }
}

}  // namespace
}  // namespace neardup
