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

#include "common/byte_io.h"
#include "neardup/env.h"
#include "neardup/fingerprint.h"
#include "neardup/status.h"

namespace neardup::store {

// XXH3-64 of `bytes`: the checksum used by every file of the store.
uint64_t Checksum(const void* bytes, size_t size);
inline uint64_t Checksum(std::string_view bytes) { return Checksum(bytes.data(), bytes.size()); }

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
Status WriteFileAtomically(Env* env, const std::string& dir, const std::string& name,
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
