// DocumentReader: streams documents (id + text) out of JSONL, CSV/TSV and plain text files,
// directories of them, pipes and standard input, reading gzip, zstd and xz compressed input
// directly. It is the one reader of every command that reads documents (dedup, explain, eval,
// fingerprint, keywords, idf, index add), so they all take the same inputs and report malformed
// records the same way.
//
// A DocumentReader is not thread-safe: one thread calls Next() at a time. Memory does not grow with
// the amount of text read: only the current line or record (or, for a plain text file, the current
// file) is held. Inputs are visited in a canonical order (sorted paths; standard input first) so
// the same set of files always yields the same sequence of documents, whatever order they were
// named in.
//
// Compression is recognised by the input's first bytes (gzip, zstd, xz magic numbers), whatever its
// name, standard input and pipes included; the format is chosen by the name without a compression
// suffix (.gz, .zst, .xz):
//   *.jsonl, *.ndjson, *.json - one JSON object per line; the id and text are read from
//       configurable fields, which may be nested paths ("meta.id", "content.text"). Blank lines are
//       ignored.
//   *.csv, *.tsv - RFC 4180 records (quoted fields may hold separators, quotes and line breaks;
//       parsed with libcsv; in TSV a quote inside a field is text), comma- or tab-separated, with
//       a header row naming the columns; the
//       field options name columns (id_field, text_field, score_field, fingerprint_field;
//       metadata_field's cell becomes a JSON string). No text column is an error naming the
//       columns; a record's location is the line it starts on.
//   any other file - plain text, the whole file is one document whose id is its path.
//   "-" - standard input, JSONL unless DocumentReaderOptions::stdin_is_text; so is a pipe whose
//       name has no such suffix (/dev/fd/63 from a shell's <(...)).
//   a directory - every regular file below it (recursively), in sorted path order. A broken
//       symbolic link, or a pipe, socket or device inside it, is skipped with a counted warning.
// Formats neardup cannot read (Parquet, Arrow, Avro, ORC, spreadsheets, ZIP, bzip2, LZ4, 7-Zip,
// tar), recognised by name or first bytes, are refused with an Unsupported error before anything is
// read. Pipes and process substitutions (/dev/fd/63) are read as streams, once, front to back
// (spool_stdin copies them so that Rewind() works).
// A UTF-8 byte-order mark at the start of a file is ignored. A file named twice (by any path, even
// through a directory) is read once: files are told apart by device and inode. Every file and
// directory read is recorded for output protection (NoteInput in neardup/output_file.h).
//
// A malformed line or record (invalid JSON or CSV, missing or non-string text, invalid UTF-8,
// over-long) or an empty document (no text, or only whitespace) is counted under its reason
// (skipped()), reported through the warning callback as "file:line: reason (skipped)", and
// skipped; with `strict` it instead ends reading with an error naming the place. Records that are
// read but fall back to a default (a missing or null id becomes "file:line", a missing or
// non-numeric score field) are counted under their reason (fallbacks()) and reported as
// "file:line: reason (...)"; with `strict` they are errors too.
#ifndef NEARDUP_DOCUMENT_READER_H_
#define NEARDUP_DOCUMENT_READER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

struct NEARDUP_EXPORT DocumentReaderOptions {
  // Field names are dotted paths into nested objects ("meta.id"); a key that itself contains a dot
  // is found too (the whole name is tried first).
  std::string id_field = "id";      // JSONL field holding the id (string or number)
  std::string text_field = "text";  // JSONL field holding the text (must be a string)
  // Optional numeric JSONL field copied into Document::score (e.g. for "keep the highest").
  std::string score_field;
  // Optional JSONL field whose value is copied, as compact JSON text, into Document::metadata.
  std::string metadata_field;
  // Optional JSONL field holding a fingerprint (hex string): a record with it needs no text field
  // (Document::fingerprint is set and Document::text left empty).
  std::string fingerprint_field;
  // Pass plain-text documents (not JSONL) with invalid UTF-8 through instead of skipping them, for
  // callers that repair it (NormalizeOptions::replace_invalid_utf8). Document::text may then hold
  // invalid UTF-8.
  bool allow_invalid_utf8_text = false;
  // Stop at the first malformed record with an error instead of skipping it.
  bool strict = false;
  // Treat standard input as one plain-text document instead of JSONL.
  bool stdin_is_text = false;
  // Every input (files, directories, standard input) is plain text with one document a line, id
  // "file:line" (blank lines are ignored). Overrides the format chosen by name.
  bool text_lines = false;
  // Copy standard input and every other stream input (a pipe, /dev/fd/N) to an anonymous
  // temporary file first so Rewind() can read it again.
  bool spool_stdin = false;
  // Keep the raw JSONL line in Document::raw_line (for re-writing the input).
  bool keep_raw_line = false;
  // Inputs held in memory (for embedding, e.g. the Python package): an input naming a key of this
  // map is read from its bytes, with the same rules as a file of that name (JSONL by the name's
  // extension), instead of from the file system. Not decompressed.
  std::map<std::string, std::shared_ptr<const std::string>> memory_inputs;
  // Lines / text files longer than this are skipped as "too_large".
  size_t max_document_bytes = size_t{64} << 20;
  // Called for each skipped record with a message such as "a.jsonl:12: invalid JSON (...)".
  std::function<void(const std::string&)> on_warning;
};

// One document as read from the inputs.
struct Document {
  std::string id;               // the id field, or "<path>:<line>" / "<path>" when absent
  std::string text;             // valid UTF-8
  std::string location;         // "<path>:<line>" (JSONL) or "<path>" (plain text)
  uint32_t file_index = 0;      // index into DocumentReader::files()
  uint64_t line = 0;            // 1-based line number (0 for a plain text file)
  std::optional<double> score;  // the score field, when configured and numeric
  std::string raw_line;         // the original JSONL line when keep_raw_line (empty otherwise)
  bool from_jsonl = false;
  std::string metadata;     // compact JSON of the metadata field's value (empty when absent)
  std::string fingerprint;  // the fingerprint field's string (empty when absent)
};

// Reasons a record was skipped, as counted in DocumentReader::skipped().
inline constexpr const char* kSkipInvalidJson = "invalid_json";
inline constexpr const char* kSkipMissingText = "missing_text";
inline constexpr const char* kSkipNonStringText = "non_string_text";
inline constexpr const char* kSkipInvalidUtf8 = "invalid_utf8";
inline constexpr const char* kSkipTooLarge = "too_large";
inline constexpr const char* kSkipEmptyText = "empty_text";  // empty or only whitespace
inline constexpr const char* kSkipUnreadable = "unreadable_file";
inline constexpr const char* kSkipInvalidCsv = "invalid_csv";         // a malformed CSV/TSV record
inline constexpr const char* kSkipBrokenSymlink = "broken_symlink";   // in an input directory
inline constexpr const char* kSkipNotRegular = "not_a_regular_file";  // a pipe, socket, device

// Fallbacks counted in DocumentReader::fallbacks() (the record is still read).
inline constexpr const char* kFallbackMissingId = "missing_id";  // id absent, null or not scalar
inline constexpr const char* kFallbackMissingScore = "missing_score";
inline constexpr const char* kFallbackNonNumericScore = "non_numeric_score";

class NEARDUP_EXPORT DocumentReader {
 public:
  // Expands `inputs` (files, directories, "-") and opens the reader. NotFound names a missing
  // input; InvalidArgument if there is none.
  static Result<std::unique_ptr<DocumentReader>> Open(const std::vector<std::string>& inputs,
                                                      DocumentReaderOptions options);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // Reads the next document into *doc. Returns true if one was read, false at the end of all
  // inputs, or an error (I/O failure, corrupt compressed data, or any malformed record when
  // strict).
  Result<bool> Next(Document* doc);

  // Starts again from the first input (standard input only when spooled). Skip counts are kept.
  Status Rewind();

  // The expanded input files in reading order ("-" for standard input).
  const std::vector<std::string>& files() const;
  // Skipped records per reason (see kSkip*), counted during the first pass only.
  const std::map<std::string, uint64_t>& skipped() const;
  uint64_t skipped_total() const;
  // Records read with a fallback, per reason (see kFallback*), counted during the first pass only.
  const std::map<std::string, uint64_t>& fallbacks() const;
  // Uncompressed bytes consumed so far (all passes).
  uint64_t bytes_read() const;
  // Sum of the on-disk sizes of the regular input files (0 if unknown), for progress estimates.
  uint64_t total_input_bytes() const;
  // Compressed/on-disk bytes consumed so far, comparable with total_input_bytes().
  uint64_t input_bytes_consumed() const;

 private:
  struct NEARDUP_HIDDEN Impl;
  DocumentReader();
  std::unique_ptr<Impl> impl_;
};

// True if `path` names a JSONL file (by extension, ignoring a trailing .gz / .zst / .xz).
NEARDUP_EXPORT bool IsJsonlPath(std::string_view path);

// True if `path` is standard input ("-") or another stream (a pipe, /dev/fd/N, a socket or a
// device): it can be read only once, unless spooled.
NEARDUP_EXPORT bool IsStreamInput(const std::string& path);

// True if `a` and `b` name the same existing file (same device and inode), whatever the path.
NEARDUP_EXPORT bool IsSameFile(const std::string& a, const std::string& b);

}  // namespace neardup

#endif  // NEARDUP_DOCUMENT_READER_H_
