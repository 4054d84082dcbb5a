// The one set codec (src/common/set_codec.h, Elias-Fano of sorted distinct u32): every set comes
// back exactly, several sets concatenate, and damaged bytes are refused, never read past.
#include "common/set_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace neardup {
namespace {

std::vector<uint32_t> RandomSet(std::mt19937_64& rng, size_t n, uint32_t max) {
  std::set<uint32_t> values;
  std::uniform_int_distribution<uint32_t> value(0, max);
  while (values.size() < n) values.insert(value(rng));
  return {values.begin(), values.end()};
}

// `bytes`, sets encoded one after another, decode to exactly `sets`, in order, with nothing left.
void ExpectDecodedInOrder(std::string_view bytes, const std::vector<std::vector<uint32_t>>& sets) {
  for (const auto& set : sets) {
    std::vector<uint32_t> back;
    size_t used = 0;
    ASSERT_TRUE(DecodeShingleSet(bytes, &back, &used));
    EXPECT_EQ(back, set);
    bytes.remove_prefix(used);
  }
  EXPECT_TRUE(bytes.empty());
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
  ExpectDecodedInOrder(all, sets);
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

// Bytes the codec wrote before it took a universe (main at e8e4df9): they decode to the same
// sets, and the default universe (32, the shingle sets') still writes exactly them, so stores
// and spills written before stay byte-identical.
TEST(SetCodecTest, EncodingsWrittenBeforeTheUniverseArgumentAreUnchanged) {
  struct Golden {
    std::vector<uint32_t> set;
    std::string bytes;
  };
  const std::vector<Golden> goldens = {
      {{7}, std::string("\x01\x20\x02\x07\x00\x00\x00\x01", 8)},
      {{5, 0x7fffffffu}, std::string("\x02\x1f\x03\x05\x00\x00\x80\xff\xff\xff\x3f\x03", 12)},
      {{1, 1000, 70000, 0x80000000u, 0xfffffff0u},
       std::string("\x05\x1d\x0d\x01\x00\x00\x00\x7d\x00\x00\xc0\x45\x04\x00\x00\x00\x00\x00\xff"
                   "\xff\xff\x01\x87\x08",
                   24)},
      {{3, 9, 12, 200, 4000, 65536, 1u << 20},
       std::string("\x07\x1d\x08\x03\x00\x00\x20\x01\x00\x00\x30\x00\x00\x00\x64\x00\x00\x00\xfa"
                   "\x00\x00\x00\x00\x02\x00\x00\x00\x04\x00\x7f",
                   30)}};
  for (const Golden& golden : goldens) {
    std::vector<uint32_t> back;
    size_t used = 0;
    ASSERT_TRUE(DecodeShingleSet(golden.bytes, &back, &used));
    EXPECT_EQ(back, golden.set);
    EXPECT_EQ(used, golden.bytes.size());
    std::string bytes, explicit32;
    EncodeShingleSet(golden.set, &bytes);
    EncodeShingleSet(golden.set, &explicit32, 32);
    EXPECT_EQ(bytes, golden.bytes);
    EXPECT_EQ(explicit32, golden.bytes);
  }
}

// 20-bit sets (the `edited` reason's unit sets) with a 20-bit universe: every set comes back
// exactly, concatenated with 32-bit sets too, and takes about L + 2 bits a value with L ~ 20 -
// log2(n) (~14.5 bits a value at n ~ 265, against ~24 for the same values with the 32-bit
// universe and ~26.5 for 32-bit values).
TEST(SetCodecTest, TwentyBitSetsRoundTripAndShrink) {
  std::mt19937_64 rng(20);
  const uint32_t max20 = (1u << 20) - 1;
  std::vector<std::vector<uint32_t>> sets = {{}, {0}, {max20}, {0, max20}, {1, 2, 3}};
  for (size_t n : {1, 2, 3, 10, 265, 1000, 20000, 300000}) {
    sets.push_back(RandomSet(rng, n, max20));
  }
  std::string all;
  std::vector<std::vector<uint32_t>> order;
  for (const auto& set : sets) {
    std::string bytes;
    EncodeShingleSet(set, &bytes, 20);
    std::vector<uint32_t> back = {42};
    size_t used = 0;
    ASSERT_TRUE(DecodeShingleSet(bytes, &back, &used)) << set.size();
    EXPECT_EQ(back, set);
    EXPECT_EQ(used, bytes.size());
    if (set.size() == 265) {
      std::string wide;
      EncodeShingleSet(set, &wide);
      const double bits20 = 8.0 * bytes.size() / set.size();
      const double bits32 = 8.0 * wide.size() / set.size();
      EXPECT_LT(bits20, 15.5) << bits20;
      EXPECT_GT(bits32, 23.5) << bits32;  // L = 23 low bits a value with the 32-bit universe
    }
    // Interleaved with a 32-bit set, as a store's record holds them.
    const std::vector<uint32_t> shingles = RandomSet(rng, 50, UINT32_MAX);
    EncodeShingleSet(shingles, &all);
    EncodeShingleSet(set, &all, 20);
    order.push_back(shingles);
    order.push_back(set);
  }
  ExpectDecodedInOrder(all, order);
  // A value past the universe (misuse) still comes back exactly.
  const std::vector<uint32_t> past = {5, 1u << 20, UINT32_MAX};
  std::string bytes;
  EncodeShingleSet(past, &bytes, 20);
  std::vector<uint32_t> back;
  ASSERT_TRUE(DecodeShingleSet(bytes, &back));
  EXPECT_EQ(back, past);
}

}  // namespace
}  // namespace neardup
