// Tests of the labelled-pair scoring arithmetic (on a tiny hand-checked case) and the
// longest-sentences baseline signature.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "eval/eval.h"

namespace neardup {
namespace {

LabelledPair Pair(const std::string& set, const std::string& label) {
  LabelledPair pair;
  pair.set = set;
  pair.id_a = "a";
  pair.id_b = "b";
  pair.label = label;
  return pair;
}

TEST(EvalScoringTest, HandCheckedCounts) {
  // 4 positives (3 flagged), 4 negatives (1 flagged), 1 graded (flagged), 1 after-normalisation
  // (not flagged), 1 missing positive.
  std::vector<LabelledPair> pairs = {Pair("S_en", "exact"),
                                     Pair("S_en", "syn_html"),
                                     Pair("S_en", "syn_html"),
                                     Pair("S_zh", "syn_boilerplate"),
                                     Pair("X_en", "negative_random"),
                                     Pair("X_en", "negative_random"),
                                     Pair("X_zh", "negative_short"),
                                     Pair("X_zh", "paraphrase"),
                                     Pair("S_en", "syn_partial_60"),
                                     Pair("S_zh", "syn_script_s2t"),
                                     Pair("S_zh", "exact")};
  std::vector<bool> flagged = {true,  true,  false, true,  false, true,
                               false, false, true,  false, true};
  std::vector<bool> found = {true, true, true, true, true, true, true, true, true, true, false};
  auto scores = ScorePairs(pairs, flagged, found);
  ASSERT_TRUE(scores.ok());
  const PairCounts& o = scores->overall;
  EXPECT_EQ(o.positives, 4u);
  EXPECT_EQ(o.flagged_positives, 3u);
  EXPECT_EQ(o.negatives, 4u);
  EXPECT_EQ(o.flagged_negatives, 1u);
  EXPECT_EQ(o.missing, 1u);
  EXPECT_DOUBLE_EQ(o.recall(), 0.75);
  EXPECT_DOUBLE_EQ(o.precision(), 0.75);
  EXPECT_DOUBLE_EQ(o.f1(), 0.75);
  EXPECT_DOUBLE_EQ(o.false_positive_rate(), 0.25);
  EXPECT_EQ(scores->after_normalisation.positives, 1u);
  EXPECT_EQ(scores->after_normalisation.flagged_positives, 0u);

  const PairCounts& html = scores->by_label.at("syn_html");
  EXPECT_DOUBLE_EQ(html.recall(), 0.5);
  const PairCounts& graded = scores->by_label.at("syn_partial_60");
  EXPECT_EQ(graded.graded, 1u);
  EXPECT_DOUBLE_EQ(graded.graded_flag_rate(), 1.0);
  const PairCounts& s_en = scores->by_set.at("S_en");
  EXPECT_EQ(s_en.positives, 3u);
  EXPECT_EQ(s_en.flagged_positives, 2u);
  EXPECT_EQ(s_en.graded, 1u);
  const PairCounts& x_en = scores->by_set.at("X_en");
  EXPECT_DOUBLE_EQ(x_en.false_positive_rate(), 0.5);
  EXPECT_DOUBLE_EQ(x_en.precision(), 0.0);  // one flagged, a false positive
  const PairCounts& s_zh = scores->by_set.at("S_zh");
  EXPECT_EQ(s_zh.missing, 1u);
  EXPECT_DOUBLE_EQ(s_zh.recall(), 1.0);

  // Precision with F1: 2 * p * r / (p + r) for p = 2/3, r = 1/2.
  PairCounts c;
  c.positives = 4;
  c.flagged_positives = 2;
  c.flagged_negatives = 1;
  c.negatives = 10;
  EXPECT_NEAR(c.f1(), 2 * (2.0 / 3) * 0.5 / (2.0 / 3 + 0.5), 1e-12);
}

TEST(EvalScoringTest, MismatchedSizesAreAnError) {
  auto scores = ScorePairs({Pair("S", "exact")}, {}, {true});
  EXPECT_FALSE(scores.ok());
}

TEST(EvalScoringTest, LabelClasses) {
  EXPECT_EQ(ClassifyLabel("syn_boilerplate"), LabelClass::kPositive);
  EXPECT_EQ(ClassifyLabel("syn_script_t2s"), LabelClass::kPositiveAfterNormalisation);
  EXPECT_EQ(ClassifyLabel("campaign_variant"), LabelClass::kGraded);
  EXPECT_EQ(ClassifyLabel("negative_same_template"), LabelClass::kNegative);
  EXPECT_EQ(ClassifyLabel("whatever"), LabelClass::kUnknown);
}

TEST(EvalScoringTest, ReadsPairsTsvAndReportsBadLines) {
  auto dir = std::filesystem::temp_directory_path();
  auto good = (dir / "neardup_eval_good.tsv").string();
  auto bad = (dir / "neardup_eval_bad.tsv").string();
  std::ofstream(good) << "set\tid_a\tid_b\tlabel\tsim\tnote\nS_en\tx\ty\texact\t1.0\tsame\n";
  std::ofstream(bad) << "set\tid_a\tid_b\tlabel\tsim\tnote\nS_en\tx\n";
  auto pairs = ReadLabelledPairs(good);
  ASSERT_TRUE(pairs.ok());
  ASSERT_EQ(pairs->size(), 1u);
  EXPECT_EQ((*pairs)[0].id_b, "y");
  EXPECT_DOUBLE_EQ((*pairs)[0].reference_similarity, 1.0);
  auto broken = ReadLabelledPairs(bad);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(bad + ":2"), std::string::npos);
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

TEST(EvalScoringTest, LongestSentencesSignature) {
  // Only the shortest sentence differs: the three longest are the same, so the signatures match.
  const std::string a = "Hi. This is the longest sentence of all here! Medium one here? Short one.";
  const std::string b = "Yo. This is the longest sentence of all here! Medium one here? Short one.";
  const std::string c =
      "Hi. This is a different long sentence entirely! Medium one here? Short one.";
  EXPECT_EQ(LongestSentencesSignature(a), LongestSentencesSignature(b));
  EXPECT_NE(LongestSentencesSignature(a), LongestSentencesSignature(c));
  EXPECT_NE(LongestSentencesSignature(a), 0u);
  EXPECT_EQ(LongestSentencesSignature(""), 0u);
  EXPECT_EQ(LongestSentencesSignature("  \n  "), 0u);
}

}  // namespace
}  // namespace neardup
