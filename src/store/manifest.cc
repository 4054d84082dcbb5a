// MANIFEST encoding, decoding and directory listing; see manifest.h and docs/storage_format.md.
#include "store/manifest.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "neardup/pair_rule.h"
#include "store/store_format.h"

namespace neardup::store {
namespace {

constexpr char kManifestMagic[8] = {'N', 'D', 'U', 'P', 'M', 'A', 'N', '\0'};
// 2: + index design, fingerprint options; 3: + the duplicate rule; 4: + its containment options.
// Versions 2 (a kSimHash store) and 3 (read with the kVersion3Containment* values) are still read;
// every MANIFEST is written as version 4.
constexpr uint32_t kEditedManifestVersion = 5;  // written only when the edited reason is on
constexpr uint32_t kManifestVersion = 4;
constexpr uint32_t kRuleManifestVersion = 3;
constexpr uint32_t kOldManifestVersion = 2;

void PutF64(std::string* out, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  PutU64(out, bits);
}

bool ReadF64(ByteReader* reader, double* value) {
  uint64_t bits;
  if (!reader->U64(&bits)) return false;
  std::memcpy(value, &bits, 8);
  return true;
}
constexpr uint32_t kRuleSimHash = 0, kRuleDedup = 1;

}  // namespace

std::string EncodeManifest(const Manifest& m) {
  const bool edited = m.rule && m.rule->edited_threshold > 0;
  std::string out(kManifestMagic, 8);
  PutU32(&out, edited ? kEditedManifestVersion : kManifestVersion);
  PutU32(&out, static_cast<uint32_t>(m.bits));
  PutU32(&out, static_cast<uint32_t>(m.indexed_k));
  PutU32(&out, 0);
  PutU64(&out, m.next_file_number);
  PutU64(&out, m.wal_number);
  PutU64(&out, m.segments_live);
  PutU64(&out, m.segments.size());
  for (uint64_t number : m.segments) PutU64(&out, number);
  PutU32(&out, static_cast<uint32_t>(m.design.size()));
  out += m.design;
  PutU32(&out, static_cast<uint32_t>(m.fingerprint_options.size()));
  out += m.fingerprint_options;
  const ManifestRule rule = m.rule.value_or(ManifestRule{0, 0, 0, 0, 0, 0, 0, 0, 0});
  PutU32(&out, m.rule ? kRuleDedup : kRuleSimHash);
  PutF64(&out, rule.threshold);
  PutU32(&out, static_cast<uint32_t>(rule.bands));
  PutU32(&out, static_cast<uint32_t>(rule.rows));
  PutU32(&out, rule.bucket_window);
  PutU32(&out, rule.verification_form);
  PutU64(&out, rule.seed);
  PutF64(&out, rule.containment_threshold);
  PutF64(&out, rule.containment_min_shingles);
  PutF64(&out, rule.containment_min_ratio);
  if (edited) {
    PutF64(&out, rule.edited_threshold);
    PutF64(&out, rule.edited_min_jaccard);
  }
  PutU64(&out, Checksum(out));
  return out;
}

Status WriteManifest(Env* env, const std::string& dir, const Manifest& manifest) {
  return WriteFileAtomically(env, dir, kManifestName, EncodeManifest(manifest));
}

Result<Manifest> ReadManifest(const std::string& dir, bool accept_version_1) {
  const std::string path = JoinPath(dir, kManifestName);
  Result<std::string> contents = ReadFile(path);
  if (!contents.ok()) return contents.status();
  const std::string& bytes = *contents;
  if (bytes.size() < 8 + 8 || bytes.compare(0, 8, std::string(kManifestMagic, 8)) != 0) {
    return Status::Corruption(path + ": not a neardup MANIFEST (bad magic or truncated)");
  }
  if (LoadU64(bytes.data() + bytes.size() - 8) != Checksum(bytes.data(), bytes.size() - 8)) {
    return Status::Corruption(path + ": MANIFEST checksum mismatch");
  }
  ByteReader reader(std::string_view(bytes).substr(8, bytes.size() - 16));
  uint32_t version, bits, indexed_k, reserved;
  uint64_t count;
  Manifest m;
  if (!reader.U32(&version) || !reader.U32(&bits) || !reader.U32(&indexed_k) ||
      !reader.U32(&reserved) || !reader.U64(&m.next_file_number) || !reader.U64(&m.wal_number) ||
      !reader.U64(&m.segments_live) || !reader.U64(&count)) {
    return Status::Corruption(path + ": MANIFEST is truncated");
  }
  const bool version_1 = version == 1 && accept_version_1;
  if (version != kEditedManifestVersion && version != kManifestVersion &&
      version != kRuleManifestVersion && version != kOldManifestVersion && !version_1) {
    return Status::Unsupported(
        path + ": MANIFEST version " + std::to_string(version) + " is not supported" +
        (version < kOldManifestVersion ? " (written by an older neardup: `neardup index recover` "
                                         "rewrites the store)"
                                       : ""));
  }
  if ((bits != 64 && bits != 128) || indexed_k > 15 || count > (1u << 20)) {
    return Status::Corruption(path + ": MANIFEST fields out of range");
  }
  m.bits = static_cast<int>(bits);
  m.indexed_k = static_cast<int>(indexed_k);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t number;
    if (!reader.U64(&number)) return Status::Corruption(path + ": MANIFEST is truncated");
    m.segments.push_back(number);
  }
  if (version_1) {  // ends after the segment list
    if (!reader.done()) return Status::Corruption(path + ": MANIFEST has trailing bytes");
    m.version = 1;
    return m;
  }
  uint32_t length;
  std::string_view text;
  if (!reader.U32(&length) || !reader.Bytes(length, &text))
    return Status::Corruption(path + ": MANIFEST is truncated");
  m.design.assign(text);
  if (!reader.U32(&length) || !reader.Bytes(length, &text))
    return Status::Corruption(path + ": MANIFEST is truncated");
  m.fingerprint_options.assign(text);
  m.version = static_cast<int>(version);
  if (version >= kRuleManifestVersion) {
    ManifestRule rule;  // version 3: the kVersion3Containment* values
    uint32_t kind, bands, rows;
    if (!reader.U32(&kind) || !ReadF64(&reader, &rule.threshold) || !reader.U32(&bands) ||
        !reader.U32(&rows) || !reader.U32(&rule.bucket_window) ||
        !reader.U32(&rule.verification_form) || !reader.U64(&rule.seed) ||
        (version >= 4 && (!ReadF64(&reader, &rule.containment_threshold) ||
                          !ReadF64(&reader, &rule.containment_min_shingles) ||
                          !ReadF64(&reader, &rule.containment_min_ratio))) ||
        (version >= 5 && (!ReadF64(&reader, &rule.edited_threshold) ||
                          !ReadF64(&reader, &rule.edited_min_jaccard)))) {
      return Status::Corruption(path + ": MANIFEST is truncated");
    }
    if (kind == kRuleSimHash) {
      if (!reader.done()) return Status::Corruption(path + ": MANIFEST has trailing bytes");
      return m;
    }
    if (kind != kRuleDedup || !(rule.threshold > 0 && rule.threshold < 1) || bands < 1 ||
        rows < 1 || bands > 1024 || rows > 64 || rule.bucket_window < 1 ||
        (rule.edited_threshold > 0 ? rule.verification_form != kShingleAndUnitSetForm &&
                                         rule.verification_form != kShingleAndUnit20SetForm
                                   : rule.verification_form != kShingleSetForm) ||
        (version >= 5) != (rule.edited_threshold > 0)) {
      return Status::Corruption(path + ": MANIFEST rule fields out of range");
    }
    PairRuleOptions pair_rule;
    pair_rule.jaccard_threshold = rule.threshold;
    pair_rule.containment_threshold = rule.containment_threshold;
    pair_rule.containment_min_shingles = rule.containment_min_shingles;
    pair_rule.containment_min_ratio = rule.containment_min_ratio;
    pair_rule.edited_threshold = rule.edited_threshold;
    pair_rule.edited_min_jaccard = rule.edited_min_jaccard;
    if (Status valid = ValidatePairRuleOptions(pair_rule); !valid.ok()) {
      return Status::Corruption(path + ": MANIFEST rule fields out of range: " + valid.message());
    }
    rule.bands = static_cast<int>(bands);
    rule.rows = static_cast<int>(rows);
    m.rule = rule;
  }
  if (!reader.done()) return Status::Corruption(path + ": MANIFEST has trailing bytes");
  return m;
}

Result<std::vector<std::string>> ListDataFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus("list directory", dir, errno);
  std::vector<std::string> names;
  while (struct dirent* entry = ::readdir(d)) {
    std::string name = entry->d_name;
    bool is_segment;
    uint64_t number;
    if (ParseFileName(name, &is_segment, &number)) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace neardup::store
