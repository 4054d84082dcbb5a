// OutputFile: the one way neardup writes a result file. It never writes over one of the command's
// inputs (compared by device and inode, not by name), refuses an existing file unless `force`, and
// writes through a temporary file in the same directory that is renamed into place on Commit(), so
// a failed or interrupted run leaves no half-written file and the old file (with --force) intact.
//
// "-" is standard output (no temporary file). Not thread-safe: one writer per object.
#ifndef NEARDUP_OUTPUT_FILE_H_
#define NEARDUP_OUTPUT_FILE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

struct NEARDUP_EXPORT OutputFileOptions {
  // Replace an existing file (never one of `inputs`).
  bool force = false;
  // The files the command reads (as expanded by DocumentReader::files(); "-" is ignored).
  std::vector<std::string> inputs;
};

// Checks that `path` may be written: InvalidArgument if it is one of the inputs (even with
// force) or a directory, AlreadyExists if it exists and !force. "-" always passes.
NEARDUP_EXPORT Status CheckOutputPath(const std::string& path, const OutputFileOptions& options);

class NEARDUP_EXPORT OutputFile {
 public:
  // Checks `path` (CheckOutputPath) and opens a temporary file beside it.
  static Result<std::unique_ptr<OutputFile>> Create(const std::string& path,
                                                    const OutputFileOptions& options);
  // Removes the temporary file unless Commit() succeeded.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Status Write(std::string_view bytes);
  // Flushes, closes and renames the temporary file to the final path (re-checking that the
  // path did not become an input or appear meanwhile). Errors name the path.
  Status Commit();
  const std::string& path() const;

 private:
  struct Impl;
  OutputFile();
  std::unique_ptr<Impl> impl_;
};

// Creates `path`, writes `bytes` and commits, in one call.
NEARDUP_EXPORT Status WriteOutputFile(const std::string& path, std::string_view bytes,
                                      const OutputFileOptions& options);

}  // namespace neardup

#endif  // NEARDUP_OUTPUT_FILE_H_
