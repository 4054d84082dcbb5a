// Tests of dedup's clustering (connected components, keep policies, chaining), the shingle
// similarity used for verification, and the pair rule (JudgePair) with its size-independent
// defaults.
#include <gtest/gtest.h>

#include <random>

#include "neardup/dedup.h"
#include "neardup/dedup_stages.h"
#include "neardup/shingles.h"

namespace neardup {
namespace {

DedupDocument Doc(const std::string& id, uint64_t fp, uint64_t bytes, uint64_t hash = 0,
                  std::optional<double> score = std::nullopt) {
  DedupDocument doc;
  doc.id = id;
  doc.fingerprint = Fingerprint::From64(fp);
  doc.text_bytes = bytes;
  doc.normalized_bytes = bytes;  // --keep longest compares the normalised length
  doc.content_hash = hash == 0 ? fp * 31 + bytes : hash;
  doc.score = score;
  return doc;
}

TEST(DedupClusterTest, ConnectedComponentsAndKeepFirst) {
  std::vector<DedupDocument> docs = {Doc("a", 0b0000, 10), Doc("b", 0b0001, 30),
                                     Doc("c", 0b0011, 20), Doc("d", 0xF0F0F0F0, 5),
                                     Doc("e", 0b0111, 40)};
  // a~b, b~c (chain), e alone except e~c; d alone.
  std::vector<DuplicatePair> pairs = {
      {0, 1, 1, std::nullopt}, {1, 2, 1, std::nullopt}, {2, 4, 1, std::nullopt}};
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
  for (const ClusterMember& m : clusters[0].removed) {
    EXPECT_FALSE(m.similarity_to_via.has_value()) << m.document;  // unverified pairs: unset
  }
  EXPECT_EQ(removed, (std::vector<bool>{false, true, true, false, true}));
}

TEST(DedupClusterTest, KeepLongestAndField) {
  std::vector<DedupDocument> docs = {Doc("a", 1, 10, 0, 1.0), Doc("b", 3, 30, 0, std::nullopt),
                                     Doc("c", 7, 20, 0, 5.0)};
  std::vector<DuplicatePair> pairs = {{0, 1, 1, std::nullopt}, {1, 2, 1, std::nullopt}};
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
  ASSERT_TRUE(clusters[0].removed[0].similarity_to_via.has_value());
  EXPECT_EQ(*clusters[0].removed[0].similarity_to_via, 1.0);  // the pair's similarity, carried
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

// The definition of "duplicate" comes from the options alone: no corpus size enters it.
TEST(DedupDefaultsTest, ThresholdSetsVerificationAndLshParameters) {
  DedupOptions options;
  EXPECT_EQ(options.lsh.threshold, 0.5);
  EXPECT_EQ(ResolveVerifyThreshold(options), 0.5);
  EXPECT_EQ(options.k, 3);
  EXPECT_EQ(options.candidates, DedupOptions::Candidates::kLsh);
  EXPECT_EQ(*ResolveLshParameters(options.lsh), (LshParameters{30, 3}));
  options.lsh.threshold = 0.8;
  EXPECT_EQ(ResolveVerifyThreshold(options), 0.8);
  EXPECT_EQ(*ResolveLshParameters(options.lsh), (LshParameters{17, 7}));
  options.verify_threshold = 0;  // verification off, explicitly
  EXPECT_EQ(ResolveVerifyThreshold(options), 0.0);
}

TEST(JudgePairTest, AppliesTheDedupRule) {
  DedupOptions options;
  const std::string base =
      "Neardup finds documents that say the same thing with a few words changed, and it keeps "
      "one of each group while the others are removed from the corpus before training begins.";
  const std::string edited =
      "Neardup finds documents that say the same thing with a few words altered, and it keeps "
      "one of each group while the others are removed from the corpus before training begins.";
  const std::string other =
      "A completely different sentence about the weather in the mountains, where snow falls "
      "early in the autumn and the roads close until the spring returns to the valleys below.";
  auto near = JudgePair(base, edited, options);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_GT(near->jaccard, 0.7);
  EXPECT_TRUE(near->verified);
  EXPECT_GT(near->shared_bands, 0);
  EXPECT_TRUE(near->lsh_candidate);
  EXPECT_TRUE(near->duplicate);
  // The default rule's plan: down to the `edited` reason's shingle Jaccard, 0.45 (30 x 3 without).
  EXPECT_EQ(near->lsh, (LshParameters{41, 3}));
  auto far = JudgePair(base, other, options);
  ASSERT_TRUE(far.ok());
  EXPECT_LT(far->jaccard, 0.1);
  EXPECT_FALSE(far->verified);
  EXPECT_FALSE(far->duplicate);
  // Whitespace-only variants are duplicates whatever their shingles.
  auto spaced = JudgePair("Hum an Gro wth hormone", "Human Growth hormone", options);
  ASSERT_TRUE(spaced.ok());
  EXPECT_TRUE(spaced->whitespace_only);
  EXPECT_TRUE(spaced->duplicate);
  // A stricter threshold leaves the one-word edit to the `edited` reason (on by default: the
  // units' multiset Jaccard is above 0.8), and without that reason makes it a distinct document.
  options.lsh.threshold = 0.95;
  auto strict = JudgePair(base, edited, options);
  ASSERT_TRUE(strict.ok());
  EXPECT_TRUE(strict->duplicate);
  EXPECT_EQ(strict->reason, DuplicateReason::kEdited);
  options.edited_threshold = 0;
  strict = JudgePair(base, edited, options);
  ASSERT_TRUE(strict.ok());
  EXPECT_FALSE(strict->verified);
  EXPECT_FALSE(strict->duplicate);
  options.edited_threshold = DedupOptions().edited_threshold;
  // With the SimHash join on, a pair within k is a candidate too.
  options.lsh.threshold = 0.5;
  options.candidates = DedupOptions::Candidates::kLshAndSimHash;
  auto both = JudgePair(base, edited, options);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->within_k, both->distance <= 3);
  EXPECT_TRUE(both->duplicate);
  // SimHash join only: no LSH candidate even when bands are shared.
  options.lsh.threshold = 0.5;
  options.candidates = DedupOptions::Candidates::kSimHash;
  auto simhash = JudgePair(base, edited, options);
  ASSERT_TRUE(simhash.ok());
  EXPECT_FALSE(simhash->lsh_candidate);
  EXPECT_EQ(simhash->duplicate, simhash->within_k);
}

}  // namespace
}  // namespace neardup
