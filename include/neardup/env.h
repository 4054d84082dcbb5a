// Env: the few file operations by which a DocumentStore changes its directory (create, append,
// sync, truncate, rename, remove, directory sync), in LevelDB's manner: Env::Default() is the
// operating system, and a caller (a test, an embedding with its own I/O policy) may pass another
// Env in StoreOptions::env, e.g. a fault-injection layer that simulates a power cut. Reading
// (whole files, mmap) goes straight to the operating system, so an Env must write through.
//
// Thread safety: Env::Default() may be used from any number of threads at once; an Env passed to
// a store must be too. A WritableFile is used by one thread at a time.
#ifndef NEARDUP_ENV_H_
#define NEARDUP_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

// A file open for appending.
class NEARDUP_EXPORT WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends with write(2); IoError naming the file on failure (part of `data` may be written).
  virtual Status Append(std::string_view data) = 0;
  // fdatasync: everything appended so far survives a power cut.
  virtual Status Sync() = 0;
  // Cuts the file to `size` bytes (not synced).
  virtual Status Truncate(uint64_t size) = 0;
  virtual const std::string& path() const = 0;
};

class NEARDUP_EXPORT Env {
 public:
  virtual ~Env() = default;
  // Creates `path` empty (truncating an existing file), opened for appending.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Opens the existing `path` for appending at its end.
  virtual Result<std::unique_ptr<WritableFile>> ReopenWritableFile(const std::string& path) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Removes a file; a missing file is not an error.
  virtual Status Remove(const std::string& path) = 0;
  // fsync of a directory: names created, renamed or removed in it survive a power cut.
  virtual Status SyncDir(const std::string& dir) = 0;

  // The operating system's file system (POSIX). Never null; lives as long as the process.
  static Env* Default();
};

}  // namespace neardup

#endif  // NEARDUP_ENV_H_
