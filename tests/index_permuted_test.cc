// Property tests of PermutedIndex against BruteForceIndex: planted neighbours at every distance,
// every k, 64 and 128 bits, skewed sets, duplicates, removal, empty index, concurrent inserts,
// self-join and components.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "neardup/brute_force_index.h"
#include "neardup/clusters.h"
#include "neardup/permuted_index.h"

namespace neardup {
namespace {

Fingerprint RandomFp(std::mt19937_64& rng, int bits) {
  return bits == 64 ? Fingerprint::From64(rng()) : Fingerprint::From128(rng(), rng());
}

// Flips `d` distinct random bits.
Fingerprint Flip(Fingerprint fp, int d, std::mt19937_64& rng) {
  std::vector<int> positions(fp.bits);
  for (int i = 0; i < fp.bits; ++i) positions[i] = i;
  std::shuffle(positions.begin(), positions.end(), rng);
  for (int i = 0; i < d; ++i) {
    int b = positions[i];
    if (b < 64)
      fp.lo ^= uint64_t{1} << b;
    else
      fp.hi ^= uint64_t{1} << (b - 64);
  }
  return fp;
}

struct Data {
  std::vector<uint64_t> ids;
  std::vector<Fingerprint> fps;
  std::vector<Fingerprint> anchors;
};

// Random fingerprints plus, around each anchor, neighbours at every distance 0..max_k+1.
Data MakeData(int bits, int max_k, size_t random_count, size_t anchors, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Data data;
  uint64_t next_id = 1;
  for (size_t i = 0; i < random_count; ++i) {
    data.ids.push_back(next_id++);
    data.fps.push_back(RandomFp(rng, bits));
  }
  for (size_t a = 0; a < anchors; ++a) {
    Fingerprint anchor = RandomFp(rng, bits);
    data.anchors.push_back(anchor);
    for (int d = 0; d <= max_k + 1; ++d) {
      data.ids.push_back(next_id++);
      data.fps.push_back(Flip(anchor, d, rng));
    }
  }
  // Shuffle so planted items are spread over segments and the delta buffer.
  std::vector<size_t> order(data.ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  Data shuffled;
  shuffled.anchors = data.anchors;
  for (size_t i : order) {
    shuffled.ids.push_back(data.ids[i]);
    shuffled.fps.push_back(data.fps[i]);
  }
  return shuffled;
}

std::unique_ptr<PermutedIndex> MakeIndex(int bits, int max_k, double n, size_t delta = 64,
                                         double budget = 64) {
  PermutedIndexOptions options;
  options.bits = bits;
  options.indexed_k = max_k;
  options.expected_size = n;
  options.delta_capacity = delta;
  options.memory_budget = MemoryBudget{0, budget};
  auto index = PermutedIndex::Create(options);
  EXPECT_TRUE(index.ok()) << index.status().ToString();
  return std::move(index).value();
}

// Adds half with AddBatch, the rest one by one (delta buffer, segment merges).
void Fill(HammingIndex* index, const Data& data) {
  size_t half = data.ids.size() / 2;
  ASSERT_TRUE(
      index->AddBatch(std::span(data.ids).first(half), std::span(data.fps).first(half)).ok());
  for (size_t i = half; i < data.ids.size(); ++i)
    ASSERT_TRUE(index->Add(data.ids[i], data.fps[i]).ok());
}

void ExpectSameAnswers(const HammingIndex& index, const HammingIndex& oracle,
                       const std::vector<Fingerprint>& queries, int max_k) {
  for (const Fingerprint& q : queries) {
    for (int k = 0; k <= max_k; ++k) {
      auto got = index.Search(q, k);
      auto want = oracle.Search(q, k);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_TRUE(want.ok());
      ASSERT_EQ(*got, *want) << "k=" << k << " query " << ToHex(q);
    }
  }
}

std::vector<Fingerprint> Queries(const Data& data, int max_k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Fingerprint> queries = data.anchors;
  for (size_t i = 0; i < 20; ++i) queries.push_back(RandomFp(rng, data.fps[0].bits));
  for (size_t i = 0; i < 40; ++i)
    queries.push_back(
        Flip(data.fps[rng() % data.fps.size()], static_cast<int>(rng() % (max_k + 2)), rng));
  return queries;
}

class EveryK : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(EveryK, SearchMatchesBruteForce) {
  auto [bits, max_k] = GetParam();
  Data data = MakeData(bits, max_k, 3000, 30, 1000 + bits * 31 + max_k);
  auto index = MakeIndex(bits, max_k, static_cast<double>(data.ids.size()));
  auto oracle_owner = BruteForceIndex::Create(bits).value();
  BruteForceIndex& oracle = *oracle_owner;
  Fill(index.get(), data);
  Fill(&oracle, data);
  EXPECT_EQ(index->size(), oracle.size());
  ExpectSameAnswers(*index, oracle, Queries(data, max_k, 7), max_k);
  auto too_far = index->Search(data.anchors[0], max_k + 1);
  EXPECT_FALSE(too_far.ok());
}

TEST_P(EveryK, SelfJoinAndComponentsMatchBruteForce) {
  auto [bits, max_k] = GetParam();
  Data data = MakeData(bits, max_k, 1500, 20, 77 + max_k);
  // Wide radii on 128 bits: an unlimited budget keeps the multi-index probe count small.
  const double budget = bits == 128 && max_k >= 12 ? 0 : 64;
  auto index = MakeIndex(bits, max_k, static_cast<double>(data.ids.size()), 64, budget);
  auto oracle_owner = BruteForceIndex::Create(bits).value();
  BruteForceIndex& oracle = *oracle_owner;
  Fill(index.get(), data);
  Fill(&oracle, data);
  for (int k : {0, max_k / 2, max_k}) {
    auto got = index->SelfJoin(k);
    auto want = oracle.SelfJoin(k);
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(want.ok());
    ASSERT_EQ(*got, *want) << "k=" << k;
    EXPECT_EQ(ConnectedComponents(data.ids, *got), ConnectedComponents(data.ids, *want));
  }
  // Each anchor's planted chain at distances 0..max_k is one component (all within 2*max_k of
  // each other only through the anchor copy at distance 0).
  auto pairs = index->SelfJoin(max_k);
  ASSERT_TRUE(pairs.ok());
  EXPECT_GE(pairs->size(), data.anchors.size() * static_cast<size_t>(max_k));
}

INSTANTIATE_TEST_SUITE_P(Widths, EveryK,
                         ::testing::Values(std::pair{64, 0}, std::pair{64, 1}, std::pair{64, 2},
                                           std::pair{64, 3}, std::pair{64, 4}, std::pair{64, 5},
                                           std::pair{64, 6}, std::pair{64, 7}, std::pair{64, 8},
                                           std::pair{128, 0}, std::pair{128, 3}, std::pair{128, 8},
                                           std::pair{128, 12}, std::pair{128, 16}));

TEST(PermutedIndexTest, SkewedSetsSharingPrefixAndBlocks) {
  for (int bits : {64, 128}) {
    std::mt19937_64 rng(5 + bits);
    Data data;
    uint64_t id = 1;
    const uint64_t shared_prefix = rng();
    // 3000 fingerprints sharing their top 40 bits; 3000 sharing a whole 16-bit middle block;
    // 2000 random.
    for (int i = 0; i < 3000; ++i) {
      Fingerprint fp = RandomFp(rng, bits);
      if (bits == 64)
        fp.lo = (shared_prefix & ~((uint64_t{1} << 24) - 1)) | (fp.lo & ((1 << 24) - 1));
      else
        fp.hi = (shared_prefix & ~((uint64_t{1} << 24) - 1)) | (fp.hi & ((1 << 24) - 1));
      data.ids.push_back(id++);
      data.fps.push_back(fp);
    }
    for (int i = 0; i < 3000; ++i) {
      Fingerprint fp = RandomFp(rng, bits);
      fp.lo = (fp.lo & ~(uint64_t{0xFFFF} << 24)) | (uint64_t{0xBEEF} << 24);
      data.ids.push_back(id++);
      data.fps.push_back(fp);
    }
    for (int i = 0; i < 2000; ++i) {
      data.ids.push_back(id++);
      data.fps.push_back(RandomFp(rng, bits));
    }
    const int max_k = 4;
    auto index = MakeIndex(bits, max_k, 1e6);  // planned for far more: runs look oversized
    auto oracle_owner = BruteForceIndex::Create(bits).value();
    BruteForceIndex& oracle = *oracle_owner;
    Fill(index.get(), data);
    Fill(&oracle, data);
    std::vector<Fingerprint> queries;
    for (int i = 0; i < 60; ++i)
      queries.push_back(Flip(data.fps[rng() % data.fps.size()], static_cast<int>(rng() % 6), rng));
    ExpectSameAnswers(*index, oracle, queries, max_k);
    EXPECT_GT(index->detailed_stats().oversized_runs, 0u) << "bits=" << bits;
    // Oversized runs are descended, not scanned: far fewer candidates than items per query.
    index->ResetStats();
    ASSERT_TRUE(index->Search(queries[0], max_k).ok());
    EXPECT_LT(index->stats().candidates, data.ids.size());
    auto got = index->SelfJoin(3);
    auto want = oracle.SelfJoin(3);
    ASSERT_TRUE(got.ok() && want.ok());
    EXPECT_EQ(*got, *want);
  }
}

TEST(PermutedIndexTest, DuplicatesUnderDifferentIdsAndSameId) {
  auto index = MakeIndex(64, 3, 1000, 8);
  auto oracle_owner = BruteForceIndex::Create(64).value();
  BruteForceIndex& oracle = *oracle_owner;
  std::mt19937_64 rng(9);
  Fingerprint fp = Fingerprint::From64(rng());
  for (uint64_t id = 1; id <= 50; ++id) {
    ASSERT_TRUE(index->Add(id, fp).ok());
    ASSERT_TRUE(oracle.Add(id, fp).ok());
  }
  // Same id twice with different fingerprints: one answer, at the nearer distance.
  Fingerprint near = Flip(fp, 2, rng);
  ASSERT_TRUE(index->Add(7, near).ok());
  ASSERT_TRUE(oracle.Add(7, near).ok());
  auto got = index->Search(fp, 3);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 50u);
  EXPECT_EQ(*got, *oracle.Search(fp, 3));
  auto from_near = index->Search(near, 3);
  ASSERT_TRUE(from_near.ok());
  EXPECT_EQ(*from_near, *oracle.Search(near, 3));
  EXPECT_EQ(*index->SelfJoin(3), *oracle.SelfJoin(3));
}

TEST(PermutedIndexTest, RemovalAndReAdd) {
  for (int bits : {64, 128}) {
    Data data = MakeData(bits, 3, 2000, 20, 3 + bits);
    auto index = MakeIndex(bits, 3, 2500, 32);
    auto oracle_owner = BruteForceIndex::Create(bits).value();
    BruteForceIndex& oracle = *oracle_owner;
    Fill(index.get(), data);
    Fill(&oracle, data);
    std::mt19937_64 rng(11);
    for (int i = 0; i < 300; ++i) {
      size_t j = rng() % data.ids.size();
      EXPECT_EQ(index->Remove(data.ids[j], data.fps[j]), oracle.Remove(data.ids[j], data.fps[j]));
    }
    EXPECT_EQ(index->Remove(999999, data.fps[0]), 0u);
    EXPECT_EQ(index->size(), oracle.size());
    ExpectSameAnswers(*index, oracle, Queries(data, 3, 5), 3);
    EXPECT_EQ(*index->SelfJoin(3), *oracle.SelfJoin(3));
    // Re-adding removed pairs makes them visible again.
    for (int i = 0; i < 50; ++i) {
      size_t j = rng() % data.ids.size();
      oracle.Remove(data.ids[j], data.fps[j]);
      index->Remove(data.ids[j], data.fps[j]);
      ASSERT_TRUE(index->Add(data.ids[j], data.fps[j]).ok());
      ASSERT_TRUE(oracle.Add(data.ids[j], data.fps[j]).ok());
    }
    EXPECT_EQ(index->size(), oracle.size());
    ExpectSameAnswers(*index, oracle, Queries(data, 3, 6), 3);
    index->Compact();
    EXPECT_EQ(index->detailed_stats().segments, 1u);
    ExpectSameAnswers(*index, oracle, Queries(data, 3, 8), 3);
  }
}

TEST(PermutedIndexTest, EmptyIndexAndBadArguments) {
  auto index = MakeIndex(64, 3, 100);
  EXPECT_EQ(index->size(), 0u);
  auto r = index->Search(Fingerprint::From64(42), 3);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  auto pairs = index->SelfJoin(3);
  ASSERT_TRUE(pairs.ok());
  EXPECT_TRUE(pairs->empty());
  EXPECT_EQ(index->Remove(1, Fingerprint::From64(42)), 0u);
  EXPECT_FALSE(index->Search(Fingerprint::From128(1, 2), 3).ok());
  EXPECT_FALSE(index->Search(Fingerprint::From64(1), -1).ok());
  EXPECT_FALSE(index->Search(Fingerprint::From64(1), 4).ok());
  EXPECT_FALSE(index->Add(1, Fingerprint::From128(1, 2)).ok());
  EXPECT_FALSE(index->Add(1, Fingerprint{1, 2, 64}).ok());  // 64-bit with high bits set
  std::vector<uint64_t> ids = {1, 2};
  std::vector<Fingerprint> fps = {Fingerprint::From64(1)};
  EXPECT_FALSE(index->AddBatch(ids, fps).ok());
  PermutedIndexOptions bad;
  bad.bits = 32;
  EXPECT_FALSE(PermutedIndex::Create(bad).ok());
  bad.bits = 64;
  bad.indexed_k = 40;
  EXPECT_FALSE(PermutedIndex::Create(bad).ok());
}

TEST(PermutedIndexTest, ConcurrentQueriesDuringInserts) {
  const int max_k = 3;
  Data data = MakeData(64, max_k, 6000, 100, 21);
  auto index = MakeIndex(64, max_k, 6000, 128);
  std::atomic<size_t> inserted{0};
  std::atomic<bool> failed{false};
  std::thread writer([&] {
    for (size_t i = 0; i < data.ids.size(); ++i) {
      if (!index->Add(data.ids[i], data.fps[i]).ok()) failed = true;
      inserted.store(i + 1, std::memory_order_release);
    }
  });
  auto reader = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    while (inserted.load(std::memory_order_acquire) < data.ids.size()) {
      size_t visible = inserted.load(std::memory_order_acquire);
      if (visible == 0) continue;
      size_t j = rng() % visible;
      auto got = index->Search(data.fps[j], max_k);
      if (!got.ok()) {
        failed = true;
        continue;
      }
      // The item added before the query began must be found at distance 0; every answer must
      // be within k.
      bool found = false;
      for (const Neighbor& n : *got) {
        if (n.distance > max_k) failed = true;
        if (n.id == data.ids[j] && n.distance == 0) found = true;
      }
      if (!found) failed = true;
    }
  };
  std::thread r1(reader, 1), r2(reader, 2);
  writer.join();
  r1.join();
  r2.join();
  EXPECT_FALSE(failed.load());
  auto oracle_owner = BruteForceIndex::Create(64).value();
  BruteForceIndex& oracle = *oracle_owner;
  ASSERT_TRUE(oracle.AddBatch(data.ids, data.fps).ok());
  ExpectSameAnswers(*index, oracle, Queries(data, max_k, 3), max_k);
}

TEST(PermutedIndexTest, SearchBatchMatchesSearch) {
  Data data = MakeData(64, 3, 5000, 50, 33);
  auto index = MakeIndex(64, 3, 5000);
  ASSERT_TRUE(index->AddBatch(data.ids, data.fps).ok());
  auto queries = Queries(data, 3, 4);
  auto batch = index->SearchBatch(queries, 3);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), queries.size());
  for (size_t i = 0; i < queries.size(); ++i) EXPECT_EQ((*batch)[i], *index->Search(queries[i], 3));
}

// Every design the planner offers (including multi-index hashing radii and two-level designs) is
// exact: force each and compare with brute force.
TEST(PermutedIndexTest, EveryPlannedDesignIsExact) {
  for (int bits : {64, 128}) {
    for (int k : {2, 3, 5}) {
      PlanRequest request;
      request.bits = bits;
      request.indexed_k = k;
      request.expected_size = 4000;
      auto designs = EnumerateIndexDesigns(request);
      ASSERT_TRUE(designs.ok());
      Data data = MakeData(bits, k, 1500, 15, 100 + k + bits);
      auto oracle_owner = BruteForceIndex::Create(bits).value();
      BruteForceIndex& oracle = *oracle_owner;
      ASSERT_TRUE(oracle.AddBatch(data.ids, data.fps).ok());
      auto queries = Queries(data, k, 9);
      std::vector<const IndexDesign*> eligible;
      for (const IndexDesign& design : *designs)
        if (design.probes_per_query <= 5000 && design.tables.size() <= 60)
          eligible.push_back(&design);
      size_t tested = 0;
      const size_t stride = std::max<size_t>(1, eligible.size() / 10);
      for (size_t i = 0; i < eligible.size(); i += stride) {
        const IndexDesign& design = *eligible[i];
        PermutedIndexOptions options;
        options.bits = bits;
        options.indexed_k = k;
        options.design = design;
        auto index = PermutedIndex::Create(options);
        ASSERT_TRUE(index.ok());
        ASSERT_TRUE((*index)->AddBatch(data.ids, data.fps).ok());
        SCOPED_TRACE(design.description);
        ExpectSameAnswers(**index, oracle, queries, k);
        ++tested;
      }
      EXPECT_GE(tested, 3u);
    }
  }
}

TEST(ClustersTest, ComponentsUseSmallestId) {
  std::vector<uint64_t> ids = {10, 3, 7, 5, 9, 1};
  std::vector<NeighborPair> pairs = {{7, 10, 1}, {3, 7, 2}, {5, 9, 0}};
  auto c = ConnectedComponents(ids, pairs);
  std::vector<ClusterAssignment> want = {{1, 1}, {3, 3}, {5, 5}, {7, 3}, {9, 5}, {10, 3}};
  EXPECT_EQ(c, want);
  auto groups = GroupComponents(c);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<uint64_t>{3, 7, 10}));
  EXPECT_EQ(groups[1], (std::vector<uint64_t>{5, 9}));
  EXPECT_EQ(GroupComponents(c, true).size(), 3u);
}

}  // namespace
}  // namespace neardup
