// SpillFile: an anonymous temporary file dedup writes intermediate data to (band keys, candidate
// pair runs, shingle sets) so that its memory does not grow with the signature size or the number
// of candidate pairs.
//
// The file is unlinked as soon as it is created (O_TMPFILE where the file system supports it,
// otherwise mkstemp + unlink), so it never appears in the directory listing after Create()
// returns and its space is freed when the object is destroyed or the process dies.
//
// Internal header. Appends are buffered and not thread-safe; ReadAt() (pread) may be called from
// any number of threads at once once the appends are flushed.
#ifndef NEARDUP_DEDUP_SPILL_FILE_H_
#define NEARDUP_DEDUP_SPILL_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "neardup/status.h"

namespace neardup {

class SpillFile {
 public:
  // A new empty file in `directory` (empty: $TMPDIR, else /tmp). Errors name the directory.
  static Result<SpillFile> Create(const std::string& directory);
  // The directory Create() uses for `directory`.
  static std::string ResolveDirectory(const std::string& directory);

  SpillFile(SpillFile&& other) noexcept;
  SpillFile& operator=(SpillFile&& other) noexcept;
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  ~SpillFile();

  // Appends `bytes` bytes (buffered).
  Status Append(const void* data, size_t bytes);
  // Writes the buffered bytes; needed before ReadAt() sees them.
  Status Flush();
  // Reads exactly `bytes` bytes at `offset` (flushed data only). Thread-safe.
  Status ReadAt(uint64_t offset, void* data, size_t bytes) const;
  // Bytes appended so far (flushed or not).
  uint64_t size() const { return size_; }

 private:
  SpillFile(int fd, std::string directory) : fd_(fd), directory_(std::move(directory)) {}
  int fd_ = -1;
  std::string directory_;  // for error messages
  uint64_t size_ = 0;
  std::vector<char> buffer_;
};

}  // namespace neardup

#endif  // NEARDUP_DEDUP_SPILL_FILE_H_
