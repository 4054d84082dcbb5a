// ShingleSimilarity implementation; see shingles.h.
#include "neardup/shingles.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <xxhash.h>

#include <algorithm>

#include "common/utf8.h"

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

uint64_t Mix(uint64_t h, uint64_t unit) {
  h ^= unit + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

}  // namespace

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
  shingles->clear();
  std::vector<uint64_t> units;
  size_t character_units = 0;
  size_t word_start = std::string::npos;
  auto end_word = [&](size_t end) {
    if (word_start != std::string::npos) {
      units.push_back(XXH3_64bits(normal.data() + word_start, end - word_start));
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
    if (IsCharacterUnit(cp)) {
      end_word(i);
      if (IsWordCharacter(cp)) {
        units.push_back(XXH3_64bits(normal.data() + i, len));
        ++character_units;
      }
    } else if (IsWordCharacter(cp)) {
      if (word_start == std::string::npos) word_start = i;
    } else {
      end_word(i);
    }
    i += len;
  }
  end_word(normal.size());
  if (units.empty()) return;
  const size_t n = character_units * 2 >= units.size() ? 5 : 3;
  if (units.size() <= n) {
    uint64_t h = 0;
    for (uint64_t unit : units) h = Mix(h, unit);
    shingles->push_back(h);
    return;
  }
  shingles->reserve(units.size() - n + 1);
  for (size_t start = 0; start + n <= units.size(); ++start) {
    uint64_t h = 0;
    for (size_t j = 0; j < n; ++j) h = Mix(h, units[start + j]);
    shingles->push_back(h);
  }
  std::sort(shingles->begin(), shingles->end());
  shingles->erase(std::unique(shingles->begin(), shingles->end()), shingles->end());
}

namespace {
template <typename T>
size_t IntersectionSize(const std::vector<T>& a, const std::vector<T>& b) {
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

double ShingleSimilarity::Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t common = IntersectionSize(a, b);
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

double ShingleSimilarity::Jaccard32(const std::vector<uint32_t>& a,
                                    const std::vector<uint32_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t common = IntersectionSize(a, b);
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

void ShingleSimilarity::Narrow(const std::vector<uint64_t>& shingles,
                               std::vector<uint32_t>* narrow) {
  narrow->clear();
  narrow->reserve(shingles.size());
  for (uint64_t h : shingles) narrow->push_back(static_cast<uint32_t>(h ^ (h >> 32)));
  std::sort(narrow->begin(), narrow->end());
  narrow->erase(std::unique(narrow->begin(), narrow->end()), narrow->end());
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
  size_t common = IntersectionSize(a, b);
  return static_cast<double>(common) / static_cast<double>(std::min(a.size(), b.size()));
}

}  // namespace neardup
