// Checks bench/generate_distractors.py on a sample: the documents it writes are near-duplicates
// neither of each other nor of any devpairs document, by the shingle Jaccard dedup verifies with;
// with --dup-rate, the originals still are not, and every planted copy named in the truth file is
// a near-duplicate of its original.
// Needs ../shared (corpus and devpairs) and /usr/bin/python3; skips visibly without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "neardup/dedup.h"
#include "neardup/document_reader.h"
#include "neardup/shingles.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<uint64_t>> ShinglesOf(const std::string& path,
                                              const ShingleSimilarity& similarity,
                                              std::vector<std::string>* ids = nullptr) {
  std::vector<std::vector<uint64_t>> sets;
  auto reader = DocumentReader::Open({path}, DocumentReaderOptions{});
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return sets;
  Document doc;
  for (;;) {
    auto got = (*reader)->Next(&doc);
    EXPECT_TRUE(got.ok());
    if (!got.ok() || !*got) break;
    sets.emplace_back();
    EXPECT_TRUE(similarity.Shingles(doc.text, &sets.back()).ok());
    if (ids) ids->push_back(doc.id);
  }
  return sets;
}

TEST(DistractorGeneratorTest, SampleHoldsNoNearDuplicates) {
  const fs::path shared = NEARDUP_SHARED_DIR;
  if (!fs::exists(shared / "corpus") || !fs::exists(shared / "devpairs" / "docs.jsonl")) {
    GTEST_SKIP() << "../shared (corpus, devpairs) not found at " << shared;
  }
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not found";
  const fs::path out =
      fs::temp_directory_path() / ("neardup_distractors_" + std::to_string(::getpid()) + ".jsonl");
  const std::string command =
      "/usr/bin/python3 " NEARDUP_SOURCE_DIR "/bench/generate_distractors.py 800 " + out.string() +
      " --corpus " + (shared / "corpus").string() + " --seed 7 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  auto similarity = ShingleSimilarity::Create(true);
  ASSERT_TRUE(similarity.ok());
  const auto distractors = ShinglesOf(out.string(), **similarity);
  fs::remove(out);
  ASSERT_EQ(distractors.size(), 800u);
  const auto devpairs = ShinglesOf((shared / "devpairs" / "docs.jsonl").string(), **similarity);
  ASSERT_GT(devpairs.size(), 4000u);

  // Exact all pairs: the sample among itself and against every devpairs document.
  const double threshold = ResolveVerifyThreshold(DedupOptions{});
  double max_among = 0, max_devpairs = 0;
  for (size_t i = 0; i < distractors.size(); ++i) {
    EXPECT_FALSE(distractors[i].empty()) << "distractor " << i << " has no shingles";
    for (size_t j = i + 1; j < distractors.size(); ++j) {
      max_among = std::max(max_among, ShingleSimilarity::Jaccard(distractors[i], distractors[j]));
    }
    for (const auto& doc : devpairs) {
      max_devpairs = std::max(max_devpairs, ShingleSimilarity::Jaccard(distractors[i], doc));
    }
  }
  std::printf("largest Jaccard: among distractors %.3f, distractor vs devpairs %.3f\n", max_among,
              max_devpairs);
  // Far below the dedup threshold (0.5): no pair is even close to a near-duplicate.
  EXPECT_LT(max_among, threshold / 2);
  EXPECT_LT(max_devpairs, threshold / 2);
}

TEST(DistractorGeneratorTest, PlantedCopiesAreNearDuplicatesAndOriginalsAreNot) {
  const fs::path shared = NEARDUP_SHARED_DIR;
  if (!fs::exists(shared / "corpus")) GTEST_SKIP() << "../shared/corpus not found at " << shared;
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not found";
  const fs::path out =
      fs::temp_directory_path() / ("neardup_planted_" + std::to_string(::getpid()) + ".jsonl");
  const fs::path truth_path = out.string() + ".truth.tsv";
  const std::string command =
      "/usr/bin/python3 " NEARDUP_SOURCE_DIR "/bench/generate_distractors.py 1000 " + out.string() +
      " --corpus " + (shared / "corpus").string() + " --seed 11 --dup-rate 0.25 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  auto similarity = ShingleSimilarity::Create(true);
  ASSERT_TRUE(similarity.ok());
  std::vector<std::string> ids;
  const auto sets = ShinglesOf(out.string(), **similarity, &ids);
  fs::remove(out);
  ASSERT_EQ(sets.size(), 1000u);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < ids.size(); ++i) index[ids[i]] = i;

  // The truth file: one line per planted copy, naming an earlier document of the corpus.
  std::ifstream truth(truth_path);
  ASSERT_TRUE(truth.good()) << truth_path;
  std::string line;
  std::getline(truth, line);
  EXPECT_EQ(line, "copy_id\toriginal_id\tkind");
  std::set<size_t> copies;
  std::map<std::string, size_t> kinds;
  const double threshold = ResolveVerifyThreshold(DedupOptions{});
  double min_copy = 1;
  while (std::getline(truth, line)) {
    std::istringstream fields(line);
    std::string copy, original, kind;
    std::getline(fields, copy, '\t');
    std::getline(fields, original, '\t');
    std::getline(fields, kind, '\t');
    ASSERT_TRUE(index.count(copy) && index.count(original)) << line;
    ASSERT_LT(index[original], index[copy]) << line;
    copies.insert(index[copy]);
    ++kinds[kind];
    const double j = ShingleSimilarity::Jaccard(sets[index[copy]], sets[index[original]]);
    min_copy = std::min(min_copy, j);
    EXPECT_GE(j, threshold) << kind << " copy " << copy << " of " << original;
  }
  truth.close();
  fs::remove(truth_path);
  EXPECT_GT(copies.size(), 150u);
  EXPECT_LT(copies.size(), 350u);
  for (const char* kind : {"exact", "noise", "sentence", "words", "boilerplate"}) {
    EXPECT_GT(kinds[kind], 5u) << kind;
  }

  // The originals are near-duplicates of nothing among themselves.
  double max_among = 0;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (copies.count(i)) continue;
    for (size_t j = i + 1; j < sets.size(); ++j) {
      if (copies.count(j)) continue;
      max_among = std::max(max_among, ShingleSimilarity::Jaccard(sets[i], sets[j]));
    }
  }
  std::printf(
      "planted: %zu copies, smallest Jaccard to the original %.3f; largest Jaccard "
      "between originals %.3f\n",
      copies.size(), min_copy, max_among);
  EXPECT_LT(max_among, threshold / 2);
}

}  // namespace
}  // namespace neardup
