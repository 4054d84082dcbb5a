// HammingIndex: the abstraction every neardup fingerprint index implements.
//
// An index stores (id, fingerprint) pairs of one width (64 or 128 bits) and answers, exactly,
// "which stored fingerprints are within Hamming distance k of this one": no stored item within k is
// ever missed and none beyond k is returned. Each stored id appears at most once in an answer.
//
// Thread safety: const methods may run concurrently with each other and with at most one thread
// calling the mutating methods (Add, AddBatch, Remove), unless an implementation says otherwise.
#ifndef NEARDUP_HAMMING_INDEX_H_
#define NEARDUP_HAMMING_INDEX_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "neardup/export.h"
#include "neardup/fingerprint.h"
#include "neardup/status.h"

namespace neardup {

// One answer to a query: a stored id and its distance to the query.
struct Neighbor {
  uint64_t id = 0;
  int distance = 0;
  friend bool operator==(const Neighbor&, const Neighbor&) = default;
};

// One pair of the self-join: ids a < b whose fingerprints are within k.
struct NeighborPair {
  uint64_t a = 0;
  uint64_t b = 0;
  int distance = 0;
  // Ordered by (a, b, distance).
  friend auto operator<=>(const NeighborPair&, const NeighborPair&) = default;
};

// Cost counters a caller can print (FAISS-style statistics), summed over calls since reset.
struct IndexSearchStats {
  uint64_t queries = 0;
  uint64_t probes = 0;      // bucket/prefix look-ups
  uint64_t candidates = 0;  // fingerprints whose distance was computed
  uint64_t results = 0;     // neighbours returned
};

class NEARDUP_EXPORT HammingIndex {
 public:
  virtual ~HammingIndex() = default;

  // Fingerprint width this index holds: 64 or 128.
  virtual int bits() const = 0;
  // Largest k Search accepts.
  virtual int max_search_k() const = 0;
  // Number of stored (id, fingerprint) pairs.
  virtual size_t size() const = 0;

  // Stores one pair. Ids need not be unique: the same id added twice is stored twice.
  // InvalidArgument if fp.bits != bits().
  virtual Status Add(uint64_t id, const Fingerprint& fp) = 0;
  // Stores many pairs at once (faster than repeated Add; may use all cores).
  virtual Status AddBatch(std::span<const uint64_t> ids, std::span<const Fingerprint> fps) = 0;
  // Removes every stored pair with this id and fingerprint; returns how many were removed.
  virtual size_t Remove(uint64_t id, const Fingerprint& fp) = 0;

  // Every stored item within distance k of `query`, sorted by (distance, id).
  // InvalidArgument if k is outside [0, max_search_k()] or the width differs.
  virtual Result<std::vector<Neighbor>> Search(const Fingerprint& query, int k) const = 0;

  // All pairs (a < b by id, one entry per pair of stored items) within k among the stored items,
  // sorted by (a, b). Uses all cores.
  virtual Result<std::vector<NeighborPair>> SelfJoin(int k) const = 0;

  virtual IndexSearchStats stats() const = 0;
};

}  // namespace neardup

#endif  // NEARDUP_HAMMING_INDEX_H_
