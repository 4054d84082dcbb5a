// Tests of dedup's spilling path (DedupOptions::spill: band keys, candidate-pair runs and
// verification shingles in unlinked temporary files, inputs read a second time): the same pairs
// and clusters as the in-memory path and whatever the share of shingle sets kept from the first
// pass (DedupOptions::first_pass_set_bytes), no file left behind, a clear error for a bad temporary
// directory, and standard input (readable once) handled by spooling. The 28k-document test needs
// ../shared and skips visibly without it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_writer.h"
#include "neardup/dedup.h"
#include "shared_data.h"
#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing_files::JsonLine;
using testing_files::Lines;

std::string MakeText(std::mt19937* random, int words) {
  static const char* kSyllables[] = {"ka", "lo", "mi", "ne", "tu", "ra", "so", "vi",
                                     "de", "pa", "gu", "ze", "fo", "hi", "ba", "ly"};
  std::string text;
  for (int w = 0; w < words; ++w) {
    if (w > 0) text += (w % 12 == 0) ? ". " : " ";
    int syllables = 1 + static_cast<int>((*random)() % 3);
    for (int s = 0; s < syllables; ++s) text += kSyllables[(*random)() % 16];
  }
  return text + ".";
}

// Replaces `edits` random words of `text`.
std::string Edit(std::mt19937* random, const std::string& text, int edits) {
  std::vector<std::string> words;
  std::istringstream in(text);
  std::string word;
  while (in >> word) words.push_back(word);
  for (int e = 0; e < edits && !words.empty(); ++e) words[(*random)() % words.size()] = "qqzx";
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

class DedupSpillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neardup_spill_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "tmp");
    // Originals, lightly and heavily edited copies far apart in the input (so verification needs
    // documents from both ends), exact and whitespace copies, an empty and a corrupt record.
    std::mt19937 random(7);
    std::vector<std::string> originals;
    for (int i = 0; i < 300; ++i) originals.push_back(MakeText(&random, 60 + i % 90));
    std::string a, b;
    auto add = [this](std::string* file, const std::string& id, const std::string& text) {
      *file += JsonLine(id, text);
      texts_[id] = text;
    };
    for (int i = 0; i < 300; ++i) add(&a, "o" + std::to_string(i), originals[i]);
    a += JsonLine("empty", "") + "{\"id\": \"broken\", \"text\": \n";
    for (int i = 0; i < 300; i += 2) {
      const int edits = 1 + static_cast<int>(random() % 25);
      add(&b, "e" + std::to_string(i), Edit(&random, originals[i], edits));
      if (i % 10 == 0) add(&b, "x" + std::to_string(i), originals[i]);
      if (i % 14 == 0) add(&b, "w" + std::to_string(i), "  " + originals[i] + "\n\n");
    }
    Write("a.jsonl", a);
    Write("b.jsonl", b);
    inputs_ = {(dir_ / "a.jsonl").string(), (dir_ / "b.jsonl").string()};
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name, std::ios::binary) << content;
  }

  DedupOptions Options(bool spill) const {
    DedupOptions options;
    options.spill = spill;
    options.temp_directory = (dir_ / "tmp").string();
    options.batch_size = 64;  // several batches, so band files and shingles are appended in parts
    return options;
  }

  fs::path dir_;
  std::vector<std::string> inputs_;
  std::map<std::string, std::string> texts_;  // by id, of the documents with a text
};

// Everything a user sees of a run, for comparing two runs.
void ExpectSameResult(const DedupReport& x, const DedupReport& y) {
  ASSERT_EQ(x.documents.size(), y.documents.size());
  EXPECT_EQ(x.candidate_pairs, y.candidate_pairs);
  EXPECT_EQ(x.lsh_candidate_pairs, y.lsh_candidate_pairs);
  EXPECT_EQ(x.simhash_candidate_pairs, y.simhash_candidate_pairs);
  EXPECT_EQ(x.simhash_only_candidate_pairs, y.simhash_only_candidate_pairs);
  EXPECT_EQ(x.simhash_only_accepted_pairs, y.simhash_only_accepted_pairs);
  EXPECT_EQ(x.lsh_stats.buckets, y.lsh_stats.buckets);
  EXPECT_EQ(x.lsh_stats.bucket_pairs, y.lsh_stats.bucket_pairs);
  ASSERT_EQ(x.pairs.size(), y.pairs.size());
  for (size_t i = 0; i < x.pairs.size(); ++i) {
    EXPECT_EQ(x.pairs[i].a, y.pairs[i].a) << i;
    EXPECT_EQ(x.pairs[i].b, y.pairs[i].b) << i;
    EXPECT_EQ(x.pairs[i].distance, y.pairs[i].distance) << i;
    EXPECT_EQ(x.pairs[i].similarity, y.pairs[i].similarity) << i;
  }
  ASSERT_EQ(x.clusters.size(), y.clusters.size());
  for (size_t c = 0; c < x.clusters.size(); ++c) {
    EXPECT_EQ(x.clusters[c].kept, y.clusters[c].kept);
    ASSERT_EQ(x.clusters[c].removed.size(), y.clusters[c].removed.size());
    for (size_t m = 0; m < x.clusters[c].removed.size(); ++m) {
      EXPECT_EQ(x.clusters[c].removed[m].document, y.clusters[c].removed[m].document);
      EXPECT_EQ(x.clusters[c].removed[m].via, y.clusters[c].removed[m].via);
      EXPECT_EQ(x.clusters[c].removed[m].reason, y.clusters[c].removed[m].reason);
    }
  }
  EXPECT_EQ(x.removed, y.removed);
}

TEST_F(DedupSpillTest, SameClustersAsInMemoryForEveryCandidateMode) {
  for (auto candidates : {DedupOptions::Candidates::kLsh, DedupOptions::Candidates::kLshAndSimHash,
                          DedupOptions::Candidates::kSimHash}) {
    for (std::optional<double> verify :
         {std::optional<double>(), std::optional(0.0), std::optional(0.3)}) {
      SCOPED_TRACE(::testing::Message() << "candidates " << static_cast<int>(candidates)
                                        << " verify " << verify.value_or(-1));
      DedupOptions on = Options(true), off = Options(false);
      on.candidates = off.candidates = candidates;
      on.verify_threshold = off.verify_threshold = verify;
      on.k = off.k = 6;
      auto spilled = RunDedup(inputs_, on);
      auto in_memory = RunDedup(inputs_, off);
      ASSERT_TRUE(spilled.ok()) << spilled.status().ToString();
      ASSERT_TRUE(in_memory.ok()) << in_memory.status().ToString();
      EXPECT_TRUE(spilled->spilled);
      EXPECT_FALSE(in_memory->spilled);
      EXPECT_EQ(in_memory->spill_peak_bytes, 0u);
      if (candidates != DedupOptions::Candidates::kSimHash) {
        EXPECT_GT(spilled->spill_peak_bytes, 0u);
      }
      // The corpus has real work: edited copies found and some candidates rejected.
      EXPECT_GT(spilled->clusters.size(), 50u);
      ExpectSameResult(*spilled, *in_memory);
    }
  }
}

TEST_F(DedupSpillTest, SameResultForEveryThreadCount) {
  DedupOptions options = Options(true);
  options.threads = 1;
  auto one = RunDedup(inputs_, options);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  for (int threads : {2, 3, 8}) {
    options.threads = threads;
    auto many = RunDedup(inputs_, options);
    ASSERT_TRUE(many.ok()) << many.status().ToString();
    ExpectSameResult(*one, *many);
  }
}

// The shingle sets kept from the first pass (all, some, none) give the same pairs and clusters as
// normalising the documents again for verification, spilled or in memory.
TEST_F(DedupSpillTest, SameResultWhateverTheFirstPassSetBudget) {
  for (bool spill : {true, false}) {
    for (auto candidates :
         {DedupOptions::Candidates::kLsh, DedupOptions::Candidates::kLshAndSimHash}) {
      SCOPED_TRACE(::testing::Message()
                   << "spill " << spill << " candidates " << static_cast<int>(candidates));
      DedupOptions options = Options(spill);
      options.candidates = candidates;
      options.first_pass_set_bytes = 0;  // every set from the second pass
      auto second_pass = RunDedup(inputs_, options);
      ASSERT_TRUE(second_pass.ok()) << second_pass.status().ToString();
      EXPECT_GT(second_pass->clusters.size(), 50u);
      // 1 byte: no set fits; 20,000 bytes: the sets of the first documents only (the budget runs
      // out in the middle of a batch); the default: every set.
      for (uint64_t budget : {uint64_t{1}, uint64_t{20000}, DedupOptions().first_pass_set_bytes}) {
        SCOPED_TRACE(::testing::Message() << "budget " << budget);
        options.first_pass_set_bytes = budget;
        for (int threads : {1, 3}) {
          options.threads = threads;
          auto run = RunDedup(inputs_, options);
          ASSERT_TRUE(run.ok()) << run.status().ToString();
          ExpectSameResult(*second_pass, *run);
        }
      }
    }
  }
}

// The pair rule's `edited` reason: verification builds unit sets only for the pairs the rule
// decides `edited` with PairRule::DeferredUnits, and judges those again with them, on every path
// (first-pass sets, all, some or none; spilled or in memory; any thread count), with the same
// pairs, in pair order, each as JudgePair decides it; it finds edited copies the rule without it
// misses, and changes nothing else.
TEST_F(DedupSpillTest, EditedReasonSameResultOnEveryPath) {
  DedupOptions base = Options(true);
  base.edited_threshold = 0.7;
  base.first_pass_set_bytes = 0;
  base.threads = 1;
  auto reference = RunDedup(inputs_, base);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  EXPECT_GT(reference->pairs_by_reason["edited"], 5u);
  DedupOptions without = base;
  without.edited_threshold = 0;
  auto off = RunDedup(inputs_, without);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->pairs_by_reason.count("edited"), 0u);
  EXPECT_GT(reference->removed_count(), off->removed_count());
  // Each accepted pair, judged apart (the unit sets of both texts at hand), in pair order.
  for (size_t i = 0; i < reference->pairs.size(); ++i) {
    const DuplicatePair& pair = reference->pairs[i];
    if (i > 0) {
      const DuplicatePair& before = reference->pairs[i - 1];
      EXPECT_TRUE(before.a < pair.a || (before.a == pair.a && before.b < pair.b)) << i;
    }
    auto judged = JudgePair(texts_.at(reference->documents[pair.a].id),
                            texts_.at(reference->documents[pair.b].id), base);
    ASSERT_TRUE(judged.ok()) << judged.status().ToString();
    EXPECT_EQ(judged->reason, pair.reason) << i;
    if (pair.reason == DuplicateReason::kEdited) {
      ASSERT_TRUE(pair.similarity.has_value());
      EXPECT_NEAR(judged->unit_jaccard, *pair.similarity, 1e-12) << i;
    }
  }
  // Every pair the rule without `edited` accepts is accepted with it, for the same reason.
  std::map<std::pair<uint32_t, uint32_t>, DuplicateReason> with_reason;
  for (const DuplicatePair& pair : reference->pairs) with_reason[{pair.a, pair.b}] = pair.reason;
  for (const DuplicatePair& pair : off->pairs) {
    auto it = with_reason.find({pair.a, pair.b});
    ASSERT_NE(it, with_reason.end()) << pair.a << " " << pair.b;
    EXPECT_EQ(it->second, pair.reason);
  }
  for (bool spill : {true, false}) {
    for (uint64_t budget : {uint64_t{20000}, DedupOptions().first_pass_set_bytes}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message()
                     << "spill " << spill << " budget " << budget << " threads " << threads);
        DedupOptions options = base;
        options.spill = spill;
        options.first_pass_set_bytes = budget;
        options.threads = threads;
        auto run = RunDedup(inputs_, options);
        ASSERT_TRUE(run.ok()) << run.status().ToString();
        ExpectSameResult(*reference, *run);
        for (size_t i = 0; i < run->pairs.size() && i < reference->pairs.size(); ++i) {
          EXPECT_EQ(run->pairs[i].reason, reference->pairs[i].reason) << i;
        }
        EXPECT_EQ(run->similarity_histogram.rejected, reference->similarity_histogram.rejected);
        EXPECT_EQ(run->similarity_histogram.accepted, reference->similarity_histogram.accepted);
      }
    }
  }
  // With the SimHash join too, its extra candidates are verified with the same rule.
  DedupOptions both = base;
  both.candidates = DedupOptions::Candidates::kLshAndSimHash;
  both.k = 8;
  auto joined = RunDedup(inputs_, both);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_GE(joined->pairs_by_reason["edited"], reference->pairs_by_reason["edited"]);
}

TEST_F(DedupSpillTest, TemporaryFilesNeverAppearAndLeaveNothingBehind) {
  const fs::path tmp = dir_ / "tmp";
  int checks = 0;
  auto progress = [&](const std::string&, uint64_t, uint64_t, uint64_t) {
    // The files are unlinked when created: the directory stays empty during the run too.
    EXPECT_TRUE(fs::is_empty(tmp));
    ++checks;
  };
  auto report = RunDedup(inputs_, Options(true), progress);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_GT(report->spill_peak_bytes, 0u);
  EXPECT_GT(checks, 2);
  EXPECT_TRUE(fs::is_empty(tmp));
}

TEST_F(DedupSpillTest, MissingTemporaryDirectoryIsAnErrorNamingIt) {
  DedupOptions options = Options(true);
  options.temp_directory = (dir_ / "no-such-dir").string();
  auto report = RunDedup(inputs_, options);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("no-such-dir"), std::string::npos)
      << report.status().ToString();
  // The in-memory path needs no temporary directory.
  options.spill = false;
  EXPECT_TRUE(RunDedup(inputs_, options).ok());
}

// Standard input can be read only once: the reader spools it to a temporary file, so the second
// pass of verification sees the same documents and the clusters match a run over the file.
TEST_F(DedupSpillTest, StandardInputGivesTheSameClustersAsTheFile) {
  const std::string merged = (dir_ / "merged.jsonl").string();
  {
    std::ifstream a(inputs_[0], std::ios::binary), b(inputs_[1], std::ios::binary);
    std::ofstream out(merged, std::ios::binary);
    out << a.rdbuf() << b.rdbuf();
  }
  auto run = [&](const std::string& args, const std::string& out_dir) {
    const std::string command = std::string(NEARDUP_BINARY) + " dedup " + args + " -o " +
                                (dir_ / out_dir).string() + " -q --temp-dir " +
                                (dir_ / "tmp").string() + " 2>" + (dir_ / "err.txt").string();
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  // Through a pipe (not seekable), and from the file.
  ASSERT_EQ(system(("cat " + merged + " | " + NEARDUP_BINARY + " dedup - -o " +
                    (dir_ / "piped").string() + " -q --temp-dir " + (dir_ / "tmp").string())
                       .c_str()),
            0);
  ASSERT_EQ(run(merged, "file"), 0);
  auto read = [](const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  };
  const std::string from_file = read(dir_ / "file" / "remove.txt");
  EXPECT_FALSE(from_file.empty());
  EXPECT_EQ(read(dir_ / "piped" / "remove.txt"), from_file);
  EXPECT_EQ(read(dir_ / "piped" / "keep.txt"), read(dir_ / "file" / "keep.txt"));
  // clusters.jsonl names the input file: compare it without the file names.
  EXPECT_EQ(Lines(read(dir_ / "piped" / "clusters.jsonl")).size(),
            Lines(read(dir_ / "file" / "clusters.jsonl")).size());
  EXPECT_TRUE(fs::is_empty(dir_ / "tmp"));
}

// The labelled pairs and the dev corpus (27,961 documents): spilling changes nothing.
TEST(DedupSpillSharedTest, SameClustersOnTheDevCorpusAndDevpairs) {
  NEARDUP_SKIP_WITHOUT_SHARED_CORPUS();
  std::vector<std::string> inputs;
  for (const auto& entry : fs::directory_iterator(NEARDUP_SHARED_DIR "/corpus")) {
    if (entry.path().extension() == ".jsonl") inputs.push_back(entry.path().string());
  }
  inputs.push_back(NEARDUP_SHARED_DIR "/devpairs/docs.jsonl");
  DedupOptions on, off, second_pass;
  off.spill = false;
  second_pass.first_pass_set_bytes = 0;  // verification normalises the documents again
  auto spilled = RunDedup(inputs, on);
  auto in_memory = RunDedup(inputs, off);
  auto normalised_again = RunDedup(inputs, second_pass);
  ASSERT_TRUE(spilled.ok()) << spilled.status().ToString();
  ASSERT_TRUE(in_memory.ok()) << in_memory.status().ToString();
  ASSERT_TRUE(normalised_again.ok()) << normalised_again.status().ToString();
  EXPECT_GT(spilled->pairs.size(), 10000u);
  ExpectSameResult(*spilled, *in_memory);
  ExpectSameResult(*spilled, *normalised_again);
}

}  // namespace
}  // namespace neardup
