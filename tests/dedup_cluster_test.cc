// Tests of dedup's clustering (union-find, keep policies, chaining), the exact self-join and the
// shingle similarity used for verification.
#include <gtest/gtest.h>

#include <random>

#include "dedup/self_join.h"
#include "neardup/shingles.h"
#include "neardup/dedup.h"

namespace neardup {
namespace {

DedupDocument Doc(const std::string& id, uint64_t fp, uint64_t bytes, uint64_t hash = 0,
                  std::optional<double> score = std::nullopt) {
  DedupDocument doc;
  doc.id = id;
  doc.fingerprint = Fingerprint::From64(fp);
  doc.text_bytes = bytes;
  doc.content_hash = hash == 0 ? fp * 31 + bytes : hash;
  doc.score = score;
  return doc;
}

TEST(DedupClusterTest, ConnectedComponentsAndKeepFirst) {
  std::vector<DedupDocument> docs = {Doc("a", 0b0000, 10), Doc("b", 0b0001, 30),
                                     Doc("c", 0b0011, 20), Doc("d", 0xF0F0F0F0, 5),
                                     Doc("e", 0b0111, 40)};
  // a~b, b~c (chain), e alone except e~c; d alone.
  std::vector<DuplicatePair> pairs = {{0, 1, 1, -1}, {1, 2, 1, -1}, {2, 4, 1, -1}};
  std::vector<DedupCluster> clusters;
  std::vector<bool> removed;
  BuildClusters(docs, pairs, KeepPolicy::kFirst, &clusters, &removed);
  ASSERT_EQ(clusters.size(), 1u);
  EXPECT_EQ(clusters[0].kept, 0u);
  ASSERT_EQ(clusters[0].removed.size(), 3u);
  EXPECT_EQ(clusters[0].removed[0].document, 1u);
  EXPECT_EQ(clusters[0].removed[0].reason, "near_duplicate");
  EXPECT_EQ(clusters[0].removed[0].via, 0u);
  EXPECT_EQ(clusters[0].removed[1].document, 2u);
  EXPECT_EQ(clusters[0].removed[1].reason, "chained");
  EXPECT_EQ(clusters[0].removed[1].via, 1u);
  EXPECT_EQ(clusters[0].removed[1].distance_to_kept, 2);
  EXPECT_EQ(clusters[0].removed[2].document, 4u);
  EXPECT_EQ(clusters[0].removed[2].via, 2u);
  EXPECT_EQ(clusters[0].removed[2].distance_to_kept, 3);
  EXPECT_EQ(removed, (std::vector<bool>{false, true, true, false, true}));
}

TEST(DedupClusterTest, KeepLongestAndField) {
  std::vector<DedupDocument> docs = {Doc("a", 1, 10, 0, 1.0), Doc("b", 3, 30, 0, std::nullopt),
                                     Doc("c", 7, 20, 0, 5.0)};
  std::vector<DuplicatePair> pairs = {{0, 1, 1, -1}, {1, 2, 1, -1}};
  std::vector<DedupCluster> clusters;
  std::vector<bool> removed;
  BuildClusters(docs, pairs, KeepPolicy::kLongest, &clusters, &removed);
  ASSERT_EQ(clusters.size(), 1u);
  EXPECT_EQ(clusters[0].kept, 1u);
  EXPECT_EQ(clusters[0].removed[0].reason, "near_duplicate");  // a and c both link to b directly
  EXPECT_EQ(clusters[0].removed[1].reason, "near_duplicate");
  BuildClusters(docs, pairs, KeepPolicy::kField, &clusters, &removed);
  EXPECT_EQ(clusters[0].kept, 2u);  // highest score; the missing score loses
  EXPECT_EQ(removed, (std::vector<bool>{true, true, false}));
}

TEST(DedupClusterTest, ExactDuplicateReasonAndTieBreak) {
  std::vector<DedupDocument> docs = {Doc("x", 5, 10, 99), Doc("y", 5, 10, 99)};
  std::vector<DuplicatePair> pairs = {{0, 1, 0, 1.0}};
  std::vector<DedupCluster> clusters;
  std::vector<bool> removed;
  BuildClusters(docs, pairs, KeepPolicy::kLongest, &clusters, &removed);
  ASSERT_EQ(clusters.size(), 1u);
  EXPECT_EQ(clusters[0].kept, 0u);  // equal length: the first wins
  EXPECT_EQ(clusters[0].removed[0].reason, "exact_duplicate");
}

TEST(DedupClusterTest, ParseKeepPolicy) {
  KeepPolicy policy;
  std::string field;
  EXPECT_TRUE(ParseKeepPolicy("longest", &policy, &field).ok());
  EXPECT_EQ(policy, KeepPolicy::kLongest);
  EXPECT_TRUE(ParseKeepPolicy("field:stars", &policy, &field).ok());
  EXPECT_EQ(policy, KeepPolicy::kField);
  EXPECT_EQ(field, "stars");
  EXPECT_FALSE(ParseKeepPolicy("field:", &policy, &field).ok());
  EXPECT_FALSE(ParseKeepPolicy("biggest", &policy, &field).ok());
}

// The block self-join must find exactly the pairs brute force finds, for several k and widths.
TEST(SelfJoinTest, MatchesBruteForce) {
  std::mt19937_64 random(7);
  for (int bits : {64, 128}) {
    std::vector<Fingerprint> fps;
    for (int i = 0; i < 300; ++i) {
      Fingerprint base =
          bits == 64 ? Fingerprint::From64(random()) : Fingerprint::From128(random(), random());
      fps.push_back(base);
      // A few near neighbours of each base.
      for (int flips = 1; flips <= 6; flips += 2) {
        Fingerprint near = base;
        for (int f = 0; f < flips; ++f) {
          int bit = static_cast<int>(random() % bits);
          if (bit < 64) {
            near.lo ^= uint64_t{1} << bit;
          } else {
            near.hi ^= uint64_t{1} << (bit - 64);
          }
        }
        fps.push_back(near);
      }
    }
    for (int k : {0, 1, 3, 5, 12, 16}) {
      auto joined = SelfJoinWithinK(fps, k, 2);
      ASSERT_TRUE(joined.ok());
      std::vector<NeighborPair> expected;
      for (size_t i = 0; i < fps.size(); ++i) {
        for (size_t j = i + 1; j < fps.size(); ++j) {
          int d = HammingDistance(fps[i], fps[j]);
          if (d <= k) expected.push_back({i, j, d});
        }
      }
      EXPECT_EQ(*joined, expected) << "bits=" << bits << " k=" << k;
    }
  }
}

TEST(ShingleSimilarityTest, NormalisesBeforeShingling) {
  auto similarity = ShingleSimilarity::Create(/*traditional_to_simplified=*/true);
  ASSERT_TRUE(similarity.ok()) << similarity.status().ToString();
  std::vector<uint64_t> a, b, c;
  ASSERT_TRUE((*similarity)->Shingles("The quick brown fox jumps over the lazy dog", &a).ok());
  ASSERT_TRUE(
      (*similarity)->Shingles("<p>THE QUICK brown fox</p> jumps over &amp; the lazy dog", &b).ok());
  ASSERT_TRUE((*similarity)->Shingles("Completely unrelated words appear in this line", &c).ok());
  EXPECT_EQ(a.size(), 7u);  // 9 words -> 7 word 3-grams
  EXPECT_GT(ShingleSimilarity::Jaccard(a, b), 0.6);
  EXPECT_EQ(ShingleSimilarity::Jaccard(a, c), 0.0);
  EXPECT_EQ(ShingleSimilarity::Jaccard(a, a), 1.0);
  // Chinese: character 5-grams, Traditional folded to Simplified.
  std::vector<uint64_t> simplified, traditional;
  ASSERT_TRUE(
      (*similarity)->Shingles("这是一个关于简体中文和繁体中文的测试句子", &simplified).ok());
  ASSERT_TRUE(
      (*similarity)->Shingles("這是一個關於簡體中文和繁體中文的測試句子", &traditional).ok());
  EXPECT_GT(ShingleSimilarity::Jaccard(simplified, traditional), 0.8);
}

TEST(DedupAutoDistanceTest, SmallCorpusGetsTunedKLargeCorpusGetsIndexableK) {
  DedupOptions options;
  ASSERT_EQ(options.max_distance, DedupOptions::kAutoDistance);
  EXPECT_EQ(ResolveMaxDistance(options, 0), 16);
  EXPECT_EQ(ResolveMaxDistance(options, DedupOptions::kAutoDistanceLimit), 16);
  EXPECT_EQ(ResolveMaxDistance(options, DedupOptions::kAutoDistanceLimit + 1), 6);
  options.max_distance = 3;  // an explicit k is never changed
  EXPECT_EQ(ResolveMaxDistance(options, 10), 3);
  EXPECT_EQ(ResolveMaxDistance(options, 10000000), 3);
}

}  // namespace
}  // namespace neardup
