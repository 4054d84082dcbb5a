// Golomb-Rice coding of ascending sequences (src/common/rice_codec.h): round trips of random,
// dense, sparse and edge-case sequences with and without payloads, concatenated codes, the size
// on random hash sets, and damaged input rejected without reading out of bounds.
#include "common/rice_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace neardup {
namespace {

std::vector<uint32_t> RandomSet(std::mt19937_64& rng, size_t n, uint32_t max) {
  std::vector<uint32_t> v(n);
  std::uniform_int_distribution<uint32_t> dist(0, max);
  for (uint32_t& x : v) x = dist(rng);
  std::sort(v.begin(), v.end());
  return v;
}

void RoundTrip(const std::vector<uint32_t>& values, const std::vector<uint32_t>& payload = {},
               int payload_bits = 0) {
  std::string code;
  RiceEncode(values, &code, payload, payload_bits);
  std::vector<uint32_t> got, got_payload;
  size_t used = 0;
  ASSERT_TRUE(RiceDecode(code, &got, &used, &got_payload, payload_bits));
  EXPECT_EQ(got, values);
  EXPECT_EQ(used, code.size());
  if (!payload.empty()) {
    EXPECT_EQ(got_payload, payload);
  }
}

TEST(RiceCodec, RoundTrips) {
  std::mt19937_64 rng(5);
  RoundTrip({});
  RoundTrip({0});
  RoundTrip({0xFFFFFFFFu});
  RoundTrip({0, 0xFFFFFFFFu});
  RoundTrip({7, 7, 7, 8});  // repeats
  RoundTrip({1u << 31, (1u << 31) + 1, 0xFFFFFFF0u});
  for (size_t n : {1, 2, 3, 63, 64, 65, 270, 5000}) {
    RoundTrip(RandomSet(rng, n, 0xFFFFFFFFu));
    RoundTrip(RandomSet(rng, n, 1000));      // dense: k = 0 and long zero gaps
    RoundTrip(RandomSet(rng, n, 1u << 20));  // a sub-range
    std::vector<uint32_t> rows(n);
    for (size_t i = 0; i < n; ++i) rows[i] = static_cast<uint32_t>(rng() % 40000);
    RoundTrip(RandomSet(rng, n, 0xFFFFFFFFu), rows, BitsFor(39999));
  }
  std::vector<uint32_t> wide(100);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<uint32_t>(i * 40000000u);
  std::vector<uint32_t> payload(100, 0xFFFFFFFFu);
  RoundTrip(wide, payload, 32);
  RoundTrip({5, 9}, {0, 0}, 0);  // a payload of zero bits: zeros
}

TEST(RiceCodec, ConcatenatedCodesDecodeOneAfterAnother) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<uint32_t>> sets;
  std::string code;
  for (int i = 0; i < 50; ++i) {
    sets.push_back(RandomSet(rng, rng() % 300, 0xFFFFFFFFu));
    RiceEncode(sets.back(), &code);
  }
  std::string_view rest = code;
  for (const auto& set : sets) {
    std::vector<uint32_t> got;
    size_t used = 0;
    ASSERT_TRUE(RiceDecode(rest, &got, &used));
    EXPECT_EQ(got, set);
    rest.remove_prefix(used);
  }
  EXPECT_TRUE(rest.empty());
}

TEST(RiceCodec, RandomHashSetsTakeAboutThreeBytesAValue) {
  std::mt19937_64 rng(9);
  size_t bytes = 0, values = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<uint32_t> set = RandomSet(rng, 270, 0xFFFFFFFFu);
    set.erase(std::unique(set.begin(), set.end()), set.end());
    std::string code;
    RiceEncode(set, &code);
    bytes += code.size();
    values += set.size();
  }
  const double per_value = static_cast<double>(bytes) / static_cast<double>(values);
  EXPECT_LT(per_value, 3.25);
  EXPECT_GT(per_value, 2.9);
}

TEST(RiceCodec, DamageIsRejected) {
  std::mt19937_64 rng(11);
  std::vector<uint32_t> set = RandomSet(rng, 300, 0xFFFFFFFFu);
  std::string code;
  RiceEncode(set, &code);
  std::vector<uint32_t> got;
  for (size_t cut = 0; cut < code.size(); ++cut) {  // every truncation fails
    got.clear();
    EXPECT_FALSE(RiceDecode(std::string_view(code).substr(0, cut), &got)) << cut;
  }
  // Random bytes: no crash (ASan checks the bounds), whatever the answer.
  for (int i = 0; i < 2000; ++i) {
    std::string noise(rng() % 40, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    got.clear();
    (void)RiceDecode(noise, &got);
  }
  // A count far beyond the bytes, and k past 31.
  EXPECT_FALSE(RiceDecode(std::string("\xff\xff\x03\x00\x05", 5), &got));
  EXPECT_FALSE(RiceDecode(std::string("\x02\x00\x40\x00", 4), &got));
  // Values past 2^32 (a huge first value).
  EXPECT_FALSE(RiceDecode(std::string("\x01\xff\xff\xff\xff\x7f", 6), &got));
}

}  // namespace
}  // namespace neardup
