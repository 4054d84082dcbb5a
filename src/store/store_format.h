// Low-level pieces of the on-disk store format shared by the log, segment and manifest code:
// checksums, little-endian encoding, file naming and small POSIX file helpers.
//
// Internal header. See docs/storage_format.md for the layout these helpers implement.
#ifndef NEARDUP_STORE_STORE_FORMAT_H_
#define NEARDUP_STORE_STORE_FORMAT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "neardup/fingerprint.h"
#include "neardup/status.h"

namespace neardup::store {

class FileSystem;

// XXH3-64 of `bytes`: the checksum used by every file of the store.
uint64_t Checksum(const void* bytes, size_t size);
inline uint64_t Checksum(std::string_view bytes) { return Checksum(bytes.data(), bytes.size()); }

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

// File names inside a store directory.
inline constexpr const char* kManifestName = "MANIFEST";
inline constexpr const char* kLockName = "LOCK";
std::string SegmentFileName(uint64_t number);  // "seg-000001.ndseg"
std::string WalFileName(uint64_t number);      // "wal-000001.ndwal"
// Parses a segment/log file name; returns false for other names.
bool ParseFileName(std::string_view name, bool* is_segment, uint64_t* number);

std::string JoinPath(const std::string& dir, const std::string& name);

// Reads a whole file.
Result<std::string> ReadFile(const std::string& path);
// Writes `contents` to `path` via a temporary file, fsync, rename and directory fsync, so the file
// is either the old one or the new one after a crash.
Status WriteFileAtomically(FileSystem* fs, const std::string& dir, const std::string& name,
                           std::string_view contents);
// Writes all of `bytes` to fd; IoError naming `path` on failure.
Status WriteAll(int fd, std::string_view bytes, const std::string& path);
Status SyncDir(const std::string& dir);
Status ErrnoStatus(const std::string& what, const std::string& path, int err);

// Fingerprint <-> 128-bit integer, for bit-range extraction.
inline unsigned __int128 ToU128(const Fingerprint& fp) {
  return (static_cast<unsigned __int128>(fp.hi) << 64) | fp.lo;
}

}  // namespace neardup::store

#endif  // NEARDUP_STORE_STORE_FORMAT_H_
