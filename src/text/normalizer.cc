// TextNormalizer: UTF-8 validation, markup stripping, ICU NFKC / case folding, OpenCC Traditional
// -> Simplified and whitespace folding; see neardup/text.h.
#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <simdjson.h>
#include <opencc/DictEntry.hpp>
#include <opencc/Lexicon.hpp>
#include <opencc/MarisaDict.hpp>
#include <opencc/SimpleConverter.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/string_hash.h"
#include "common/utf8.h"
#include "neardup/text.h"

#ifndef NEARDUP_DEFAULT_OPENCC_DIR
#define NEARDUP_DEFAULT_OPENCC_DIR "/usr/share/opencc"
#endif

namespace neardup {
namespace {

// Code points up to this bound are tracked in the "may change under t2s" bitmap.
constexpr char32_t kMaxTrackedCodePoint = 0x40000;

std::vector<char32_t> CodePoints(std::string_view text) {
  std::vector<char32_t> points;
  size_t i = 0;
  while (i < text.size()) {
    size_t len = utf8::ValidSequenceLength(text, i);
    if (len == 0) {
      ++i;
      continue;
    }
    points.push_back(utf8::Decode(text, i, len));
    i += len;
  }
  return points;
}

// Adds to *may_change every code point whose presence can make OpenCC change a text: the keys of
// the dictionary `path` whose conversion differs, position by position. Returns false if the
// dictionary cannot be read (the caller then converts every Han text).
bool AddChangingCodePoints(const std::string& path, std::vector<bool>* may_change,
                           std::vector<bool>* in_key) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return false;
  try {
    opencc::MarisaDictPtr dict = opencc::MarisaDict::NewFromFile(file);
    std::fclose(file);
    file = nullptr;
    for (const auto& entry : *dict->GetLexicon()) {
      std::vector<char32_t> key = CodePoints(entry->Key());
      for (const std::string& value : entry->Values()) {
        std::vector<char32_t> converted = CodePoints(value);
        for (size_t i = 0; i < key.size(); ++i) {
          if (key[i] < kMaxTrackedCodePoint) (*in_key)[key[i]] = true;
          bool same = key.size() == converted.size() && key[i] == converted[i];
          if (!same && key[i] < kMaxTrackedCodePoint) (*may_change)[key[i]] = true;
        }
      }
    }
    return true;
  } catch (...) {
    if (file != nullptr) std::fclose(file);
    return false;
  }
}

// True if `text` holds a code point OpenCC may convert (any CJK ideograph without the bitmap).
bool MayChange(std::string_view text, const std::vector<bool>& may_change) {
  // ASCII and two-byte sequences hold no CJK ideograph: lead bytes below 0xE3 are skipped.
  return utf8::AnyCodePoint(text, 0xE3, [&may_change](char32_t cp) {
    if (may_change.empty()) return utf8::IsHanIdeograph(cp);
    return cp >= kMaxTrackedCodePoint || may_change[cp];
  });
}

// Per-thread buffers the stages write into alternately; reused from one text to the next, so the
// steady state allocates nothing.
struct Scratch {
  std::string replaced;
  std::string stage[2];
  // Gives back the memory of buffers grown by an earlier huge text (more than 64 MiB and 8 times
  // the text at hand), so one outlier does not pin that much memory per thread.
  void Trim(size_t text_size) {
    for (std::string* s : {&replaced, &stage[0], &stage[1]}) {
      if (s->capacity() > (size_t{64} << 20) && s->capacity() > 8 * text_size)
        std::string().swap(*s);
    }
  }
  // A buffer for the next stage's output that does not hold `current`.
  std::string* Next(std::string_view current) {
    return current.data() == stage[0].data() ? &stage[1] : &stage[0];
  }
};

// Not inlined: a thread_local seen through an inlined accessor makes the compiler recompute its
// address with __tls_get_addr (the library is a shared object) at every use in Normalize.
[[gnu::noinline]] Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// OpenCC conversions of the pieces ConvertT2s sent it, per thread, for the normaliser `owner`
// (TextNormalizer::Impl::id). Text repeats its kanji runs: each distinct one is converted once.
struct T2sCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::string, StringHash, std::equal_to<>> converted;
};
constexpr size_t kMaxCachedPieces = 1 << 16;  // then the cache starts over

[[gnu::noinline]] T2sCache& ThreadT2sCache() {
  thread_local T2sCache cache;
  return cache;
}

uint64_t NextNormalizerId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

void AppendLowerAscii(std::string_view ascii, std::string* out) {
  size_t at = out->size();
  out->resize(at + ascii.size());
  char* dest = out->data() + at;
  for (char c : ascii) {
    *dest++ = static_cast<char>(c + ((static_cast<unsigned char>(c - 'A') < 26) ? 32 : 0));
  }
}

}  // namespace

// Facts about one Normalizer2 per BMP code point, for normalising segment by segment without
// ICU. ICU's hasBoundaryBefore(c) says a text can be cut before c and the pieces normalised on
// their own. So a code point c with a boundary before it that is followed by one (or by the end)
// is a piece of its own and normalises to N(c) whatever surrounds it: itself when c is "kept",
// or a short replacement (uppercase letters, compatibility forms) read from a table. Everything
// else (combining sequences, long expansions, supplementary planes) goes to ICU in pieces cut at
// boundaries.
struct SegmentTables {
  // Code points below this bound have their replacement in `mapped`.
  static constexpr char32_t kMappedLimit = 0x3000;
  struct Mapped {
    uint8_t size = 0;  // 0: not tabled (goes to ICU)
    char bytes[7] = {};
  };
  std::vector<uint64_t> boundary;           // bit c: hasBoundaryBefore(c)
  std::vector<uint64_t> kept;               // bit c: boundary before c and N(c) == c
  std::array<uint8_t, 0x800> kept_small{};  // the same below U+0800, a byte per code point
  std::vector<Mapped> mapped;  // N(c) for other code points with a boundary before them

  bool Has(const std::vector<uint64_t>& bits, char32_t c) const {
    return (bits[c >> 6] >> (c & 63)) & 1;
  }
};

const SegmentTables* BuildSegmentTables(const icu::Normalizer2& normalizer) {
  auto* tables = new SegmentTables;
  tables->boundary.assign(0x10000 / 64, 0);
  tables->kept.assign(0x10000 / 64, 0);
  tables->mapped.resize(SegmentTables::kMappedLimit);
  std::string one, normalized;
  for (char32_t c = 0; c < 0x10000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    if (!normalizer.hasBoundaryBefore(static_cast<UChar32>(c))) continue;
    tables->boundary[c >> 6] |= uint64_t{1} << (c & 63);
    one.clear();
    utf8::Append(c, &one);
    normalized.clear();
    icu::StringByteSink<std::string> sink(&normalized);
    UErrorCode error = U_ZERO_ERROR;
    normalizer.normalizeUTF8(0, icu::StringPiece(one.data(), static_cast<int32_t>(one.size())),
                             sink, nullptr, error);
    if (U_FAILURE(error)) continue;  // left to ICU
    if (normalized == one) {
      tables->kept[c >> 6] |= uint64_t{1} << (c & 63);
      if (c < 0x800) tables->kept_small[c] = 1;
    } else if (c < SegmentTables::kMappedLimit && normalized.size() <= 7) {
      SegmentTables::Mapped& m = tables->mapped[c];
      m.size = static_cast<uint8_t>(normalized.size());
      std::memcpy(m.bytes, normalized.data(), normalized.size());
    }
  }
  return tables;
}

// The tables of NFKC (case_fold false) or NFKC_Casefold (ICU's instances are process-wide
// singletons), built once per process.
const SegmentTables* SegmentTablesFor(const icu::Normalizer2& normalizer, bool case_fold) {
  if (case_fold) {
    static const SegmentTables* const nfkc_cf = BuildSegmentTables(normalizer);
    return nfkc_cf;
  }
  static const SegmentTables* const nfkc = BuildSegmentTables(normalizer);
  return nfkc;
}

// Byte offset of the first invalid UTF-8 sequence, or npos: simdjson's vector validation (the
// same rules, RFC 3629) for the common valid text, the byte-wise scan to name the offset.
size_t FirstInvalidUtf8(std::string_view text) {
  if (simdjson::validate_utf8(text.data(), text.size())) return std::string_view::npos;
  return utf8::FindInvalid(text);
}

struct TextNormalizer::Impl {
  NormalizeOptions options;
  const uint64_t id = NextNormalizerId();        // names this configuration in T2sCache
  const icu::Normalizer2* normalizer = nullptr;  // owned by ICU; thread-safe
  // ASCII under the configured NFKC / case folding maps to itself, lowercased when case folding
  // (checked against ICU at Create), and every ASCII character has a normalisation boundary
  // before it: ASCII runs can be handled without ICU.
  bool ascii_shortcut = false;
  // Per-code-point facts of the configured Normalizer2 (NFKC or NFKC_Casefold), shared by every
  // normaliser of that kind; null without NFKC or without the ASCII shortcut.
  const struct SegmentTables* tables = nullptr;

  // NFKC / NFKC_Casefold / case folding of `text`, appended to *out.
  Status IcuNormalize(std::string_view text, bool case_fold, std::string* out) const {
    icu::StringByteSink<std::string> sink(out);
    UErrorCode error = U_ZERO_ERROR;
    icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
    if (normalizer != nullptr) {
      normalizer->normalizeUTF8(0, piece, sink, nullptr, error);
    } else if (case_fold) {
      icu::CaseMap::utf8Fold(0, piece, sink, nullptr, error);
    }
    if (U_FAILURE(error)) {
      return Status::Internal(std::string("ICU normalisation failed: ") + u_errorName(error));
    }
    return Status::Ok();
  }
  std::unique_ptr<opencc::SimpleConverter> t2s;  // Convert() is const and read-only
  // may_change_under_t2s[cp]: OpenCC may rewrite a text holding cp. Texts without any such code
  // point skip OpenCC (most Simplified text). Empty: convert every text with Han characters.
  std::vector<bool> may_change_under_t2s;
  // in_t2s_key[cp]: cp occurs in some key of the t2s dictionaries. OpenCC matches dictionary keys
  // at each position, so no match spans a code point outside every key: the text can be cut
  // there and the pieces converted on their own, and a piece without any may-change code point
  // is already its conversion. Empty: cut only at NUL.
  std::vector<bool> in_t2s_key;

  // OpenCC t2s of `text` into *out. Cuts at NUL bytes, where OpenCC itself would stop reading (it
  // takes C strings) and drop the rest of the text. The reference path.
  Status ConvertT2s(std::string_view text, std::string* out) const {
    out->clear();
    out->reserve(text.size());
    size_t piece = 0;
    while (true) {
      size_t end = text.find('\0', piece);
      if (end == std::string_view::npos) end = text.size();
      if (end > piece) {
        try {
          out->append(t2s->Convert(text.data() + piece, end - piece));
        } catch (const std::exception& e) {
          return Status::Internal(std::string("OpenCC conversion failed: ") + e.what());
        }
      }
      if (end == text.size()) return Status::Ok();
      out->push_back('\0');
      piece = end + 1;
    }
  }

  // What the fast path needs to know of a code point (or of a stray byte, by its value).
  enum T2sClass : uint8_t {
    kT2sCut = 1,     // NUL, or (in_t2s_key known) in no key: pieces are cut around it
    kT2sChanges = 2  // its piece may change
  };
  uint8_t T2sClassOf(char32_t cp) const {
    const bool changes = may_change_under_t2s.empty()
                             ? utf8::IsHanIdeograph(cp)
                             : cp >= kMaxTrackedCodePoint || may_change_under_t2s[cp];
    const bool cut =
        cp == 0 || (!in_t2s_key.empty() && cp < kMaxTrackedCodePoint && !in_t2s_key[cp]);
    return static_cast<uint8_t>((cut ? kT2sCut : 0) | (changes ? kT2sChanges : 0));
  }
  // T2sClassOf(cp) for cp < 0x10000, two bits each (16 KB), filled at Create.
  std::vector<uint64_t> bmp_t2s_classes;
  uint8_t BmpT2sClass(char32_t cp) const {
    return static_cast<uint8_t>((bmp_t2s_classes[cp >> 5] >> ((cp & 31) * 2)) & 3);
  }
  // Whether every ASCII character is kT2sCut alone (so a run of ASCII is skipped at once).
  bool ascii_cuts = false;

  // The fast path's ConvertT2s, when MayChange(text) holds, in one pass that also decides
  // MayChange: sets *changed and writes *out only if the text changes. Cuts at NUL and, when
  // in_t2s_key is known, at every code point outside all keys; only the pieces that may change go
  // to OpenCC, through the per-thread T2sCache; everything between them is copied in blocks.
  Status ConvertChangingPieces(std::string_view text, std::string* out, bool* changed) const {
    *changed = false;
    T2sCache& cache = ThreadT2sCache();
    if (cache.owner != id) {
      cache.converted.clear();
      cache.owner = id;
    }
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    // The class and length of the code point (or stray byte) at i.
    auto class_at = [&](size_t i, size_t* len) -> uint8_t {
      const unsigned char b0 = bytes[i];
      if (b0 < 0x80) {
        *len = 1;
        return BmpT2sClass(b0);
      }
      if (b0 >= 0xE1 && b0 <= 0xEF && b0 != 0xED && i + 2 < n && (bytes[i + 1] & 0xC0) == 0x80 &&
          (bytes[i + 2] & 0xC0) == 0x80) {
        // The common case: a valid three-byte sequence (no overlong or surrogate form).
        *len = 3;
        return BmpT2sClass(((b0 & 0x0Fu) << 12) | ((bytes[i + 1] & 0x3Fu) << 6) |
                           (bytes[i + 2] & 0x3Fu));
      }
      *len = utf8::ValidSequenceLength(text, i);
      if (*len == 0) {
        *len = 1;  // a stray byte (the text is valid UTF-8 by now): kept in its piece as itself
        return BmpT2sClass(b0);
      }
      const char32_t cp = utf8::Decode(text, i, *len);
      return cp < 0x10000 ? BmpT2sClass(cp) : T2sClassOf(cp);
    };
    // MayChange(text): it visits only the valid sequences of lead byte 0xE3 or more (U+3000 and
    // up), so a changing code point below U+3000 or a stray byte does not count.
    bool triggered = false;
    auto note = [&](size_t at, size_t len, uint8_t cls) {
      triggered = triggered || ((cls & kT2sChanges) != 0 && len >= 3 && bytes[at] >= 0xE3);
    };
    size_t copied = 0;  // text[0, copied) is in *out (once *changed)
    size_t piece = 0;   // where the piece holding text[i] starts (after the last cut)
    size_t i = 0;
    while (i < n) {
      if (ascii_cuts && bytes[i] < 0x80) {
        // A run of ASCII: every character cuts, none changes.
        ++i;
#ifdef __SSE2__
        while (i + 16 <= n && _mm_movemask_epi8(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(bytes + i))) == 0) {
          i += 16;
        }
#endif
        while (i < n && bytes[i] < 0x80) ++i;
        piece = i;
        continue;
      }
      size_t len = 0;
      const uint8_t cls = class_at(i, &len);
      if (cls != kT2sChanges) {  // the common case: a cut, or no change
        i += len;
        piece = (cls & kT2sCut) != 0 ? i : piece;
        continue;
      }
      // A code point that may change: its piece runs from `piece` to the next cut.
      note(i, len, cls);
      i += len;
      while (i < n) {
        const uint8_t next = class_at(i, &len);
        if ((next & kT2sCut) != 0) break;
        note(i, len, next);
        i += len;
      }
      const std::string_view part = text.substr(piece, i - piece);
      const std::string* conversion = nullptr;
      NEARDUP_RETURN_IF_ERROR(CachedT2s(part, &cache, &conversion));
      if (*conversion != part) {  // else it stays in the block still to copy
        if (!*changed) {
          *changed = true;
          out->clear();
          out->reserve(n + n / 8);
        }
        out->append(text.substr(copied, piece - copied));
        out->append(*conversion);
        copied = i;
      }
      piece = i;  // text[i] is a cut (or the end)
    }
    if (!triggered) {
      *changed = false;  // MayChange(text) is false: the text stays as it is
    } else if (*changed) {
      out->append(text.substr(copied));
    }
    return Status::Ok();
  }

  // OpenCC's conversion of `part`, from the cache or converted and cached.
  Status CachedT2s(std::string_view part, T2sCache* cache, const std::string** conversion) const {
    auto it = cache->converted.find(part);
    if (it == cache->converted.end()) {
      std::string converted;
      try {
        converted = t2s->Convert(part.data(), part.size());
      } catch (const std::exception& e) {
        return Status::Internal(std::string("OpenCC conversion failed: ") + e.what());
      }
      if (cache->converted.size() >= kMaxCachedPieces) cache->converted.clear();
      it = cache->converted.emplace(std::string(part), std::move(converted)).first;
    }
    *conversion = &it->second;
    return Status::Ok();
  }

  // NFKC / NFKC_Casefold of valid UTF-8 `text` into *out (replaced), piece by piece with
  // `tables`: kept code points copied, tabled ones replaced, ICU for the rest.
  Status SegmentNormalize(std::string_view text, std::string* out) const;
  class SegmentPass;  // one SegmentNormalize over a text
  // The plain path (NormalizeOptions::fast_paths off).
  Status ReferenceNormalize(std::string_view text, std::string* out) const;
  // `ascii` case-folded (when options.case_fold) or copied, appended to *out.
  void AppendLowerOrCopy(std::string_view ascii, std::string* out) const;
};

namespace {

// Whether ASCII text may skip ICU: checked once per configuration against ICU itself.
bool AsciiShortcutHolds(const TextNormalizer::Impl& impl, bool case_fold) {
  for (int c = 0; c < 0x80; ++c) {
    if (impl.normalizer != nullptr && !impl.normalizer->hasBoundaryBefore(c)) return false;
    std::string one(1, static_cast<char>(c));
    std::string folded;
    if (!impl.IcuNormalize(one, case_fold, &folded).ok()) return false;
    std::string expected;
    if (case_fold) {
      AppendLowerAscii(one, &expected);
    } else {
      expected = one;
    }
    if (folded != expected) return false;
  }
  return true;
}

}  // namespace

TextNormalizer::TextNormalizer(const NormalizeOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}

const NormalizeOptions& TextNormalizer::options() const { return impl_->options; }

TextNormalizer::~TextNormalizer() = default;

Result<std::unique_ptr<TextNormalizer>> TextNormalizer::Create(const NormalizeOptions& options) {
  std::unique_ptr<TextNormalizer> normalizer(new TextNormalizer(options));
  UErrorCode error = U_ZERO_ERROR;
  if (options.nfkc && options.case_fold) {
    normalizer->impl_->normalizer = icu::Normalizer2::getNFKCCasefoldInstance(error);
  } else if (options.nfkc) {
    normalizer->impl_->normalizer = icu::Normalizer2::getNFKCInstance(error);
  }
  if (U_FAILURE(error)) {
    return Status::Internal(std::string("ICU normalizer unavailable: ") + u_errorName(error));
  }
  if (options.nfkc || options.case_fold) {
    normalizer->impl_->ascii_shortcut = AsciiShortcutHolds(*normalizer->impl_, options.case_fold);
    if (normalizer->impl_->ascii_shortcut && normalizer->impl_->normalizer != nullptr) {
      normalizer->impl_->tables =
          SegmentTablesFor(*normalizer->impl_->normalizer, options.nfkc && options.case_fold);
    }
  }
  if (options.traditional_to_simplified) {
    std::string config = options.opencc_config.empty()
                             ? std::string(NEARDUP_DEFAULT_OPENCC_DIR) + "/t2s.json"
                             : options.opencc_config;
    std::error_code fs_error;
    if (!std::filesystem::exists(config, fs_error)) {
      return Status::NotFound("OpenCC configuration " + config + " does not exist");
    }
    try {
      normalizer->impl_->t2s = std::make_unique<opencc::SimpleConverter>(config);
      if (options.opencc_config.empty()) {
        // The default t2s.json converts with TSPhrases then TSCharacters.
        std::vector<bool> may_change(kMaxTrackedCodePoint, false);
        std::vector<bool> in_key(kMaxTrackedCodePoint, false);
        std::string dir = NEARDUP_DEFAULT_OPENCC_DIR;
        if (AddChangingCodePoints(dir + "/TSPhrases.ocd2", &may_change, &in_key) &&
            AddChangingCodePoints(dir + "/TSCharacters.ocd2", &may_change, &in_key)) {
          normalizer->impl_->may_change_under_t2s = std::move(may_change);
          normalizer->impl_->in_t2s_key = std::move(in_key);
        }
      }
    } catch (const std::exception& e) {
      return Status::InvalidArgument("cannot load OpenCC configuration " + config + ": " +
                                     e.what());
    }
    Impl& impl = *normalizer->impl_;
    impl.bmp_t2s_classes.assign(0x10000 / 32, 0);
    impl.ascii_cuts = true;
    for (char32_t cp = 0; cp < 0x10000; ++cp) {
      const uint8_t cls = impl.T2sClassOf(cp);
      impl.bmp_t2s_classes[cp >> 5] |= uint64_t{cls} << ((cp & 31) * 2);
      if (cp < 0x80 && cls != Impl::kT2sCut) impl.ascii_cuts = false;
    }
  }
  return normalizer;
}

Status TextNormalizer::Normalize(std::string_view text, std::string* out) const {
  if (!impl_->options.fast_paths) return impl_->ReferenceNormalize(text, out);
  Scratch& scratch = ThreadScratch();
  scratch.Trim(text.size());
  size_t invalid = FirstInvalidUtf8(text);
  if (invalid != std::string_view::npos) {
    if (!impl_->options.replace_invalid_utf8) {
      return Status::InvalidUtf8("invalid UTF-8 at byte " + std::to_string(invalid));
    }
    scratch.replaced = utf8::ReplaceInvalid(text);
    text = scratch.replaced;
  }
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::ResourceExhausted("text of " + std::to_string(text.size()) +
                                     " bytes is too large to normalise (limit 2 GiB)");
  }
  std::string_view current = text;
  // Markup stripping changes nothing in a text without '<' or '&'.
  if (impl_->options.strip_markup && (current.find('<') != std::string_view::npos ||
                                      current.find('&') != std::string_view::npos)) {
    std::string* next = scratch.Next(current);
    StripMarkupTo(current, next);
    current = *next;
  }
  if (impl_->normalizer != nullptr || impl_->options.case_fold) {
    std::string* next = scratch.Next(current);
    next->clear();
    const size_t non_ascii = impl_->tables != nullptr ? 0
                             : impl_->ascii_shortcut  ? utf8::CountNonAscii(current)
                                                      : current.size();
    if (impl_->tables != nullptr) {
      NEARDUP_RETURN_IF_ERROR(impl_->SegmentNormalize(current, next));
    } else if (non_ascii == 0) {
      if (impl_->options.case_fold) {
        AppendLowerAscii(current, next);
      } else {
        next->assign(current);  // NFKC leaves ASCII as it is
      }
    } else if (non_ascii * 8 < current.size()) {
      // Mostly ASCII: ASCII runs by hand, ICU on each non-ASCII island together with the ASCII
      // character before it (which may combine with a following mark). Every ASCII character has
      // a normalisation boundary before it, so the pieces normalise independently.
      next->reserve(current.size() + current.size() / 8);
      size_t i = 0;
      const size_t n = current.size();
      while (i < n) {
        size_t j = i;
        while (j < n && static_cast<unsigned char>(current[j]) < 0x80) ++j;
        if (j == n) {
          impl_->AppendLowerOrCopy(current.substr(i), next);
          break;
        }
        size_t island = j > i ? j - 1 : j;
        impl_->AppendLowerOrCopy(current.substr(i, island - i), next);
        size_t k = j;
        while (k < n && static_cast<unsigned char>(current[k]) >= 0x80) ++k;
        NEARDUP_RETURN_IF_ERROR(impl_->IcuNormalize(current.substr(island, k - island),
                                                    impl_->options.case_fold, next));
        i = k;
      }
    } else {
      next->reserve(current.size() + current.size() / 8);
      NEARDUP_RETURN_IF_ERROR(impl_->IcuNormalize(current, impl_->options.case_fold, next));
    }
    current = *next;
  }
  if (impl_->t2s != nullptr) {
    std::string* next = scratch.Next(current);
    bool changed = false;
    NEARDUP_RETURN_IF_ERROR(impl_->ConvertChangingPieces(current, next, &changed));
    if (changed) current = *next;
  }
  if (impl_->options.fold_whitespace) {
    if (current.data() >= out->data() && current.data() < out->data() + out->capacity()) {
      std::string* copy = scratch.Next(current);  // `text` is *out itself: fold from a copy
      copy->assign(current);
      current = *copy;
    }
    FoldWhitespaceTo(current, out);
  } else {
    out->assign(current);
  }
  return Status::Ok();
}

void TextNormalizer::Impl::AppendLowerOrCopy(std::string_view ascii, std::string* out) const {
  if (options.case_fold) {
    AppendLowerAscii(ascii, out);
  } else {
    out->append(ascii);
  }
}

// One SegmentNormalize over a text, in two states, at position p. Direct (icu == kNone):
// text[run_, p) are kept code points not yet copied out. ICU (icu != kNone): text[icu, p) is a
// run of whole pieces that goes to ICU. prev / prev_out: where the last code point handled
// directly starts, in the text and (when it was written out, prev < run_) in the output: it is
// handed to ICU after all when the code point after it has no boundary before it.
// Speed: p, icu, prev and prev_out are Run's locals handed to the steps, every step is inlined
// into Run and Run into SegmentNormalize, and ICU's output buffer is the caller's, so that no
// state escapes to a call and all of it stays in registers.
class TextNormalizer::Impl::SegmentPass {
 public:
  // `icu_out`: scratch for ICU's output.
  SegmentPass(const Impl& impl, std::string_view text, std::string* out, std::string* icu_out)
      : impl_(impl),
        t_(*impl.tables),
        fold_(impl.options.case_fold),
        text_(text),
        in_(reinterpret_cast<const unsigned char*>(text.data())),
        n_(text.size()),
        out_(out),
        icu_out_(icu_out) {}

  [[gnu::always_inline]] Status Run() {
    // Output through a raw pointer into *out_, grown as needed; `used_` bytes are written.
    out_->resize(n_ + 64);
    const unsigned char* const in = in_;
    const size_t n = n_;
    const SegmentTables& t = t_;
    size_t p = 0, icu = kNone, prev = kNone, prev_out = 0;
    while (p < n) {
      if (icu == kNone) {
        p = SkipKeptBelowU0800(p, &prev, &prev_out);
        if (p >= n) break;
      }
      size_t len = 0;
      const char32_t c = DecodeAt(in, n, p, &len);
      const bool bmp = c < 0x10000;
      if (bmp && t.Has(t.kept, c)) {
        if (icu != kNone) {
          NEARDUP_RETURN_IF_ERROR(FlushIcu(icu, p));
          icu = kNone;
        }
        prev = p;
        p += len;
        continue;
      }
      if (c < SegmentTables::kMappedLimit && t.mapped[c].size != 0) {
        // A piece of its own, replaced from the table.
        if (icu != kNone) {
          NEARDUP_RETURN_IF_ERROR(FlushIcu(icu, p));
          icu = kNone;
        } else {
          CopyRun(p);
        }
        prev = p;
        prev_out = used_;
        WriteMapped(t.mapped[c]);
        p += len;
        run_ = p;
        continue;
      }
      if (icu == kNone) icu = StartIcuPiece(p, prev, prev_out, bmp && t.Has(t.boundary, c));
      p += len;
    }
    if (icu != kNone) {
      NEARDUP_RETURN_IF_ERROR(FlushIcu(icu, n));
    } else {
      CopyRun(n);
    }
    out_->resize(used_);
    return Status::Ok();
  }

 private:
  static constexpr size_t kNone = std::string_view::npos;

  void Ensure(size_t more) {
    if (used_ + more > out_->size()) out_->resize(std::max(2 * out_->size(), used_ + more));
  }

  // Copies the kept code points text[run_, end) out.
  void CopyRun(size_t end) {
    if (end == run_) return;
    Ensure(end - run_);
    std::memcpy(out_->data() + used_, in_ + run_, end - run_);
    used_ += end - run_;
  }

  // Ends the ICU state at `end` (a boundary): the pieces text[begin, end) go to ICU, through
  // `icu_out_` and then copied, so *out_ keeps its size (shrinking it to `used_` here made the
  // next Ensure() zero the whole tail again: quadratic in the text on pieces that alternate with
  // kept runs).
  [[gnu::always_inline]] Status FlushIcu(size_t begin, size_t end) {
    icu_out_->clear();
    NEARDUP_RETURN_IF_ERROR(impl_.IcuNormalize(text_.substr(begin, end - begin), fold_, icu_out_));
    Ensure(icu_out_->size());
    std::memcpy(out_->data() + used_, icu_out_->data(), icu_out_->size());
    used_ += icu_out_->size();
    run_ = end;
    return Status::Ok();
  }

  // Direct state: kept code points below U+0800 (ASCII, Latin, Greek, Cyrillic, Hebrew, Arabic,
  // ...) from `p` on need nothing but moving on; they are copied out in one piece later. Returns
  // where the first other code point starts.
  size_t SkipKeptBelowU0800(size_t p, size_t* prev, size_t* prev_out) {
    const unsigned char* const in = in_;
    const size_t n = n_;
    const std::array<uint8_t, 0x800>& kept_small = t_.kept_small;
    while (p < n) {
      const unsigned char b = in[p];
      if (b < 0x80) {
#ifdef __SSE2__
        // Sixteen ASCII bytes: each has a boundary before it and maps to itself, lowercased when
        // case folding (checked at Create: ascii_shortcut).
        if (n - p >= 16) {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + p));
          if (_mm_movemask_epi8(v) == 0) {
            const __m128i d = _mm_sub_epi8(v, _mm_set1_epi8('A'));
            const __m128i upper = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(25)), d);
            if (fold_ && _mm_movemask_epi8(upper) != 0) {
              WriteLowercased(p, v, upper);
              *prev_out = used_ - 1;
            }
            *prev = p + 15;
            p += 16;
            continue;
          }
        }
#endif
        if (!kept_small[b]) break;
        *prev = p;
        p += 1;
      } else if (b >= 0xC2 && b < 0xE0 && p + 1 < n) {
        const char32_t c = (static_cast<char32_t>(b & 0x1F) << 6) | (in[p + 1] & 0x3F);
        if (!kept_small[c]) break;
        *prev = p;
        p += 2;
      } else {
        break;
      }
    }
    return p;
  }

#ifdef __SSE2__
  // The sixteen ASCII bytes `v` at `p`, of which those marked in `upper` are uppercase, written
  // out lowercased (after the kept code points before them).
  void WriteLowercased(size_t p, __m128i v, __m128i upper) {
    CopyRun(p);
    Ensure(16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out_->data() + used_),
                     _mm_add_epi8(v, _mm_and_si128(upper, _mm_set1_epi8(0x20))));
    used_ += 16;
    run_ = p + 16;
  }
#endif

  // The code point at in[p] (of n bytes) and its length in *len; 0x10000 (no boundary before it,
  // not tabled) for supplementary planes and for a byte that starts no complete sequence.
  static char32_t DecodeAt(const unsigned char* in, size_t n, size_t p, size_t* len) {
    const unsigned char b = in[p];
    *len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (b < 0x80) return b;
    if (b < 0xC0 || p + *len > n) {
      *len = 1;  // not a lead byte or a truncated sequence (the text is valid UTF-8 by now)
      return 0x10000;
    }
    if (b < 0xE0) return (static_cast<char32_t>(b & 0x1F) << 6) | (in[p + 1] & 0x3F);
    if (b < 0xF0) {
      return (static_cast<char32_t>(b & 0x0F) << 12) |
             (static_cast<char32_t>(in[p + 1] & 0x3F) << 6) | (in[p + 2] & 0x3F);
    }
    return 0x10000;  // supplementary planes: treated as having no boundary before them
  }

  // The tabled replacement `m` written out (its size counted; the table's slack bytes are
  // overwritten by what follows).
  void WriteMapped(const SegmentTables::Mapped& m) {
    Ensure(sizeof(m.bytes));
    std::memcpy(out_->data() + used_, m.bytes, sizeof(m.bytes));
    used_ += m.size;
  }

  // Direct state, at p, a code point that goes to ICU: returns where the ICU state starts, at it
  // when it has a `boundary` before it, else at the code point before it, `prev` (taken back
  // from the output, at `prev_out`, if it was written out).
  size_t StartIcuPiece(size_t p, size_t prev, size_t prev_out, bool boundary) {
    if (boundary) {
      CopyRun(p);  // a piece of its own starts here
      return p;
    }
    if (prev == kNone) return p;  // only at the start of the text
    if (prev >= run_) {
      CopyRun(prev);  // the kept code point before belongs to this piece
    } else {
      used_ = prev_out;  // take back what the code point before wrote: it belongs to this piece
    }
    return prev;
  }

  const Impl& impl_;
  const SegmentTables& t_;
  const bool fold_;
  const std::string_view text_;
  const unsigned char* const in_;
  const size_t n_;
  std::string* const out_;
  std::string* const icu_out_;
  size_t used_ = 0;
  size_t run_ = 0;
};

Status TextNormalizer::Impl::SegmentNormalize(std::string_view text, std::string* out) const {
  std::string icu_out;
  return SegmentPass(*this, text, out, &icu_out).Run();
}

// The plain path: every step over the whole text, fresh buffers (the reference the fast path is
// tested against).
Status TextNormalizer::Impl::ReferenceNormalize(std::string_view text, std::string* out) const {
  std::string buffer;
  size_t invalid = utf8::FindInvalid(text);
  if (invalid != std::string_view::npos) {
    if (!options.replace_invalid_utf8) {
      return Status::InvalidUtf8("invalid UTF-8 at byte " + std::to_string(invalid));
    }
    buffer = utf8::ReplaceInvalid(text);
    text = buffer;
  }
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::ResourceExhausted("text of " + std::to_string(text.size()) +
                                     " bytes is too large to normalise (limit 2 GiB)");
  }
  std::string current;
  if (options.strip_markup) {
    current = StripMarkup(text);
  } else {
    current.assign(text);
  }
  if (normalizer != nullptr || options.case_fold) {
    std::string next;
    next.reserve(current.size());
    NEARDUP_RETURN_IF_ERROR(IcuNormalize(current, options.case_fold, &next));
    current.swap(next);
  }
  if (t2s != nullptr && MayChange(current, may_change_under_t2s)) {
    std::string converted;
    NEARDUP_RETURN_IF_ERROR(ConvertT2s(current, &converted));
    current.swap(converted);
  }
  if (options.fold_whitespace) {
    *out = FoldWhitespace(current);
  } else {
    out->swap(current);
  }
  return Status::Ok();
}

}  // namespace neardup
