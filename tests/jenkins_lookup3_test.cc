// Tests of the Jenkins lookup3 hashlittle2 against the test vectors printed by lookup3.c's driver5.
#include "fingerprint/jenkins_lookup3.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace neardup {
namespace {

struct Hash2 {
  uint32_t c;
  uint32_t b;
};

Hash2 HashLittle2(std::string_view bytes, uint32_t c, uint32_t b) {
  JenkinsHashLittle2(bytes, &c, &b);
  return {c, b};
}

TEST(JenkinsLookup3Test, EmptyInputMatchesLookup3Driver) {
  Hash2 h = HashLittle2("", 0, 0);
  EXPECT_EQ(h.c, 0xdeadbeefu);
  EXPECT_EQ(h.b, 0xdeadbeefu);
  h = HashLittle2("", 0, 0xdeadbeef);
  EXPECT_EQ(h.c, 0xbd5b7ddeu);
  EXPECT_EQ(h.b, 0xdeadbeefu);
  h = HashLittle2("", 0xdeadbeef, 0xdeadbeef);
  EXPECT_EQ(h.c, 0x9c093ccdu);
  EXPECT_EQ(h.b, 0xbd5b7ddeu);
}

TEST(JenkinsLookup3Test, FourScoreMatchesLookup3Driver) {
  const std::string text = "Four score and seven years ago";
  Hash2 h = HashLittle2(text, 0, 0);
  EXPECT_EQ(h.c, 0x17770551u);
  EXPECT_EQ(h.b, 0xce7226e6u);
  h = HashLittle2(text, 0, 1);
  EXPECT_EQ(h.c, 0xe3607caeu);
  EXPECT_EQ(h.b, 0xbd371de4u);
  h = HashLittle2(text, 1, 0);
  EXPECT_EQ(h.c, 0xcd628161u);
  EXPECT_EQ(h.b, 0x6cbea4b3u);
}

TEST(JenkinsLookup3Test, Hash64PacksCHighAndBLow) {
  EXPECT_EQ(JenkinsLookup3Hash64(""), 0xdeadbeefdeadbeefull);
  EXPECT_EQ(JenkinsLookup3Hash64("Four score and seven years ago"), 0x17770551ce7226e6ull);
}

TEST(JenkinsLookup3Test, IndependentOfAlignmentAndSensitiveToEveryByte) {
  const std::string text = "The quick brown fox jumps over the lazy dog, 敏捷的棕色狐狸";
  const uint64_t expected = JenkinsLookup3Hash64(text);
  for (size_t shift = 1; shift < 8; ++shift) {
    std::string buffer(shift, 'x');
    buffer += text;
    EXPECT_EQ(JenkinsLookup3Hash64(std::string_view(buffer).substr(shift)), expected);
  }
  // Every length 0..40 (all tail lengths and the 12-byte boundary) gives distinct values, and
  // flipping any one byte changes the hash.
  std::string bytes;
  std::vector<uint64_t> seen;
  for (int n = 0; n <= 40; ++n) {
    const uint64_t h = JenkinsLookup3Hash64(bytes);
    for (uint64_t other : seen) EXPECT_NE(h, other) << "length " << n;
    seen.push_back(h);
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::string flipped = bytes;
      flipped[i] ^= 1;
      EXPECT_NE(JenkinsLookup3Hash64(flipped), h) << "length " << n << " byte " << i;
    }
    bytes.push_back(static_cast<char>('a' + n % 26));
  }
}

}  // namespace
}  // namespace neardup
