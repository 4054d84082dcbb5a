// The store's MANIFEST: which segment files and which log make up the store, plus its creation
// options. Replaced atomically (temp file + rename) on every flush and compaction.
//
// Internal header. Not thread-safe: the store serialises MANIFEST writes with a mutex.
#ifndef NEARDUP_STORE_MANIFEST_H_
#define NEARDUP_STORE_MANIFEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/env.h"
#include "neardup/status.h"

namespace neardup::store {

// The containment options a version-3 MANIFEST (which did not record them) is read with: the
// values such stores answered with (PairRuleOptions' defaults when they were written).
constexpr double kVersion3ContainmentThreshold = 0.9;
constexpr double kVersion3ContainmentMinShingles = 30;
constexpr double kVersion3ContainmentMinRatio = 0.6;
// The `edited` options a MANIFEST before version 5 (which did not record them) is read with: the
// reason off, as such stores answered.
constexpr double kVersion4EditedMinJaccard = 0.45;

// Verification forms (ManifestRule::verification_form): what a stored sketch's set bytes hold.
// 1: the narrowed shingle set (common/set_codec.h); 2: that, then the narrowed 32-bit unit set
// (the `edited` reason's; version 5, only when the reason is on; written by stores created
// before the unit sets were 20 bits wide, which keep it); 3: the same with 20-bit unit sets
// (ShingleSimilarity::kUnitBits; what a store created with the reason on writes now).
constexpr uint32_t kShingleSetForm = 1;
constexpr uint32_t kShingleAndUnitSetForm = 2;
constexpr uint32_t kShingleAndUnit20SetForm = 3;
// The width of the unit elements of a verification form (0: it keeps no unit sets).
constexpr int UnitBitsOfForm(uint32_t form) {
  return form == kShingleAndUnitSetForm ? 32 : form == kShingleAndUnit20SetForm ? 20 : 0;
}

// The duplicate rule of a kDedup store (MANIFEST version 3; the containment options since 4; the
// edited options since 5, written only when the reason is on, so a store without it stays
// readable by the releases before it).
struct ManifestRule {
  double threshold = 0.5;
  int bands = 0;
  int rows = 0;
  uint32_t bucket_window = 64;
  uint64_t seed = 0;
  // kShingleAndUnitSetForm or kShingleAndUnit20SetForm iff edited is on
  uint32_t verification_form = kShingleSetForm;
  // The `contained` reason of the pair rule (PairRuleOptions; jaccard_threshold is `threshold`).
  double containment_threshold = kVersion3ContainmentThreshold;
  double containment_min_shingles = kVersion3ContainmentMinShingles;
  double containment_min_ratio = kVersion3ContainmentMinRatio;
  // The `edited` reason (PairRuleOptions::edited_threshold, 0 = off, and edited_min_jaccard).
  double edited_threshold = 0;
  double edited_min_jaccard = kVersion4EditedMinJaccard;
};

struct Manifest {
  // 1: written before the design was recorded (read only for recovery); 2: before the duplicate
  // rule was recorded (a kSimHash store); 3: with the rule; 4: with the rule's containment
  // options; 5: with the rule's edited options. EncodeManifest writes 5 when the rule's edited
  // reason is on, else 4.
  int version = 2;
  int bits = 64;
  int indexed_k = 3;
  uint64_t next_file_number = 1;
  uint64_t wal_number = 0;
  uint64_t segments_live = 0;        // live documents in the segments alone
  std::vector<uint64_t> segments;    // segment file numbers, oldest first
  std::string design;                // index::EncodeDesign of the store's index design
  std::string fingerprint_options;   // opaque description given at creation (may be empty)
  std::optional<ManifestRule> rule;  // kDedup stores only
};

// NotFound if there is no MANIFEST; Corruption (naming the file) if it is damaged; Unsupported
// for another version, unless `accept_version_1` (recovery) and it is a version-1 MANIFEST, which
// is returned with `version` 1 and no design or fingerprint options.
Result<Manifest> ReadManifest(const std::string& dir, bool accept_version_1 = false);
Status WriteManifest(Env* env, const std::string& dir, const Manifest& manifest);
std::string EncodeManifest(const Manifest& manifest);

// Names of segment and log files in `dir` (not MANIFEST, LOCK or other files).
Result<std::vector<std::string>> ListDataFiles(const std::string& dir);

}  // namespace neardup::store

#endif  // NEARDUP_STORE_MANIFEST_H_
