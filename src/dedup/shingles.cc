// ShingleSimilarity implementation and the internal shingle forms of dedup/shingle_hashes.h; see
// neardup/shingles.h.
#include "neardup/shingles.h"

#include "neardup/pair_rule.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>

// xxHash inlined into this unit: unit hashes are short, and the call into the shared library
// costs as much as the hash. Same algorithm and values as the library's XXH3_64bits.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>

#include "common/utf8.h"
#include "dedup/document_hashes.h"
#include "dedup/shingle_hashes.h"

namespace neardup {

namespace {

// Scripts written without spaces between words: each character is a unit.
bool IsCharacterUnit(char32_t cp) {
  if (cp < 0x0E00) return false;
  UErrorCode error = U_ZERO_ERROR;
  UScriptCode script = uscript_getScript(static_cast<UChar32>(cp), &error);
  if (U_FAILURE(error)) return false;
  switch (script) {
    case USCRIPT_HAN:
    case USCRIPT_HIRAGANA:
    case USCRIPT_KATAKANA:
    case USCRIPT_THAI:
    case USCRIPT_LAO:
    case USCRIPT_KHMER:
    case USCRIPT_MYANMAR:
      return true;
    default:
      return false;
  }
}

bool IsWordCharacter(char32_t cp) {
  if (u_isalnum(static_cast<UChar32>(cp))) return true;
  int8_t type = u_charType(static_cast<UChar32>(cp));
  return type == U_NON_SPACING_MARK || type == U_COMBINING_SPACING_MARK;
}

// What a code point is to the unit splitter. A character of a character-unit script that is not a
// word character separates like any other non-word character.
enum UnitClass : uint8_t { kSeparator = 0, kWordCharacter = 1, kCharacterUnit = 2 };

uint8_t ClassifyCodePoint(char32_t cp) {
  const bool word = IsWordCharacter(cp);
  if (IsCharacterUnit(cp)) return word ? kCharacterUnit : kSeparator;
  return word ? kWordCharacter : kSeparator;
}

// The classes of the Basic Multilingual Plane, 256 code points a page, each page computed with
// ICU on first use (ICU's property lookups cost tens of ns a code point; a page lookup is one
// load). Pages are never freed; a page built by two threads at once is kept once.
class BmpClasses {
 public:
  uint8_t Of(char32_t cp) {
    const uint8_t* page = pages_[cp >> 8].load(std::memory_order_acquire);
    if (page == nullptr) page = Build(static_cast<uint32_t>(cp >> 8));
    return page[cp & 0xFF];
  }

 private:
  const uint8_t* Build(uint32_t index) {
    auto* page = new uint8_t[256];
    for (uint32_t k = 0; k < 256; ++k) page[k] = ClassifyCodePoint(char32_t{index << 8 | k});
    const uint8_t* expected = nullptr;
    if (pages_[index].compare_exchange_strong(expected, page, std::memory_order_acq_rel)) {
      return page;
    }
    delete[] page;
    return expected;
  }
  std::atomic<const uint8_t*> pages_[256] = {};
};

BmpClasses& Classes() {
  static BmpClasses* const classes = new BmpClasses;  // never destroyed: threads may outlive main
  return *classes;
}

inline bool IsAsciiAlnum(unsigned char c) {
  return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

uint64_t Mix(uint64_t h, uint64_t unit) {
  h ^= unit + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

// Sorts 32-bit hash values (close to uniform): a counting pass distributes them into about one
// bucket per value by their top bits, then each bucket is sorted (expected O(n) for hashes,
// O(n log n) at worst for any other values). Small arrays: std::sort.
void SortHashValues(std::vector<uint32_t>* values) {
  const size_t n = values->size();
  if (n < 64) {
    std::sort(values->begin(), values->end());
    return;
  }
  const int bits = std::min(
      16, static_cast<int>(std::bit_width(n - 1)));  // 2^bits >= n (at most 65,536 buckets)
  const int shift = 32 - bits;
  thread_local std::vector<uint32_t> scratch, counts;
  scratch.resize(n);
  counts.assign((size_t{1} << bits) + 1, 0);
  uint32_t* in = values->data();
  for (size_t i = 0; i < n; ++i) ++counts[(in[i] >> shift) + 1];
  for (size_t b = 1; b < counts.size(); ++b) counts[b] += counts[b - 1];
  uint32_t* out = scratch.data();
  for (size_t i = 0; i < n; ++i) out[counts[in[i] >> shift]++] = in[i];
  // Every bucket is now in place (bucket b ends at counts[b]); sort within buckets: insertion
  // sort for the small ones hashes give, std::sort for a large one (values that are not hashes).
  size_t begin = 0;
  for (size_t b = 0; b + 1 < counts.size(); ++b) {
    const size_t end = counts[b];
    if (end - begin > 32) {
      std::sort(out + begin, out + end);
    } else {
      for (size_t i = begin + 1; i < end; ++i) {
        const uint32_t v = out[i];
        size_t j = i;
        while (j > begin && out[j - 1] > v) {
          out[j] = out[j - 1];
          --j;
        }
        out[j] = v;
      }
    }
    begin = end;
  }
  values->swap(scratch);
}

}  // namespace

void ShingleHashesInOrder(std::string_view normal, std::vector<uint64_t>* units,
                          std::vector<uint64_t>* shingles) {
  shingles->clear();
  units->clear();
  // Whether each unit is a character unit (a shingle starting at one spans 5 units, else 3).
  thread_local std::vector<uint8_t> kinds;
  kinds.clear();
  BmpClasses& classes = Classes();
  const char* text = normal.data();
  const size_t size = normal.size();
  size_t word_start = std::string_view::npos;
  auto end_word = [&](size_t end) {
    if (word_start != std::string_view::npos) {
      units->push_back(XXH3_64bits(text + word_start, end - word_start));
      kinds.push_back(0);
      word_start = std::string_view::npos;
    }
  };
  size_t i = 0;
  while (i < size) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (IsAsciiAlnum(c)) {
        if (word_start == std::string_view::npos) word_start = i;
        ++i;
        while (i < size && IsAsciiAlnum(static_cast<unsigned char>(text[i]))) ++i;
      } else {
        end_word(i);
        ++i;
      }
      continue;
    }
    const size_t len = utf8::ValidSequenceLength(normal, i);
    if (len == 0) {
      end_word(i);
      ++i;
      continue;
    }
    const char32_t cp = utf8::Decode(normal, i, len);
    const uint8_t type = cp < 0x10000 ? classes.Of(cp) : ClassifyCodePoint(cp);
    if (type == kCharacterUnit) {
      end_word(i);
      units->push_back(XXH3_64bits(text + i, len));
      kinds.push_back(1);
    } else if (type == kWordCharacter) {
      if (word_start == std::string_view::npos) word_start = i;
    } else {
      end_word(i);
    }
    i += len;
  }
  end_word(size);
  if (units->empty()) return;
  const uint64_t* u = units->data();
  const uint8_t* kind = kinds.data();
  const size_t count = units->size();
  // The shingle size is chosen where each shingle starts, so a passage keeps its shingles
  // whatever surrounds it (a Chinese article inside an English page, a Russian one in a
  // Japanese template).
  shingles->resize(count);
  uint64_t* out = shingles->data();
  size_t made = 0;
  for (size_t start = 0; start + 3 <= count; ++start) {
    uint64_t h = Mix(Mix(Mix(0, u[start]), u[start + 1]), u[start + 2]);
    if (kind[start]) {
      if (start + 5 > count) continue;
      h = Mix(Mix(h, u[start + 3]), u[start + 4]);
    }
    out[made++] = h;
  }
  if (made == 0) {  // too short for any shingle: one of all its units
    uint64_t h = 0;
    for (size_t j = 0; j < count; ++j) h = Mix(h, u[j]);
    out[made++] = h;
  }
  shingles->resize(made);
}

uint64_t UnitSetHash(uint64_t unit) { return Mix(kUnitDomain, unit); }

namespace {

// The occurrence tags of a unit multiset without sorting: calls element(i, value) for each unit
// hash units[i], value being h = UnitSetHash(units[i]) at a unit's first occurrence and
// Mix(h, k) at its k-th repeat (k >= 1, in text order). Which of equal units gets which k does
// not matter (they are equal), so the values are exactly those UnitMultiset's sorted runs give.
// An open-addressing table of the distinct hashes counts the occurrences: expected O(n).
template <typename Element>
void TagOccurrences(std::span<const uint64_t> units, Element element) {
  const size_t n = units.size();
  if (n == 0) return;
  const int bits = std::max(4, static_cast<int>(std::bit_width(2 * n - 1)));  // >= 2n slots
  const size_t mask = (size_t{1} << bits) - 1;
  thread_local std::vector<uint64_t> keys;
  thread_local std::vector<uint32_t> counts;  // occurrences so far; 0 = an empty slot
  keys.resize(mask + 1);
  counts.assign(mask + 1, 0);
  uint64_t* key = keys.data();
  uint32_t* count = counts.data();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = UnitSetHash(units[i]);
    size_t slot = static_cast<size_t>(h >> (64 - bits));  // Mix's top bits are its best mixed
    while (count[slot] != 0 && key[slot] != h) slot = (slot + 1) & mask;
    const uint32_t k = count[slot]++;
    key[slot] = h;
    element(i, k == 0 ? h : Mix(h, k));
  }
  if (mask >= (size_t{1} << 16)) {  // a huge document's table is not kept for the thread's life
    std::vector<uint64_t>().swap(keys);
    std::vector<uint32_t>().swap(counts);
  }
}

}  // namespace

void UnitMultiset(std::vector<uint64_t>* units) {
  // The k-th repeat of a value (k >= 1) becomes Mix(value, k): one element per occurrence.
  uint64_t* out = units->data();
  TagOccurrences(*units, [out](size_t i, uint64_t value) { out[i] = value; });
  std::sort(units->begin(), units->end());
  units->erase(std::unique(units->begin(), units->end()), units->end());
}

void FoldUnitSet(std::vector<uint32_t>* set, int bits) {
  if (bits >= 32) return;
  const int shift = 32 - std::max(bits, 1);
  for (uint32_t& value : *set) value >>= shift;
  set->erase(std::unique(set->begin(), set->end()), set->end());
}

void NarrowedUnitSet(std::span<const uint64_t> units_in_order, std::vector<uint32_t>* narrow,
                     int bits) {
  // Narrowing commutes with taking the distinct values, so the occurrence tags are narrowed as
  // they come and only the 32-bit values are sorted; the fold to `bits` is monotone, so it
  // follows the sort.
  narrow->resize(units_in_order.size());
  uint32_t* out = narrow->data();
  TagOccurrences(units_in_order, [out](size_t i, uint64_t value) {
    out[i] = static_cast<uint32_t>(value ^ (value >> 32));
  });
  SortHashValues(narrow);
  narrow->erase(std::unique(narrow->begin(), narrow->end()), narrow->end());
  FoldUnitSet(narrow, bits);
}

void NarrowedSet(std::span<const uint64_t> shingles, std::vector<uint32_t>* narrow) {
  narrow->resize(shingles.size());
  uint32_t* out = narrow->data();
  for (size_t i = 0; i < shingles.size(); ++i) {
    out[i] = static_cast<uint32_t>(shingles[i] ^ (shingles[i] >> 32));
  }
  SortHashValues(narrow);
  narrow->erase(std::unique(narrow->begin(), narrow->end()), narrow->end());
}

struct ShingleSimilarity::Impl {
  std::unique_ptr<TextNormalizer> normalizer;
};

ShingleSimilarity::ShingleSimilarity(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShingleSimilarity::~ShingleSimilarity() = default;

const NormalizeOptions& ShingleSimilarity::normalize_options() const {
  return impl_->normalizer->options();
}

Result<std::unique_ptr<ShingleSimilarity>> ShingleSimilarity::Create(
    bool traditional_to_simplified) {
  NormalizeOptions options;
  options.replace_invalid_utf8 = true;
  options.strip_markup = true;
  options.nfkc = true;
  options.case_fold = true;
  options.traditional_to_simplified = traditional_to_simplified;
  options.fold_whitespace = true;
  auto normalizer = TextNormalizer::Create(options);
  if (!normalizer.ok()) return normalizer.status();
  auto impl = std::make_unique<Impl>();
  impl->normalizer = std::move(*normalizer);
  return std::unique_ptr<ShingleSimilarity>(new ShingleSimilarity(std::move(impl)));
}

Status ShingleSimilarity::Shingles(std::string_view text, std::vector<uint64_t>* shingles) const {
  shingles->clear();
  std::string normal;
  NEARDUP_RETURN_IF_ERROR(impl_->normalizer->Normalize(text, &normal));
  ShinglesOfNormalized(normal, shingles);
  return Status::Ok();
}

void ShingleSimilarity::ShinglesOfNormalized(std::string_view normal,
                                             std::vector<uint64_t>* shingles) {
  std::vector<uint64_t> units;
  ShingleHashesInOrder(normal, &units, shingles);
  std::sort(shingles->begin(), shingles->end());
  shingles->erase(std::unique(shingles->begin(), shingles->end()), shingles->end());
}

Status ShingleSimilarity::Units(std::string_view text, std::vector<uint64_t>* units) const {
  units->clear();
  std::string normal;
  NEARDUP_RETURN_IF_ERROR(impl_->normalizer->Normalize(text, &normal));
  UnitsOfNormalized(normal, units);
  return Status::Ok();
}

void ShingleSimilarity::UnitsOfNormalized(std::string_view normal, std::vector<uint64_t>* units) {
  std::vector<uint64_t> shingles;
  ShinglesAndUnitsOfNormalized(normal, &shingles, units);
}

void ShingleSimilarity::ShinglesAndUnitsOfNormalized(std::string_view normal,
                                                     std::vector<uint64_t>* shingles,
                                                     std::vector<uint64_t>* units) {
  ShingleHashesInOrder(normal, units, shingles);
  std::sort(shingles->begin(), shingles->end());
  shingles->erase(std::unique(shingles->begin(), shingles->end()), shingles->end());
  UnitMultiset(units);
}

Status ShingleSimilarity::ShinglesAndUnits(std::string_view text, std::vector<uint64_t>* shingles,
                                           std::vector<uint64_t>* units) const {
  shingles->clear();
  units->clear();
  std::string normal;
  NEARDUP_RETURN_IF_ERROR(impl_->normalizer->Normalize(text, &normal));
  ShinglesAndUnitsOfNormalized(normal, shingles, units);
  return Status::Ok();
}

namespace {

// |a ∩ b| / |a ∪ b| from the sizes.
inline double JaccardOf(size_t common, size_t na, size_t nb) {
  return static_cast<double>(common) / static_cast<double>(na + nb - common);
}

template <typename T>
size_t IntersectionSize(std::span<const T> a, std::span<const T> b) {
  size_t i = 0, j = 0, common = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  return common;
}
}  // namespace

bool SameNormalization(const FingerprintOptions& fingerprint, const NormalizeOptions& shingles) {
  const NormalizeOptions& f = fingerprint.normalize;
  return fingerprint.profile != HashProfile::kYanyiwuSimhash &&
         f.strip_markup == shingles.strip_markup && f.nfkc == shingles.nfkc &&
         f.case_fold == shingles.case_fold &&
         f.traditional_to_simplified == shingles.traditional_to_simplified &&
         f.fold_whitespace == shingles.fold_whitespace &&
         f.opencc_config == shingles.opencc_config &&
         (f.replace_invalid_utf8 == shingles.replace_invalid_utf8 || !f.replace_invalid_utf8);
}

double ShingleSimilarity::Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t common = IntersectionSize<uint64_t>(a, b);
  return JaccardOf(common, a.size(), b.size());
}

double ShingleSimilarity::Jaccard32(const std::vector<uint32_t>& a,
                                    const std::vector<uint32_t>& b) {
  return neardup::Jaccard32(a, b);
}

double Jaccard32(std::span<const uint32_t> a, std::span<const uint32_t> b) {
  if (a.empty() && b.empty()) return 1.0;
  return JaccardOf(IntersectionSize(a, b), a.size(), b.size());
}

bool ReachesJaccard(std::span<const uint32_t> a, std::span<const uint32_t> b, double threshold,
                    double* similarity) {
  if (a.empty() && b.empty()) {
    *similarity = 1.0;
    return 1.0 >= threshold;
  }
  const size_t na = a.size(), nb = b.size();
  const size_t smaller = std::min(na, nb);
  // JaccardOf(c) grows with c, so the pair reaches the threshold iff the intersection holds at
  // least `need` elements, the smallest c with JaccardOf(c) >= threshold (the same expression, so
  // the same rounding). c <= smaller, and JaccardOf(smaller) = smaller / larger.
  if (JaccardOf(smaller, na, nb) < threshold) return false;
  const double estimate = threshold * static_cast<double>(na + nb) / (1.0 + threshold);
  size_t need = std::min(smaller, static_cast<size_t>(std::max(0.0, estimate)));
  while (need > 0 && JaccardOf(need - 1, na, nb) >= threshold) --need;
  while (JaccardOf(need, na, nb) < threshold) ++need;  // ends: JaccardOf(smaller) >= threshold
  size_t i = 0, j = 0, common = 0;
  while (i < na && j < nb) {
    if (a[i] < b[j]) {
      ++i;
      if (common + std::min(na - i, nb - j) < need) return false;
    } else if (b[j] < a[i]) {
      ++j;
      if (common + std::min(na - i, nb - j) < need) return false;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  if (common < need) return false;
  *similarity = JaccardOf(common, na, nb);
  return true;
}

void ShingleSimilarity::Narrow(const std::vector<uint64_t>& shingles,
                               std::vector<uint32_t>* narrow) {
  NarrowedSet(shingles, narrow);
}

void ShingleSimilarity::NarrowUnits(const std::vector<uint64_t>& units,
                                    std::vector<uint32_t>* narrow, int bits) {
  NarrowedSet(units, narrow);
  FoldUnitSet(narrow, bits);
}

Result<double> ShingleSimilarity::VerifiedJaccard(std::string_view a, std::string_view b) const {
  std::vector<uint64_t> wide;
  std::vector<uint32_t> na, nb;
  NEARDUP_RETURN_IF_ERROR(Shingles(a, &wide));
  Narrow(wide, &na);
  NEARDUP_RETURN_IF_ERROR(Shingles(b, &wide));
  Narrow(wide, &nb);
  return Jaccard32(na, nb);
}

double ShingleSimilarity::Containment(const std::vector<uint64_t>& a,
                                      const std::vector<uint64_t>& b) {
  if (a.empty() || b.empty()) return a.empty() && b.empty() ? 1.0 : 0.0;
  size_t common = IntersectionSize<uint64_t>(a, b);
  return static_cast<double>(common) / static_cast<double>(std::min(a.size(), b.size()));
}

// The facts of one document for the pair rule (neardup/pair_rule.h); here, beside the shingler,
// so that pair_rule.cc needs no text processing (the fuzzed store links it alone).
Status ComputeDocumentFacts(std::string_view text, const ShingleSimilarity& shingler,
                            DocumentFacts* facts) {
  facts->content_hash = XXH3_64bits(text.data(), text.size());
  facts->text_bytes = text.size();
  facts->squeezed_hash = SqueezedHash(text);
  std::vector<uint64_t> wide, units;
  NEARDUP_RETURN_IF_ERROR(shingler.ShinglesAndUnits(text, &wide, &units));
  ShingleSimilarity::Narrow(wide, &facts->shingles);
  ShingleSimilarity::NarrowUnits(units, &facts->units);
  return Status::Ok();
}

}  // namespace neardup
