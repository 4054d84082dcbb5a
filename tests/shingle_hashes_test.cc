// Differential tests of dedup's fast per-document forms against straightforward references: the
// table-driven shingle splitter (dedup/shingle_hashes.h) against the code-point-by-code-point ICU
// splitter it replaced, the narrowed set against sort + unique, the early-exit Jaccard test
// against the full intersection, and the branch-free SqueezedHash against the byte-by-byte
// definition. The corpus part needs ../shared and skips visibly without it.
#include <gtest/gtest.h>
#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "dedup/document_hashes.h"
#include "dedup/shingle_hashes.h"
#include "neardup/shingles.h"
#include "shared_data.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

// ---- The reference splitter: ICU properties asked for every code point.

bool ReferenceIsCharacterUnit(char32_t cp) {
  if (cp < 0x0E00) return false;
  UErrorCode error = U_ZERO_ERROR;
  UScriptCode script = uscript_getScript(static_cast<UChar32>(cp), &error);
  if (U_FAILURE(error)) return false;
  return script == USCRIPT_HAN || script == USCRIPT_HIRAGANA || script == USCRIPT_KATAKANA ||
         script == USCRIPT_THAI || script == USCRIPT_LAO || script == USCRIPT_KHMER ||
         script == USCRIPT_MYANMAR;
}

bool ReferenceIsWordCharacter(char32_t cp) {
  if (u_isalnum(static_cast<UChar32>(cp))) return true;
  int8_t type = u_charType(static_cast<UChar32>(cp));
  return type == U_NON_SPACING_MARK || type == U_COMBINING_SPACING_MARK;
}

uint64_t ReferenceMix(uint64_t h, uint64_t unit) {
  h ^= unit + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

// The text's unit hashes in order (XXH3-64 of each unit's bytes) and which are character units.
void ReferenceCut(std::string_view normal, std::vector<uint64_t>* units_out,
                  std::vector<bool>* is_character_out) {
  std::vector<uint64_t>& units = *units_out;
  std::vector<bool>& is_character = *is_character_out;
  size_t word_start = std::string::npos;
  auto end_word = [&](size_t end) {
    if (word_start != std::string::npos) {
      units.push_back(XXH3_64bits(normal.data() + word_start, end - word_start));
      is_character.push_back(false);
      word_start = std::string::npos;
    }
  };
  size_t i = 0;
  while (i < normal.size()) {
    size_t len = utf8::ValidSequenceLength(normal, i);
    if (len == 0) {
      end_word(i);
      ++i;
      continue;
    }
    char32_t cp = utf8::Decode(normal, i, len);
    if (ReferenceIsCharacterUnit(cp)) {
      end_word(i);
      if (ReferenceIsWordCharacter(cp)) {
        units.push_back(XXH3_64bits(normal.data() + i, len));
        is_character.push_back(true);
      }
    } else if (ReferenceIsWordCharacter(cp)) {
      if (word_start == std::string::npos) word_start = i;
    } else {
      end_word(i);
    }
    i += len;
  }
  end_word(normal.size());
}

std::vector<uint64_t> ReferenceShingles(std::string_view normal) {
  std::vector<uint64_t> units, shingles;
  std::vector<bool> is_character;
  ReferenceCut(normal, &units, &is_character);
  if (units.empty()) return shingles;
  // A shingle starting at a character unit spans 5 units, one starting at a word 3.
  for (size_t start = 0; start < units.size(); ++start) {
    const size_t n = is_character[start] ? 5 : 3;
    if (start + n > units.size()) continue;
    uint64_t h = 0;
    for (size_t j = 0; j < n; ++j) h = ReferenceMix(h, units[start + j]);
    shingles.push_back(h);
  }
  if (shingles.empty()) {
    uint64_t h = 0;
    for (uint64_t unit : units) h = ReferenceMix(h, unit);
    shingles.push_back(h);
  }
  std::sort(shingles.begin(), shingles.end());
  shingles.erase(std::unique(shingles.begin(), shingles.end()), shingles.end());
  return shingles;
}

std::vector<uint64_t> SortedDistinct(std::vector<uint64_t> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// The unit set: each unit's hash mixed with the unit domain, sorted and distinct.
std::vector<uint64_t> ReferenceUnits(std::string_view normal) {
  std::vector<uint64_t> units;
  std::vector<bool> is_character;
  ReferenceCut(normal, &units, &is_character);
  // The multiset: a unit seen c times gives h, Mix(h, 1), ..., Mix(h, c - 1).
  std::map<uint64_t, uint64_t> counts;
  for (uint64_t unit : units) ++counts[ReferenceMix(0x756e697473657431ULL, unit)];
  std::vector<uint64_t> elements;
  for (const auto& [h, count] : counts) {
    elements.push_back(h);
    for (uint64_t k = 1; k < count; ++k) elements.push_back(ReferenceMix(h, k));
  }
  return SortedDistinct(elements);
}

// The fast splitter gives the reference's set, in text order with repeats; the public
// ShinglesOfNormalized gives exactly the reference.
std::vector<uint32_t> ReferenceNarrow(const std::vector<uint64_t>& shingles) {
  std::vector<uint32_t> narrow;
  for (uint64_t h : shingles) narrow.push_back(static_cast<uint32_t>(h ^ (h >> 32)));
  std::sort(narrow.begin(), narrow.end());
  narrow.erase(std::unique(narrow.begin(), narrow.end()), narrow.end());
  return narrow;
}

// The unit sets' form: each value narrowed, then its top `bits` bits, sorted and distinct.
std::vector<uint32_t> ReferenceUnitNarrow(const std::vector<uint64_t>& units,
                                          int bits = ShingleSimilarity::kUnitBits) {
  std::vector<uint32_t> narrow;
  for (uint64_t h : units) {
    const uint32_t value = static_cast<uint32_t>(h ^ (h >> 32));
    narrow.push_back(bits >= 32 ? value : value >> (32 - bits));
  }
  std::sort(narrow.begin(), narrow.end());
  narrow.erase(std::unique(narrow.begin(), narrow.end()), narrow.end());
  return narrow;
}

void ExpectSameShingles(std::string_view text) {
  std::vector<uint64_t> units, in_order, sorted;
  ShingleHashesInOrder(text, &units, &in_order);
  const std::vector<uint64_t> reference = ReferenceShingles(text);
  EXPECT_EQ(SortedDistinct(in_order), reference) << "text: " << text;
  ShingleSimilarity::ShinglesOfNormalized(text, &sorted);
  EXPECT_EQ(sorted, reference) << "text: " << text;
  // The unit multiset, 64-bit and narrowed from the in-order units.
  const std::vector<uint64_t> reference_units = ReferenceUnits(text);
  ShingleSimilarity::UnitsOfNormalized(text, &sorted);
  EXPECT_EQ(sorted, reference_units) << "text: " << text;
  std::vector<uint32_t> narrowed, public_form;
  NarrowedUnitSet(units, &narrowed);
  EXPECT_EQ(narrowed, ReferenceUnitNarrow(reference_units)) << "text: " << text;
  for (uint32_t value : narrowed) EXPECT_LT(value, 1u << ShingleSimilarity::kUnitBits);
  ShingleSimilarity::NarrowUnits(reference_units, &public_form);
  EXPECT_EQ(public_form, narrowed) << "text: " << text;
  // 32 bits: the form stores of verification form 2 hold (Narrow itself).
  NarrowedUnitSet(units, &narrowed, 32);
  EXPECT_EQ(narrowed, ReferenceNarrow(reference_units)) << "text: " << text;
  ShingleSimilarity::NarrowUnits(reference_units, &public_form, 32);
  EXPECT_EQ(public_form, narrowed) << "text: " << text;
}

TEST(ShingleHashesTest, SameSetsAsTheReferenceSplitter) {
  std::vector<std::string> texts = {"", "   ", "one", "one two", "one two three"};
  texts.push_back("the quick brown fox jumps over the lazy dog the quick brown fox");
  texts.push_back("a1b2 c3-d4, e5.f6!! 007 x");
  texts.push_back("naïve café résumé coöperate");  // precomposed letters
  texts.push_back(
      "cafe\xcc\x81 ne\xcc\x81"
      "e");  // combining acute (a mark inside the word)
  texts.push_back("\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82 \xe0\xa4\xad\xe0\xa4\xbe");  // Devanagari
  texts.push_back("中文的文本很好，我们今天去北京。中文的文本很好");
  texts.push_back("日本語のテキストです。カタカナとひらがな");
  texts.push_back("ภาษาไทยไม่มีช่องว่าง ระหว่างคำ");
  texts.push_back("ພາສາລາວ ກຂຄ");
  texts.push_back("ភាសាខ្មែរ");
  texts.push_back("မြန်မာဘာသာ");
  texts.push_back("mixed中文words和english123混合");
  texts.push_back("Привет мир, как дела? Ελληνικά κείμενα. עברית ערבית العربية");
  texts.push_back("emoji 😀 and zwj 👨‍👩‍👧 in text 🇫🇷");
  texts.push_back("supplementary han 𠀀𠀁𠀂𠀃𠀄𠀅 and words");
  texts.push_back("ﬁ ligature ﬂ and full-width ＡＢＣ １２３");
  texts.push_back("\xff\xfe bad bytes \xc3 in \xe4\xb8 the middle \xf0\x9f\x98");
  texts.push_back(
      "a\x80"
      "b\xc0\xaf"
      "c");
  for (const char* han : {"短", "一二三四", "一二三四五", "一二三四五六"}) texts.push_back(han);
  for (const std::string& text : texts) ExpectSameShingles(text);
}

// The densest unit patterns (one-byte words between one-byte separators, words next to character
// units, stray bytes as separators: as many units as the splitter's buffer allows) and ASCII words
// and separator runs of every length around the splitter's 16-byte blocks.
TEST(ShingleHashesTest, SameSetsOnDenseUnitsAndLongRuns) {
  std::vector<std::string> texts;
  for (const char* unit : {"a ", "a", "a\xff", "a\xe5\xad\x97",
                           "\xe5\xad\x97"
                           "a ",
                           "1,"}) {
    for (int repeat : {1, 2, 3, 7, 16, 33, 200}) {
      std::string text;
      for (int k = 0; k < repeat; ++k) text += unit;
      texts.push_back(text);
      texts.push_back(text + "z");
    }
  }
  std::mt19937 random(5);
  const std::string separators = " ,.;-\t\n!?()";
  for (int round = 0; round < 300; ++round) {
    std::string text;
    while (text.size() < 200) {
      const size_t word = 1 + random() % 40, gap = 1 + random() % 20;
      for (size_t k = 0; k < word; ++k) text += static_cast<char>('a' + random() % 26);
      if (random() % 8 == 0) text += "\xc3\xa9";  // a word going on past ASCII
      for (size_t k = 0; k < gap; ++k) text += separators[random() % separators.size()];
    }
    texts.push_back(text.substr(random() % 17));
  }
  for (const std::string& text : texts) ExpectSameShingles(text);
}

TEST(ShingleHashesTest, SameSetsOnRandomCodePoints) {
  // Code points from every plane region the splitter treats differently, and raw bytes.
  std::mt19937 random(11);
  const char32_t ranges[][2] = {{0x20, 0x7E},       {0xA0, 0x2FF},      {0x300, 0x36F},
                                {0x400, 0x4FF},     {0x900, 0x97F},     {0xE00, 0xEFF},
                                {0x1780, 0x17FF},   {0x1000, 0x109F},   {0x3000, 0x30FF},
                                {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},   {0xF900, 0xFFFD},
                                {0x10000, 0x1FFFF}, {0x20000, 0x2A6DF}, {0xE0000, 0xE01EF}};
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const int length = 1 + static_cast<int>(random() % 120);
    for (int k = 0; k < length; ++k) {
      if (random() % 40 == 0) {
        text += static_cast<char>(0x80 + random() % 0x80);  // a stray byte
        continue;
      }
      if (random() % 6 == 0) {
        text += ' ';
        continue;
      }
      const auto& range = ranges[random() % std::size(ranges)];
      char32_t cp = range[0] + static_cast<char32_t>(random() % (range[1] - range[0] + 1));
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
      std::string encoded;
      if (cp < 0x80) {
        encoded = static_cast<char>(cp);
      } else if (cp < 0x800) {
        encoded = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      } else if (cp < 0x10000) {
        encoded = {static_cast<char>(0xE0 | (cp >> 12)),
                   static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                   static_cast<char>(0x80 | (cp & 0x3F))};
      } else {
        encoded = {
            static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
            static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
      text += encoded;
    }
    ExpectSameShingles(text);
  }
}

TEST(ShingleHashesTest, SameSetsOnTheDevCorpus) {
  NEARDUP_SKIP_WITHOUT_SHARED_CORPUS();
  auto similarity = ShingleSimilarity::Create(true);
  ASSERT_TRUE(similarity.ok());
  auto normalizer = TextNormalizer::Create((*similarity)->normalize_options());
  ASSERT_TRUE(normalizer.ok());
  size_t documents = 0;
  for (const auto& entry : fs::directory_iterator(NEARDUP_SHARED_DIR "/corpus")) {
    if (entry.path().extension() != ".jsonl") continue;
    std::ifstream in(entry.path());
    std::string line;
    int taken = 0;
    // Every 7th line of each file, as raw JSON and as normalised text: both are valid inputs.
    for (int n = 0; std::getline(in, line) && taken < 300; ++n) {
      if (n % 7 != 0) continue;
      ++taken;
      ++documents;
      ExpectSameShingles(line);
      std::string normal;
      ASSERT_TRUE((*normalizer)->Normalize(line, &normal).ok());
      ExpectSameShingles(normal);
    }
  }
  EXPECT_GT(documents, 1000u);
}

// ---- Narrowed sets.

TEST(ShingleHashesTest, NarrowedSetIsSortedDistinctWhateverTheValues) {
  std::mt19937_64 random(5);
  std::vector<uint32_t> narrow;
  for (size_t size : {0, 1, 2, 63, 64, 65, 500, 4096, 5000, 70000, 200000}) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<uint64_t> values(size);
      for (size_t i = 0; i < size; ++i) {
        switch (kind) {
          case 0:  // hashes
            values[i] = random();
            break;
          case 1:  // many repeats
            values[i] = random() % 17;
            break;
          case 2:  // one value
            values[i] = 42;
            break;
          default:  // descending, clustered in the top bits
            values[i] = (uint64_t{0xFFFF0000} - i) << 32;
        }
      }
      NarrowedSet(values, &narrow);
      EXPECT_EQ(narrow, ReferenceNarrow(values)) << "size " << size << " kind " << kind;
      std::vector<uint32_t> public_form;
      ShingleSimilarity::Narrow(SortedDistinct(values), &public_form);
      EXPECT_EQ(public_form, narrow);
    }
  }
}

// ---- The early-exit Jaccard test.

TEST(ShingleHashesTest, ReachesJaccardAgreesWithTheFullIntersection) {
  std::mt19937 random(3);
  int accepted = 0, rejected = 0;
  for (int round = 0; round < 20000; ++round) {
    // Two sets drawn from a small universe, so overlaps of every size occur.
    const uint32_t universe = 1 + random() % 300;
    std::vector<uint32_t> a, b;
    const uint32_t pa = random() % 101, pb = random() % 101;
    for (uint32_t v = 0; v < universe; ++v) {
      if (random() % 100 < pa) a.push_back(v * 7919u);
      if (random() % 100 < pb) b.push_back(v * 7919u);
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    const double full = Jaccard32(a, b);
    EXPECT_EQ(full, ShingleSimilarity::Jaccard32(a, b));
    // Thresholds around and exactly at the pair's own value.
    for (double threshold : {0.1, 0.3, 0.5, 0.7, 0.9, 1.0, full > 0 ? full : 0.5}) {
      double similarity = -1;
      const bool reaches = ReachesJaccard(a, b, threshold, &similarity);
      ASSERT_EQ(reaches, full >= threshold)
          << "|a| " << a.size() << " |b| " << b.size() << " J " << full << " t " << threshold;
      if (reaches) {
        EXPECT_EQ(similarity, full);
        ++accepted;
      } else {
        ++rejected;
      }
    }
  }
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(rejected, 1000);
}

TEST(ShingleHashesTest, ReachesJaccardOnEmptySets) {
  const std::vector<uint32_t> none, some = {1, 2, 3};
  double similarity = -1;
  EXPECT_TRUE(ReachesJaccard(none, none, 0.5, &similarity));
  EXPECT_EQ(similarity, 1.0);
  EXPECT_FALSE(ReachesJaccard(none, some, 0.5, &similarity));
  EXPECT_FALSE(ReachesJaccard(some, none, 0.01, &similarity));
  EXPECT_TRUE(ReachesJaccard(some, some, 1.0, &similarity));
  EXPECT_EQ(similarity, 1.0);
}

// ---- SqueezedHash.

uint64_t ReferenceSqueezedHash(std::string_view text) {
  std::string squeezed;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') continue;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0xA0) {
      ++i;
      continue;
    }
    if (c == 0xE3 && text.compare(i, 3, "\xE3\x80\x80") == 0) {
      i += 2;
      continue;
    }
    squeezed.push_back(static_cast<char>(c));
  }
  return XXH3_64bits(squeezed.data(), squeezed.size());
}

TEST(ShingleHashesTest, SqueezedHashMatchesTheDefinition) {
  const std::string texts[] = {
      "",
      " ",
      "a b\tc\nd\re\ff\vg",
      "no\xc2\xa0"
      "break",
      "ends with \xc2",
      "ends with \xe3\x80",
      "ends with \xe3",
      "ideographic\xe3\x80\x80space",
      "\xe3\x80\x81 is not a space, \xc2\xa1 neither",
      "\xc2\xc2\xa0\xa0",
      "\xe3\xe3\x80\x80\x80",
      std::string("nul\0inside", 10),
      "全角\xe3\x80\x80空格 和 普通空格",
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(SqueezedHash(text), ReferenceSqueezedHash(text)) << text;
  }
  std::mt19937 random(9);
  const unsigned char alphabet[] = {' ', '\t', '\n', 'a', 'b', 0xC2, 0xA0, 0xE3, 0x80, 0x81, 0xFF};
  for (int round = 0; round < 5000; ++round) {
    std::string text(random() % 64, ' ');
    for (char& c : text) c = static_cast<char>(alphabet[random() % std::size(alphabet)]);
    ASSERT_EQ(SqueezedHash(text), ReferenceSqueezedHash(text));
  }
  // Longer texts, which go through the 16-byte blocks: every sequence across a block boundary,
  // and blocks without any byte removed.
  for (int round = 0; round < 20000; ++round) {
    std::string text(random() % 300, ' ');
    const size_t kinds = round % 4 == 0 ? 4 : std::size(alphabet);  // some blocks all ASCII
    for (char& c : text) c = static_cast<char>(alphabet[random() % kinds]);
    ASSERT_EQ(SqueezedHash(text), ReferenceSqueezedHash(text)) << round;
  }
  std::string runs;
  for (int k = 0; k < 400; ++k) runs += k % 3 == 0 ? "abcdefghijklmnopq" : "\xe3\x80\x80\xc2\xa0x";
  EXPECT_EQ(SqueezedHash(runs), ReferenceSqueezedHash(runs));
  std::string every_byte;
  for (int k = 0; k < 4 * 256; ++k) every_byte.push_back(static_cast<char>(k * 7 % 256));
  for (size_t start = 0; start < 40; ++start) {
    const std::string_view view = std::string_view(every_byte).substr(start);
    ASSERT_EQ(SqueezedHash(view), ReferenceSqueezedHash(view)) << start;
  }
  // A long text, then a short one: the per-thread buffer is reused.
  std::string long_text(1 << 20, 'x');
  for (size_t i = 0; i < long_text.size(); i += 97) long_text[i] = ' ';
  EXPECT_EQ(SqueezedHash(long_text), ReferenceSqueezedHash(long_text));
  EXPECT_EQ(SqueezedHash("a b"), ReferenceSqueezedHash("ab"));
}

// ---- Unit sets (the pair rule's `edited` reason).

// The unit sets from every path (alone, with the shingles from one cut, narrowed from the
// splitter's in-order units) equal the reference splitter's.
TEST(ShingleHashesTest, UnitSetsMatchTheReferenceSplitter) {
  const std::vector<std::string> texts = {"",
                                          "   ",
                                          "one",
                                          "one two one",
                                          "the quick brown fox jumps over the lazy dog",
                                          "中文的文本很好，我们今天去北京。中文的文本很好",
                                          "日本語のテキストです。カタカナとひらがな",
                                          "ภาษาไทยไม่มีช่องว่าง ระหว่างคำ",
                                          "mixed中文words和english123混合",
                                          "Привет мир, как дела? Ελληνικά",
                                          "supplementary han 𠀀𠀁𠀂 and words",
                                          "\xff\xfe bad bytes \xc3 in \xe4\xb8 the middle"};
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const std::vector<uint64_t> reference = ReferenceUnits(text);
    std::vector<uint64_t> units, shingles, both_units;
    ShingleSimilarity::UnitsOfNormalized(text, &units);
    EXPECT_EQ(units, reference);
    ShingleSimilarity::ShinglesAndUnitsOfNormalized(text, &shingles, &both_units);
    EXPECT_EQ(both_units, reference);
    EXPECT_EQ(shingles, ReferenceShingles(text));
    std::vector<uint64_t> in_order_units, in_order_shingles;
    ShingleHashesInOrder(text, &in_order_units, &in_order_shingles);
    std::vector<uint32_t> narrowed, expected;
    NarrowedUnitSet(in_order_units, &narrowed);
    ShingleSimilarity::NarrowUnits(reference, &expected);
    EXPECT_EQ(narrowed, expected);
    EXPECT_EQ(narrowed, ReferenceUnitNarrow(reference));
  }
}

// The occurrence tagging agrees with counting whatever the repeats: random unit hashes drawn
// from pools of 1 to 5,000 values (a few units repeated thousands of times, or nearly all
// distinct), sizes up and down so the per-thread table is reused at every size.
TEST(ShingleHashesTest, UnitMultisetMatchesCountingOnRandomRepeats) {
  std::mt19937_64 random(25);
  const size_t sizes[] = {0, 1, 2, 3, 17, 64, 65, 1000, 5, 20000, 300, 1, 70000, 9};
  const size_t pools[] = {1, 2, 7, 100, 5000};
  for (size_t n : sizes) {
    for (size_t pool : pools) {
      SCOPED_TRACE(testing::Message() << "n " << n << " pool " << pool);
      std::vector<uint64_t> values(pool);
      for (uint64_t& value : values) value = random();
      std::vector<uint64_t> units(n);
      for (uint64_t& unit : units) unit = values[random() % pool];
      std::map<uint64_t, uint64_t> counts;
      for (uint64_t unit : units) ++counts[ReferenceMix(0x756e697473657431ULL, unit)];
      std::vector<uint64_t> elements;
      for (const auto& [h, count] : counts) {
        elements.push_back(h);
        for (uint64_t k = 1; k < count; ++k) elements.push_back(ReferenceMix(h, k));
      }
      const std::vector<uint64_t> reference = SortedDistinct(elements);
      std::vector<uint32_t> narrowed;
      NarrowedUnitSet(units, &narrowed);
      EXPECT_EQ(narrowed, ReferenceUnitNarrow(reference));
      NarrowedUnitSet(units, &narrowed, 32);
      EXPECT_EQ(narrowed, ReferenceNarrow(reference));
      UnitMultiset(&units);
      EXPECT_EQ(units, reference);
    }
  }
}

// Each Han character is one unit, each other run of letters and digits one word unit; each
// occurrence counts (a multiset), order does not, the text is normalised (case folded) first, and
// a unit's hash is not the hash of the one-unit text's shingle.
TEST(ShingleHashesTest, UnitsOfMixedScriptText) {
  auto shingler = ShingleSimilarity::Create(true);
  ASSERT_TRUE(shingler.ok());
  std::vector<uint64_t> units, shingles;
  // mixed, 中, 文, words, 和, english123, 混, 合
  ASSERT_TRUE((*shingler)->Units("mixed中文words和english123混合", &units).ok());
  EXPECT_EQ(units.size(), 8u);
  // hello x3, 世 x2, 界 x1: six elements.
  ASSERT_TRUE((*shingler)->Units("Hello HELLO 世界 hello 世", &units).ok());
  EXPECT_EQ(units.size(), 6u);
  std::vector<uint64_t> other;
  ASSERT_TRUE((*shingler)->Units("世 hello 界 世 hello hello", &other).ok());
  EXPECT_EQ(units, other);  // a multiset: order does not matter ...
  ASSERT_TRUE((*shingler)->Units("世界 hello", &other).ok());
  EXPECT_EQ(other.size(), 3u);  // ... repeats do: {hello, 世, 界} is a subset of the six
  EXPECT_TRUE(std::includes(units.begin(), units.end(), other.begin(), other.end()));
  EXPECT_DOUBLE_EQ(ShingleSimilarity::Jaccard(units, other), 0.5);
  ASSERT_TRUE((*shingler)->ShinglesAndUnits("Hello HELLO 世界 hello 世", &shingles, &other).ok());
  EXPECT_EQ(units, other);
  ASSERT_TRUE((*shingler)->Units("word", &units).ok());
  ASSERT_TRUE((*shingler)->Shingles("word", &shingles).ok());
  ASSERT_EQ(units.size(), 1u);
  ASSERT_EQ(shingles.size(), 1u);
  EXPECT_NE(units[0], shingles[0]);
  ASSERT_TRUE((*shingler)->Units(" ,. ", &units).ok());
  EXPECT_TRUE(units.empty());
}

// The `edited` reason's unit sets are kUnitBits (20) bits wide. Random collisions move the unit
// Jaccard of two multisets A, B (as sets of their 64-bit elements, |A u B| = U) by about
//   J |A xor B| / 2^(b+1)  (pairs within A u B merging: the union loses more than the
//                           intersection)
// + |A\B| |B\A| / (2^b U)  (an element of A\B meeting one of B\A: a false common element),
// an inflation (J = 0.6: ~0.0038 at 20,000 units, ~6e-5 at 300). Checked with a fixed seed on
// unit multisets made as texts make them (tokens from a vocabulary, with repeats; B is A with a
// share of its tokens replaced), the true Jaccard from the 64-bit elements: the mean inflation
// is the formula's, within its statistical error, and no pair moves by more than twice it plus
// four elements' worth.
TEST(ShingleHashesTest, TwentyBitUnitJaccardStaysWithinTheCollisionBound) {
  std::mt19937_64 random(2020);
  const double space = std::ldexp(1.0, ShingleSimilarity::kUnitBits);
  for (const auto& [n, trials] : {std::pair<size_t, int>{300, 3000}, {20000, 40}}) {
    for (double replaced : {0.1, 0.25}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " replaced " << replaced);
      std::vector<uint64_t> vocabulary(n / 2);
      double sum = 0, sum_squares = 0, expected = 0, worst = 0;
      for (int trial = 0; trial < trials; ++trial) {
        for (uint64_t& word : vocabulary) word = random();
        std::vector<uint64_t> a(n), b(n);
        for (size_t i = 0; i < n; ++i) {
          a[i] = vocabulary[random() % vocabulary.size()];
          b[i] = std::uniform_real_distribution<double>(0, 1)(random) < replaced ? random() : a[i];
        }
        std::vector<uint32_t> a20, b20;
        NarrowedUnitSet(a, &a20);
        NarrowedUnitSet(b, &b20);
        UnitMultiset(&a);
        UnitMultiset(&b);
        std::vector<uint64_t> common;
        std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
        const double i = static_cast<double>(common.size());
        const double u = static_cast<double>(a.size() + b.size()) - i;
        const double only_a = static_cast<double>(a.size()) - i;
        const double only_b = static_cast<double>(b.size()) - i;
        const double truth = i / u;
        const double bound =
            truth * (only_a + only_b) / (2 * space) + only_a * only_b / (space * u);
        const double d = ShingleSimilarity::Jaccard32(a20, b20) - truth;
        EXPECT_LE(std::abs(d), 2 * bound + 4 / u) << "trial " << trial << " J " << truth;
        sum += d;
        sum_squares += d * d;
        expected += bound;
        worst = std::max(worst, std::abs(d));
      }
      const double mean = sum / trials;
      const double error = std::sqrt(std::max(0.0, sum_squares / trials - mean * mean) / trials);
      expected /= trials;
      EXPECT_NEAR(mean, expected, 4 * error + 0.1 * expected)
          << "mean inflation " << mean << " +- " << error << ", bound " << expected << ", worst "
          << worst;
      std::printf("n %zu replaced %.2f: mean inflation %.6f +- %.6f, bound %.6f, worst %.6f\n", n,
                  replaced, mean, error, expected, worst);
    }
  }
}

}  // namespace
}  // namespace neardup
