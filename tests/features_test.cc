// Tests of feature extraction: tokenizers on zh/en/ja/th/ru/mixed text, shingles, character
// n-grams, weighting, top-K, IDF tables and the IDF learner.
#include "neardup/features.h"
#include "neardup/jieba.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace neardup {
namespace {

std::unique_ptr<FeatureExtractor> Make(FeatureOptions options) {
  auto extractor = FeatureExtractor::Create(options);
  EXPECT_TRUE(extractor.ok()) << extractor.status().ToString();
  return extractor.ok() ? std::move(*extractor) : nullptr;
}

std::vector<std::string> Tokens(Tokenizer tokenizer, std::string_view text) {
  FeatureOptions options;
  options.tokenizer = tokenizer;
  auto extractor = Make(options);
  std::vector<std::string> tokens;
  EXPECT_TRUE(extractor->Tokenize(text, &tokens).ok());
  return tokens;
}

bool Contains(const std::vector<std::string>& tokens, const std::string& token) {
  return std::find(tokens.begin(), tokens.end(), token) != tokens.end();
}

TEST(FeaturesTest, ChineseUsesJieba) {
  auto tokens = Tokens(Tokenizer::kAuto, "我来到北京清华大学");
  EXPECT_EQ(tokens, (std::vector<std::string>{"我", "来到", "北京", "清华大学"}));
}

TEST(FeaturesTest, EnglishUsesIcuWords) {
  auto tokens = Tokens(Tokenizer::kAuto, "Hello, world! It's 2024 -- isn't it?");
  EXPECT_EQ(tokens, (std::vector<std::string>{"Hello", "world", "It's", "2024", "isn't", "it"}));
}

TEST(FeaturesTest, RussianUsesIcuWords) {
  auto tokens = Tokens(Tokenizer::kAuto, "Привет, мир! Это тест.");
  EXPECT_EQ(tokens, (std::vector<std::string>{"Привет", "мир", "Это", "тест"}));
}

TEST(FeaturesTest, JapaneseUsesIcuDictionary) {
  auto tokens = Tokens(Tokenizer::kAuto, "東京に行きました。日本語のテキスト");
  EXPECT_TRUE(Contains(tokens, "東京")) << ::testing::PrintToString(tokens);
  EXPECT_TRUE(Contains(tokens, "テキスト"));
  EXPECT_GE(tokens.size(), 5u);
}

TEST(FeaturesTest, ThaiUsesIcuDictionary) {
  // Thai has no spaces between words; ICU's dictionary splits them.
  auto tokens = Tokens(Tokenizer::kAuto, "ภาษาไทยง่ายนิดเดียว");
  EXPECT_GE(tokens.size(), 3u) << ::testing::PrintToString(tokens);
  EXPECT_TRUE(Contains(tokens, "ภาษา"));
}

TEST(FeaturesTest, MixedChineseEnglish) {
  auto tokens = Tokens(Tokenizer::kAuto, "我们使用 Python 和 SimHash 算法去重");
  EXPECT_TRUE(Contains(tokens, "Python")) << ::testing::PrintToString(tokens);
  EXPECT_TRUE(Contains(tokens, "SimHash"));
  EXPECT_TRUE(Contains(tokens, "算法"));
  EXPECT_FALSE(Contains(tokens, " "));  // whitespace and punctuation are dropped
}

TEST(FeaturesTest, CharNgrams) {
  FeatureOptions options;
  options.tokenizer = Tokenizer::kCharNgram;
  options.char_ngram_size = 3;
  auto extractor = Make(options);
  std::vector<std::string> tokens;
  ASSERT_TRUE(extractor->Tokenize("ab, c中d", &tokens).ok());
  EXPECT_EQ(tokens, (std::vector<std::string>{"abc", "bc中", "c中d"}));
  // Shorter than n: one gram of everything.
  ASSERT_TRUE(extractor->Tokenize("x!", &tokens).ok());
  EXPECT_EQ(tokens, (std::vector<std::string>{"x"}));
}

TEST(FeaturesTest, ShinglesAndTermFrequency) {
  FeatureOptions options;
  options.tokenizer = Tokenizer::kIcuWord;
  options.shingle_size = 2;
  options.sublinear_tf = false;
  options.weighting = Weighting::kTermFrequency;
  auto extractor = Make(options);
  std::vector<WeightedFeature> features;
  ASSERT_TRUE(extractor->Extract("a b a b c", &features).ok());
  std::vector<WeightedFeature> expected = {{"a b", 2}, {"b a", 1}, {"b c", 1}};
  EXPECT_EQ(features, expected);
  // Fewer words than the shingle size: one shingle of all words.
  ASSERT_TRUE(extractor->Extract("alone", &features).ok());
  EXPECT_EQ(features, (std::vector<WeightedFeature>{{"alone", 1}}));
  ASSERT_TRUE(extractor->Extract("... !!!", &features).ok());
  EXPECT_TRUE(features.empty());
}

TEST(FeaturesTest, SublinearAndUniformWeights) {
  FeatureOptions options;
  options.tokenizer = Tokenizer::kIcuWord;
  options.shingle_size = 1;
  options.sublinear_tf = true;
  auto extractor = Make(options);
  std::vector<WeightedFeature> features;
  ASSERT_TRUE(extractor->Extract("x x x x y", &features).ok());
  ASSERT_EQ(features.size(), 2u);
  EXPECT_EQ(features[0].text, "x");
  EXPECT_DOUBLE_EQ(features[0].weight, 1 + std::log(4.0));
  EXPECT_DOUBLE_EQ(features[1].weight, 1.0);
  options.weighting = Weighting::kUniform;
  extractor = Make(options);
  ASSERT_TRUE(extractor->Extract("x x x x y", &features).ok());
  EXPECT_EQ(features, (std::vector<WeightedFeature>{{"x", 1}, {"y", 1}}));
}

TEST(FeaturesTest, TfIdfWithJiebaTableAndTopK) {
  FeatureOptions options;
  options.tokenizer = Tokenizer::kJieba;
  options.shingle_size = 1;
  options.weighting = Weighting::kTfIdf;
  options.sublinear_tf = false;
  options.drop_single_char_words = true;
  options.top_k = 2;
  auto extractor = Make(options);
  std::vector<WeightedFeature> features;
  ASSERT_TRUE(extractor->Extract("我来到北京清华大学", &features).ok());
  ASSERT_EQ(features.size(), 2u);
  EXPECT_EQ(features[0].text, "清华大学");
  EXPECT_NEAR(features[0].weight, 8.08059472162, 1e-9);  // idf.txt value, tf 1
  EXPECT_EQ(features[1].text, "来到");
  // An unknown word gets the median IDF.
  EXPECT_DOUBLE_EQ(extractor->Idf("完全不存在的词语xyz"), extractor->Idf("另一个不存在的词qqq"));
}

TEST(FeaturesTest, StopWordsAndSingleCharacters) {
  FeatureOptions options;
  options.tokenizer = Tokenizer::kJieba;
  options.shingle_size = 1;
  options.drop_stop_words = true;
  options.drop_single_char_words = true;
  auto extractor = Make(options);
  std::vector<std::string> tokens;
  ASSERT_TRUE(extractor->Tokenize("the cat is on 我们 桌子", &tokens).ok());
  EXPECT_EQ(tokens, (std::vector<std::string>{"cat", "我们", "桌子"}));
}

TEST(FeaturesTest, RejectsBadOptions) {
  FeatureOptions options;
  options.shingle_size = 0;
  EXPECT_EQ(FeatureExtractor::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.shingle_size = 1;
  options.char_ngram_size = 0;
  EXPECT_EQ(FeatureExtractor::Create(options).status().code(), StatusCode::kInvalidArgument);
}

TEST(FeaturesTest, CustomIdfTableAndErrors) {
  std::string path = ::testing::TempDir() + "/features_test_idf.txt";
  {
    std::ofstream out(path);
    out << "alpha 5.0\nbeta 1.0\ngamma 3.0\n";
  }
  FeatureOptions options;
  options.tokenizer = Tokenizer::kIcuWord;
  options.shingle_size = 1;
  options.weighting = Weighting::kTfIdf;
  options.sublinear_tf = false;
  options.idf_path = path;
  auto extractor = Make(options);
  EXPECT_DOUBLE_EQ(extractor->Idf("alpha"), 5.0);
  EXPECT_DOUBLE_EQ(extractor->Idf("unknown"), 3.0);  // median
  std::vector<WeightedFeature> features;
  ASSERT_TRUE(extractor->Extract("beta alpha beta", &features).ok());
  EXPECT_EQ(features, (std::vector<WeightedFeature>{{"alpha", 5}, {"beta", 2}}));

  {
    std::ofstream out(path);
    out << "alpha 5.0\nbeta one\n";
  }
  auto bad = FeatureExtractor::Create(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_NE(bad.status().message().find(path + ":2"), std::string::npos) << bad.status().message();
  options.idf_path = "/nonexistent/idf.txt";
  EXPECT_EQ(FeatureExtractor::Create(options).status().code(), StatusCode::kNotFound);
  std::remove(path.c_str());
}

TEST(FeaturesTest, OneIdfParserForBothReaders) {
  // Blank lines, CRLF, a tab separator, a repeated word (the last value wins): IdfTable and
  // jieba's KeywordExtractor read the file through the same parser and agree.
  std::string path = ::testing::TempDir() + "/features_test_idf_lenient.txt";
  std::ofstream(path, std::ios::binary) << "\xE8\x9E\x83\xE8\x9F\xB9 9.5\r\n\nfoo\t2.5\n"
                                           "foo 3.5\n  bar 1.25  \n";
  FeatureOptions options;
  options.weighting = Weighting::kTfIdf;
  options.idf_path = path;
  auto extractor = FeatureExtractor::Create(options);
  ASSERT_TRUE(extractor.ok()) << extractor.status().ToString();
  EXPECT_EQ((*extractor)->Idf("foo"), 3.5);
  EXPECT_EQ((*extractor)->Idf("bar"), 1.25);
  JiebaOptions jieba;
  jieba.idf_path = path;
  auto keywords = KeywordExtractor::Create(*JiebaSegmenter::Default(), jieba);
  ASSERT_TRUE(keywords.ok()) << keywords.status().ToString();
  EXPECT_EQ((*keywords)->Idf("foo"), 3.5);
  EXPECT_EQ((*keywords)->Idf("bar"), 1.25);
  EXPECT_EQ((*keywords)->Idf("\xE8\x9E\x83\xE8\x9F\xB9"), 9.5);
  std::ofstream(path, std::ios::binary) << "ok 1.0\nbroken\n";
  auto bad = KeywordExtractor::Create(*JiebaSegmenter::Default(), jieba);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ":2:"), std::string::npos)
      << bad.status().ToString();
  std::remove(path.c_str());
}

TEST(FeaturesTest, IdfTableBuilder) {
  IdfTableBuilder builder;
  builder.AddDocument({"a", "b", "a"});
  IdfTableBuilder other;
  other.AddDocument({"a", "c"});
  other.AddDocument({"a"});
  other.AddDocument({"d"});
  builder.Merge(other);
  EXPECT_EQ(builder.document_count(), 4u);
  std::string text = builder.ToText(1);
  char expected[256];
  std::snprintf(expected, sizeof(expected), "a %.8f\nb %.8f\nc %.8f\nd %.8f\n", std::log(4.0 / 3),
                std::log(4.0), std::log(4.0), std::log(4.0));
  EXPECT_EQ(text, expected);
  EXPECT_EQ(builder.ToText(2), builder.ToText(3));  // only "a" has df >= 2 ... and >= 3
  EXPECT_EQ(builder.ToText(4), "");
}

}  // namespace
}  // namespace neardup
