// Edge cases of the Chinese fast path against the reference path: the one-pass Traditional ->
// Simplified check of the normaliser (pieces, NUL, ASCII runs, supplementary characters, text
// that changes or only may change) and the jieba cut that drops the tokens without content itself.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "features/jieba_internal.h"
#include "features/word_splitter.h"
#include "neardup/features.h"
#include "neardup/text.h"

namespace neardup {
namespace {

// Texts around the T2S pieces: cut characters (ASCII, punctuation, kana), Traditional characters
// and phrases, Simplified characters that OpenCC may look at but leaves alone, NUL bytes,
// supplementary characters (U+29028 is a TSCharacters key, U+20000 is in no key), and a change at
// either end of the text or of a long ASCII run.
std::vector<std::string> EdgeTexts() {
  std::vector<std::string> texts = {
      "",
      "plain ascii only",
      "\xE8\xBF\x99\xE6\x98\xAF\xE7\xAE\x80\xE4\xBD\x93\xE4\xB8\xAD\xE6\x96\x87\xE3\x80\x82",
      "abc \xE8\x87\xBA\xE7\x81\xA3 def",
      "\xE8\x87\xBA\xE7\x81\xA3",
      "\xE8\x87\xBA",
      "x\xE8\x87\xBA",
      "\xE8\x87\xBAx",
      std::string("\xE8\x87\xBA\0\xE7\x81\xA3", 7),
      std::string("abc\0def\0\xE8\x87\xBA\xE7\x81\xA3\0", 16),
      "\xF0\xA9\x80\xA8",
      "\xE4\xB8\xAD\xF0\xA9\x80\xA8\xE6\x96\x87",
      "\xF0\xA0\x80\x80\xE8\x87\xBA",
      "\xE8\x87\xBA\xE7\x81\xA3\xEF\xBC\x8C\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x82\xBF\xE3\x83\xAF\xE3\x83"
      "\xBC\xE3\x80\x82",
      "\xE5\x90\x8E\xE6\x9D\xA5\xE4\xBB\x96\xE5\xB9\xB2\xE4\xBA\x86\xE4\xB8\x80\xE4\xBB\xB6\xE4\xBA"
      "\x8B",
      "\xE8\xAE\x8A\xE5\xBE\xB5 \xE5\x8F\x98\xE5\xBE\xB5",
      "\xC3\xA9t\xC3\xA9 \xE9\x9B\xBB\xE8\x85\xA6",
  };
  std::string long_ascii(100, 'a');
  texts.push_back(long_ascii + "\xE8\x87\xBA" + long_ascii);
  texts.push_back(long_ascii + "\xE8\xBF\x99" + long_ascii + "\xE7\x81\xA3");
  std::string mixed;
  for (int i = 0; i < 50; ++i) {
    mixed += i % 3 == 0 ? "\xE8\x87\xBA" : i % 3 == 1 ? "\xE5\x8F\xB0 " : "ab\xE3\x80\x82";
  }
  texts.push_back(mixed);
  return texts;
}

TEST(ZhFastPathTest, TraditionalToSimplifiedMatchesTheReferencePath) {
  NormalizeOptions fast_options;
  NormalizeOptions reference_options;
  reference_options.fast_paths = false;
  auto fast = TextNormalizer::Create(fast_options);
  auto reference = TextNormalizer::Create(reference_options);
  ASSERT_TRUE(fast.ok() && reference.ok());
  int changed = 0;
  for (const std::string& text : EdgeTexts()) {
    std::string a, b;
    ASSERT_TRUE((*fast)->Normalize(text, &a).ok());
    ASSERT_TRUE((*reference)->Normalize(text, &b).ok());
    EXPECT_EQ(a, b) << "text: " << text;
    changed += text.find("\xE8\x87\xBA") != std::string::npos &&
               a.find("\xE8\x87\xBA") == std::string::npos;
  }
  EXPECT_GT(changed, 5);  // U+81FA (Traditional) became U+53F0 in most of them
  // The supplementary Traditional character is converted (U+29028 -> U+2B55A).
  std::string out;
  ASSERT_TRUE((*fast)->Normalize("\xF0\xA9\x80\xA8", &out).ok());
  EXPECT_EQ(out, "\xF0\xAB\x95\x9A");
}

TEST(ZhFastPathTest, TraditionalToSimplifiedWithInvalidUtf8Replaced) {
  NormalizeOptions fast_options;
  fast_options.replace_invalid_utf8 = true;
  NormalizeOptions reference_options = fast_options;
  reference_options.fast_paths = false;
  auto fast = TextNormalizer::Create(fast_options);
  auto reference = TextNormalizer::Create(reference_options);
  ASSERT_TRUE(fast.ok() && reference.ok());
  for (const std::string& text :
       {std::string("\xE8\x87\xBA\xFF\xE7\x81\xA3"), std::string("\xE8\x87\xE7\x81\xA3"),
        std::string("\x80\xE8\x87\xBA\xC3")}) {
    std::string a, b;
    ASSERT_TRUE((*fast)->Normalize(text, &a).ok());
    ASSERT_TRUE((*reference)->Normalize(text, &b).ok());
    EXPECT_EQ(a, b);
  }
}

// Every character of jieba's Han range is a letter: a block token with one holds content.
TEST(ZhFastPathTest, JiebaHanRangeIsAllLetters) {
  for (char32_t cp = jieba::kHanFirst; cp <= jieba::kHanLast; ++cp) {
    ASSERT_TRUE(IsLetterMarkOrNumber(cp)) << static_cast<uint32_t>(cp);
  }
}

// Tokens of the jieba cut with the content filter built in against the cut followed by the filter,
// on texts of block characters that are not content (+#&._%-), punctuation, spaces, "\r\n",
// letters outside blocks (kana, Latin with accents, Hangul), marks, invalid bytes, with and without
// the HMM and with the other filters on.
TEST(ZhFastPathTest, JiebaContentCutMatchesTheReferenceFilter) {
  const std::vector<std::string> texts = {
      "",
      "c++ \xE5\x92\x8C c# \xE8\xBF\x98\xE6\x9C\x89 ... --- %%% _ & + # "
      "\xE4\xB8\xAD\xE6\x96\x87",
      "\xE6\x88\x91\xE4\xBB\xAC\xE5\x9C\xA8\xE5\x8C\x97\xE4\xBA\xAC\xE3\x80\x82\r\n\r\n"
      "\xE4\xBB\x96\xE6\x9D\xA5\xE5\x88\xB0\xE4\xBA\x86\xE7\xBD\x91\xE6\x98\x93\xE6\x9D\xAD\xE7"
      "\xA0\x94\xE5\xA4\xA7\xE5\x8E\xA6",
      "\xE3\x81\x82\xE3\x81\x84 caf\xC3\xA9 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 "
      "e\xCC\x81 \xE2\x80\x94 \xE2\x91\xA0 \xEF\xBC\x91",
      "a\xFF"
      "b \xE4\xB8\xAD\xE8\xB8 \xC3 \xE6\x96\x87",
      "3.14% 1.5 v2.0 foo_bar-baz \xE7\x89\x88\xE6\x9C\xAC 1.2.3",
      "\xF0\xA0\x80\x80\xE4\xB8\xAD \xF0\x9F\x98\x80 \xE6\x96\x87",
  };
  for (bool hmm : {true, false}) {
    for (bool other_filters : {false, true}) {
      FeatureOptions fast;
      fast.tokenizer = Tokenizer::kJieba;
      fast.jieba_hmm = hmm;
      fast.drop_single_char_words = other_filters;
      fast.drop_stop_words = other_filters;
      FeatureOptions reference = fast;
      reference.fast_paths = false;
      auto a = FeatureExtractor::Create(fast);
      auto b = FeatureExtractor::Create(reference);
      ASSERT_TRUE(a.ok() && b.ok());
      for (const std::string& text : texts) {
        std::vector<std::string> ta, tb;
        ASSERT_TRUE((*a)->Tokenize(text, &ta).ok());
        ASSERT_TRUE((*b)->Tokenize(text, &tb).ok());
        EXPECT_EQ(ta, tb) << "hmm " << hmm << " filters " << other_filters << " text: " << text;
      }
    }
  }
}

}  // namespace
}  // namespace neardup
