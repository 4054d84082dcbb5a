// End-to-end tests of `neardup dedup` (and `neardup explain`) on small fixtures: exact and near
// duplicates, a corrupt line, an empty document, gzip and zstd inputs, a directory of text files,
// --write-kept, --strict, and determinism across thread counts and input order.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_writer.h"
#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing_files::JsonLine;
using testing_files::Lines;
using testing_files::ReadFile;

// A pseudo-English text of `words` words drawn from a fixed vocabulary (deterministic per seed).
std::string MakeText(uint32_t seed, int words) {
  static const char* kSyllables[] = {"ka", "lo", "mi", "ne", "tu", "ra", "so", "vi",
                                     "de", "pa", "gu", "ze", "fo", "hi", "ba", "ly"};
  std::mt19937 random(seed);
  std::string text;
  for (int w = 0; w < words; ++w) {
    if (w > 0) text += (w % 12 == 0) ? ". " : " ";
    int syllables = 1 + static_cast<int>(random() % 3);
    for (int s = 0; s < syllables; ++s) text += kSyllables[random() % 16];
  }
  return text + ".";
}

// `text` with the words at the given positions replaced.
std::string EditWords(const std::string& text, std::vector<int> positions) {
  std::istringstream in(text);
  std::string word, out;
  int index = 0;
  while (in >> word) {
    if (!out.empty()) out += " ";
    bool replace = false;
    for (int p : positions) replace = replace || p == index;
    out += replace ? "zzqx" : word;
    ++index;
  }
  return out;
}

class DedupCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neardup_dedup_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    base_ = MakeText(1, 160);
    // a.jsonl: an exact duplicate pair, a near-duplicate pair, unrelated documents, a corrupt line
    // and an empty document.
    std::string a = JsonLine("base", base_) + JsonLine("base-copy", base_) +
                    JsonLine("base-edit", EditWords(base_, {10, 90})) +
                    JsonLine("other1", MakeText(2, 150)) + "{\"id\": \"broken\", \"text\": \n" +
                    JsonLine("empty", "") + JsonLine("other2", MakeText(3, 140));
    Write("a.jsonl", a);
    // b.jsonl.gz: a near duplicate of other1 (longer: one extra sentence) and an unrelated doc.
    std::string b = JsonLine("other1-plus", MakeText(2, 150) + " " + MakeText(50, 8)) +
                    JsonLine("other3", MakeText(4, 150));
    WriteGzip("b.jsonl.gz", b);
    // c.jsonl.zst: another copy of base with whitespace noise, and an unrelated doc.
    std::string c =
        JsonLine("base-zst", "  " + base_ + "\n\n") + JsonLine("other4", MakeText(5, 150));
    WriteZstd("c.jsonl.zst", c);
    // texts/: plain text files, one a near duplicate of other2.
    Write("texts/one.txt", EditWords(MakeText(3, 140), {5}));
    Write("texts/two.txt", MakeText(6, 130));
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& content) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << content;
  }
  void WriteGzip(const std::string& name, const std::string& content) {
    gzFile file = gzopen((dir_ / name).c_str(), "wb");
    gzwrite(file, content.data(), static_cast<unsigned>(content.size()));
    gzclose(file);
  }
  void WriteZstd(const std::string& name, const std::string& content) {
    std::string compressed(ZSTD_compressBound(content.size()), '\0');
    compressed.resize(
        ZSTD_compress(compressed.data(), compressed.size(), content.data(), content.size(), 3));
    Write(name, compressed);
  }
  // Runs the neardup binary with `args`; returns its exit code and captures stdout/stderr.
  int Run(const std::string& args, std::string* out = nullptr, std::string* err = nullptr) {
    fs::path out_file = dir_ / "stdout.txt", err_file = dir_ / "stderr.txt";
    std::string command = std::string(NEARDUP_BINARY) + " " + args + " >" + out_file.string() +
                          " 2>" + err_file.string();
    int status = std::system(command.c_str());
    if (out) *out = ReadFile(out_file);
    if (err) *err = ReadFile(err_file);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Inputs(bool reversed = false) const {
    std::vector<std::string> inputs = {(dir_ / "a.jsonl").string(), (dir_ / "b.jsonl.gz").string(),
                                       (dir_ / "c.jsonl.zst").string(), (dir_ / "texts").string()};
    if (reversed) std::reverse(inputs.begin(), inputs.end());
    std::string joined;
    for (const auto& input : inputs) joined += input + " ";
    return joined;
  }

  fs::path dir_;
  std::string base_;
};

TEST_F(DedupCommandTest, ClustersDuplicatesAndWritesAllOutputs) {
  fs::path out = dir_ / "out";
  std::string err;
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() + " --threads 2 --write-kept " +
                    (dir_ / "kept.jsonl").string(),
                nullptr, &err),
            0)
      << err;
  // The corrupt line is reported with file and line.
  EXPECT_NE(err.find("a.jsonl:5"), std::string::npos) << err;

  std::vector<std::string> keep = Lines(ReadFile(out / "keep.txt"));
  std::vector<std::string> remove = Lines(ReadFile(out / "remove.txt"));
  std::set<std::string> removed(remove.begin(), remove.end());
  std::set<std::string> kept(keep.begin(), keep.end());
  EXPECT_EQ(removed, (std::set<std::string>{"base-copy", "base-edit", "base-zst", "other1-plus",
                                            (dir_ / "texts" / "one.txt").string()}));
  EXPECT_TRUE(kept.count("base"));
  EXPECT_TRUE(kept.count("other1"));
  EXPECT_TRUE(kept.count("other2"));
  EXPECT_TRUE(kept.count("other3"));
  EXPECT_TRUE(kept.count("other4"));
  EXPECT_TRUE(kept.count((dir_ / "texts" / "two.txt").string()));
  EXPECT_EQ(keep.size() + remove.size(), 11u);  // 13 records - corrupt - empty

  std::string clusters = ReadFile(out / "clusters.jsonl");
  EXPECT_EQ(Lines(clusters).size(), 3u) << clusters;
  EXPECT_NE(clusters.find("\"reason\":\"exact_duplicate\""), std::string::npos) << clusters;
  EXPECT_NE(clusters.find("\"reason\":\"near_duplicate\""), std::string::npos) << clusters;
  EXPECT_NE(clusters.find("\"distance\":"), std::string::npos);

  std::string summary = ReadFile(out / "summary.json");
  EXPECT_NE(summary.find("\"invalid_json\":1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"empty_text\":1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"documents_removed\":5"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"stage\":\"fingerprint\""), std::string::npos) << summary;

  // --write-kept re-writes the kept documents: original lines for JSONL, {"id","text"} for text.
  std::vector<std::string> kept_lines = Lines(ReadFile(dir_ / "kept.jsonl"));
  EXPECT_EQ(kept_lines.size(), keep.size());
  EXPECT_EQ(kept_lines[0] + "\n", JsonLine("base", base_));
}

TEST_F(DedupCommandTest, KeepLongestPicksTheLongerDocument) {
  fs::path out = dir_ / "out";
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() + " --keep longest -q"), 0);
  std::string keep = ReadFile(out / "keep.txt");
  EXPECT_NE(keep.find("other1-plus\n"), std::string::npos) << keep;
  EXPECT_EQ(keep.find("other1\n"), std::string::npos) << keep;
}

TEST_F(DedupCommandTest, SameResultWhateverThreadsAndInputOrder) {
  std::string first_clusters, first_keep;
  int run = 0;
  for (const auto& [threads, reversed] :
       std::vector<std::pair<int, bool>>{{1, false}, {2, false}, {2, true}}) {
    fs::path out = dir_ / ("out" + std::to_string(run++));
    ASSERT_EQ(Run("dedup " + Inputs(reversed) + " -o " + out.string() + " -q --threads " +
                  std::to_string(threads)),
              0);
    std::string clusters = ReadFile(out / "clusters.jsonl");
    std::string keep = ReadFile(out / "keep.txt");
    if (first_clusters.empty()) {
      first_clusters = clusters;
      first_keep = keep;
      ASSERT_FALSE(clusters.empty());
    } else {
      EXPECT_EQ(clusters, first_clusters) << "threads=" << threads << " reversed=" << reversed;
      EXPECT_EQ(keep, first_keep);
    }
  }
}

TEST_F(DedupCommandTest, VerificationThresholdDropsPairsBelowIt) {
  // base-edit differs from base in 2 of 160 words: its Jaccard is high but below 0.99, while the
  // exact and whitespace-only copies always pass. Its containment is high too, and so are its
  // words (the `edited` reason, on by default), so the contained and edited reasons are turned off
  // (or made as strict) for the pair to be dropped.
  fs::path out = dir_ / "out";
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() +
                " -q --verify 0.99 --containment 0 --edited 0"),
            0);
  std::string remove = ReadFile(out / "remove.txt");
  EXPECT_NE(remove.find("base-copy\n"), std::string::npos) << remove;
  EXPECT_NE(remove.find("base-zst\n"), std::string::npos) << remove;
  EXPECT_EQ(remove.find("base-edit\n"), std::string::npos) << remove;
  // With the default containment, base-edit lies 97 % inside base: a duplicate, "contained".
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() + " -q --force --verify 0.99"), 0);
  remove = ReadFile(out / "remove.txt");
  EXPECT_NE(remove.find("base-edit\n"), std::string::npos) << remove;
  EXPECT_NE(ReadFile(out / "clusters.jsonl").find("\"reason\":\"contained\""), std::string::npos);
}

TEST_F(DedupCommandTest, StrictStopsAtTheCorruptLine) {
  std::string err;
  EXPECT_EQ(
      Run("dedup " + Inputs() + " -o " + (dir_ / "out").string() + " --strict", nullptr, &err), 1);
  EXPECT_NE(err.find("a.jsonl:5"), std::string::npos) << err;
}

TEST_F(DedupCommandTest, StandardInputAndStandardOutput) {
  // Without -o the clusters (JSONL) go to standard output and the summary to stderr.
  std::string out, err;
  std::string command = "dedup - --verify 0.4 < " + (dir_ / "a.jsonl").string();
  ASSERT_EQ(Run(command, &out, &err), 0) << err;
  std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  EXPECT_EQ(lines[0].rfind("{\"cluster\":0,", 0), 0u) << out;
  EXPECT_NE(lines[0].find("\"id\":\"base-copy\""), std::string::npos) << out;
  EXPECT_NE(lines[0].find("\"id\":\"base-edit\""), std::string::npos) << out;
  EXPECT_NE(err.find("neardup: dedup: 5 documents"), std::string::npos) << err;
}

TEST_F(DedupCommandTest, BadOptionsAreUsageErrors) {
  std::string err;
  EXPECT_EQ(Run("dedup " + Inputs() + " --keep biggest", nullptr, &err), 2);
  EXPECT_NE(err.find("--keep"), std::string::npos) << err;
  EXPECT_EQ(Run("dedup " + Inputs() + " -k 40", nullptr, &err), 2);
  EXPECT_EQ(Run("dedup " + (dir_ / "missing.jsonl").string(), nullptr, &err), 1);
  EXPECT_NE(err.find("missing.jsonl"), std::string::npos) << err;
}

TEST_F(DedupCommandTest, SummaryRecordsTheRuleUsed) {
  fs::path out = dir_ / "out";
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() + " -q"), 0);
  std::string summary = ReadFile(out / "summary.json");
  EXPECT_NE(summary.find("\"candidates\":\"lsh\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"threshold\":0.5"), std::string::npos) << summary;
  // The default rule has the `edited` reason on (0.8, shingle Jaccard >= 0.45): the LSH plan
  // reaches down to 0.45, 41 x 3 (30 x 3 with --edited 0, below).
  EXPECT_NE(summary.find("\"bands\":41"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"rows\":3"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"edited\":0.8,\"edited_min_jaccard\":0.45"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("\"k\":-1"), std::string::npos) << summary;  // SimHash join off
  EXPECT_NE(summary.find("\"verify\":0.5"), std::string::npos) << summary;
  // Boilerplate weights are opt-in: by default the rule depends on the two documents only.
  EXPECT_NE(summary.find("\"boilerplate\":false"), std::string::npos) << summary;
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() + " -q --force --boilerplate"), 0);
  summary = ReadFile(out / "summary.json");
  EXPECT_NE(summary.find("\"boilerplate\":true"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"boilerplate_min_documents\""), std::string::npos) << summary;
  // A small input: every document counted, whatever the sketch's cap (FrequencySketchFor).
  EXPECT_NE(summary.find("\"frequency_counted_every\":1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"boilerplate_sketch_mb\":512"), std::string::npos) << summary;
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() +
                " -q --force --boilerplate --boilerplate-sketch-mb 1"),
            0);
  summary = ReadFile(out / "summary.json");
  EXPECT_NE(summary.find("\"boilerplate_sketch_mb\":1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"frequency_counted_every\":1"), std::string::npos) << summary;
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() + " -q --force --edited 0"), 0);
  summary = ReadFile(out / "summary.json");
  EXPECT_NE(summary.find("\"bands\":30"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"edited\":0,"), std::string::npos) << summary;
  ASSERT_EQ(Run("dedup " + Inputs() + " -o " + out.string() +
                " -q --force --threshold 0.8 --containment 0 --edited 0 --candidates lsh+simhash"),
            0);
  summary = ReadFile(out / "summary.json");
  EXPECT_NE(summary.find("\"bands\":17"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"rows\":7"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"k\":3"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"verify\":0.8"), std::string::npos) << summary;
  std::string err;
  EXPECT_EQ(Run("dedup " + Inputs() + " --threshold 1.5", nullptr, &err), 2);
  EXPECT_NE(err.find("--threshold"), std::string::npos) << err;
  EXPECT_EQ(Run("dedup " + Inputs() + " --bands 4", nullptr, &err), 2);
  EXPECT_EQ(Run("dedup " + Inputs() + " --boilerplate --boilerplate-sketch-mb 0", nullptr, &err),
            2);
  EXPECT_NE(err.find("--boilerplate-sketch-mb"), std::string::npos) << err;
}

// The pair rule's `edited` reason end to end: a 300-word text with one word in eight replaced
// (shingle Jaccard ~0.48, below the near_duplicate threshold; its word multisets 0.791 alike) is
// a duplicate with --edited 0.7, and neither with the default 0.8 nor with --edited 0 (off); the
// same output at 1 and 2 threads; summary.json, clusters.jsonl, explain and eval name the reason,
// and plan shows it.
TEST_F(DedupCommandTest, EditedReasonFindsALightlyEditedCopy) {
  const std::string base = MakeText(77, 300);
  std::vector<int> positions;
  for (int i = 0; i < 35; ++i) positions.push_back(5 + 8 * i);
  Write("edited.jsonl", JsonLine("base", base) + JsonLine("copy", EditWords(base, positions)) +
                            JsonLine("other", MakeText(78, 300)));
  const std::string input = (dir_ / "edited.jsonl").string();
  fs::path off = dir_ / "off", one = dir_ / "one", two = dir_ / "two";
  ASSERT_EQ(Run("dedup " + input + " -q -o " + off.string()), 0);
  EXPECT_EQ(ReadFile(off / "remove.txt"), "");
  ASSERT_EQ(Run("dedup " + input + " -q --edited 0 -f -o " + off.string()), 0);
  EXPECT_EQ(ReadFile(off / "remove.txt"), "");
  ASSERT_EQ(Run("dedup " + input + " -q --edited 0.7 -j 1 -o " + one.string()), 0);
  ASSERT_EQ(Run("dedup " + input + " -q --edited 0.7 -j 2 -o " + two.string()), 0);
  EXPECT_EQ(ReadFile(one / "remove.txt"), "copy\n");
  for (const char* file : {"clusters.jsonl", "keep.txt", "remove.txt"}) {
    EXPECT_EQ(ReadFile(one / file), ReadFile(two / file)) << file;
  }
  EXPECT_NE(ReadFile(one / "clusters.jsonl").find("\"reason\":\"edited\""), std::string::npos);
  const std::string summary = ReadFile(one / "summary.json");
  EXPECT_NE(summary.find("\"edited\":1}"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"edited_threshold\":0.7,\"edited_min_jaccard\":0.45"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("\"lowest_accepted_jaccard\":0.45"), std::string::npos) << summary;
  std::string out;
  ASSERT_EQ(Run("explain --file " + input + " base copy --edited 0.7", &out), 0);
  EXPECT_NE(out.find("pair rule: edited"), std::string::npos) << out;
  EXPECT_NE(out.find("near-duplicate: yes (edited)"), std::string::npos) << out;
  EXPECT_NE(out.find("unit similarity: Jaccard 0."), std::string::npos) << out;
  ASSERT_EQ(Run("explain --file " + input + " base copy", &out), 0);
  EXPECT_NE(out.find("near-duplicate: no"), std::string::npos) << out;
  EXPECT_NE(out.find("unit similarity: Jaccard 0.791 of the word / character sets (edited at >= "
                     "0.80 with plain shingle Jaccard >= 0.45"),
            std::string::npos)
      << out;
  ASSERT_EQ(Run("explain --file " + input + " base copy --edited 0", &out), 0);
  EXPECT_NE(out.find("near-duplicate: no"), std::string::npos) << out;
  EXPECT_NE(out.find("(edited off)"), std::string::npos) << out;
  ASSERT_EQ(Run("explain --file " + input + " base copy --edited 0.7 --json", &out), 0);
  EXPECT_NE(out.find("\"reason\":\"edited\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"unit_jaccard\":0."), std::string::npos) << out;
  Write("labels.tsv", "s\tbase\tcopy\tnear_dup_real\ns\tbase\tother\tnegative_random\n");
  ASSERT_EQ(Run("eval --pairs " + (dir_ / "labels.tsv").string() + " --docs " + input +
                    " --edited 0.7 --json",
                &out),
            0);
  EXPECT_NE(out.find("\"accepted_pairs_by_reason\":{\"edited\":1}"), std::string::npos) << out;
  ASSERT_EQ(
      Run("eval --pairs " + (dir_ / "labels.tsv").string() + " --docs " + input + " --edited 0.7",
          &out),
      0);
  EXPECT_NE(out.find("Accepted pairs by reason: edited 1"), std::string::npos) << out;
  ASSERT_EQ(Run("plan --threshold 0.5 --edited 0.7", &out), 0);
  EXPECT_NE(out.find("edited: plain shingle Jaccard >= 0.45"), std::string::npos) << out;
  EXPECT_NE(out.find("41 bands x 3 rows"), std::string::npos) << out;
  std::string err;
  EXPECT_EQ(Run("dedup " + input + " --edited 0.7 --edited-min-jaccard 0", nullptr, &err), 2);
  EXPECT_NE(err.find("--edited-min-jaccard"), std::string::npos) << err;
}

TEST_F(DedupCommandTest, PlanPrintsTheLshTradeOff) {
  std::string out;
  // The default rule: the `edited` reason on (0.8), so the plan reaches its floor, 0.45.
  ASSERT_EQ(Run("plan --threshold 0.5 -n 1e6", &out), 0);
  EXPECT_NE(out.find("edited: plain shingle Jaccard >= 0.45 and multiset Jaccard of the units "
                     "(words, Han characters) >= 0.80"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("41 bands x 3 rows = 123 signature values (chosen for the lowest Jaccard the "
                     "rule accepts); pairs down to Jaccard 0.450 are candidates with probability "
                     "0.980"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("0.996"), std::string::npos) << out;  // P(found) at J = 0.5
  EXPECT_NE(out.find("expected candidate pairs among n = 1e+06"), std::string::npos) << out;
  // Without it: the threshold's plan.
  ASSERT_EQ(Run("plan --threshold 0.5 -n 1e6 --edited 0", &out), 0);
  EXPECT_NE(out.find("edited: off"), std::string::npos) << out;
  EXPECT_NE(out.find("30 bands x 3 rows"), std::string::npos) << out;
  EXPECT_NE(out.find("0.982"), std::string::npos) << out;  // P(found) at J = 0.5
}

TEST_F(DedupCommandTest, ExplainTwoDocuments) {
  std::string out;
  ASSERT_EQ(Run("explain --file " + (dir_ / "a.jsonl").string() + " base base-edit", &out), 0);
  EXPECT_NE(out.find("distance"), std::string::npos) << out;
  EXPECT_NE(out.find("similarity"), std::string::npos) << out;
  EXPECT_NE(out.find("near-duplicate: yes"), std::string::npos) << out;
  EXPECT_NE(out.find("MinHash LSH: "), std::string::npos) << out;
  // The same rule as dedup: a threshold above the pair's Jaccard makes it distinct.
  ASSERT_EQ(
      Run("explain --file " + (dir_ / "a.jsonl").string() + " base base-edit --verify 0.99", &out),
      0);
  EXPECT_NE(out.find("near-duplicate: yes (contained)"), std::string::npos) << out;
  // Without containment, its words (2 of 160 changed) still make it `edited` (on by default) ...
  ASSERT_EQ(Run("explain --file " + (dir_ / "a.jsonl").string() +
                    " base base-edit --verify 0.99 --containment 0",
                &out),
            0);
  EXPECT_NE(out.find("near-duplicate: yes (edited)"), std::string::npos) << out;
  // ... and without that reason too it is distinct.
  ASSERT_EQ(Run("explain --file " + (dir_ / "a.jsonl").string() +
                    " base base-edit --verify 0.99 --containment 0 --edited 0",
                &out),
            0);
  EXPECT_NE(out.find("near-duplicate: no"), std::string::npos) << out;
  ASSERT_EQ(Run("explain --file " + (dir_ / "a.jsonl").string() + " base other2", &out), 0);
  EXPECT_NE(out.find("near-duplicate: no"), std::string::npos) << out;
  EXPECT_EQ(Run("explain --file " + (dir_ / "a.jsonl").string() + " base nope", &out), 1);
}

}  // namespace
}  // namespace neardup
