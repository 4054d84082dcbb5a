// Tests of SimHash bit voting (against a plain reference loop), feature hashing and input checks.
#include "neardup/simhash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace neardup {
namespace {

// The textbook loop of yanyiwu/simhash.
uint64_t ReferenceSimHash(const std::vector<uint64_t>& hashes, const std::vector<double>& weights) {
  std::vector<double> sums(64, 0.0);
  for (size_t i = 0; i < hashes.size(); ++i) {
    for (int j = 0; j < 64; ++j) sums[j] += (((hashes[i] >> j) & 1) ? 1 : -1) * weights[i];
  }
  uint64_t value = 0;
  for (int j = 0; j < 64; ++j) {
    if (sums[j] > 0.0) value |= uint64_t{1} << j;
  }
  return value;
}

TEST(SimHashTest, MatchesReferenceLoop) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> weight(0.01, 20.0);
  for (int round = 0; round < 200; ++round) {
    size_t n = rng() % 50;
    std::vector<uint64_t> hashes(n);
    std::vector<double> weights(n);
    for (size_t i = 0; i < n; ++i) {
      hashes[i] = rng();
      weights[i] = weight(rng);
    }
    auto fp = SimHash64(hashes, weights);
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->lo, ReferenceSimHash(hashes, weights));
    EXPECT_EQ(fp->bits, 64);
  }
}

TEST(SimHashTest, TiesAndEmptyGiveZeroBits) {
  EXPECT_EQ(SimHash64({}, {})->lo, 0u);
  // Two opposite hashes of equal weight cancel on every bit.
  std::vector<uint64_t> hashes = {0xF0F0F0F0F0F0F0F0ULL, 0x0F0F0F0F0F0F0F0FULL};
  std::vector<double> weights = {1.5, 1.5};
  EXPECT_EQ(SimHash64(hashes, weights)->lo, 0u);
  // A single feature's SimHash is its hash.
  EXPECT_EQ(SimHash64(std::vector<uint64_t>{0x123456789ULL}, std::vector<double>{2})->lo,
            0x123456789ULL);
}

TEST(SimHashTest, RejectsBadInput) {
  std::vector<uint64_t> hashes = {1, 2};
  std::vector<double> one = {1};
  EXPECT_EQ(SimHash64(hashes, one).status().code(), StatusCode::kInvalidArgument);
  std::vector<double> nan = {1, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_EQ(SimHash64(hashes, nan).status().code(), StatusCode::kInvalidArgument);
  std::vector<WeightedFeature> features = {{"a", 1}};
  EXPECT_EQ(SimHashFeatures(features, 32).status().code(), StatusCode::kInvalidArgument);
  features[0].weight = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(SimHashFeatures(features, 64).ok());
}

TEST(SimHashTest, FeatureHashes) {
  EXPECT_EQ(HashFeature("hello", FeatureHash::kXxh3, 64).lo, XXH3_64bits("hello", 5));
  XXH128_hash_t h = XXH3_128bits("hello", 5);
  FeatureHashValue v = HashFeature("hello", FeatureHash::kXxh3, 128);
  EXPECT_EQ(v.lo, h.low64);
  EXPECT_EQ(v.hi, h.high64);
  FeatureHashValue j = HashFeature("hello", FeatureHash::kJenkinsLookup3, 128);
  EXPECT_NE(j.hi, j.lo);
  EXPECT_EQ(j.lo, HashFeature("hello", FeatureHash::kJenkinsLookup3, 64).lo);
}

TEST(SimHashTest, Width128UsesBothHalves) {
  std::vector<WeightedFeature> features = {{"alpha", 1}, {"beta", 2}, {"gamma", 3}};
  auto fp = SimHashFeatures(features, 128);
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(fp->bits, 128);
  EXPECT_NE(fp->hi, 0u);
  // The low half equals a 64-bit SimHash over the XXH3_128 low words.
  std::vector<uint64_t> lows;
  std::vector<double> weights;
  for (const auto& f : features) {
    lows.push_back(XXH3_128bits(f.text.data(), f.text.size()).low64);
    weights.push_back(f.weight);
  }
  EXPECT_EQ(fp->lo, ReferenceSimHash(lows, weights));
}

TEST(SimHashTest, HeavierFeatureWins) {
  std::vector<WeightedFeature> features = {{"heavy", 100}, {"light1", 1}, {"light2", 1}};
  auto fp = SimHashFeatures(features, 64);
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(fp->lo, HashFeature("heavy", FeatureHash::kXxh3).lo);
}

}  // namespace
}  // namespace neardup
