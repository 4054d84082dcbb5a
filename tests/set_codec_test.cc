// The one set codec (src/common/set_codec.h, Elias-Fano of sorted distinct u32): every set comes
// back exactly, several sets concatenate, and damaged bytes are refused, never read past.
#include "common/set_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace neardup {
namespace {

std::vector<uint32_t> RandomSet(std::mt19937_64& rng, size_t n, uint32_t max) {
  std::set<uint32_t> values;
  std::uniform_int_distribution<uint32_t> value(0, max);
  while (values.size() < n) values.insert(value(rng));
  return {values.begin(), values.end()};
}

TEST(SetCodecTest, EverySetComesBackExactly) {
  std::mt19937_64 rng(5);
  std::vector<std::vector<uint32_t>> sets = {
      {}, {0}, {UINT32_MAX}, {0, UINT32_MAX}, {1, 2, 3, 4, 5, 6, 7, 8}};
  for (size_t n : {1, 2, 3, 10, 100, 1000, 5000}) {
    sets.push_back(RandomSet(rng, n, UINT32_MAX));
    sets.push_back(RandomSet(rng, n, static_cast<uint32_t>(n * 3)));  // dense
  }
  std::vector<uint32_t> dense(70000);
  for (uint32_t i = 0; i < dense.size(); ++i) dense[i] = i;  // every value: L = 0
  sets.push_back(dense);
  std::string all;
  for (const auto& set : sets) {
    std::string bytes;
    EncodeShingleSet(set, &bytes);
    std::vector<uint32_t> back = {42};
    size_t used = 0;
    ASSERT_TRUE(DecodeShingleSet(bytes, &back, &used)) << set.size();
    EXPECT_EQ(back, set);
    EXPECT_EQ(used, bytes.size());
    if (set.size() >= 100) {
      EXPECT_LT(bytes.size(), set.size() * 4) << "not smaller than the raw values";
    }
    EncodeShingleSet(set, &all);  // appended one after another
  }
  std::string_view rest = all;
  for (const auto& set : sets) {
    std::vector<uint32_t> back;
    size_t used = 0;
    ASSERT_TRUE(DecodeShingleSet(rest, &back, &used));
    EXPECT_EQ(back, set);
    rest.remove_prefix(used);
  }
  EXPECT_TRUE(rest.empty());
}

TEST(SetCodecTest, DamagedBytesAreRefusedNotOverread) {
  std::mt19937_64 rng(9);
  const std::vector<uint32_t> set = RandomSet(rng, 300, UINT32_MAX);
  std::string bytes;
  EncodeShingleSet(set, &bytes);
  std::vector<uint32_t> back;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {   // every truncation
    const std::string prefix = bytes.substr(0, cut);  // its own allocation: ASan sees overreads
    EXPECT_FALSE(DecodeShingleSet(prefix, &back)) << cut;
    EXPECT_TRUE(back.empty());
  }
  size_t refused = 0;
  for (int round = 0; round < 2000; ++round) {  // random flips: a valid set or a refusal
    std::string damaged = bytes;
    damaged[rng() % damaged.size()] ^= static_cast<char>(1 + rng() % 255);
    if (!DecodeShingleSet(damaged, &back)) {
      ++refused;
      EXPECT_TRUE(back.empty());
    } else {
      EXPECT_TRUE(std::is_sorted(back.begin(), back.end()));
    }
  }
  EXPECT_GT(refused, 0u);
  for (int round = 0; round < 2000; ++round) {  // random bytes
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    (void)DecodeShingleSet(junk, &back);
  }
}

}  // namespace
}  // namespace neardup
