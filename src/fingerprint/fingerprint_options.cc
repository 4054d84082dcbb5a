// The canonical text form of FingerprintOptions (what a store records beside its fingerprints) and
// its parser; see neardup/fingerprinter.h.
#include <charconv>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/fingerprinter.h"

namespace neardup {
namespace {

const std::map<std::string, HashProfile>& Profiles() {
  static const auto* kMap = new std::map<std::string, HashProfile>{
      {"neardup", HashProfile::kNeardup}, {"yanyiwu", HashProfile::kYanyiwuSimhash}};
  return *kMap;
}
const std::map<std::string, Tokenizer>& Tokenizers() {
  static const auto* kMap = new std::map<std::string, Tokenizer>{{"auto", Tokenizer::kAuto},
                                                                 {"jieba", Tokenizer::kJieba},
                                                                 {"icu", Tokenizer::kIcuWord},
                                                                 {"char", Tokenizer::kCharNgram}};
  return *kMap;
}
const std::map<std::string, Weighting>& Weightings() {
  static const auto* kMap = new std::map<std::string, Weighting>{{"tf", Weighting::kTermFrequency},
                                                                 {"tfidf", Weighting::kTfIdf},
                                                                 {"uniform", Weighting::kUniform}};
  return *kMap;
}
const std::map<std::string, FeatureHash>& Hashes() {
  static const auto* kMap = new std::map<std::string, FeatureHash>{
      {"xxh3", FeatureHash::kXxh3}, {"jenkins", FeatureHash::kJenkinsLookup3}};
  return *kMap;
}

template <typename Enum>
std::string NameOf(const std::map<std::string, Enum>& names, Enum value) {
  for (const auto& [name, candidate] : names) {
    if (candidate == value) return name;
  }
  return std::to_string(static_cast<int>(value));
}

std::string Escape(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (c <= 0x20 || c == '%' || c == '=' || c == 0x7f) {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

Result<std::string> Unescape(std::string_view value) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%') {
      out += value[i];
      continue;
    }
    unsigned byte = 0;
    if (i + 2 >= value.size()) {
      return Status::InvalidArgument("truncated %-escape");
    }
    auto [end, error] = std::from_chars(value.data() + i + 1, value.data() + i + 3, byte, 16);
    if (error != std::errc() || end != value.data() + i + 3) {
      return Status::InvalidArgument("bad %-escape");
    }
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

// One option: its key, how it is written and how it is read back.
struct Field {
  const char* key;
  std::string (*get)(const FingerprintOptions&);
  Status (*set)(std::string_view, FingerprintOptions*);
};

template <typename Enum>
Status SetEnum(const std::map<std::string, Enum>& names, std::string_view value, Enum* out) {
  auto it = names.find(std::string(value));
  if (it == names.end())
    return Status::InvalidArgument("unknown value \"" + std::string(value) + "\"");
  *out = it->second;
  return Status::Ok();
}

template <typename Int>
Status SetInt(std::string_view value, Int* out) {
  Int parsed = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size()) {
    return Status::InvalidArgument("not an integer: \"" + std::string(value) + "\"");
  }
  *out = parsed;
  return Status::Ok();
}

Status SetBool(std::string_view value, bool* out) {
  if (value != "0" && value != "1") {
    return Status::InvalidArgument("not 0 or 1: \"" + std::string(value) + "\"");
  }
  *out = value == "1";
  return Status::Ok();
}

#define NEARDUP_BOOL_FIELD(key, member)                                                  \
  Field {                                                                                \
    key, [](const FingerprintOptions& o) { return std::string(o.member ? "1" : "0"); },  \
        [](std::string_view v, FingerprintOptions* o) { return SetBool(v, &o->member); } \
  }
#define NEARDUP_INT_FIELD(key, member)                                                  \
  Field {                                                                               \
    key, [](const FingerprintOptions& o) { return std::to_string(o.member); },          \
        [](std::string_view v, FingerprintOptions* o) { return SetInt(v, &o->member); } \
  }
#define NEARDUP_ENUM_FIELD(key, member, names)                                                    \
  Field {                                                                                         \
    key, [](const FingerprintOptions& o) { return NameOf(names(), o.member); },                   \
        [](std::string_view v, FingerprintOptions* o) { return SetEnum(names(), v, &o->member); } \
  }
#define NEARDUP_STRING_FIELD(key, member)                              \
  Field {                                                              \
    key, [](const FingerprintOptions& o) { return Escape(o.member); }, \
        [](std::string_view v, FingerprintOptions* o) -> Status {      \
          Result<std::string> text = Unescape(v);                      \
          if (!text.ok()) return text.status();                        \
          o->member = std::move(*text);                                \
          return Status::Ok();                                         \
        }                                                              \
  }

// Every option that changes what a fingerprint is, in the order written.
const std::vector<Field>& Fields() {
  static const auto* kFields = new std::vector<Field>{
      NEARDUP_ENUM_FIELD("profile", profile, Profiles),
      NEARDUP_INT_FIELD("bits", bits),
      NEARDUP_ENUM_FIELD("hash", hash, Hashes),
      NEARDUP_ENUM_FIELD("tokenizer", features.tokenizer, Tokenizers),
      NEARDUP_INT_FIELD("shingle", features.shingle_size),
      NEARDUP_INT_FIELD("ngram", features.char_ngram_size),
      NEARDUP_ENUM_FIELD("weighting", features.weighting, Weightings),
      NEARDUP_BOOL_FIELD("sublinear_tf", features.sublinear_tf),
      NEARDUP_INT_FIELD("top_k", features.top_k),
      NEARDUP_BOOL_FIELD("drop_single_char_words", features.drop_single_char_words),
      NEARDUP_BOOL_FIELD("drop_stop_words", features.drop_stop_words),
      NEARDUP_BOOL_FIELD("jieba_hmm", features.jieba_hmm),
      NEARDUP_STRING_FIELD("idf", features.idf_path),
      NEARDUP_STRING_FIELD("jieba_dir", features.jieba_dir),
      NEARDUP_BOOL_FIELD("strip_markup", normalize.strip_markup),
      NEARDUP_BOOL_FIELD("nfkc", normalize.nfkc),
      NEARDUP_BOOL_FIELD("case_fold", normalize.case_fold),
      NEARDUP_BOOL_FIELD("t2s", normalize.traditional_to_simplified),
      NEARDUP_BOOL_FIELD("fold_whitespace", normalize.fold_whitespace),
      NEARDUP_STRING_FIELD("opencc_config", normalize.opencc_config),
  };
  return *kFields;
}

#undef NEARDUP_BOOL_FIELD
#undef NEARDUP_INT_FIELD
#undef NEARDUP_ENUM_FIELD
#undef NEARDUP_STRING_FIELD

}  // namespace

std::string FingerprintOptionsToString(const FingerprintOptions& options) {
  std::string out;
  for (const Field& field : Fields()) {
    if (!out.empty()) out += ' ';
    out += field.key;
    out += '=';
    out += field.get(options);
  }
  return out;
}

Result<FingerprintOptions> ParseFingerprintOptions(std::string_view text) {
  FingerprintOptions options;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view pair = text.substr(pos, end - pos);
    pos = end + 1;
    if (pair.empty()) continue;
    size_t equals = pair.find('=');
    if (equals == std::string_view::npos) {
      return Status::InvalidArgument("fingerprint options: \"" + std::string(pair) +
                                     "\" is not key=value");
    }
    std::string_view key = pair.substr(0, equals);
    const Field* field = nullptr;
    for (const Field& candidate : Fields()) {
      if (key == candidate.key) field = &candidate;
    }
    if (field == nullptr) {
      return Status::InvalidArgument("fingerprint options: unknown option \"" + std::string(key) +
                                     "\"");
    }
    Status status = field->set(pair.substr(equals + 1), &options);
    if (!status.ok()) return status.WithContext("fingerprint options: " + std::string(key));
  }
  return options;
}

}  // namespace neardup
