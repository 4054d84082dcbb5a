// OutputFile: the one way neardup writes a result file. It never writes over a file the command
// reads (compared by device and inode, not by name) nor into a directory it reads, refuses an
// existing file unless `force`, refuses a second output of the same command to the same file, and
// writes through a temporary file in the same directory that is renamed into place on Commit(), so
// a failed or interrupted run leaves no half-written file and the old file (with --force) intact.
// A name ending in .gz, .zst or .xz is written compressed that way.
//
// What "the files the command reads" are is decided in one place: while an InputScope is alive,
// every reader of the library (DocumentReader, the labelled pairs of eval, IDF tables) records the
// files and directories it opens (NoteInput), and every OutputFile checks against them, besides
// OutputFileOptions::inputs. The command-line tool holds one scope for its whole run; the Python
// package one per call that writes files.
//
// "-" is standard output (no temporary file, never compressed). Not thread-safe: one writer per
// object (the scope's record is thread-safe).
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
// force), lies inside a directory read as an input, is a directory, or was already written by this
// scope (see InputScope); AlreadyExists if it exists and !force. "-" always passes.
NEARDUP_EXPORT Status CheckOutputPath(const std::string& path, const OutputFileOptions& options);

// CheckOutputPath for each of `paths`, and InvalidArgument if two of them name the same file
// (by path after resolving "." / ".." / symbolic links, or by device and inode), so a command that
// writes several outputs refuses before writing any of them.
NEARDUP_EXPORT Status CheckOutputPaths(const std::vector<std::string>& paths,
                                       const OutputFileOptions& options);

// While an InputScope is alive, NoteInput() records what the readers open and OutputFile refuses
// it. Scopes nest (the record lives until the outermost one ends) and may be held by several
// threads at once (they then share one record).
class NEARDUP_EXPORT InputScope {
 public:
  InputScope();
  ~InputScope();
  InputScope(const InputScope&) = delete;
  InputScope& operator=(const InputScope&) = delete;
};

// Records that the current scope reads `path` (a file, or a directory read recursively when
// `directory`). Nothing happens outside a scope or for "-". Called by the library's readers.
NEARDUP_EXPORT void NoteInput(const std::string& path, bool directory = false);

// The compression an output name asks for: "gzip", "zstd", "xz" for a name ending in .gz, .zst,
// .xz; "" otherwise.
NEARDUP_EXPORT const char* OutputCompression(std::string_view path);

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
  struct NEARDUP_HIDDEN Impl;
  OutputFile();
  std::unique_ptr<Impl> impl_;
};

// Creates `path`, writes `bytes` and commits, in one call.
NEARDUP_EXPORT Status WriteOutputFile(const std::string& path, std::string_view bytes,
                                      const OutputFileOptions& options);

}  // namespace neardup

#endif  // NEARDUP_OUTPUT_FILE_H_
