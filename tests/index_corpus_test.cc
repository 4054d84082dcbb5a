// PermutedIndex on real fingerprints: the shared corpus fingerprinted with the default
// Fingerprinter (skewed: boilerplate-heavy documents share many bits), checked against brute force
// for search, self-join and components. NEARDUP_LARGE_TESTS=1 uses every document.
#include <gtest/gtest.h>

#include <simdjson.h>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/parallel.h"
#include "neardup/brute_force_index.h"
#include "neardup/clusters.h"
#include "neardup/fingerprinter.h"
#include "neardup/permuted_index.h"

namespace neardup {
namespace {

// Up to `per_file` texts from every corpus file.
std::vector<std::string> LoadTexts(size_t per_file) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(NEARDUP_SHARED_DIR "/corpus", ec))
    if (e.path().extension() == ".jsonl") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  simdjson::ondemand::parser parser;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string line;
    size_t taken = 0;
    while (taken < per_file && std::getline(in, line)) {
      simdjson::padded_string padded(line);
      simdjson::ondemand::document doc;
      if (parser.iterate(padded).get(doc)) continue;
      std::string_view text;
      if (doc["text"].get_string().get(text)) continue;
      texts.emplace_back(text);
      ++taken;
    }
  }
  return texts;
}

TEST(IndexCorpusTest, RealFingerprintsMatchBruteForce) {
  const bool large = std::getenv("NEARDUP_LARGE_TESTS") != nullptr;
  std::vector<std::string> texts = LoadTexts(large ? size_t{1} << 30 : 250);
  if (texts.empty()) GTEST_SKIP() << "corpus not found under " NEARDUP_SHARED_DIR;
  auto fingerprinter = Fingerprinter::Create(FingerprintOptions{});
  ASSERT_TRUE(fingerprinter.ok()) << fingerprinter.status().ToString();
  std::vector<Fingerprint> fps(texts.size());
  std::vector<char> ok(texts.size(), 0);
  ParallelFor(texts.size(), 0, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      auto fp = (*fingerprinter)->Compute(texts[i]);
      if (fp.ok()) {
        fps[i] = *fp;
        ok[i] = 1;
      }
    }
  });
  std::vector<uint64_t> ids;
  std::vector<Fingerprint> kept;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!ok[i]) continue;
    ids.push_back(i);
    kept.push_back(fps[i]);
  }
  ASSERT_GT(kept.size(), 100u);
  const int max_k = 6;
  PermutedIndexOptions options;
  options.indexed_k = max_k;
  options.expected_size = static_cast<double>(kept.size());
  auto index = PermutedIndex::Create(options);
  ASSERT_TRUE(index.ok());
  auto oracle_owner = BruteForceIndex::Create(64).value();
  BruteForceIndex& oracle = *oracle_owner;
  ASSERT_TRUE((*index)->AddBatch(ids, kept).ok());
  ASSERT_TRUE(oracle.AddBatch(ids, kept).ok());
  std::mt19937_64 rng(1);
  for (int i = 0; i < 300; ++i) {
    Fingerprint q = kept[rng() % kept.size()];
    for (int flips = static_cast<int>(rng() % 4); flips > 0; --flips)
      q.lo ^= uint64_t{1} << (rng() % 64);
    for (int k : {0, 3, max_k}) {
      auto got = (*index)->Search(q, k);
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(*got, *oracle.Search(q, k)) << "k=" << k << " query " << ToHex(q);
    }
  }
  for (int k : {3, max_k}) {
    auto got = (*index)->SelfJoin(k);
    auto want = oracle.SelfJoin(k);
    ASSERT_TRUE(got.ok() && want.ok());
    ASSERT_EQ(*got, *want) << "k=" << k;
    EXPECT_EQ(ConnectedComponents(ids, *got), ConnectedComponents(ids, *want));
  }
}

}  // namespace
}  // namespace neardup
