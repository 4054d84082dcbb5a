// Eval: scores a near-duplicate detector against labelled document pairs (the devpairs format:
// set, id_a, id_b, label, sim, note) with precision / recall per label, per set and overall.
//
// Scoring rules (from the devpairs README): positive labels must be flagged, negative labels must
// not; "positive after normalisation" labels (script / transliteration variants) are scored on
// their own and graded labels only reported, so neither enters the overall precision, recall and
// F1. Pairs whose documents are missing are counted as missing and not scored.
//
// Thread safety: plain functions and values, no shared state.
#ifndef NEARDUP_EVAL_EVAL_H_
#define NEARDUP_EVAL_EVAL_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/status.h"

namespace neardup {

enum class LabelClass {
  kPositive,
  kPositiveAfterNormalisation,
  kGraded,
  kNegative,
  kUnknown,
};

// The class of a devpairs label ("exact" -> kPositive, "negative_short" -> kNegative ...).
LabelClass ClassifyLabel(std::string_view label);
const char* LabelClassName(LabelClass label_class);

struct LabelledPair {
  std::string set;
  std::string id_a;
  std::string id_b;
  std::string label;
  double reference_similarity = 0;
};

// Reads a pairs.tsv file (header line first). Errors name the file and line.
Result<std::vector<LabelledPair>> ReadLabelledPairs(const std::string& path);

// Counts for one group of pairs.
struct PairCounts {
  uint64_t positives = 0;          // pairs that must be flagged
  uint64_t flagged_positives = 0;  // true positives
  uint64_t negatives = 0;          // pairs that must not be flagged
  uint64_t flagged_negatives = 0;  // false positives
  uint64_t graded = 0;             // graded / after-normalisation pairs (not errors either way)
  uint64_t flagged_graded = 0;
  uint64_t missing = 0;  // pairs with a document not found

  // TP / (TP + FN); 1 when there are no positives.
  double recall() const;
  // TP / (TP + FP); 1 when nothing was flagged.
  double precision() const;
  // FP / negatives; 0 when there are no negatives.
  double false_positive_rate() const;
  // Harmonic mean of precision and recall (0 when both are 0).
  double f1() const;
  // Flagged fraction of the graded pairs (0 when none).
  double graded_flag_rate() const;
};

struct EvalScores {
  std::map<std::string, PairCounts> by_label;
  std::map<std::string, PairCounts> by_set;
  PairCounts overall;              // positives + negatives only
  PairCounts after_normalisation;  // the "positive after normalisation" labels, as positives
};

// Scores `flagged[i]` (the detector's verdict on pairs[i]); `found[i]` false marks a missing pair.
// Sizes must match (InvalidArgument otherwise).
Result<EvalScores> ScorePairs(const std::vector<LabelledPair>& pairs,
                              const std::vector<bool>& flagged, const std::vector<bool>& found);

// The classic "three longest sentences" signature: the text is split into sentences at . ! ? and
// their full-width forms and at line breaks, the three longest (by bytes, earliest first on ties)
// are trimmed and hashed together in that order. 0 when the text has no sentence.
uint64_t LongestSentencesSignature(std::string_view text);

}  // namespace neardup

#endif  // NEARDUP_EVAL_EVAL_H_
