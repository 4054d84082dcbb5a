// Delta + varint coding of shingle sets; see set_codec.h.
#include "store/set_codec.h"

namespace neardup::store {
namespace {

void PutVarint(uint64_t v, std::string* out) {
  char buffer[10];
  size_t n = 0;
  while (v >= 0x80) {
    buffer[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buffer[n++] = static_cast<char>(v);
  out->append(buffer, n);
}

// Reads a varint of at most 5 bytes (a value < 2^35) at *pos.
inline bool GetVarint(const uint8_t* p, size_t size, size_t* pos, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (*pos >= size) return false;
    const uint8_t byte = p[(*pos)++];
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) {
      *v = result;
      return true;
    }
  }
  return false;
}

}  // namespace

void EncodeShingleSet(std::span<const uint32_t> set, std::string* out) {
  PutVarint(set.size(), out);
  uint64_t previous = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    PutVarint(i == 0 ? set[0] : set[i] - previous - 1, out);
    previous = set[i];
  }
}

bool DecodeShingleSet(std::string_view bytes, std::vector<uint32_t>* set, size_t* used) {
  set->clear();
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t size = bytes.size();
  size_t pos = 0;
  uint64_t count = 0;
  if (!GetVarint(p, size, &pos, &count) || count > size - pos) return false;
  set->resize(count);
  uint64_t value = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t v;
    // The common one-byte gap without the loop.
    if (pos < size && p[pos] < 0x80) {
      v = p[pos++];
    } else if (!GetVarint(p, size, &pos, &v)) {
      set->clear();
      return false;
    }
    value = i == 0 ? v : value + v + 1;
    if (value > UINT32_MAX) {
      set->clear();
      return false;
    }
    (*set)[i] = static_cast<uint32_t>(value);
  }
  if (used != nullptr) *used = pos;
  return true;
}

}  // namespace neardup::store
