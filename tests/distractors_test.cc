// Checks bench/generate_distractors.py on a sample: the documents it writes are near-duplicates
// neither of each other nor of any devpairs document, by the shingle Jaccard dedup verifies with.
// Needs ../shared (corpus and devpairs) and /usr/bin/python3; skips visibly without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "neardup/dedup.h"
#include "neardup/document_reader.h"
#include "neardup/shingles.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<uint64_t>> ShinglesOf(const std::string& path,
                                              const ShingleSimilarity& similarity) {
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

}  // namespace
}  // namespace neardup
