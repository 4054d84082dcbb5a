// Tests of Fingerprint text forms and Hamming distance.
#include "neardup/fingerprint.h"

#include <gtest/gtest.h>

namespace neardup {
namespace {

TEST(FingerprintTest, HexRoundTrip64) {
  Fingerprint fp = Fingerprint::From64(0xf773be40a3f0a3e5ULL);
  EXPECT_EQ(ToHex(fp), "f773be40a3f0a3e5");
  auto parsed = ParseFingerprint("F773BE40A3F0A3E5");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, fp);
}

TEST(FingerprintTest, HexAndBinaryRoundTrip128) {
  Fingerprint fp = Fingerprint::From128(0x0123456789abcdefULL, 0xfedcba9876543210ULL);
  EXPECT_EQ(ToHex(fp), "0123456789abcdeffedcba9876543210");
  auto from_hex = ParseFingerprint(ToHex(fp));
  ASSERT_TRUE(from_hex.ok());
  EXPECT_EQ(*from_hex, fp);
  std::string binary = ToBinary(fp);
  ASSERT_EQ(binary.size(), 128u);
  auto from_binary = ParseFingerprint(binary);
  ASSERT_TRUE(from_binary.ok());
  EXPECT_EQ(*from_binary, fp);
}

TEST(FingerprintTest, DecimalForm) {
  Fingerprint fp = Fingerprint::From64(17831459094038722629ULL);
  EXPECT_EQ(ToDecimal(fp), "17831459094038722629");
  auto parsed = ParseFingerprint("d:17831459094038722629");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, fp);
}

TEST(FingerprintTest, RejectsMalformedText) {
  for (const char* bad : {"", "xyz", "0123456789abcdeg", "d:", "d:18446744073709551616", "0x12"}) {
    auto parsed = ParseFingerprint(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(FingerprintTest, HammingDistance) {
  EXPECT_EQ(HammingDistance(Fingerprint::From64(0), Fingerprint::From64(~0ULL)), 64);
  EXPECT_EQ(HammingDistance(Fingerprint::From64(0b1011), Fingerprint::From64(0b0001)), 2);
  EXPECT_EQ(HammingDistance(Fingerprint::From128(1, 0), Fingerprint::From128(0, 1)), 2);
}

}  // namespace
}  // namespace neardup
