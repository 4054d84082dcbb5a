// Tests of the yanyiwu/simhash compatibility profile: the values that library publishes.
#include <gtest/gtest.h>

#include "neardup/fingerprinter.h"

namespace neardup {
namespace {

uint64_t Compat(std::string_view text, size_t top_k) {
  auto fingerprinter = Fingerprinter::Create(YanyiwuSimhashOptions(top_k));
  EXPECT_TRUE(fingerprinter.ok()) << fingerprinter.status().ToString();
  auto fp = (*fingerprinter)->Compute(text);
  EXPECT_TRUE(fp.ok()) << fp.status().ToString();
  return fp->lo;
}

TEST(CompatProfileTest, PublishedValues) {
  EXPECT_EQ(Compat("我是蓝翔技工拖拉机学院手扶拖拉机专业的。不用多久，我就会升职加薪，当上总经理，"
                   "出任CEO，走上人生巅峰。",
                   5),
            17831459094038722629ULL);
  EXPECT_EQ(Compat("我来到北京清华大学", 5), 18353917987193416477ULL);
  EXPECT_EQ(Compat("你好世界", 3), 17676873585679812141ULL);
}

TEST(CompatProfileTest, KeywordsAreRawCountTimesIdf) {
  auto fingerprinter = Fingerprinter::Create(YanyiwuSimhashOptions(5));
  ASSERT_TRUE(fingerprinter.ok());
  auto features = (*fingerprinter)->Features("我来到北京清华大学");
  ASSERT_TRUE(features.ok());
  ASSERT_EQ(features->size(), 3u);  // "我" is a single character: dropped
  EXPECT_EQ((*features)[0].text, "清华大学");
  EXPECT_NEAR((*features)[0].weight, 8.08059472162, 1e-9);
  EXPECT_EQ((*features)[1].text, "来到");
  EXPECT_EQ((*features)[2].text, "北京");
  // Twice the text: counts double, weights double, the fingerprint stays.
  auto twice = (*fingerprinter)->Features("我来到北京清华大学我来到北京清华大学");
  ASSERT_TRUE(twice.ok());
  EXPECT_NEAR((*twice)[0].weight, 2 * 8.08059472162, 1e-9);
}

TEST(CompatProfileTest, RejectsInvalidUtf8And128Bits) {
  auto fingerprinter = Fingerprinter::Create(YanyiwuSimhashOptions(5));
  ASSERT_TRUE(fingerprinter.ok());
  EXPECT_EQ((*fingerprinter)->Compute("\xe4\xb8").status().code(), StatusCode::kInvalidUtf8);
  FingerprintOptions options = YanyiwuSimhashOptions(5);
  options.bits = 128;
  EXPECT_EQ(Fingerprinter::Create(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace neardup
