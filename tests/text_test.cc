// Tests of text normalisation: NFKC, case folding, Traditional->Simplified, markup stripping,
// whitespace folding and invalid UTF-8 handling.
#include "neardup/text.h"

#include <gtest/gtest.h>

#include <unicode/uchar.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "common/utf8.h"
#include "shared_data.h"

#ifndef NEARDUP_DEFAULT_OPENCC_DIR_FOR_TESTS
#define NEARDUP_DEFAULT_OPENCC_DIR_FOR_TESTS "/usr/share/opencc"
#endif

namespace neardup {
namespace {

std::string Normalize(const NormalizeOptions& options, std::string_view text) {
  auto normalizer = TextNormalizer::Create(options);
  EXPECT_TRUE(normalizer.ok()) << normalizer.status().ToString();
  std::string out;
  Status status = (*normalizer)->Normalize(text, &out);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return out;
}

NormalizeOptions AllOff() {
  NormalizeOptions options;
  options.nfkc = false;
  options.case_fold = false;
  options.traditional_to_simplified = false;
  options.fold_whitespace = false;
  options.strip_markup = false;
  return options;
}

TEST(TextTest, NfkcFoldsWidthAndCompatibilityForms) {
  NormalizeOptions options = AllOff();
  options.nfkc = true;
  // Full-width ASCII, half-width katakana, the "ﬁ" ligature, circled digit.
  EXPECT_EQ(Normalize(options, "ＡＢＣ１２３"), "ABC123");
  EXPECT_EQ(Normalize(options, "ｶﾀｶﾅ"), "カタカナ");
  EXPECT_EQ(Normalize(options, "ﬁle ①"), "file 1");
}

TEST(TextTest, OneWhitespaceDefinitionAgreesWithIcu) {
  // utf8::IsPythonSpace is Unicode White_Space above ASCII (what folding used from ICU before).
  for (char32_t cp = 0x80; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    ASSERT_EQ(utf8::IsPythonSpace(cp), static_cast<bool>(u_isUWhiteSpace(static_cast<UChar32>(cp))))
        << "U+" << std::hex << static_cast<uint32_t>(cp);
  }
  std::string ascii_spaces;
  for (int c = 0; c < 0x80; ++c) {
    if (utf8::IsPythonSpace(static_cast<char32_t>(c))) ascii_spaces.push_back(static_cast<char>(c));
  }
  EXPECT_EQ(ascii_spaces, "\t\n\v\f\r\x1C\x1D\x1E\x1F ");
  EXPECT_EQ(FoldWhitespace(" a\x1C\u3000b\u00A0\u200Bc "), "a b \u200Bc");
}

TEST(TextTest, CaseFolding) {
  NormalizeOptions options = AllOff();
  options.case_fold = true;
  EXPECT_EQ(Normalize(options, "Hello WORLD"), "hello world");
  EXPECT_EQ(Normalize(options, "Straße"), "strasse");
  EXPECT_EQ(Normalize(options, "ПРИВЕТ"), "привет");
  options.nfkc = true;  // combined NFKC_Casefold
  EXPECT_EQ(Normalize(options, "ＨＥＬＬＯ Straße"), "hello strasse");
}

TEST(TextTest, TraditionalToSimplified) {
  NormalizeOptions options = AllOff();
  options.traditional_to_simplified = true;
  EXPECT_EQ(Normalize(options, "漢語資訊"), "汉语资讯");
  EXPECT_EQ(Normalize(options, "English only"), "English only");
  for (bool fast : {true, false}) {
    options.fast_paths = fast;
    // OpenCC reads C strings: the text after a NUL must not be lost.
    EXPECT_EQ(Normalize(options, std::string("漢語\0資訊 x", 14)), std::string("汉语\0资讯 x", 14));
    EXPECT_EQ(Normalize(options, "頭髮 and 發展, 乾燥。干预"), "头发 and 发展, 干燥。干预");
  }
}

TEST(TextTest, WhitespaceFolding) {
  NormalizeOptions options = AllOff();
  options.fold_whitespace = true;
  EXPECT_EQ(Normalize(options, "  a \t\n b\u3000\u00a0c  "), "a b c");
  EXPECT_EQ(FoldWhitespace("x\r\n\r\ny"), "x y");
  EXPECT_EQ(FoldWhitespace(""), "");
}

TEST(TextTest, StripMarkup) {
  EXPECT_EQ(
      FoldWhitespace(StripMarkup("<html><head><title>T</title><style>p{color:red}</style>"
                                 "</head><body><h1>Head</h1><p>a &amp; b &lt;c&gt;</p>"
                                 "<script>var x = '<p>';</script><!-- hidden -->"
                                 "<p>wo<b>rd</b>&#x4E2D;&#25991;&nbsp;end</p></body></html>")),
      "T Head a & b <c> word中文 end");
  // A literal '<' that does not start a tag, an unknown entity and a broken one stay as they are.
  EXPECT_EQ(StripMarkup("1 < 2 &bogus; & x"), "1 < 2 &bogus; & x");
  // Numeric references outside Unicode become U+FFFD.
  EXPECT_EQ(StripMarkup("&#x110000;&#0;"), "\uFFFD\uFFFD");
  // Unterminated constructs do not crash.
  EXPECT_EQ(StripMarkup("a <p class=\"x"), "a <p class=\"x");
  EXPECT_EQ(StripMarkup("if a<b then c"), "if a<b then c");
  EXPECT_EQ(StripMarkup("#include <stdio.h>"), "#include ");
  EXPECT_EQ(StripMarkup("a <!-- never closed"), "a  ");
}

// Tags and entities at every offset of the 16-byte blocks the scan for '<' and '&' reads, and
// non-ASCII text around them.
TEST(TextTest, StripMarkupFindsTagsAndEntitiesAtEveryOffset) {
  for (size_t before = 0; before < 40; ++before) {
    for (size_t after : {0, 1, 15, 16, 17, 33}) {
      const std::string head(before, 'a'), tail(after, 'z');
      EXPECT_EQ(StripMarkup(head + "<b>\u0436</b>&amp;&lt;x&gt; 1 < 2" + tail),
                head + "\u0436&<x> 1 < 2" + tail)
          << before << " " << after;
      EXPECT_EQ(StripMarkup(head + "&" + tail), head + "&" + tail) << before << " " << after;
      EXPECT_EQ(StripMarkup(head + tail), head + tail);
    }
  }
}

TEST(TextTest, StripMarkupOption) {
  NormalizeOptions options;  // defaults + markup
  options.strip_markup = true;
  EXPECT_EQ(Normalize(options, "<P>Ｈello&nbsp;<B>World</B></P>"), "hello world");
}

TEST(TextTest, DefaultsCombineEverything) {
  NormalizeOptions options;
  EXPECT_EQ(Normalize(options, "  ＡＢＣ  漢語\n\nTest "), "abc 汉语 test");
}

TEST(TextTest, InvalidUtf8IsAnErrorNamingTheByte) {
  auto normalizer = TextNormalizer::Create(NormalizeOptions());
  ASSERT_TRUE(normalizer.ok());
  std::string out;
  Status status = (*normalizer)->Normalize(std::string_view("abc\xff\xfe", 5), &out);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUtf8);
  EXPECT_NE(status.message().find("byte 3"), std::string::npos) << status.message();
  // Truncated sequence and an overlong encoding.
  EXPECT_FALSE((*normalizer)->Normalize("ab\xe4\xb8", &out).ok());
  EXPECT_FALSE((*normalizer)->Normalize("\xc0\xaf", &out).ok());
}

// The fast path validates with simdjson, the plain path byte by byte (utf8::FindInvalid): on
// random bytes drawn mostly from lead and continuation bytes (overlong forms, surrogates, code
// points above U+10FFFF, truncated sequences, at every offset of a 64-byte block), both accept
// the same texts and name the same byte.
TEST(TextTest, FastUtf8ValidationMatchesTheByteWiseScan) {
  NormalizeOptions options;
  auto fast = TextNormalizer::Create(options);
  options.fast_paths = false;
  auto plain = TextNormalizer::Create(options);
  ASSERT_TRUE(fast.ok() && plain.ok());
  const unsigned char alphabet[] = {'a',  ' ',  0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0,
                                    0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED,
                                    0xEE, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xF8, 0xFF};
  const char* const valid[] = {"a",      "\u00E9",     "\u0436", "\u2014",
                               "\u4E2D", "\U0001F600", "\uFFFD", "\U0010FFFF"};
  uint64_t state = 7;
  size_t rejected = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text(static_cast<size_t>(round % 70), 'x');
    const int count = 1 + round % 7;
    for (int k = 0; k < count; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const uint64_t pick = state >> 33;
      if (pick % 4 != 0) {  // mostly whole characters, so that valid texts occur too
        text += valid[pick % std::size(valid)];
      } else {
        text.push_back(static_cast<char>(alphabet[(pick / 4) % sizeof(alphabet)]));
      }
    }
    std::string a, b;
    const Status fast_status = (*fast)->Normalize(text, &a);
    const Status plain_status = (*plain)->Normalize(text, &b);
    ASSERT_EQ(fast_status.ToString(), plain_status.ToString()) << round;
    ASSERT_EQ(fast_status.ok(), utf8::IsValid(text)) << round;
    rejected += !fast_status.ok();
  }
  EXPECT_GT(rejected, 1000u);  // both kinds of text occur
  EXPECT_LT(rejected, 19000u);
  std::printf("UTF-8 validation: %zu of 20000 random texts rejected by both paths\n", rejected);
}

TEST(TextTest, InvalidUtf8ReplacementMode) {
  NormalizeOptions options;
  options.replace_invalid_utf8 = true;
  EXPECT_EQ(Normalize(options,
                      "ab\xff"
                      "cd"),
            "ab\uFFFDcd");
  // Different invalid bytes do not make texts differ beyond the replacement.
  EXPECT_EQ(Normalize(options, "x\xfe"), Normalize(options, "x\xff"));
}

TEST(TextTest, EmptyText) {
  EXPECT_EQ(Normalize(NormalizeOptions(), ""), "");
  EXPECT_EQ(Normalize(NormalizeOptions(), " \n\t "), "");
}

TEST(TextTest, MissingOpenCCConfigIsReported) {
  NormalizeOptions options;
  options.opencc_config = "/nonexistent/t2s.json";
  auto normalizer = TextNormalizer::Create(options);
  ASSERT_FALSE(normalizer.ok());
  EXPECT_EQ(normalizer.status().code(), StatusCode::kNotFound);
  EXPECT_NE(normalizer.status().message().find("/nonexistent/t2s.json"), std::string::npos);
}

}  // namespace
}  // namespace neardup

namespace neardup {
namespace {

// The default configuration skips OpenCC for texts holding no convertible character; the result
// must equal converting every text (an explicit opencc_config disables the shortcut).
TEST(TextTest, TraditionalShortcutMatchesFullConversion) {
  NEARDUP_SKIP_WITHOUT_SHARED_CORPUS();
  NormalizeOptions fast_options;
  NormalizeOptions full_options;
  full_options.opencc_config = std::string(NEARDUP_DEFAULT_OPENCC_DIR_FOR_TESTS) + "/t2s.json";
  auto fast = TextNormalizer::Create(fast_options);
  auto full = TextNormalizer::Create(full_options);
  NormalizeOptions no_t2s_options;
  no_t2s_options.traditional_to_simplified = false;
  auto no_t2s = TextNormalizer::Create(no_t2s_options);
  ASSERT_TRUE(fast.ok() && full.ok() && no_t2s.ok());
  std::ifstream in(std::string(NEARDUP_SHARED_DIR) + "/corpus/zh_poetry.jsonl");
  std::string line;
  int compared = 0, changed = 0;
  std::string a, b, c;
  while (compared < 400 && std::getline(in, line)) {
    // The JSON line itself is valid UTF-8 text with Han characters: good enough as input.
    ASSERT_TRUE((*fast)->Normalize(line, &a).ok());
    ASSERT_TRUE((*full)->Normalize(line, &b).ok());
    EXPECT_EQ(a, b);
    ++compared;
    ASSERT_TRUE((*no_t2s)->Normalize(line, &c).ok());
    changed += a != c;
  }
  EXPECT_EQ(compared, 400);
  EXPECT_GT(changed, 0);  // some poems are Traditional
}

// FoldWhitespace against a code point by code point reference, on random mixes of kana, kanji,
// Cyrillic, U+3000, every other kind of space, punctuation that shares lead bytes with spaces
// (U+00AB, U+2014, U+2030, U+205E, U+1680's neighbours), stray and truncated bytes, at every
// offset of the 16-byte blocks its vector path packs.
TEST(TextTest, FoldWhitespaceMatchesCodePointReference) {
  const std::vector<std::vector<std::string>> alphabets = {
      {"\u3042", "\u6F22", "\u3000", "\u30FC", " ", "\n", "a", "\u2003", "\u3001", "\u00A0", "xy",
       "\u3080"},
      {" ",
       "  ",
       "\t",
       "\r\n",
       "\x0B",
       "\x0C",
       "\x1C",
       "\x1F",
       "\x1B",
       "\x7F",
       std::string(1, '\0'),
       "w",
       "word",
       "\u044B",
       "\u0416",
       "\u00AB",
       "\u00A9",
       "\u0085",
       "\u00A0",
       "\u1680",
       "\u1681",
       "\u169A",
       "\u2000",
       "\u200A",
       "\u200B",
       "\u2014",
       "\u2028",
       "\u2029",
       "\u202F",
       "\u2030",
       "\u205E",
       "\u205F",
       "\u2060",
       "\u3000",
       "\u3001",
       "\xE2\x80",
       "\xC2",
       "\x80",
       "\xE3\x80",
       "\xFF"}};
  auto reference = [](std::string_view text) {
    std::string out;
    bool after_space = true;
    for (size_t i = 0; i < text.size();) {
      size_t len = utf8::ValidSequenceLength(text, i);
      if (len == 0) len = 1;
      const bool space = len == 1 ? utf8::IsAsciiWhitespace(static_cast<unsigned char>(text[i]))
                                  : utf8::IsPythonSpace(utf8::Decode(text, i, len));
      if (space) {
        if (!after_space) out.push_back(' ');
      } else {
        out.append(text.substr(i, len));
      }
      after_space = space;
      i += len;
    }
    if (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  };
  uint64_t state = 42;
  for (const std::vector<std::string>& pieces : alphabets) {
    for (int round = 0; round < 20000; ++round) {
      std::string text;
      const int count = 1 + round % 60;
      for (int k = 0; k < count; ++k) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        text += pieces[(state >> 33) % pieces.size()];
      }
      ASSERT_EQ(FoldWhitespace(text), reference(text)) << round;
    }
  }
}

}  // namespace
}  // namespace neardup
