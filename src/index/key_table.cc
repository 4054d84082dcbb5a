// KeyTable images: building and viewing; see key_table.h.
#include "index/key_table.h"

#include <sys/mman.h>

#include <bit>
#include <cstdlib>
#include <cstring>

#include "common/byte_io.h"
#include "index/table_segment.h"

namespace neardup::index {
namespace {

constexpr size_t kHeaderBytes = 16;
constexpr int kMaxDirBits = 24;

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

template <typename Key>
uint64_t TopBits(Key key, int dir_bits) {
  constexpr int kBits = sizeof(Key) * 8;
  return dir_bits == 0 ? 0 : static_cast<uint64_t>(key) >> (kBits - dir_bits);
}

}  // namespace

int KeyTableDirectoryBits(size_t n, int key_bits) {
  if (n < 16) return 0;
  const int log2n = 63 - std::countl_zero(static_cast<uint64_t>(n));
  return std::clamp(log2n - 3, 0, std::min(kMaxDirBits, key_bits));
}

size_t KeyTableImageSize(size_t n, int key_bytes) {
  const int dir_bits = KeyTableDirectoryBits(n, key_bytes * 8);
  return kHeaderBytes + Align8(n * key_bytes) + Align8(n * 4) +
         Align8(((size_t{1} << dir_bits) + 1) * 4);
}

template <typename Key>
void BuildKeyTable(std::vector<KeyRow<Key>> rows, std::string* out) {
  constexpr int kBits = sizeof(Key) * 8;
  // Sort by (key, age): radix-sort by age, then stably by key.
  RadixSort(&rows, [](const KeyRow<Key>& r) { return r.age; });
  RadixSort(&rows, [](const KeyRow<Key>& r) { return static_cast<uint64_t>(r.key); });
  const size_t n = rows.size();
  const int dir_bits = KeyTableDirectoryBits(n, kBits);
  const size_t dir_size = (size_t{1} << dir_bits) + 1;
  PutU64(out, n);
  PutU32(out, sizeof(Key));
  PutU32(out, static_cast<uint32_t>(dir_bits));
  for (const KeyRow<Key>& r : rows) {
    char bytes[sizeof(Key)];
    std::memcpy(bytes, &r.key, sizeof(Key));
    out->append(bytes, sizeof(Key));
  }
  out->resize(Align8(out->size()), '\0');
  for (const KeyRow<Key>& r : rows) PutU32(out, r.row);
  out->resize(Align8(out->size()), '\0');
  size_t at = 0;
  for (size_t p = 0; p < dir_size; ++p) {
    while (at < n && TopBits(rows[at].key, dir_bits) < p) ++at;
    PutU32(out, static_cast<uint32_t>(at));
  }
  out->resize(Align8(out->size()), '\0');
}

template <typename Key>
Result<KeyTable<Key>> KeyTable<Key>::View(std::string_view bytes, const std::string& what,
                                          size_t* image_size) {
  if (bytes.size() < kHeaderBytes) return Status::Corruption(what + ": key table is truncated");
  const uint64_t n = LoadU64(bytes.data());
  const uint32_t key_bytes = LoadU32(bytes.data() + 8);
  const uint32_t dir_bits = LoadU32(bytes.data() + 12);
  if (key_bytes != sizeof(Key) || dir_bits > static_cast<uint32_t>(kMaxDirBits) ||
      n >= (uint64_t{1} << 32) || n > bytes.size()) {
    return Status::Corruption(what + ": key table header is inconsistent");
  }
  const size_t keys_off = kHeaderBytes;
  const size_t rows_off = keys_off + Align8(n * sizeof(Key));
  const size_t dir_off = rows_off + Align8(n * 4);
  const size_t dir_size = (size_t{1} << dir_bits) + 1;
  const size_t end = dir_off + Align8(dir_size * 4);
  if (end > bytes.size()) return Status::Corruption(what + ": key table runs past its section");
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0)
    return Status::Corruption(what + ": key table is misaligned");
  KeyTable table;
  table.n_ = n;
  table.dir_bits_ = static_cast<int>(dir_bits);
  table.dir_size_ = dir_size;
  table.keys_ = reinterpret_cast<const Key*>(bytes.data() + keys_off);
  table.rows_ = reinterpret_cast<const uint32_t*>(bytes.data() + rows_off);
  table.dir_ = reinterpret_cast<const uint32_t*>(bytes.data() + dir_off);
  *image_size = end;
  return table;
}

template <typename Key>
std::pair<size_t, size_t> KeyTable<Key>::Bucket(Key key) const {
  const uint64_t p = TopBits(key, dir_bits_);
  // Directory entries come from the file: clamp them so a damaged one cannot point outside.
  const size_t lo = std::min<size_t>(dir_[p], n_);
  const size_t hi = std::min<size_t>(dir_[p + 1], n_);
  return hi < lo ? std::pair<size_t, size_t>{0, 0} : std::pair<size_t, size_t>{lo, hi};
}

template <typename Key>
std::pair<size_t, size_t> KeyTable<Key>::Equal(Key key) const {
  if (n_ == 0) return {0, 0};
  const auto [lo, hi] = Bucket(key);
  return Search(key, lo, hi);
}

template <typename Key>
void KeyTable<Key>::EqualMany(std::span<const KeyTable* const> tables, std::span<const Key> keys,
                              std::pair<size_t, size_t>* ranges) {
  const size_t count = std::min(tables.size(), keys.size());
  for (size_t i = 0; i < count; ++i) {
    const KeyTable& t = *tables[i];
    if (t.n_ > 0) __builtin_prefetch(t.dir_ + TopBits(keys[i], t.dir_bits_));
  }
  for (size_t i = 0; i < count; ++i) {
    const KeyTable& t = *tables[i];
    ranges[i] = t.n_ == 0 ? std::pair<size_t, size_t>{0, 0} : t.Bucket(keys[i]);
    if (ranges[i].second > ranges[i].first) {
      __builtin_prefetch(t.keys_ + ranges[i].first);
      __builtin_prefetch(t.keys_ + ranges[i].second - 1);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    ranges[i] = tables[i]->Search(keys[i], ranges[i].first, ranges[i].second);
  }
}

template <typename Key>
void KeyTable<Key>::KeepDirectoryInMemory() {
  if (owned_dir_ || dir_size_ == 0) return;
  const size_t bytes = dir_size_ * sizeof(uint32_t);
  void* memory = nullptr;
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes >= kHuge && ::posix_memalign(&memory, kHuge, bytes) == 0) {
    ::madvise(memory, bytes, MADV_HUGEPAGE);  // advisory: ignored where THP is off
  } else {
    memory = std::malloc(bytes);
  }
  if (memory == nullptr) return;  // stays on the mapping
  std::memcpy(memory, dir_, bytes);
  owned_dir_ = std::shared_ptr<const uint32_t>(
      static_cast<const uint32_t*>(memory),
      [](const uint32_t* p) { std::free(const_cast<uint32_t*>(p)); });
  dir_ = owned_dir_.get();
}

template void BuildKeyTable<uint32_t>(std::vector<KeyRow<uint32_t>>, std::string*);
template void BuildKeyTable<uint64_t>(std::vector<KeyRow<uint64_t>>, std::string*);
template class KeyTable<uint32_t>;
template class KeyTable<uint64_t>;

}  // namespace neardup::index
