// Stage 2 of dedup, the candidate pairs over records: LshBucketRecordPairs, FirstOfEqualHashPairs
// and MergeCandidatePairs; see neardup/dedup_stages.h. (RunDedup's LSH stage walks the same
// bucket rule band by band over spilled keys, src/index/lsh_band_pairs.h; its SimHash stage is
// HammingJoin::SelfJoin.)
#include <algorithm>
#include <cassert>
#include <utility>

#include "dedup/pair_runs.h"
#include "neardup/dedup_stages.h"

namespace neardup {
namespace {

// (key, document) records sorted, each key's range handed to fn(first, end).
template <typename Fn>
void ForEachGroup(std::vector<std::pair<uint64_t, uint64_t>>* records, Fn&& fn) {
  std::sort(records->begin(), records->end());
  for (size_t begin = 0; begin < records->size();) {
    size_t end = begin + 1;
    while (end < records->size() && (*records)[end].first == (*records)[begin].first) ++end;
    fn(begin, end);
    begin = end;
  }
}

std::vector<std::pair<uint64_t, uint64_t>> Records(std::span<const uint64_t> keys,
                                                   std::span<const uint64_t> documents) {
  const size_t n = std::min(keys.size(), documents.size());
  std::vector<std::pair<uint64_t, uint64_t>> records(n);
  for (size_t i = 0; i < n; ++i) records[i] = {keys[i], documents[i]};
  return records;
}

}  // namespace

std::vector<LshPair> LshBucketRecordPairs(std::span<const uint64_t> buckets,
                                          std::span<const uint64_t> documents, uint32_t window,
                                          LshJoinStats* stats) {
  std::vector<std::pair<uint64_t, uint64_t>> records = Records(buckets, documents);
  LshJoinStats counted;
  counted.records = records.size();
  std::vector<LshPair> pairs;
  std::vector<uint64_t> members;
  ForEachGroup(&records, [&](size_t begin, size_t end) {
    members.clear();
    for (size_t i = begin; i < end; ++i) {
      if (members.empty() || members.back() != records[i].second) {
        members.push_back(records[i].second);
      }
    }
    const size_t m = members.size();
    if (m < 2) return;
    ++counted.buckets;
    if (m > static_cast<size_t>(window) + 1) ++counted.oversized_buckets;
    counted.largest_bucket = std::max<uint64_t>(counted.largest_bucket, m);
    counted.bucket_pairs += BucketPairCount(m, window);
    BucketPairs(members, window, &pairs);
  });
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  counted.candidate_pairs = pairs.size();
  if (stats != nullptr) {
    stats->records += counted.records;
    stats->buckets += counted.buckets;
    stats->oversized_buckets += counted.oversized_buckets;
    stats->largest_bucket = std::max(stats->largest_bucket, counted.largest_bucket);
    stats->bucket_pairs += counted.bucket_pairs;
    stats->candidate_pairs += counted.candidate_pairs;
  }
  return pairs;
}

std::vector<LshPair> FirstOfEqualHashPairs(std::span<const uint64_t> hashes,
                                           std::span<const uint64_t> documents) {
  std::vector<std::pair<uint64_t, uint64_t>> records = Records(hashes, documents);
  std::vector<LshPair> pairs;
  ForEachGroup(&records, [&](size_t begin, size_t end) {
    for (size_t i = begin + 1; i < end; ++i) {
      if (records[i].second != records[begin].second) {
        pairs.push_back({records[begin].second, records[i].second});
      }
    }
  });
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

void MergeCandidatePairs(std::span<const CandidateRun> runs, std::vector<uint64_t>* pairs,
                         std::vector<uint8_t>* sources) {
  std::vector<PairRun> pair_runs;
  for (const CandidateRun& run : runs) pair_runs.push_back({nullptr, 0, 0, run.pairs, run.source});
  pairs->clear();
  sources->clear();
  // Runs in memory: no read can fail, and the visitor never does.
  [[maybe_unused]] Status merged =
      PairRunMerger(std::move(pair_runs)).ForEach([&](uint64_t pair, uint8_t from) {
        pairs->push_back(pair);
        sources->push_back(from);
        return Status::Ok();
      });
  assert(merged.ok());
}

}  // namespace neardup
