// Unit tests of the jieba-exact segmenter and keyword extractor: known outputs of Python jieba
// 0.42.1, user words, data loading errors, and robustness on arbitrary bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "features/jieba_internal.h"
#include "neardup/jieba.h"

namespace neardup {
namespace {

using Tokens = std::vector<std::string>;

const JiebaSegmenter& Segmenter() {
  static auto segmenter = JiebaSegmenter::Default();
  EXPECT_TRUE(segmenter.ok()) << segmenter.status().ToString();
  return **segmenter;
}

const KeywordExtractor& Extractor() {
  static auto extractor = KeywordExtractor::Default();
  EXPECT_TRUE(extractor.ok()) << extractor.status().ToString();
  return **extractor;
}

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

// Expected values below were printed by Python jieba 0.42.1 (Debian python3-jieba).
TEST(JiebaSegmenterTest, DictionaryMatchesPythonTotals) {
  EXPECT_EQ(Segmenter().total_frequency(), 60101967);
  EXPECT_EQ(Segmenter().dictionary_size(), 498113u);  // len(jieba.dt.FREQ)
  EXPECT_EQ(Segmenter().Frequency("清华大学"), 922);
  EXPECT_EQ(Segmenter().Frequency("清华大"), 0);  // a prefix only
  EXPECT_EQ(Segmenter().Frequency("不存在的词语"), std::nullopt);
}

TEST(JiebaSegmenterTest, CutsLikePythonJieba) {
  EXPECT_EQ(Segmenter().LCut("我来到北京清华大学"), (Tokens{"我", "来到", "北京", "清华大学"}));
  EXPECT_EQ(Segmenter().LCut("他来到了网易杭研大厦"),
            (Tokens{"他", "来到", "了", "网易", "杭研", "大厦"}));
  EXPECT_EQ(Segmenter().LCut("他来到了网易杭研大厦", /*hmm=*/false),
            (Tokens{"他", "来到", "了", "网易", "杭", "研", "大厦"}));
  EXPECT_EQ(Segmenter().LCut("小明硕士毕业于中国科学院计算所，后在日本京都大学深造"),
            (Tokens{"小明", "硕士", "毕业", "于", "中国科学院", "计算所", "，", "后", "在",
                    "日本京都大学", "深造"}));
  const std::string mixed =
      "C++和Python3.6.1是编程语言, 比例12.5%\r\n下一行 URL: https://example.com/a_b-c";
  EXPECT_EQ(Segmenter().LCut(mixed),
            (Tokens{"C++", "和",   "Python3.6", ".",    "1",  "是",   "编程语言", ",",
                    " ",   "比例", "12.5%",     "\r\n", "下", "一行", " ",        "URL",
                    ":",   " ",    "https",     ":",    "/",  "/",    "example",  ".",
                    "com", "/",    "a",         "_",    "b",  "-",    "c"}));
  EXPECT_EQ(Segmenter().LCut(mixed, /*hmm=*/false),
            (Tokens{"C++",     "和", "Python3", ".",  "6", ".",     "1", "是",   "编程语言",
                    ",",       " ",  "比例",    "12", ".", "5",     "%", "\r\n", "下",
                    "一行",    " ",  "URL",     ":",  " ", "https", ":", "/",    "/",
                    "example", ".",  "com",     "/",  "a", "_",     "b", "-",    "c"}));
  EXPECT_TRUE(Segmenter().LCut("").empty());
}

TEST(JiebaSegmenterTest, TokensAreViewsThatRebuildTheText) {
  const std::string text = "中文分词test 测试\r\n\xF0\x9F\x98\x80 emoji：全角ＡＢＣ１２３。";
  std::vector<std::string_view> tokens;
  Segmenter().Cut(text, &tokens);
  std::string joined;
  for (std::string_view token : tokens) {
    EXPECT_GE(token.data(), text.data());
    EXPECT_LE(token.data() + token.size(), text.data() + text.size());
    joined.append(token);
  }
  EXPECT_EQ(joined, text);
}

TEST(JiebaSegmenterTest, NeverCrashesOnArbitraryBytes) {
  std::mt19937 random(42);
  for (int round = 0; round < 300; ++round) {
    std::string bytes(random() % 64, '\0');
    for (char& c : bytes) {
      // Bias towards UTF-8 lead bytes of the Han range and ASCII block characters.
      const uint32_t r = random();
      c = static_cast<char>(r % 3 == 0 ? 0xE4 + r % 6 : r);
    }
    std::vector<std::string_view> tokens;
    Segmenter().Cut(bytes, &tokens, round % 2 == 0);
    size_t total = 0;
    for (std::string_view token : tokens) total += token.size();
    EXPECT_EQ(total, bytes.size());
    Extractor().ExtractTags(bytes, 5);
  }
}

TEST(JiebaSegmenterTest, SafeToShareBetweenThreads) {
  const std::string text = "小明硕士毕业于中国科学院计算所，后在日本京都大学深造";
  const Tokens expected = Segmenter().LCut(text);
  const auto expected_tags = Extractor().ExtractTags(text, 5);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (Segmenter().LCut(text) != expected) ++mismatches[t];
        if (Extractor().ExtractTags(text, 5) != expected_tags) ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(JiebaKeywordTest, ExtractTagsLikePythonJieba) {
  auto tags = Extractor().ExtractTags("小明硕士毕业于中国科学院计算所，后在日本京都大学深造", 5);
  ASSERT_EQ(tags.size(), 5u);
  const std::vector<std::pair<std::string, double>> expected = {
      {"日本京都大学", 1.8867900673428573},
      {"计算所", 1.6719218678},
      {"小明", 1.589726989957143},
      {"深造", 1.2983561852285714},
      {"硕士", 1.2671771043685713}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(tags[i].word, expected[i].first);
    EXPECT_DOUBLE_EQ(tags[i].weight, expected[i].second);
  }
  // Equal weights keep the order of first occurrence; stop words and 1-character words go.
  tags = Extractor().ExtractTags("C++和Python3.6.1是编程语言, 比例12.5% The URL is https", 0);
  ASSERT_GE(tags.size(), 4u);
  EXPECT_EQ(tags[0].word, "C++");
  EXPECT_EQ(tags[1].word, "Python3.6");
  EXPECT_EQ(tags[2].word, "12.5%");
  EXPECT_EQ(tags[3].word, "URL");
  for (const Keyword& k : tags) {
    EXPECT_NE(k.word, "The");
    EXPECT_NE(k.word, "is");
  }
  EXPECT_TRUE(Extractor().ExtractTags("", 20).empty());
}

TEST(JiebaKeywordTest, RawWeightsAndIdfTable) {
  EXPECT_EQ(Extractor().idf_size(), 270132u);
  EXPECT_DOUBLE_EQ(Extractor().median_idf(), 11.9547675029);
  EXPECT_DOUBLE_EQ(Extractor().Idf("劳动防护"), 13.900677652);
  EXPECT_TRUE(Extractor().HasIdf("劳动防护"));
  EXPECT_FALSE(Extractor().HasIdf("杭研"));
  EXPECT_DOUBLE_EQ(Extractor().Idf("杭研"), Extractor().median_idf());
  const std::string text = "北京北京北京上海";
  auto raw = Extractor().ExtractTagsRaw(text, 0);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0].word, "北京");
  EXPECT_DOUBLE_EQ(raw[0].weight, 3 * Extractor().Idf("北京"));
  EXPECT_DOUBLE_EQ(raw[1].weight, 1 * Extractor().Idf("上海"));
  std::vector<TermCount> terms;
  Extractor().CountTerms(text, &terms);
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0].word, "北京");
  EXPECT_EQ(terms[0].count, 3);
}

TEST(JiebaKeywordTest, CustomIdfTableOfDictionaryAndOtherWords) {
  JiebaOptions options;
  // 北京 and 上海 are dictionary words, 杭研 is not; a repeated word takes its last value.
  options.idf_path =
      WriteTempFile("jieba_custom_idf.txt", "北京 1.0\n杭研 7.5\n上海 3.0\n北京 5.0\n");
  auto extractor = KeywordExtractor::Create(*JiebaSegmenter::Default(), options);
  ASSERT_TRUE(extractor.ok()) << extractor.status().ToString();
  const KeywordExtractor& custom = **extractor;
  EXPECT_EQ(custom.idf_size(), 3u);
  EXPECT_EQ(custom.median_idf(), 5.0);  // sorted([5.0, 7.5, 3.0])[1]
  EXPECT_EQ(custom.Idf("北京"), 5.0);
  EXPECT_EQ(custom.Idf("杭研"), 7.5);
  EXPECT_EQ(custom.Idf("广州"), 5.0);
  EXPECT_TRUE(custom.HasIdf("杭研"));
  EXPECT_TRUE(custom.HasIdf("上海"));
  EXPECT_FALSE(custom.HasIdf("广州"));
  EXPECT_FALSE(custom.HasIdf("不存在的词语"));
  auto raw = custom.ExtractTagsRaw("上海上海北京", 0);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0], (Keyword{"上海", 6.0}));
  EXPECT_EQ(raw[1], (Keyword{"北京", 5.0}));
}

TEST(JiebaKeywordTest, IdfTableWithManyDistinctValues) {
  // More than 65,535 distinct values for dictionary words takes the per-node double path.
  std::ifstream dict(DefaultJiebaDirectory() + "/dict.txt");
  std::string line;
  std::string idf_text;
  std::vector<std::string> words;
  while (words.size() < 70000 && std::getline(dict, line)) {
    words.push_back(line.substr(0, line.find(' ')));
    idf_text += words.back() + " " + std::to_string(words.size()) + ".25\n";
  }
  ASSERT_EQ(words.size(), 70000u);
  JiebaOptions options;
  options.idf_path = WriteTempFile("jieba_many_idf.txt", idf_text);
  auto extractor = KeywordExtractor::Create(*JiebaSegmenter::Default(), options);
  ASSERT_TRUE(extractor.ok()) << extractor.status().ToString();
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < words.size(); i += 997) {
    if (!seen.insert(words[i]).second) continue;  // dict.txt may repeat a word
    EXPECT_TRUE((*extractor)->HasIdf(words[i])) << words[i];
  }
  EXPECT_EQ((*extractor)->Idf(words[69999]), 70000.25);
  EXPECT_FALSE((*extractor)->HasIdf("不存在的词语"));
}

TEST(JiebaUserDictTest, AddWordWithAndWithoutFrequency) {
  JiebaOptions options;
  options.user_dict_paths.push_back(
      WriteTempFile("jieba_user_dict.txt", "\xEF\xBB\xBF杭研大厦 5 nt\n\n  网易杭研\n来到了 0\n"));
  options.user_words.push_back({"研大", 100000});
  auto segmenter = JiebaSegmenter::Create(options);
  ASSERT_TRUE(segmenter.ok()) << segmenter.status().ToString();
  const JiebaSegmenter& custom = **segmenter;
  EXPECT_EQ(custom.Frequency("杭研大厦"), 5);
  EXPECT_EQ(custom.Frequency("来到了"), 0);
  EXPECT_EQ(custom.Frequency("研大"), 100000);
  // suggest_freq("网易杭研") and the totals as Python computes them (load_userdict, add_word).
  EXPECT_EQ(custom.Frequency("网易杭研"), 1);
  EXPECT_EQ(custom.total_frequency(), 60201973);
  EXPECT_EQ(custom.LCut("他来到了网易杭研大厦"), (Tokens{"他", "来到", "了", "网易", "杭研大厦"}));
  EXPECT_EQ(custom.LCut("他来到了网易杭研大厦", false),
            (Tokens{"他", "来到", "了", "网易", "杭研大厦"}));
}

// The double-array trie: every word of the default dictionary is found with its frequency (the
// last line wins, as in Python's dict), every proper prefix of a word is a node (FREQ 0 unless a
// word itself), and nothing else is.
TEST(JiebaTrieTest, EveryDictionaryWordAndPrefix) {
  std::ifstream in(JiebaOptionsForDirectory("").dict_path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "jieba's dict.txt (python3-jieba) is needed";
  std::unordered_map<std::string, int64_t> freq;
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    freq[line.substr(0, space)] = std::stoll(line.substr(space + 1));
  }
  ASSERT_GT(freq.size(), 300000u);
  size_t checked_prefixes = 0;
  for (const auto& [word, f] : freq) {
    ASSERT_EQ(Segmenter().Frequency(word), f) << word;
    bool three_byte = word.size() % 3 == 0;  // Han words: prefixes at every third byte
    for (size_t i = 0; i < word.size() && three_byte; i += 3) {
      three_byte = (static_cast<unsigned char>(word[i]) & 0xF0) == 0xE0;
    }
    for (size_t end = 3; three_byte && end < word.size(); end += 3) {
      const std::string prefix = word.substr(0, end);
      if (freq.count(prefix) != 0) continue;  // a word itself: checked above
      ASSERT_EQ(Segmenter().Frequency(prefix), 0) << prefix;
      ++checked_prefixes;
    }
  }
  EXPECT_GT(checked_prefixes, 10000u);
  EXPECT_EQ(Segmenter().Frequency("清华大学不存在"), std::nullopt);
  EXPECT_EQ(Segmenter().Frequency("\U00020000"), std::nullopt);
  EXPECT_EQ(Segmenter().Frequency("x"), std::nullopt);
}

TEST(JiebaTrieTest, SupplementaryPlaneAndAsciiWords) {
  JiebaOptions options;
  options.dict_path = WriteTempFile("jieba_small_dict.txt",
                                    "\U00020000\U00020001 7 n\n\U00020000 3 n\nab 5 x\nabc 9 x\n"
                                    "\u4E2D\u6587 11 n\n\u4E2D 2 n\n\u6587 2 n\n"
                                    "\U00020000\u4E2D 4 n\n");
  auto segmenter = JiebaSegmenter::Create(options);
  ASSERT_TRUE(segmenter.ok()) << segmenter.status().ToString();
  const JiebaSegmenter& small = **segmenter;
  EXPECT_EQ(small.Frequency("\U00020000\U00020001"), 7);
  EXPECT_EQ(small.Frequency("\U00020000"), 3);
  EXPECT_EQ(small.Frequency("\U00020000\u4E2D"), 4);
  EXPECT_EQ(small.Frequency("\U00020001"), std::nullopt);
  EXPECT_EQ(small.Frequency("a"), 0);  // a prefix only
  EXPECT_EQ(small.Frequency("abc"), 9);
  EXPECT_EQ(small.Frequency("abcd"), std::nullopt);
  EXPECT_EQ(small.Frequency("\u4E2D\u6587"), 11);
  EXPECT_EQ(small.dictionary_size(), 9u);  // 8 words and the prefix "a"
}

// The trie keeps each distinct word weight once in a table of at most 65,534; a dictionary with
// more distinct frequencies keeps the rest per unit. Every 2-character word here has its own
// frequency, far above its characters' (1 each), so Cut of the word alone gives the word back only
// if its weight is right.
TEST(JiebaTrieTest, MoreDistinctFrequenciesThanTheWeightTable) {
  constexpr char32_t kFirst = 0x4E00;
  constexpr size_t kSide = 280;  // 280 x 280 = 78,400 words
  auto utf8 = [](char32_t cp) {
    std::string out;
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
    return out;
  };
  std::string dict;
  std::vector<std::string> words;
  for (size_t a = 0; a < kSide; ++a) {
    dict += utf8(kFirst + a) + " 1\n";
    for (size_t b = 0; b < kSide; ++b) {
      words.push_back(utf8(kFirst + a) + utf8(kFirst + b));
      dict += words.back() + " " + std::to_string(1000000 + words.size()) + "\n";
    }
  }
  JiebaOptions options;
  options.dict_path = WriteTempFile("jieba_many_frequencies.txt", dict);
  auto segmenter = JiebaSegmenter::Create(options);
  ASSERT_TRUE(segmenter.ok()) << segmenter.status().ToString();
  size_t wrong = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    const Tokens tokens = (*segmenter)->LCut(words[i], /*hmm=*/false);
    if (tokens != Tokens{words[i]}) ++wrong;
    ASSERT_EQ((*segmenter)->Frequency(words[i]), static_cast<int64_t>(1000001 + i));
  }
  EXPECT_EQ(wrong, 0u);
  // Two words in a row: the route takes both (their weights against four single characters).
  EXPECT_EQ((*segmenter)->LCut(words.front() + words.back(), false),
            (Tokens{words.front(), words.back()}));
}

// CountTerms cuts only for the words it can count: its counts are those of Cut's tokens that
// have two or more characters after strip() and are not stop words, in order of first occurrence.
TEST(JiebaKeywordTest, CountTermsMatchesCountingCutTokens) {
  const std::vector<std::string> texts = {
      "小明硕士毕业于中国科学院计算所，后在日本京都大学深造。小明硕士毕业。",
      "C++和Python3.6.1是编程语言, 比例12.5% The URL is https\r\n THE the 和 Of of\r\n",
      "\xE4\xB8\xAD\xFF\xFE文 abc\tdef 中国 中国 中国\x80\xE4\xB8",
      "他来到了网易杭研大厦，他来到了网易杭研大厦",
      "",
      "  \r\n\r\n 。。 a b c",
  };
  for (const std::string& text : texts) {
    std::vector<TermCount> terms;
    Extractor().CountTerms(text, &terms);
    std::vector<std::pair<std::string, int64_t>> expected;
    std::unordered_map<std::string, size_t> index;
    for (const std::string& token : Segmenter().LCut(text)) {
      std::string stripped = token;
      while (!stripped.empty() && std::isspace(static_cast<unsigned char>(stripped.back()))) {
        stripped.pop_back();
      }
      while (!stripped.empty() && std::isspace(static_cast<unsigned char>(stripped.front()))) {
        stripped.erase(stripped.begin());
      }
      size_t characters = 0;
      for (unsigned char c : stripped) characters += (c & 0xC0) != 0x80;
      std::string lower = token;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const bool stop_word = std::find(std::begin(jieba::kStopWords), std::end(jieba::kStopWords),
                                       lower) != std::end(jieba::kStopWords);
      if (characters < 2 || stop_word) continue;
      auto [it, inserted] = index.try_emplace(token, expected.size());
      if (inserted) expected.emplace_back(token, 0);
      ++expected[it->second].second;
    }
    std::vector<std::pair<std::string, int64_t>> got;
    for (const TermCount& term : terms) got.emplace_back(std::string(term.word), term.count);
    EXPECT_EQ(got, expected) << text;
  }
}

TEST(JiebaLoadTest, ReportsBadFilesWithTheirPlace) {
  JiebaOptions options;
  options.dict_path = WriteTempFile("jieba_bad_dict.txt", "好 3 a\n坏词\n");
  auto result = JiebaSegmenter::Create(options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("jieba_bad_dict.txt:2"), std::string::npos)
      << result.status().ToString();

  options.dict_path = ::testing::TempDir() + "/does_not_exist.txt";
  result = JiebaSegmenter::Create(options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);

  options = JiebaOptions();
  options.hmm_dir = ::testing::TempDir() + "/jieba_bad_hmm";
  std::filesystem::create_directories(options.hmm_dir);
  WriteTempFile("jieba_bad_hmm/prob_start.py", "P={'B': -0.26, 'E': oops}\n");
  result = JiebaSegmenter::Create(options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("prob_start.py:1"), std::string::npos)
      << result.status().ToString();

  options = JiebaOptions();
  options.idf_path = WriteTempFile("jieba_bad_idf.txt", "词 1.5\n词二\n");
  auto extractor = KeywordExtractor::Create(*JiebaSegmenter::Default(), options);
  ASSERT_FALSE(extractor.ok());
  EXPECT_NE(extractor.status().message().find("jieba_bad_idf.txt:2"), std::string::npos)
      << extractor.status().ToString();
}

}  // namespace
}  // namespace neardup
