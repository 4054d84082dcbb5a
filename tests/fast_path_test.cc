// Differential tests of the fast text pipeline against the plain ICU path it replaces: the same
// normalised text, the same tokens and the same fingerprints, over the shared corpus and the edge
// cases fast paths tend to break (combining marks, full-width forms, ligatures, Turkish dotted I,
// emoji and ZWJ sequences, mixed scripts inside one word, invalid UTF-8 at a word boundary of the
// 8-byte ASCII scan, one 10 MB token), and Japanese, which the fast path segments with our own
// copy of ICU's CJ dictionary break (features/cj_dictionary_break.h): long katakana runs, mixed
// kana/kanji/ASCII/full-width, half-width katakana, iteration and prolonged sound marks, text
// without dictionary words, invalid UTF-8 next to kana, a 10 MB run of one script.
//
// Documents compared: every document of ../shared/corpus with NEARDUP_LARGE_TESTS=1; an evenly
// spaced subset of 4,000 by default; 400 under NEARDUP_SANITIZER_BUILD=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "features/cj_dictionary_break.h"
#include "features/word_splitter.h"
#include "neardup/document_reader.h"
#include "neardup/features.h"
#include "neardup/fingerprinter.h"
#include "neardup/text.h"
#include "test_files.h"

namespace neardup {
namespace {

bool EnvFlag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "1";
}

struct Doc {
  std::string name;
  std::string text;
};

std::vector<Doc> CorpusSubset(size_t* total) {
  std::vector<Doc> all;
  for (const std::string& file : testing_files::CorpusFiles()) {
    auto reader = DocumentReader::Open({file}, {});
    if (!reader.ok()) continue;
    Document doc;
    size_t line = 0;
    while (true) {
      auto got = (*reader)->Next(&doc);
      if (!got.ok() || !*got) break;
      ++line;
      all.push_back({std::filesystem::path(file).filename().string() + ":" + std::to_string(line),
                     std::move(doc.text)});
    }
  }
  *total = all.size();
  size_t wanted = 4000;
  if (EnvFlag("NEARDUP_LARGE_TESTS")) wanted = all.size();
  if (EnvFlag("NEARDUP_SANITIZER_BUILD")) wanted = 400;
  wanted = std::min(wanted, all.size());
  std::vector<Doc> subset;
  for (size_t i = 0; i < wanted; ++i) subset.push_back(std::move(all[i * all.size() / wanted]));
  return subset;
}

std::vector<Doc> EdgeCases(bool with_large) {
  std::vector<Doc> cases = {
      {"combining marks",
       "Cafe\u0301 nai\u0308ve e\u0301te\u0301 \u0301leading x\u0301\u0302y "
       "\n\u0301after newline Ы\u0306 क\u093F ب\u064E"},
      {"full-width forms", "ＡＢＣ１２３ Ｆｕｌｌ－ｗｉｄｔｈ　ｔｅｘｔ，ｈｅｒｅ． ｶﾀｶﾅ"},
      {"ligatures", "ﬁle ﬂow ﬀ œuvre Æsir Ǆ ㎏ ① ½ ™"},
      {"turkish dotted i", "İstanbul ISTANBUL ıiIİ i̇stanbul KIRIKKALE"},
      {"emoji and zwj",
       "family 👨‍👩‍👧 here 🇫🇷 flag 👍🏽 ok ❤️ x👍y a\u200Db"},
      {"mixed scripts in one word",
       "abcабв αβγ123 x٣y Moskвa e-mail test_case π3.14 "
       "naïveБ l'homme can't 1,000.5 3'4 a:b @user __ _ a_b"},
      {"hebrew quotes", "צה\"ל ש'כ אבג'"},
      {"thai and latin", "ภาษาไทย word ภาษา"},
      {"cjk in latin text", "the 漢字 word and かな text"},
      {"markup", "<p>Hello &amp; <b>World</b></p>&lt;tag&gt; &#x4E2D;&#25991; a<b"},
      {"whitespace kinds", "a\u00A0b\u2003c\u3000d\te\r\nf\u2028g\u0085h  \x1Ci"},
      {"uppercase greek sigma", "ΣΊΣΥΦΟΣ Ὀδυσσεύς ΑΣ"},
      {"german sharp s", "STRASSE Straße ẞ"},
      {"numbers", "1.5 1,5 1'5 ١٢٣ ७८९ 3rd 4x4 x86_64"},
      {"only punctuation", "!!! ... ??? ---"},
      {"japanese", "日本語の文章を単語に分割します。東京都に住んでいます。"},
      {"katakana runs longer than 8 and 20",
       "コンピュータプログラミングインターフェース "
       "アイウエオカキクケコサシスセソタチツテトナニヌネノ"},
      {"mixed kana kanji ascii full-width",
       "Linuxカーネル2.6で ｆｕｌｌ－ｗｉｄｔｈ の ＡＢＣ１２３ と漢字かなカナmix123テスト"},
      {"half-width katakana", "ｶﾀｶﾅ ﾃｽﾄ ｶﾞｷﾞ ｰ"},
      {"iteration marks", "人々 時々 こゝろ いすゞ ミスヾ 〻 々"},
      {"prolonged sound mark", "ー ーー コーヒー らーめん ｰ ラーメンー"},
      {"kana without dictionary words", "ゐゑゐゑ ヰヱヰヱ 𠀋𠀋𠀋 ゟ"},
      {"extendnumlet next to kana", "カタカナ_abc abc_カナ である__asm__ x_ひら"},
      {"invalid UTF-8 next to kana", "かな\xE3\x81ことば\xFFカナ\xE6\x97"},
      {"empty", ""},
      {"compositions across the normaliser's pieces",
       "\u1100\u1161\u11A8 \u304B\u3099 A\u030A \u0418\u0306 \u0413\u0301 \uFDFA\u0301 "
       "\U0001D400\u0301 \u212B \u2126 \u00C5"},
      {"uppercase runs longer than a block",
       "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG AND KEEPS RUNNING\u0301 "
       "\u0421\u041B\u041E\u0412\u041E\u0421\u041B\u041E\u0412\u041E\u0421\u041B\u041E"},
      {"words across the splitter's 64-byte window",
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, b.c d'e f;g h\"i "
       "jjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjj"
       "jjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjjj\u0301 k"},
  };
  // An invalid byte at every offset across two 8-byte words, and a truncated sequence at the end.
  for (size_t at = 0; at < 18; ++at) {
    std::string text(20, 'a');
    text[at] = '\xC3';
    cases.push_back({"invalid byte at " + std::to_string(at), text});
  }
  cases.push_back({"truncated sequence at the end", "abcdefgh word \xE2\x82"});
  if (!with_large) return cases;
  cases.push_back({"one 10 MB ASCII token", std::string(10 << 20, 'x')});
  std::string accented;
  while (accented.size() < (10u << 20)) accented += "e\u0301";
  cases.push_back({"one 10 MB token of combining marks", accented});
  std::string kana;
  while (kana.size() < (10u << 20)) kana += "\u3042";
  cases.push_back({"a 10 MB run of one hiragana", kana});
  return cases;
}

FingerprintOptions Reference(FingerprintOptions options) {
  options.normalize.fast_paths = false;
  options.features.fast_paths = false;
  return options;
}

// Which fast tokenizer decided a text alone.
struct Decided {
  bool splitter = false;  // SplitSpaceSeparatedWords
  bool japanese = false;  // SplitJapaneseWords (after the splitter refused)
};

// Compares one text on every stage; returns which fast tokenizer decided it.
Decided Compare(const Doc& doc, const TextNormalizer& fast_norm, const TextNormalizer& ref_norm,
                const FeatureExtractor& fast_words, const FeatureExtractor& ref_words,
                const std::vector<std::pair<const Fingerprinter*, const Fingerprinter*>>& pairs) {
  std::string fast_text, ref_text;
  Status fast_status = fast_norm.Normalize(doc.text, &fast_text);
  Status ref_status = ref_norm.Normalize(doc.text, &ref_text);
  EXPECT_EQ(fast_status.ToString(), ref_status.ToString()) << doc.name;
  EXPECT_TRUE(fast_text == ref_text) << doc.name << ": normalised text differs";
  // Tokens of the raw and of the normalised text (ICU word tokenizer).
  for (const std::string& text : {doc.text, ref_text}) {
    if (!ref_status.ok() && &text == &doc.text) continue;
    std::vector<std::string> fast_tokens, ref_tokens;
    Status a = fast_words.Tokenize(text, &fast_tokens);
    Status b = ref_words.Tokenize(text, &ref_tokens);
    EXPECT_EQ(a.ToString(), b.ToString()) << doc.name;
    EXPECT_TRUE(fast_tokens == ref_tokens) << doc.name << ": tokens differ (" << fast_tokens.size()
                                           << " vs " << ref_tokens.size() << ")";
    if (fast_tokens != ref_tokens) {
      for (size_t i = 0; i < std::min(fast_tokens.size(), ref_tokens.size()); ++i) {
        if (fast_tokens[i] != ref_tokens[i]) {
          ADD_FAILURE() << doc.name << ": token " << i << " '" << fast_tokens[i] << "' vs ICU '"
                        << ref_tokens[i] << "'";
          break;
        }
      }
    }
  }
  for (const auto& [fast, ref] : pairs) {
    auto a = fast->ComputeDetails(doc.text);
    auto b = ref->ComputeDetails(doc.text);
    EXPECT_EQ(a.ok(), b.ok()) << doc.name;
    if (!a.ok() || !b.ok()) {
      EXPECT_EQ(a.status().ToString(), b.status().ToString()) << doc.name;
      continue;
    }
    EXPECT_EQ(a->fingerprint, b->fingerprint)
        << doc.name << ": fingerprint differs (" << fast->options().bits << " bits)";
    EXPECT_EQ(a->feature_count, b->feature_count) << doc.name;
    EXPECT_EQ(a->whole_text_fallback, b->whole_text_fallback) << doc.name;
  }
  std::vector<std::string_view> words;
  Decided decided;
  decided.splitter = ref_status.ok() && SplitSpaceSeparatedWords(ref_text, &words);
  words.clear();
  decided.japanese = ref_status.ok() && !decided.splitter && SplitJapaneseWords(ref_text, &words);
  return decided;
}

struct Pipelines {
  std::unique_ptr<TextNormalizer> fast_norm, ref_norm;
  std::unique_ptr<FeatureExtractor> fast_words, ref_words;
  std::vector<std::unique_ptr<Fingerprinter>> fingerprinters;
  std::vector<std::pair<const Fingerprinter*, const Fingerprinter*>> pairs;

  explicit Pipelines(bool replace_invalid) {
    NormalizeOptions normalize;
    normalize.replace_invalid_utf8 = replace_invalid;
    fast_norm = TextNormalizer::Create(normalize).value();
    normalize.fast_paths = false;
    ref_norm = TextNormalizer::Create(normalize).value();
    FeatureOptions words;
    words.tokenizer = Tokenizer::kIcuWord;
    fast_words = FeatureExtractor::Create(words).value();
    words.fast_paths = false;
    ref_words = FeatureExtractor::Create(words).value();
    FingerprintOptions defaults;
    defaults.normalize.replace_invalid_utf8 = replace_invalid;
    FingerprintOptions wide = defaults;
    wide.bits = 128;
    FingerprintOptions plain_tf = defaults;
    plain_tf.features.sublinear_tf = false;
    plain_tf.features.shingle_size = 3;
    FingerprintOptions uniform = defaults;
    uniform.features.weighting = Weighting::kUniform;
    uniform.features.shingle_size = 1;
    uniform.features.tokenizer = Tokenizer::kIcuWord;
    for (const FingerprintOptions& options : {defaults, wide, plain_tf, uniform}) {
      fingerprinters.push_back(Fingerprinter::Create(options).value());
      fingerprinters.push_back(Fingerprinter::Create(Reference(options)).value());
      pairs.emplace_back(fingerprinters[fingerprinters.size() - 2].get(),
                         fingerprinters.back().get());
    }
  }
};

TEST(FastPathTest, EdgeCasesMatchTheIcuPath) {
  for (bool replace : {false, true}) {
    Pipelines p(replace);
    for (const Doc& doc : EdgeCases(/*with_large=*/!replace)) {
      Compare(doc, *p.fast_norm, *p.ref_norm, *p.fast_words, *p.ref_words, p.pairs);
    }
  }
}

TEST(FastPathTest, VotesThatCancelExactlyMatchTheReferenceOrder) {
  // Words seen twice weigh 1 + ln 2 each; on the bits where their hashes differ the votes cancel
  // to exactly 0, which rounding in another order could turn into a tiny positive sum. The fused
  // path must then vote in the reference order.
  for (int shingle : {1, 2}) {
    FingerprintOptions options;
    options.features.shingle_size = shingle;
    auto fast = Fingerprinter::Create(options).value();
    auto ref = Fingerprinter::Create(Reference(options)).value();
    for (const char* text : {"x y x y", "alpha beta alpha beta", "a b c a b c a b c",
                             "one two one two three three four four", "p q r p q r s s s s t",
                             "x y x y x y z z", "mot mot mot autre autre autre"}) {
      auto a = fast->ComputeDetails(text);
      auto b = ref->ComputeDetails(text);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->fingerprint, b->fingerprint) << text << " (shingle " << shingle << ")";
      EXPECT_EQ(a->feature_count, b->feature_count) << text;
    }
  }
}

TEST(FastPathTest, SplitterRefusesDictionaryScriptsAndZwj) {
  std::vector<std::string_view> words;
  EXPECT_FALSE(SplitSpaceSeparatedWords("the 漢字 word", &words));
  EXPECT_FALSE(SplitSpaceSeparatedWords("ภาษาไทย", &words));
  EXPECT_FALSE(SplitSpaceSeparatedWords("a\u200Db", &words));
  words.clear();
  ASSERT_TRUE(SplitSpaceSeparatedWords("Hello, wörld! can't 3.14 _ __ a_b", &words));
  EXPECT_EQ(words, (std::vector<std::string_view>{"Hello", "wörld", "can't", "3.14", "__", "a_b"}));
}

// The decode-based script detection that utf8::HanWithoutKana replaced (kept here as the
// reference): Han and no kana among the valid sequences.
bool DecodedHanWithoutKana(std::string_view text) {
  bool han = false, kana = false;
  utf8::AnyCodePoint(text, 0xE3, [&](char32_t cp) {
    if (utf8::IsHanIdeograph(cp)) {
      han = true;
    } else if ((cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x31F0 && cp <= 0x31FF) ||
               (cp >= 0xFF66 && cp <= 0xFF9F)) {
      kana = true;
      return true;
    }
    return false;
  });
  return han && !kana;
}

TEST(FastPathTest, HanWithoutKanaMatchesDecoding) {
  // Every scalar value alone, after Han, before Han, and after Han past a 16-byte block.
  const std::string han = "中", pad(17, 'x');
  size_t checked = 0, chosen = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string c;
    utf8::Append(cp, &c);
    for (const std::string& text : {c, han + c, c + han, han + pad + c + pad, pad + c + han}) {
      ASSERT_EQ(utf8::HanWithoutKana(text), DecodedHanWithoutKana(text))
          << "U+" << std::hex << static_cast<uint32_t>(cp);
      chosen += DecodedHanWithoutKana(text);
      ++checked;
    }
  }
  EXPECT_GT(chosen, 1000000u);  // Han with non-kana companions: both answers occur
  EXPECT_LT(chosen, checked);
  // Invalid and truncated sequences: random bytes drawn mostly from lead and continuation bytes.
  const unsigned char alphabet[] = {0x20, 0x41, 0x80, 0x81, 0x83, 0x87, 0x90, 0xA0, 0xA4, 0xA6,
                                    0xB0, 0xBD, 0xBE, 0xBF, 0xE3, 0xE4, 0xE9, 0xEF, 0xF0, 0xF4};
  uint64_t state = 12345;
  for (int round = 0; round < 200000; ++round) {
    std::string text;
    const size_t length = 1 + round % 40;
    for (size_t k = 0; k < length; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      text.push_back(static_cast<char>(alphabet[(state >> 33) % sizeof(alphabet)]));
    }
    ASSERT_EQ(utf8::HanWithoutKana(text), DecodedHanWithoutKana(text)) << round;
  }
  // Every corpus text, whole.
  if (!std::filesystem::exists(std::string(NEARDUP_SHARED_DIR) + "/corpus")) {
    GTEST_SKIP() << "no shared corpus at " << NEARDUP_SHARED_DIR << "/corpus";
  }
  size_t total = 0, han_texts = 0;
  std::vector<Doc> docs = CorpusSubset(&total);
  for (const Doc& doc : docs) {
    ASSERT_EQ(utf8::HanWithoutKana(doc.text), DecodedHanWithoutKana(doc.text)) << doc.name;
    han_texts += DecodedHanWithoutKana(doc.text);
  }
  EXPECT_GT(han_texts, 0u);
  std::printf("script detection: %zu of %zu corpus documents agree (%zu Han without kana)\n",
              docs.size(), total, han_texts);
}

// Random mixes of the pieces the fast paths treat differently, at every offset of their 16- and
// 64-byte blocks: ASCII words and the punctuation that may join them (' " , . ; : _ @), long
// lowercase and uppercase runs, Cyrillic/Greek/Latin letters in both cases, combining marks after
// each of them, compatibility forms (ligatures, full-width, U+FDFA's 18-byte expansion, math
// bold from plane 1), Hangul jamo that compose, kana with a combining voiced mark, spaces of every
// kind, markup and entities, invalid bytes (replaced). Normalised text, tokens and fingerprints
// must match the ICU path.
TEST(FastPathTest, RandomMixesMatchTheIcuPath) {
  const std::vector<std::string> pieces = {"word",
                                           "x",
                                           "Word",
                                           "WORD",
                                           "abcdefghijklmnopqrstu",
                                           "ABCDEFGHIJKLMNOPQRSTUV",
                                           "42",
                                           "3",
                                           " ",
                                           " ",
                                           " ",
                                           "  ",
                                           "\n",
                                           "\t",
                                           ",",
                                           ".",
                                           "'",
                                           "\"",
                                           ";",
                                           ":",
                                           "_",
                                           "@",
                                           "-",
                                           "(",
                                           ")",
                                           "/",
                                           "\u00E9",
                                           "e\u0301",
                                           "\u0301",
                                           "\u0416",
                                           "\u0436",
                                           "\u043B\u043E\u0432\u043E",
                                           "\u0419",
                                           "\u0438\u0306",
                                           "\u03A3",
                                           "\u03C2",
                                           "\u00DF",
                                           "\u0130",
                                           "\u0131",
                                           "\uFB01",
                                           "\uFF21\uFF42",
                                           "\uFDFA",
                                           "\U0001D400",
                                           "\u1100\u1161",
                                           "\uAC00",
                                           "\u304B\u3099",
                                           "\u00A0",
                                           "\u2003",
                                           "\u3000",
                                           "\u2014",
                                           "\u00AB",
                                           "\u2019",
                                           "\u200B",
                                           "\u00BD",
                                           "\u2163",
                                           "\u0661",
                                           "\u05D0\"\u05D1",
                                           "\u0915\u093F",
                                           "<b>",
                                           "&amp;",
                                           "&#x41;",
                                           "\xFF",
                                           "\xC3"};
  uint64_t state = 2026;
  std::vector<Doc> docs;
  for (int round = 0; round < (EnvFlag("NEARDUP_SANITIZER_BUILD") ? 300 : 3000); ++round) {
    std::string text;
    const int count = 1 + round % 90;
    for (int k = 0; k < count; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      text += pieces[(state >> 33) % pieces.size()];
    }
    docs.push_back({"random mix " + std::to_string(round), text});
  }
  for (bool replace : {false, true}) {
    Pipelines p(replace);
    for (const Doc& doc : docs) {
      Compare(doc, *p.fast_norm, *p.ref_norm, *p.fast_words, *p.ref_words, p.pairs);
      if (::testing::Test::HasFailure()) return;  // one document's report is enough
    }
  }
}

TEST(FastPathTest, CorpusMatchesTheIcuPath) {
  if (!std::filesystem::exists(std::string(NEARDUP_SHARED_DIR) + "/corpus")) {
    GTEST_SKIP() << "no shared corpus at " << NEARDUP_SHARED_DIR << "/corpus";
  }
  size_t total = 0;
  std::vector<Doc> docs = CorpusSubset(&total);
  ASSERT_GT(total, 20000u) << "the shared corpus should hold about 24,000 documents";
  Pipelines p(/*replace_invalid=*/false);
  size_t split = 0, space_separated = 0, space_split = 0, japanese = 0, ja_docs = 0, ja_split = 0;
  for (const Doc& doc : docs) {
    Decided decided = Compare(doc, *p.fast_norm, *p.ref_norm, *p.fast_words, *p.ref_words, p.pairs);
    split += decided.splitter;
    japanese += decided.japanese;
    if (doc.name.starts_with("en_") || doc.name.starts_with("ru_")) {
      ++space_separated;
      space_split += decided.splitter;
    }
    if (doc.name.starts_with("ja_")) {
      ++ja_docs;
      ja_split += decided.japanese;
    }
    if (::testing::Test::HasFailure()) break;  // one document's report is enough
  }
  std::printf(
      "compared %zu of %zu documents; the word splitter decided %zu alone (%zu of %zu "
      "English/Russian); the Japanese segmentation %zu (%zu of %zu ja_manpages)\n",
      docs.size(), total, split, space_split, space_separated, japanese, ja_split, ja_docs);
  // The fast tokenizers must actually carry their documents, or this test proves nothing.
  EXPECT_GT(space_split * 10, space_separated * 9);
  EXPECT_GT(ja_split * 10, ja_docs * 9);
}

}  // namespace
}  // namespace neardup
