// Tests of the dedup report (neardup/report.h): the word diff (a shortest edit script that
// rebuilds both texts), escaping, the similarity histogram dedup records, and whole reports of
// real runs: cluster counts, the seeded sample, the size bound, missing and changed inputs, eval
// folders, in-memory sources and output protection. The browser half is
// tests/report_browser_test.py.
#include "neardup/report.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "neardup/dedup.h"
#include "report/report_page.h"
#include "report/word_diff.h"
#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using report::DiffSpan;
using report::DiffTokens;
using report::WordDiff;
using report::WordDiffOptions;
using testing_files::JsonLine;
using testing_files::ReadFile;

// ---- the word diff ------------------------------------------------------------------------------

std::string Side(const std::vector<DiffSpan>& spans, DiffSpan::Kind own) {
  std::string text;
  for (const DiffSpan& span : spans) {
    if (span.kind == DiffSpan::kEqual || span.kind == own) text += span.text;
  }
  return text;
}

// Tokens deleted + inserted by the shortest edit script, by dynamic programming (LCS).
size_t ShortestEdits(const std::vector<std::string_view>& a,
                     const std::vector<std::string_view>& b) {
  std::vector<std::vector<size_t>> lcs(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;) {
    for (size_t j = b.size(); j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  return a.size() + b.size() - 2 * lcs[0][0];
}

TEST(WordDiffTest, TokensCoverTheTextAndSplitHanIntoCharacters) {
  const std::string text = "Hello,  world!\n你好世界 naïve café x2 ";
  std::vector<std::string_view> tokens = DiffTokens(text);
  std::string joined;
  for (std::string_view token : tokens) joined += token;
  EXPECT_EQ(joined, text);
  std::vector<std::string> expected = {"Hello", ",",    "  ", "world", "!", "\n",
                                       "你",    "好",   "世", "界",    " ", "naïve",
                                       " ",     "café", " ",  "x2",    " "};
  EXPECT_EQ(std::vector<std::string>(tokens.begin(), tokens.end()), expected);
  // Invalid UTF-8 bytes are tokens of one byte, and the text still comes back whole.
  const std::string invalid = "ab\xff\xfe cd";
  joined.clear();
  for (std::string_view token : DiffTokens(invalid)) joined += token;
  EXPECT_EQ(joined, invalid);
}

TEST(WordDiffTest, RebuildsBothTextsWithAShortestEditScript) {
  std::mt19937 random(7);
  const std::vector<std::string> words = {"a", "b", "c", "the", "cat", " ", "\n", ",", "你", "好"};
  WordDiffOptions raw;
  raw.cleanup = false;
  for (int round = 0; round < 400; ++round) {
    std::string a, b;
    const int na = random() % 25, nb = random() % 25;
    for (int i = 0; i < na; ++i) a += words[random() % words.size()] + " ";
    b = a.substr(0, random() % (a.size() + 1));
    for (int i = 0; i < nb; ++i) b += words[random() % words.size()] + (random() % 2 ? " " : "");
    for (const bool cleanup : {false, true}) {
      WordDiffOptions options;
      options.cleanup = cleanup;
      auto diff = WordDiff(a, b, options);
      ASSERT_TRUE(diff.complete);
      EXPECT_EQ(Side(diff.spans, DiffSpan::kDelete), a) << round;
      EXPECT_EQ(Side(diff.spans, DiffSpan::kInsert), b) << round;
      for (size_t i = 1; i < diff.spans.size(); ++i) {
        EXPECT_NE(diff.spans[i].kind, diff.spans[i - 1].kind) << round;
      }
    }
    EXPECT_EQ(WordDiff(a, b, raw).edits, ShortestEdits(DiffTokens(a), DiffTokens(b))) << round;
  }
}

TEST(WordDiffTest, MarksTheChangedWords) {
  auto diff = WordDiff("the quick brown fox jumps", "the quick red fox jumps");
  ASSERT_EQ(diff.spans.size(), 4u);
  EXPECT_EQ(diff.spans[0].text, "the quick ");
  EXPECT_EQ(diff.spans[1].kind, DiffSpan::kDelete);
  EXPECT_EQ(diff.spans[1].text, "brown");
  EXPECT_EQ(diff.spans[2].kind, DiffSpan::kInsert);
  EXPECT_EQ(diff.spans[2].text, "red");
  EXPECT_EQ(diff.spans[3].text, " fox jumps");
  EXPECT_EQ(diff.edits, 2u);
  // Identical texts: one equal span.
  auto same = WordDiff("同一段文字", "同一段文字");
  ASSERT_EQ(same.spans.size(), 1u);
  EXPECT_EQ(same.spans[0].kind, DiffSpan::kEqual);
  // Cleanup: the lone space between two changed words joins the change.
  auto rewritten = WordDiff("x one two y", "x uno dos y");
  ASSERT_EQ(rewritten.spans.size(), 4u);
  EXPECT_EQ(rewritten.spans[1].text, "one two");
  EXPECT_EQ(rewritten.spans[2].text, "uno dos");
}

TEST(WordDiffTest, GivesUpBeyondMaxEditsWithTheTextsIntact) {
  std::string a, b;
  for (int i = 0; i < 300; ++i) {
    a += "a" + std::to_string(i) + " ";
    b += "b" + std::to_string(i) + " ";
  }
  WordDiffOptions options;
  options.max_edits = 50;
  auto diff = WordDiff("same start " + a, "same start " + b, options);
  EXPECT_FALSE(diff.complete);
  EXPECT_EQ(Side(diff.spans, DiffSpan::kDelete), "same start " + a);
  EXPECT_EQ(Side(diff.spans, DiffSpan::kInsert), "same start " + b);
}

TEST(ReportEscapeTest, HtmlAndScriptJson) {
  EXPECT_EQ(report::EscapeHtml("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  const std::string json = R"({"t":"</script><!-- & -->"})";
  EXPECT_EQ(report::EscapeScriptJson(json),
            R"({"t":"\u003c/script\u003e\u003c!-- \u0026 --\u003e"})");
}

// ---- reports of real runs -----------------------------------------------------------------------

// A fresh folder, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "neardup-report-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  fs::path operator/(const std::string& name) const { return fs::path(path_) / name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// `words` random words from a small vocabulary.
std::vector<std::string> RandomWords(std::mt19937* random, int words) {
  static const std::vector<std::string> kVocabulary = [] {
    std::vector<std::string> v;
    for (int i = 0; i < 3000; ++i) v.push_back("w" + std::to_string(i * 7919 % 100003));
    return v;
  }();
  std::vector<std::string> out;
  for (int i = 0; i < words; ++i) out.push_back(kVocabulary[(*random)() % kVocabulary.size()]);
  return out;
}

std::string Join(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "" : " ") + word;
  return text;
}

// `changes` words of `words` replaced by new ones (at seeded places).
std::string Mutate(std::vector<std::string> words, int changes, std::mt19937* random) {
  for (int i = 0; i < changes; ++i) words[(*random)() % words.size()] = "x" + std::to_string(i);
  return Join(words);
}

// Writes a corpus of `originals` documents, each with `copies` near copies and one far copy
// (below the threshold), runs dedup into `dir`, and returns the report.
DedupReport RunCorpus(const TempDir& dir, int originals, int copies, int words,
                      const std::string& extra_lines = "") {
  std::mt19937 random(11);
  std::string corpus = extra_lines;
  for (int d = 0; d < originals; ++d) {
    std::vector<std::string> original = RandomWords(&random, words);
    corpus += JsonLine("doc" + std::to_string(d), Join(original));
    for (int c = 0; c < copies; ++c) {
      corpus += JsonLine("doc" + std::to_string(d) + "-copy" + std::to_string(c),
                         Mutate(original, 2 + c, &random));
    }
    corpus += JsonLine("doc" + std::to_string(d) + "-far", Mutate(original, words / 5, &random));
  }
  std::ofstream(dir / "corpus.jsonl") << corpus;
  DedupOptions options;
  options.threads = 2;
  auto report = RunDedup({(dir / "corpus.jsonl").string()}, options);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  DedupOutputOptions output;
  output.directory = (dir / "out").string();
  output.options = &options;
  EXPECT_TRUE(WriteDedupOutputs(*report, output).ok());
  return std::move(*report);
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(ReportTest, SimilarityHistogramCountsEveryVerifiedCandidate) {
  TempDir dir;
  DedupReport report = RunCorpus(dir, 40, 2, 80);
  const SimilarityHistogram& h = report.similarity_histogram;
  ASSERT_EQ(h.accepted.size(), static_cast<size_t>(SimilarityHistogram::kBins));
  uint64_t accepted = 0, rejected = 0;
  for (size_t i = 0; i < h.accepted.size(); ++i) {
    accepted += h.accepted[i];
    rejected += h.rejected[i];
    // Accepted pairs sit at or above the threshold, rejected ones below it.
    if (i < 50) {
      EXPECT_EQ(h.accepted[i], 0u) << i;
    } else {
      EXPECT_EQ(h.rejected[i], 0u) << i;
    }
  }
  EXPECT_EQ(accepted, report.pairs.size());
  EXPECT_EQ(h.rejected_pairs, report.candidate_pairs - report.pairs.size());
  EXPECT_GT(h.rejected_pairs, 0u) << "the far copies should be candidates that fail";
  EXPECT_EQ(h.rejected_sample_every, 1u);
  EXPECT_EQ(h.rejected_measured, h.rejected_pairs);
  EXPECT_EQ(rejected, h.rejected_pairs);
  const std::string summary = ReadFile(dir / "out" / "summary.json");
  EXPECT_NE(summary.find("\"similarity_histogram\""), std::string::npos);
  EXPECT_NE(summary.find("\"inputs\""), std::string::npos);
  EXPECT_NE(summary.find("\"absolute\""), std::string::npos);
}

TEST(ReportTest, ShowsEveryClusterWithTextsDiffsAndTheSample) {
  TempDir dir;
  DedupReport run = RunCorpus(dir, 30, 2, 60);
  ReportStats stats;
  ReportSources sources;
  sources.directory = (dir / "out").string();
  auto page = RenderReport(sources, ReportOptions(), &stats);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(stats.clusters, run.clusters.size());
  EXPECT_EQ(stats.clusters_embedded, run.clusters.size());
  EXPECT_EQ(stats.removed, run.removed_count());
  EXPECT_EQ(stats.sample, std::min<uint64_t>(50, run.removed_count()));
  EXPECT_EQ(stats.texts_found, stats.texts_wanted);
  EXPECT_TRUE(stats.texts_note.empty()) << stats.texts_note;
  EXPECT_GT(stats.diffs, 0u);
  EXPECT_EQ(stats.bytes, page->size());
  EXPECT_NE(page->find("id=\"cluster-count\">" + std::to_string(run.clusters.size())),
            std::string::npos);
  EXPECT_NE(page->find("Myers"), std::string::npos);  // the page names its diff algorithm
  // Self-contained: a CSP that allows nothing but the page's own nonce, and no URL to fetch.
  EXPECT_NE(page->find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(page->find("http://"), std::string::npos);
  EXPECT_EQ(page->find("https://"), std::string::npos);
  EXPECT_EQ(Occurrences(*page, "<script"), 2u);
  EXPECT_EQ(Occurrences(*page, "</script"), 2u);
}

TEST(ReportTest, CorpusMarkupIsEscapedEverywhere) {
  TempDir dir;
  const std::string hostile = "<script>alert(1)</script> \"><img src=x onerror=alert(2)>";
  std::string lines;
  for (int i = 0; i < 3; ++i) {
    lines += JsonLine("</script><b>" + std::to_string(i) + "</b>",
                      hostile + " a long enough sentence about the markup that a corpus holds " +
                          std::string(i + 1, 'x') + " <!--");
  }
  RunCorpus(dir, 2, 1, 40, lines);
  ReportSources sources;
  sources.directory = (dir / "out").string();
  ReportStats stats;
  auto page = RenderReport(sources, ReportOptions(), &stats);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  // The hostile documents form a cluster of their own, shown with texts and diffs.
  EXPECT_NE(page->find("\\u003c/script\\u003e\\u003cb\\u003e0"), std::string::npos);
  EXPECT_NE(page->find("\\u003cscript\\u003ealert(1)"), std::string::npos);
  EXPECT_EQ(stats.texts_found, stats.texts_wanted);
  EXPECT_EQ(page->find("<script>alert"), std::string::npos);
  EXPECT_EQ(page->find("<img"), std::string::npos);
  EXPECT_EQ(page->find("<b>"), std::string::npos);
  EXPECT_EQ(Occurrences(*page, "<script"), 2u);
  EXPECT_EQ(Occurrences(*page, "</script"), 2u);
  EXPECT_EQ(Occurrences(*page, "<!--"), 0u);
}

TEST(ReportTest, TheSampleIsSeededAndTheClustersAreTheLargest) {
  TempDir dir;
  RunCorpus(dir, 40, 3, 50);
  ReportSources sources;
  sources.directory = (dir / "out").string();
  auto sample_ids = [&](uint64_t seed) {
    ReportOptions options;
    options.seed = seed;
    options.sample_size = 10;
    options.max_clusters = 5;
    auto page = RenderReport(sources, options);
    EXPECT_TRUE(page.ok());
    // The sample entries' member ids, in page order.
    std::string data = page->substr(page->find("\"sample\":"));
    data = data.substr(0, data.find("\"missed\":"));
    std::vector<std::string> ids;
    const std::string marker = R"("member":{"doc":{"id":")";
    for (size_t at = data.find(marker); at != std::string::npos; at = data.find(marker, at + 1)) {
      const size_t start = at + marker.size();
      ids.push_back(data.substr(start, data.find('"', start) - start));
    }
    return ids;
  };
  const auto first = sample_ids(1);
  EXPECT_EQ(first.size(), 10u);
  EXPECT_EQ(sample_ids(1), first);
  EXPECT_NE(sample_ids(2), first);

  ReportOptions options;
  options.max_clusters = 3;
  ReportStats stats;
  auto page = RenderReport(sources, options, &stats);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(stats.clusters_embedded, 3u);
  EXPECT_GT(stats.clusters, 3u);
  EXPECT_NE(page->find("holds the 3 largest of " + std::to_string(stats.clusters)),
            std::string::npos);
}

TEST(ReportTest, StaysWithinTheTextBudget) {
  TempDir dir;
  RunCorpus(dir, 60, 4, 700);  // ~5 kB texts, 60 clusters of 5
  ReportSources sources;
  sources.directory = (dir / "out").string();
  ReportOptions options;
  options.max_total_text_bytes = 100000;
  options.max_text_bytes = 2000;
  options.sample_size = 0;
  ReportStats stats;
  auto page = RenderReport(sources, options, &stats);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(stats.clusters_embedded, 60u);
  // The first clusters keep their texts and diffs; the page says where the budget ran out.
  EXPECT_GT(stats.diffs, 10u);
  EXPECT_EQ(page->find("clusters from #1 in this list"), std::string::npos);
  // Texts (with their diffs) take at most about twice the budget; the rest is markup and data.
  EXPECT_LT(page->size(), 2 * options.max_total_text_bytes + 150000) << page->size();
  EXPECT_NE(page->find("text budget"), std::string::npos);
  // Without the budget the same page is much larger.
  options.max_total_text_bytes = 100000000;
  auto full = RenderReport(sources, options);
  ASSERT_TRUE(full.ok());
  EXPECT_GT(full->size(), 4 * page->size() / 3);
}

TEST(ReportTest, RendersWhenTheInputsAreGoneOrChanged) {
  TempDir dir;
  RunCorpus(dir, 5, 1, 40);
  ReportSources sources;
  sources.directory = (dir / "out").string();
  // Changed: the same size and lines, other ids at the recorded places.
  std::string corpus = ReadFile(dir / "corpus.jsonl");
  for (size_t at = corpus.find("\"doc"); at != std::string::npos;
       at = corpus.find("\"doc", at + 1)) {
    corpus[at + 1] = 'D';
  }
  std::ofstream(dir / "corpus.jsonl") << corpus;
  ReportStats stats;
  auto page = RenderReport(sources, ReportOptions(), &stats);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(stats.texts_found, 0u);
  EXPECT_NE(stats.texts_note.find("another id"), std::string::npos) << stats.texts_note;
  // Gone.
  fs::remove(dir / "corpus.jsonl");
  page = RenderReport(sources, ReportOptions(), &stats);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_GT(stats.texts_wanted, 0u);
  EXPECT_EQ(stats.texts_found, 0u);
  EXPECT_NE(stats.texts_note.find("the input is gone"), std::string::npos) << stats.texts_note;
  EXPECT_NE(page->find("Texts unavailable for"), std::string::npos);
  // Replaced by a pipe: never opened (reading it would wait for a writer forever).
  ASSERT_EQ(::mkfifo((dir / "corpus.jsonl").c_str(), 0600), 0);
  page = RenderReport(sources, ReportOptions(), &stats);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(stats.texts_found, 0u);
  EXPECT_NE(stats.texts_note.find("cannot be read again"), std::string::npos) << stats.texts_note;
}

TEST(ReportTest, EvalFoldersShowTheLabelTableAndMissedPairs) {
  TempDir dir;
  RunCorpus(dir, 3, 1, 40);
  std::ofstream(dir / "out" / "eval.json")
      << R"({"methods":["dedup: same cluster"],"labels":[{"label":"exact","class":"positive",)"
      << R"("pairs":4,"rates":[0.75]},{"label":"negative_x","class":"negative","pairs":2,)"
      << R"("rates":[0.5]}],"overall":{"precision":0.9,"recall":0.75},"missed":[{"kind":"missed",)"
      << R"("set":"s","label":"exact","reference_similarity":1,"jaccard":0.4,"distance":9,)"
      << R"("a":{"id":"doc0","location":")" << (dir / "corpus.jsonl").string()
      << R"(:1","bytes":300},"b":{"id":"doc1","location":")" << (dir / "corpus.jsonl").string()
      << R"(:4","bytes":300}}]})";
  ReportSources sources;
  sources.directory = (dir / "out").string();
  ReportStats stats;
  auto page = RenderReport(sources, ReportOptions(), &stats);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(stats.eval);
  EXPECT_EQ(stats.missed_pairs, 1u);
  EXPECT_NE(page->find("id=\"eval-labels\""), std::string::npos);
  EXPECT_NE(page->find("75.0 %"), std::string::npos);
  EXPECT_NE(page->find("Missed pairs: 1"), std::string::npos);
  EXPECT_EQ(stats.texts_found, stats.texts_wanted);
}

TEST(ReportTest, InMemorySourcesTakeTextsFromTheCaller) {
  ReportSources sources;
  sources.summary_json = R"({"documents_fingerprinted":3,"documents_removed":1,"clusters":1})";
  sources.clusters_jsonl =
      R"({"cluster":0,"size":2,"kept":{"id":"a","index":0,"bytes":11},)"
      R"("removed":[{"id":"b","index":2,"bytes":12,"distance":3,"reason":"near_duplicate",)"
      R"("via":"a","distance_to_via":3,"similarity_to_via":0.8}]})"
      "\n";
  std::vector<std::string> asked;
  ReportOptions options;
  options.texts = [&](const std::vector<ReportDocumentRef>& wanted,
                      std::vector<std::optional<std::string>>* texts) {
    for (size_t i = 0; i < wanted.size(); ++i) {
      asked.push_back(wanted[i].id + "@" + wanted[i].location);
      (*texts)[i] = wanted[i].id == "a" ? "hello world" : "hello there world";
    }
    return Status::Ok();
  };
  ReportStats stats;
  auto page = RenderReport(sources, options, &stats);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(std::set<std::string>(asked.begin(), asked.end()),
            (std::set<std::string>{"a@0", "b@2"}));
  EXPECT_EQ(stats.clusters, 1u);
  EXPECT_EQ(stats.texts_found, stats.texts_wanted);
  EXPECT_EQ(stats.diffs, 2u);  // the cluster's member and the same member in the sample
  EXPECT_NE(page->find(R"(["+","there "])"), std::string::npos);
  // A malformed clusters line is an error naming the line.
  sources.clusters_jsonl += "{not json\n";
  auto bad = RenderReport(sources, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("clusters.jsonl:2"), std::string::npos);
}

TEST(ReportTest, ChainedMembersAreComparedWithTheirVia) {
  // b is paired with the kept a; c only with d (chained), and d is not listed (max 2 listed).
  ReportSources sources;
  sources.summary_json = R"({"documents_fingerprinted":4})";
  sources.clusters_jsonl =
      R"({"cluster":0,"size":4,"kept":{"id":"a","location":"f:1","bytes":20},"removed":[)"
      R"({"id":"b","location":"f:2","reason":"near_duplicate","via":"a","similarity_to_via":0.7},)"
      R"({"id":"c","location":"f:3","reason":"chained","via":"d","similarity_to_via":0.6},)"
      R"({"id":"d","location":"f:4","reason":"near_duplicate","via":"a","similarity_to_via":0.6}]})"
      "\n";
  const std::map<std::string, std::string> texts = {{"a", "one two three four five"},
                                                    {"b", "one two three four six"},
                                                    {"c", "nine two three eight seven"},
                                                    {"d", "one two three eight seven"}};
  ReportOptions options;
  options.max_listed_members = 2;
  options.sample_size = 0;
  options.texts = [&](const std::vector<ReportDocumentRef>& wanted,
                      std::vector<std::optional<std::string>>* out) {
    for (size_t i = 0; i < wanted.size(); ++i) (*out)[i] = texts.at(wanted[i].id);
    return Status::Ok();
  };
  ReportStats stats;
  auto page = RenderReport(sources, options, &stats);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(stats.diffs, 2u);
  EXPECT_EQ(stats.texts_found, 4u);  // a, b, c and c's via d
  // c's diff is against d (one word changed), not against the kept a.
  EXPECT_NE(page->find(R"(["-","one"],["+","nine"],["="," two three eight seven"])"),
            std::string::npos);
  EXPECT_NE(page->find(R"("vias":[{"id":"d","loc":"f:4")"), std::string::npos);
  EXPECT_NE(page->find(R"("unlisted":1)"), std::string::npos);
}

TEST(ReportTest, ThePageListsABoundedNumberOfMembers) {
  ReportSources sources;
  sources.summary_json = "{}";
  for (int c = 0; c < 3; ++c) {
    std::string line = R"({"cluster":)" + std::to_string(c) + R"(,"size":6,"kept":{"id":"k)" +
                       std::to_string(c) + R"(","location":"f:1"},"removed":[)";
    for (int m = 0; m < 5; ++m) {
      line += std::string(m ? "," : "") + R"({"id":"m)" + std::to_string(c) + std::to_string(m) +
              R"(","location":"f:2","reason":"near_duplicate","via":"k)" + std::to_string(c) +
              R"("})";
    }
    sources.clusters_jsonl += line + "]}\n";
  }
  ReportOptions options;
  options.max_total_listed_members = 4;
  options.max_members_with_text = 1;
  options.sample_size = 0;
  options.texts = [](const std::vector<ReportDocumentRef>& wanted,
                     std::vector<std::optional<std::string>>* out) {
    for (size_t i = 0; i < wanted.size(); ++i) (*out)[i] = "text of " + wanted[i].id;
    return Status::Ok();
  };
  auto page = RenderReport(sources, options);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  // The first cluster lists 4 members, the others only the one shown with a diff.
  EXPECT_EQ(Occurrences(*page, R"("unlisted":1)"), 1u);
  EXPECT_EQ(Occurrences(*page, R"("unlisted":4)"), 2u);
  EXPECT_NE(page->find(R"("id":"m20")"), std::string::npos);
  EXPECT_EQ(page->find(R"("id":"m21")"), std::string::npos);
}

TEST(ReportTest, WriteReportProtectsInputsAndExistingFiles) {
  TempDir dir;
  RunCorpus(dir, 3, 1, 40);
  const std::string out = (dir / "out").string();
  auto written = WriteReport(out, (dir / "report.html").string(), ReportOptions());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(fs::file_size(dir / "report.html"), written->bytes);
  EXPECT_FALSE(WriteReport(out, (dir / "report.html").string(), ReportOptions()).ok());
  EXPECT_TRUE(WriteReport(out, (dir / "report.html").string(), ReportOptions(), true).ok());
  // Never over the folder's own files or the run's inputs, even with force.
  EXPECT_FALSE(
      WriteReport(out, (dir / "out" / "summary.json").string(), ReportOptions(), true).ok());
  EXPECT_FALSE(WriteReport(out, (dir / "corpus.jsonl").string(), ReportOptions(), true).ok());
  EXPECT_FALSE(
      WriteReport((dir / "nothing").string(), (dir / "r.html").string(), ReportOptions()).ok());
}

}  // namespace
}  // namespace neardup
