// Little-endian fixed-width encoding and a bounds-checked reader over a byte range: what every
// on-disk format of neardup (index segment images, the store's log, segments and MANIFEST) reads
// and writes numbers with.
//
// Internal header.
#ifndef NEARDUP_COMMON_BYTE_IO_H_
#define NEARDUP_COMMON_BYTE_IO_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace neardup {

inline void PutU32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);  // x86-64 and every supported target are little-endian
  out->append(b, 4);
}
inline void PutU64(std::string* out, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out->append(b, 8);
}
inline uint32_t LoadU32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t LoadU64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// A bounds-checked little-endian reader over a byte range.
class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : bytes_(bytes) {}
  bool U8(uint8_t* v) {
    if (pos_ + 1 > bytes_.size()) return false;
    *v = static_cast<uint8_t>(bytes_[pos_++]);
    return true;
  }
  bool U32(uint32_t* v) {
    if (pos_ + 4 > bytes_.size()) return false;
    *v = LoadU32(bytes_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool U64(uint64_t* v) {
    if (pos_ + 8 > bytes_.size()) return false;
    *v = LoadU64(bytes_.data() + pos_);
    pos_ += 8;
    return true;
  }
  bool Bytes(size_t n, std::string_view* v) {
    if (n > bytes_.size() - pos_) return false;
    *v = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace neardup

#endif  // NEARDUP_COMMON_BYTE_IO_H_
