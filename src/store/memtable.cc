// The store's memtable; see memtable.h.
#include "store/memtable.h"

#include <algorithm>
#include <bit>

namespace neardup::store {

MemTable::MemTable(std::shared_ptr<const index::CompiledDesign> design, int bands,
                   uint64_t first_seq)
    : design_(std::move(design)), bands_(bands), next_seq_(first_seq) {
  hamming_chains_.resize(design_->tables.size());
  band_chains_.resize(static_cast<size_t>(bands_));
}

const MemTable::Entry* MemTable::Find(std::string_view id) const {
  auto it = ids_.find(id);
  return it == ids_.end() ? nullptr : &slots_[it->second];
}

void MemTable::Put(WalOp&& op) {
  const uint32_t slot = static_cast<uint32_t>(slots_.size());
  auto [it, inserted] = ids_.try_emplace(op.id, slot);
  if (!inserted) {
    slots_[it->second].live = false;
    it->second = slot;
  } else {
    payload_bytes_ += op.id.size() + sizeof(std::string) + 16;
  }
  Entry& entry = slots_.emplace_back();
  entry.id = &it->first;
  entry.tombstone = op.type == WalOpType::kRemove;
  if (entry.tombstone) return;
  entry.fingerprint = op.fingerprint;
  entry.metadata = std::move(op.metadata);
  entry.seq = next_seq_++;
  payload_bytes_ += entry.metadata.size();
  if (bands_ == 0 || !op.has_sketch) return;
  entry.has_sketch = true;
  entry.sketch = std::move(op.sketch);
  payload_bytes_ += entry.sketch.set.size() + entry.sketch.band_keys.size() * 4;
}

void MemTable::IndexNewEntries() const {
  std::lock_guard<std::mutex> lock(index_mu_);
  const size_t end = slots_.size();
  for (size_t slot = indexed_.load(std::memory_order_relaxed); slot < end; ++slot) {
    const Entry& entry = slots_[slot];
    if (entry.tombstone) continue;
    const auto row = static_cast<uint32_t>(slot);
    for (size_t t = 0; t < design_->tables.size(); ++t) {
      const index::CompiledTable& table = design_->tables[t];
      hamming_chains_[t].Insert(
          table.KeyOf(table.Project(entry.fingerprint.hi, entry.fingerprint.lo)), row);
    }
    if (!entry.has_sketch) continue;
    squeezed_chains_.Insert(entry.sketch.hashes.squeezed_hash, row);
    if (static_cast<int>(entry.sketch.band_keys.size()) == bands_) {
      for (int b = 0; b < bands_; ++b) band_chains_[b].Insert(entry.sketch.band_keys[b], row);
    }
  }
  indexed_.store(end, std::memory_order_release);
}

void MemTable::CollectWithin(const Fingerprint& query, int k, std::vector<uint32_t>* found) const {
  const int radius = design_->design.probe_radius[k];
  std::vector<uint64_t> probes;
  for (size_t t = 0; t < design_->tables.size(); ++t) {
    const index::CompiledTable& table = design_->tables[t];
    const uint64_t key = table.KeyOf(table.Project(query.hi, query.lo));
    // The keys within `radius` bits of the query's key: each probe of i flipped bits is extended
    // by one more flip above its highest one.
    probes.assign(1, key);
    for (size_t first = 0, flips = 0; flips < static_cast<size_t>(radius); ++flips) {
      const size_t last = probes.size();
      for (size_t p = first; p < last; ++p) {
        const uint64_t diff = probes[p] ^ key;
        const int from = diff == 0 ? 0 : 64 - std::countl_zero(diff);
        for (int b = from; b < table.key_bits; ++b)
          probes.push_back(probes[p] ^ (uint64_t{1} << b));
      }
      first = last;
    }
    for (uint64_t probe : probes) {
      hamming_chains_[t].ForEachNewest(probe, [&](uint32_t slot) {
        const Entry& entry = slots_[slot];
        if (entry.live && HammingDistance(entry.fingerprint, query) <= k) found->push_back(slot);
        return true;
      });
    }
  }
  std::sort(found->begin(), found->end());
  found->erase(std::unique(found->begin(), found->end()), found->end());
}

size_t MemTable::MemoryBytes() const {
  std::lock_guard<std::mutex> lock(index_mu_);
  size_t bytes = payload_bytes_ + slots_.size() * sizeof(Entry) + ids_.size() * 16 +
                 squeezed_chains_.MemoryBytes();
  for (const auto& chains : hamming_chains_) bytes += chains.MemoryBytes();
  for (const auto& chains : band_chains_) bytes += chains.MemoryBytes();
  return bytes;
}

}  // namespace neardup::store
