// Differential tests of SplitJapaneseWords (our CJ dictionary segmentation) against ICU's root word
// BreakIterator: the same word segments on every corpus document, raw and normalised, and on edge
// cases (long katakana runs, mixed scripts, half-width katakana, iteration and prolonged sound
// marks, text without dictionary words, invalid UTF-8 next to kana, a 10 MB run of one script).
#include <gtest/gtest.h>
#include <unicode/brkiter.h>
#include <unicode/utext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "features/cj_dictionary_break.h"
#include "features/used_slots.h"
#include "neardup/document_reader.h"
#include "neardup/text.h"
#include "shared_data.h"
#include "test_files.h"

namespace neardup {
namespace {

// ICU's segments with rule status >= UBRK_WORD_NONE_LIMIT (what FeatureExtractor calls words).
std::vector<std::string_view> IcuWordSegments(std::string_view text) {
  static thread_local std::unique_ptr<icu::BreakIterator> iterator;
  UErrorCode error = U_ZERO_ERROR;
  if (iterator == nullptr) {
    iterator.reset(icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), error));
  }
  EXPECT_TRUE(U_SUCCESS(error));
  UText utext = UTEXT_INITIALIZER;
  utext_openUTF8(&utext, text.data(), static_cast<int64_t>(text.size()), &error);
  iterator->setText(&utext, error);
  std::vector<std::string_view> words;
  int32_t begin = iterator->first();
  for (int32_t end = iterator->next(); end != icu::BreakIterator::DONE;
       begin = end, end = iterator->next()) {
    if (iterator->getRuleStatus() >= UBRK_WORD_NONE_LIMIT) {
      words.push_back(text.substr(static_cast<size_t>(begin), static_cast<size_t>(end - begin)));
    }
  }
  utext_close(&utext);
  return words;
}

// Whether SplitJapaneseWords took the text; when it did, its words must be ICU's.
bool ExpectSameAsIcu(std::string_view text, const std::string& name) {
  std::vector<std::string_view> ours;
  if (!SplitJapaneseWords(text, &ours)) return false;
  std::vector<std::string_view> icu = IcuWordSegments(text);
  if (ours.size() != icu.size()) {
    std::string listing;
    for (size_t i = 0; i < std::max(ours.size(), icu.size()) && i < 40; ++i) {
      listing += "\n  " + std::string(i < ours.size() ? ours[i] : "-") + " | " +
                 std::string(i < icu.size() ? icu[i] : "-");
    }
    ADD_FAILURE() << name << ": " << ours.size() << " words, ICU " << icu.size()
                  << " (ours | ICU):" << listing;
    return true;
  }
  for (size_t i = 0; i < std::min(ours.size(), icu.size()); ++i) {
    if (ours[i] != icu[i] || ours[i].data() != icu[i].data()) {
      ADD_FAILURE() << name << ": word " << i << " at byte " << (icu[i].data() - text.data())
                    << ": ours '" << ours[i] << "' ICU '" << icu[i] << "'";
      break;
    }
  }
  return true;
}

TEST(CjDictionaryBreakTest, IcuDictionaryLoads) {
  const CjDictionary* dictionary = CjDictionary::Default();
  ASSERT_NE(dictionary, nullptr) << "ICU's brkitr/cjdict could not be read";
  EXPECT_GT(dictionary->word_count(), 100000u);
  // A common word is found with a cost in CjkBreakEngine's range; a non-word prefix has none.
  auto find = [&](std::u32string word) {
    uint32_t node = CjDictionary::kRoot;
    for (char32_t cp : word) {
      const uint32_t code = dictionary->Code(cp);
      if (code == 0) return CjDictionary::kNoNode;
      node = dictionary->Child(node, code);
      if (node == CjDictionary::kNoNode) return node;
    }
    return node;
  };
  const uint32_t nihon = find(U"日本");
  ASSERT_NE(nihon, CjDictionary::kNoNode);
  EXPECT_GT(dictionary->Cost(nihon), 0);
  EXPECT_LT(dictionary->Cost(nihon), 256);
  EXPECT_EQ(find(U"日本語です"), CjDictionary::kNoNode);
  EXPECT_EQ(dictionary->Code(U'a'), 0u);
}

TEST(CjDictionaryBreakTest, SmallDictionaryTrie) {
  CjDictionary dictionary({{U"ab", 5}, {U"a", 7}, {U"abc", 1}, {U"b\U00020000", 3}, {U"x", 9}});
  EXPECT_EQ(dictionary.word_count(), 5u);
  auto walk = [&](std::u32string word) {
    uint32_t node = CjDictionary::kRoot;
    for (char32_t cp : word) {
      const uint32_t code = dictionary.Code(cp);
      if (code == 0) return CjDictionary::kNoNode;
      node = dictionary.Child(node, code);
      if (node == CjDictionary::kNoNode) return node;
    }
    return node;
  };
  EXPECT_EQ(dictionary.Cost(walk(U"a")), 7);
  EXPECT_EQ(dictionary.Cost(walk(U"ab")), 5);
  EXPECT_EQ(dictionary.Cost(walk(U"abc")), 1);
  EXPECT_EQ(dictionary.Cost(walk(U"b")), -1);  // a prefix only
  EXPECT_EQ(dictionary.Cost(walk(U"b\U00020000")), 3);
  EXPECT_EQ(walk(U"ba"), CjDictionary::kNoNode);
  EXPECT_EQ(walk(U"abca"), CjDictionary::kNoNode);
  EXPECT_EQ(walk(U"y"), CjDictionary::kNoNode);
}

std::vector<std::pair<std::string, std::string>> EdgeCases(bool with_large) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"plain", "日本語の文章を単語に分割します。"},
      {"katakana longer than 8", "コンピュータプログラミングインターフェースとアプリケーション"},
      {"katakana longer than 20",
       "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモ"},
      {"katakana exactly 19 and 20",
       "アイウエオカキクケコサシスセソタチツテ。アイウエオカキクケコサシスセソタチツテト"},
      {"mixed kana kanji ascii full-width",
       "Linuxカーネル2.6で ｆｕｌｌ－ｗｉｄｔｈ の ＡＢＣ１２３ と漢字かなカナmix123テスト"},
      {"half-width katakana", "ｶﾀｶﾅ ﾃｽﾄ ｶﾞｷﾞ ｰ"},
      {"iteration marks", "人々 時々 こゝろ いすゞ ミスヾ 〻 々"},
      {"prolonged sound mark", "ー ーー コーヒー らーめん ｰ ラーメンー"},
      {"no dictionary words", "ゐゑゐゑ ヰヱヰヱ 𠀋𠀋𠀋 ゟ"},
      {"supplementary han", "𠮷野家で𩸽を食べた"},
      {"kana repeat marks", "〱〲〳〵 ゝゞヽヾ ゛゜ ゠"},
      {"combining dakuten", "か\u3099き\u3099 カ\u309A"},
      {"katakana middle dot", "コンピュータ・サイエンス"},
      {"extendnumlet next to kana", "カタカナ_abc abc_カナ 漢字_x である__asm__ x_ひら"},
      {"extendnumlet next to hiragana and kanji", "である__asm__ x_ひら 漢字_x y_字 ‿漢字‿"},
      {"zwj and format next to kana", "カナ\u200Dカナ 漢字\u00AD字 か\u200Bな"},
      {"hangul and kana", "한국어 かな"},
      {"thai and kana", "ภาษาไทย かな"},
      {"punctuation between", "「日本」、『東京』（大阪）…京都！"},
      {"latin words with apostrophes", "日本's can't 日本.com e-mail日本"},
      {"compatibility ideographs", "豈更車 CJK互換"},
      {"circled and squared katakana", "㋐㋑ ㌀㌁"},
      {"numbers and kanji", "2024年11月23日 第3回 一二三"},
      {"invalid UTF-8 next to kana", "かな\xE3\x81ことば\xFFカナ\xE6\x97"},
      {"truncated kana at the end", "日本語\xE3\x81"},
      {"empty", ""},
  };
  if (with_large) {
    std::string kana, kanji, katakana;
    while (kana.size() < (10u << 20)) kana += "あ";
    while (kanji.size() < (2u << 20)) kanji += "日本語";
    while (katakana.size() < (2u << 20)) katakana += "カ";
    cases.push_back({"10 MB of one hiragana", kana});
    cases.push_back({"2 MB of kanji", kanji});
    cases.push_back({"2 MB of one katakana", katakana});
  }
  return cases;
}

TEST(CjDictionaryBreakTest, EdgeCasesMatchIcu) {
  const bool large = std::getenv("NEARDUP_SANITIZER_BUILD") == nullptr;
  size_t taken = 0;
  auto normalizer = TextNormalizer::Create(NormalizeOptions()).value();
  for (const auto& [name, text] : EdgeCases(large)) {
    taken += ExpectSameAsIcu(text, name);
    std::string normalized;
    if (normalizer->Normalize(text, &normalized).ok()) {
      taken += ExpectSameAsIcu(normalized, name + " (normalised)");
    }
  }
  // Most cases must be decided by our path, or this test proves little.
  EXPECT_GT(taken, 30u);
}

TEST(CjDictionaryBreakTest, RefusesWhatItLeavesToIcu) {
  std::vector<std::string_view> words;
  EXPECT_FALSE(SplitJapaneseWords("ｶﾀｶﾅ", &words));         // not NFKC-normalised
  EXPECT_FALSE(SplitJapaneseWords("カナ_x", &words));       // WB13a
  EXPECT_FALSE(SplitJapaneseWords("x_カナ", &words));       // WB13b
  EXPECT_FALSE(SplitJapaneseWords("か\u3099", &words));     // WB4 after kana
  EXPECT_FALSE(SplitJapaneseWords("〱", &words));           // $KanaKanji outside the engine's set
  EXPECT_FALSE(SplitJapaneseWords("한국어 かな", &words));  // refused by the word splitter
  words.clear();
  ASSERT_TRUE(SplitJapaneseWords("abc かな", &words));
  EXPECT_EQ(words.front(), "abc");
}

// Every corpus document, raw and NFKC-casefolded: where our path takes the text, ICU's words.
TEST(CjDictionaryBreakTest, CorpusMatchesIcu) {
  NEARDUP_SKIP_WITHOUT_SHARED_CORPUS();
  const bool all = std::getenv("NEARDUP_LARGE_TESTS") != nullptr &&
                   std::string(std::getenv("NEARDUP_LARGE_TESTS")) == "1";
  auto normalizer = TextNormalizer::Create(NormalizeOptions()).value();
  const std::vector<std::string> files = testing_files::CorpusFiles();
  std::map<std::string, std::pair<size_t, size_t>> per_file;  // taken, seen (raw + normalised)
  for (const std::string& file : files) {
    const std::string base = std::filesystem::path(file).filename().string();
    // Without NEARDUP_LARGE_TESTS=1: the Japanese and multilingual files whole, others sampled.
    const bool whole = all || base.starts_with("ja_") || base.starts_with("multi_");
    auto reader = DocumentReader::Open({file}, {});
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    Document doc;
    size_t line = 0;
    while (true) {
      auto got = (*reader)->Next(&doc);
      if (!got.ok() || !*got) break;
      ++line;
      if (!whole && line % 50 != 0) continue;
      const std::string name = base + ":" + std::to_string(line);
      auto& [taken, seen] = per_file[base];
      taken += ExpectSameAsIcu(doc.text, name);
      std::string normalized;
      if (normalizer->Normalize(doc.text, &normalized).ok()) {
        taken += ExpectSameAsIcu(normalized, name + " (normalised)");
        ++seen;
      }
      ++seen;
      if (::testing::Test::HasFailure()) return;
    }
  }
  for (const auto& [file, counts] : per_file) {
    std::printf("%-24s Japanese path took %zu of %zu texts (raw and normalised)\n", file.c_str(),
                counts.first, counts.second);
  }
  // The Japanese documents must be decided by our path, or this test proves nothing.
  ASSERT_TRUE(per_file.count("ja_manpages.jsonl"));
  const auto& ja = per_file["ja_manpages.jsonl"];
  EXPECT_GT(ja.first * 10, ja.second * 9);
}

// The base search both double-array tries (this dictionary's and jieba's) place nodes with: the
// first base from `start` on at which every code's slot is free, across 64-slot windows, as a
// slot-by-slot search finds it.
TEST(UsedSlots, FirstFreeBaseIsTheFirstBaseWhereEveryCodeFits) {
  const auto code = [](uint32_t c) { return c; };
  UsedSlots used(16);
  for (size_t i = 1; i <= 70; ++i) {
    if (i != 40 && i != 42) used.Mark(i);
  }
  const std::vector<uint32_t> pair = {0, 2};
  EXPECT_EQ(used.FirstFreeBase(pair.begin(), pair.end(), code, 1), 40u);
  EXPECT_EQ(used.FirstFreeBase(pair.begin(), pair.end(), code, 41), 71u);  // past the window
  const std::vector<uint32_t> one = {5};
  EXPECT_EQ(used.FirstFreeBase(one.begin(), one.end(), code, 1), 35u);

  std::mt19937 random(20261126);
  UsedSlots dense(64);
  std::vector<bool> marked(4096, false);
  marked[0] = true;  // the root
  for (size_t i = 1; i < marked.size(); ++i) {
    if (random() % 10 < 8) {
      dense.Mark(i);
      marked[i] = true;
    }
  }
  for (int round = 0; round < 200; ++round) {
    std::vector<uint32_t> codes(1 + random() % 4);
    for (uint32_t& c : codes) c = random() % 200;
    std::sort(codes.begin(), codes.end());
    const size_t start = 1 + random() % 2000;
    size_t expected = start;
    const auto fits = [&](size_t base) {
      return std::all_of(codes.begin(), codes.end(), [&](uint32_t c) {
        return base + c >= marked.size() || !marked[base + c];
      });
    };
    while (!fits(expected)) ++expected;
    EXPECT_EQ(dense.FirstFreeBase(codes.begin(), codes.end(), code, start), expected)
        << "round " << round;
  }
}

}  // namespace
}  // namespace neardup
