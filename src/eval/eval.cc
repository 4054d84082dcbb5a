// Labelled-pair scoring and the longest-sentences baseline; see eval/eval.h.
#include "eval/eval.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>

#include "neardup/output_file.h"

namespace neardup {

LabelClass ClassifyLabel(std::string_view label) {
  static const std::set<std::string_view> kPositive = {
      "exact",          "exact_ws",        "near_dup_real",      "near_dup_template",
      "syn_light_edit", "syn_boilerplate", "syn_reorder_delete", "syn_insert",
      "syn_width_case", "syn_html"};
  static const std::set<std::string_view> kAfterNormalisation = {
      "syn_script_s2t", "syn_script_t2s", "cross_script", "diacritic_variant"};
  static const std::set<std::string_view> kGraded = {
      "syn_partial_60", "syn_heavy_edit",   "campaign_variant", "template_similar",
      "variant_graded", "regional_variant", "cross_script_hard"};
  static const std::set<std::string_view> kNegative = {
      "negative_random", "negative_same_boilerplate", "negative_same_template",
      "negative_short",  "negative_related_language", "paraphrase"};
  if (kPositive.count(label)) return LabelClass::kPositive;
  if (kAfterNormalisation.count(label)) return LabelClass::kPositiveAfterNormalisation;
  if (kGraded.count(label)) return LabelClass::kGraded;
  if (kNegative.count(label)) return LabelClass::kNegative;
  // Other labelled sets (bench/make_stress_set.py) name the class first.
  if (label.starts_with("positive_")) return LabelClass::kPositive;
  if (label.starts_with("negative_")) return LabelClass::kNegative;
  if (label.starts_with("graded_")) return LabelClass::kGraded;
  return LabelClass::kUnknown;
}

const char* LabelClassName(LabelClass label_class) {
  switch (label_class) {
    case LabelClass::kPositive:
      return "positive";
    case LabelClass::kPositiveAfterNormalisation:
      return "positive after normalisation";
    case LabelClass::kGraded:
      return "graded";
    case LabelClass::kNegative:
      return "negative";
    case LabelClass::kUnknown:
      return "unknown";
  }
  return "unknown";
}

double PairCounts::recall() const {
  return positives == 0 ? 1.0 : static_cast<double>(flagged_positives) / positives;
}

double PairCounts::precision() const {
  uint64_t flagged = flagged_positives + flagged_negatives;
  return flagged == 0 ? 1.0 : static_cast<double>(flagged_positives) / flagged;
}

double PairCounts::false_positive_rate() const {
  return negatives == 0 ? 0.0 : static_cast<double>(flagged_negatives) / negatives;
}

double PairCounts::f1() const {
  double p = precision(), r = recall();
  return p + r == 0 ? 0.0 : 2 * p * r / (p + r);
}

double PairCounts::graded_flag_rate() const {
  return graded == 0 ? 0.0 : static_cast<double>(flagged_graded) / graded;
}

Result<std::vector<LabelledPair>> ReadLabelledPairs(const std::string& path) {
  NoteInput(path);  // never an output of this command
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::vector<LabelledPair> pairs;
  std::string line;
  uint64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line_number == 1 && line.rfind("set\t", 0) == 0) continue;  // header
    if (line.empty()) continue;
    std::vector<std::string> fields;
    size_t start = 0;
    for (;;) {
      size_t tab = line.find('\t', start);
      fields.push_back(
          line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    if (fields.size() < 4) {
      return Status::InvalidArgument(path + ":" + std::to_string(line_number) +
                                     ": expected at least 4 tab-separated fields (set, id_a, id_b, "
                                     "label)");
    }
    LabelledPair pair;
    pair.set = fields[0];
    pair.id_a = fields[1];
    pair.id_b = fields[2];
    pair.label = fields[3];
    if (fields.size() > 4) pair.reference_similarity = std::strtod(fields[4].c_str(), nullptr);
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

Result<EvalScores> ScorePairs(const std::vector<LabelledPair>& pairs,
                              const std::vector<bool>& flagged, const std::vector<bool>& found) {
  if (flagged.size() != pairs.size() || found.size() != pairs.size()) {
    return Status::InvalidArgument("ScorePairs: pairs, flagged and found differ in size");
  }
  EvalScores scores;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const LabelledPair& pair = pairs[i];
    PairCounts& label = scores.by_label[pair.label];
    PairCounts& set = scores.by_set[pair.set];
    LabelClass label_class = ClassifyLabel(pair.label);
    std::vector<PairCounts*> targets = {&label, &set};
    if (!found[i]) {
      for (PairCounts* t : targets) ++t->missing;
      ++scores.overall.missing;
      continue;
    }
    const bool hit = flagged[i];
    switch (label_class) {
      case LabelClass::kPositive:
        targets.push_back(&scores.overall);
        for (PairCounts* t : targets) {
          ++t->positives;
          t->flagged_positives += hit;
        }
        break;
      case LabelClass::kNegative:
        targets.push_back(&scores.overall);
        for (PairCounts* t : targets) {
          ++t->negatives;
          t->flagged_negatives += hit;
        }
        break;
      case LabelClass::kPositiveAfterNormalisation:
        ++scores.after_normalisation.positives;
        scores.after_normalisation.flagged_positives += hit;
        for (PairCounts* t : targets) {
          ++t->graded;
          t->flagged_graded += hit;
        }
        break;
      case LabelClass::kGraded:
      case LabelClass::kUnknown:
        for (PairCounts* t : targets) {
          ++t->graded;
          t->flagged_graded += hit;
        }
        break;
    }
  }
  return scores;
}

uint64_t LongestSentencesSignature(std::string_view text) {
  struct Sentence {
    size_t start;
    size_t length;
  };
  std::vector<Sentence> sentences;
  auto add = [&](size_t begin, size_t end) {
    while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
    while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    if (end > begin) sentences.push_back({begin, end - begin});
  };
  size_t begin = 0;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    size_t terminator = 0;
    if (c == '.' || c == '!' || c == '?' || c == '\n') {
      terminator = 1;
    } else if (text.compare(i, 3, "\xE3\x80\x82") == 0 ||  // 。
               text.compare(i, 3, "\xEF\xBC\x81") == 0 ||  // ！
               text.compare(i, 3, "\xEF\xBC\x9F") == 0) {  // ？
      terminator = 3;
    }
    if (terminator > 0) {
      add(begin, i);
      i += terminator;
      begin = i;
    } else {
      ++i;
    }
  }
  add(begin, text.size());
  if (sentences.empty()) return 0;
  std::stable_sort(sentences.begin(), sentences.end(),
                   [](const Sentence& x, const Sentence& y) { return x.length > y.length; });
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (size_t i = 0; i < std::min<size_t>(3, sentences.size()); ++i) {
    XXH3_64bits_update(state, text.data() + sentences[i].start, sentences[i].length);
    XXH3_64bits_update(state, "\x1f", 1);
  }
  uint64_t signature = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return signature == 0 ? 1 : signature;
}

}  // namespace neardup
