// FileSystem: the few file operations by which the store changes its directory (create, append,
// sync, truncate, rename, remove, directory sync), so tests can put a fault-injection layer under
// it (as LevelDB's test Env does) that simulates a power cut. Reading (ReadFile, mmap) goes
// straight to the OS: a fault layer must write through.
//
// Internal header. FileSystem::Default() is the OS (POSIX) and is thread-safe; a WritableFile is
// used by one thread at a time.
#ifndef NEARDUP_STORE_FILE_SYSTEM_H_
#define NEARDUP_STORE_FILE_SYSTEM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "neardup/status.h"

namespace neardup::store {

class WritableFile {
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

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates `path` empty (truncating an existing file), opened for appending.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Opens the existing `path` for appending at its end.
  virtual Result<std::unique_ptr<WritableFile>> ReopenWritableFile(const std::string& path) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Removes a file; a missing file is not an error.
  virtual Status Remove(const std::string& path) = 0;
  // fsync of a directory: names created, renamed or removed in it survive a power cut.
  virtual Status SyncDir(const std::string& dir) = 0;

  // The operating system's file system.
  static FileSystem* Default();
};

}  // namespace neardup::store

#endif  // NEARDUP_STORE_FILE_SYSTEM_H_
