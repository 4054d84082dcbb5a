// DocumentReader implementation: input expansion, streaming (de)compression, JSONL parsing.
#include "neardup/document_reader.h"

#include <csv.h>
#include <lzma.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <simdjson.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "common/json_writer.h"
#include "common/utf8.h"
#include "neardup/output_file.h"

namespace neardup {

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view StripCompression(std::string_view path) {
  if (EndsWith(path, ".gz") || EndsWith(path, ".xz")) return path.substr(0, path.size() - 3);
  if (EndsWith(path, ".zst")) return path.substr(0, path.size() - 4);
  return path;
}

enum class Compression { kNone, kGzip, kZstd, kXz };

// The compression of a file, from its first bytes.
Compression DetectCompression(const unsigned char* magic, size_t size) {
  if (size >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) return Compression::kGzip;
  if (size >= 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)
    return Compression::kZstd;
  if (size >= 6 && magic[0] == 0xfd && std::memcmp(magic + 1, "7zXZ", 4) == 0 && magic[5] == 0)
    return Compression::kXz;
  return Compression::kNone;
}

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

// Looks up a field by name: the whole name first, then as a dotted path into nested objects.
simdjson::error_code FindField(simdjson::dom::object object, std::string_view path,
                               simdjson::dom::element* value) {
  if (object.at_key(path).get(*value) == simdjson::SUCCESS) return simdjson::SUCCESS;
  size_t dot = path.find('.');
  if (dot == std::string_view::npos) return simdjson::NO_SUCH_FIELD;
  simdjson::dom::element child;
  // The longest prefix that names an object wins; try each dot in turn.
  while (dot != std::string_view::npos) {
    if (object.at_key(path.substr(0, dot)).get(child) == simdjson::SUCCESS) {
      simdjson::dom::object nested;
      if (child.get_object().get(nested) == simdjson::SUCCESS &&
          FindField(nested, path.substr(dot + 1), value) == simdjson::SUCCESS) {
        return simdjson::SUCCESS;
      }
    }
    dot = path.find('.', dot + 1);
  }
  return simdjson::NO_SUCH_FIELD;
}

std::string ErrnoText() { return std::strerror(errno); }

// "invalid UTF-8 at byte N" (N counted from 0 in `text`), for a text that is not valid UTF-8.
std::string InvalidUtf8Message(std::string_view text) {
  const size_t at = utf8::FindInvalid(text);
  return at == std::string_view::npos ? std::string("invalid UTF-8")
                                      : "invalid UTF-8 at byte " + std::to_string(at);
}

// True if `text` has no characters other than ASCII whitespace.
bool IsBlank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

// Fills `doc` as a plain-text document (not JSONL): its location is also its id.
void SetPlainDocument(Document* doc, std::string text, const std::string& location,
                      uint32_t file_index, uint64_t line) {
  doc->text = std::move(text);
  doc->id = location;
  doc->location = location;
  doc->file_index = file_index;
  doc->line = line;
  doc->score.reset();
  doc->raw_line.clear();
  doc->from_jsonl = false;
  doc->metadata.clear();
  doc->fingerprint.clear();
}

}  // namespace

bool IsSameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool IsJsonlPath(std::string_view path) {
  std::string_view base = StripCompression(path);
  return EndsWith(base, ".jsonl") || EndsWith(base, ".ndjson") || EndsWith(base, ".json");
}

namespace {

// The bytes of one input as they come (compressed or not): a file, a pipe or standard input, with
// the bytes already read to recognise its format put back in front. Never seeks, so pipes and
// process substitutions (/dev/fd/63) read like files.
class RawInput {
 public:
  RawInput(FILE* file, bool owned) : file_(file), owned_(owned) {}
  ~RawInput() {
    if (owned_) std::fclose(file_);
  }
  RawInput(const RawInput&) = delete;
  RawInput& operator=(const RawInput&) = delete;

  // Reads up to `size` leading bytes into *head and keeps them to be read again.
  Status Peek(size_t size, std::string* head) {
    while (pending_.size() < size) {
      char chunk[16];
      const size_t n = std::fread(chunk, 1, std::min(sizeof(chunk), size - pending_.size()), file_);
      if (n == 0) {
        if (std::ferror(file_)) return Status::IoError("cannot read: " + ErrnoText());
        break;
      }
      pending_.append(chunk, n);
    }
    *head = pending_.substr(0, size);
    return Status::Ok();
  }
  // Reads up to `capacity` bytes; 0 means end of input.
  Result<size_t> Read(char* out, size_t capacity) {
    if (pending_at_ < pending_.size()) {
      const size_t n = std::min(capacity, pending_.size() - pending_at_);
      std::memcpy(out, pending_.data() + pending_at_, n);
      pending_at_ += n;
      consumed_ += n;
      return n;
    }
    const size_t n = std::fread(out, 1, capacity, file_);
    if (n == 0 && std::ferror(file_)) return Status::IoError("read failed: " + ErrnoText());
    consumed_ += n;
    return n;
  }
  uint64_t consumed() const { return consumed_; }

 private:
  FILE* file_;
  bool owned_;
  std::string pending_;
  size_t pending_at_ = 0;
  uint64_t consumed_ = 0;
};

}  // namespace

// A stream of uncompressed bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `capacity` bytes; 0 means end of stream.
  virtual Result<size_t> Read(char* out, size_t capacity) = 0;
  // On-disk (compressed) bytes consumed so far.
  virtual uint64_t consumed() const = 0;
};

namespace {

class PlainSource : public ByteSource {
 public:
  explicit PlainSource(std::unique_ptr<RawInput> input) : input_(std::move(input)) {}
  Result<size_t> Read(char* out, size_t capacity) override { return input_->Read(out, capacity); }
  uint64_t consumed() const override { return input_->consumed(); }

 private:
  std::unique_ptr<RawInput> input_;
};

// The bytes of an in-memory input (DocumentReaderOptions::memory_inputs).
class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::shared_ptr<const std::string> bytes) : bytes_(std::move(bytes)) {}
  Result<size_t> Read(char* out, size_t capacity) override {
    const size_t n = std::min(capacity, bytes_->size() - consumed_);
    std::memcpy(out, bytes_->data() + consumed_, n);
    consumed_ += n;
    return n;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  std::shared_ptr<const std::string> bytes_;
  size_t consumed_ = 0;
};

constexpr size_t kCompressedChunk = size_t{1} << 16;

// gzip through zlib's inflate (one or more concatenated members, like gunzip).
class GzipSource : public ByteSource {
 public:
  explicit GzipSource(std::unique_ptr<RawInput> input)
      : input_(std::move(input)), input_buffer_(kCompressedChunk) {
    ok_ = inflateInit2(&stream_, 15 + 16) == Z_OK;
  }
  ~GzipSource() override { inflateEnd(&stream_); }
  Result<size_t> Read(char* out, size_t capacity) override {
    if (!ok_) return Status::Internal("cannot start the gzip decoder");
    if (finished_) return size_t{0};
    stream_.next_out = reinterpret_cast<Bytef*>(out);
    stream_.avail_out = static_cast<uInt>(std::min<size_t>(capacity, 1 << 30));
    const uInt wanted = stream_.avail_out;
    while (stream_.avail_out == wanted) {
      if (stream_.avail_in == 0) {
        auto n = input_->Read(input_buffer_.data(), input_buffer_.size());
        if (!n.ok()) return n.status();
        if (*n == 0) {
          if (in_member_) return Status::Corruption("gzip error: truncated or corrupt data");
          break;
        }
        stream_.next_in = reinterpret_cast<Bytef*>(input_buffer_.data());
        stream_.avail_in = static_cast<uInt>(*n);
      }
      if (!in_member_) {
        // Another member follows the one that ended (or this is the first). Bytes after a
        // complete member that do not start one (zero padding) are ignored, as gunzip does.
        if (members_ > 0 && stream_.next_in[0] != 0x1f) {
          finished_ = true;
          break;
        }
        if (inflateReset(&stream_) != Z_OK) return Status::Internal("gzip decoder reset failed");
        in_member_ = true;
        ++members_;
      }
      const uInt available = stream_.avail_in;
      const int result = inflate(&stream_, Z_NO_FLUSH);
      if (result == Z_STREAM_END) {
        in_member_ = false;
        continue;
      }
      if (result == Z_BUF_ERROR && stream_.avail_in == available && available > 0) {
        return Status::Corruption("gzip error: corrupt data");  // no progress possible
      }
      if (result != Z_OK && result != Z_BUF_ERROR) {
        return Status::Corruption(std::string("gzip error: ") +
                                  (stream_.msg ? stream_.msg : "corrupt data"));
      }
    }
    return static_cast<size_t>(wanted - stream_.avail_out);
  }
  uint64_t consumed() const override { return input_->consumed(); }

 private:
  std::unique_ptr<RawInput> input_;
  std::vector<char> input_buffer_;
  z_stream stream_{};
  bool ok_ = false;
  bool in_member_ = false;
  bool finished_ = false;  // trailing bytes after the last member are not read
  uint64_t members_ = 0;
};

class ZstdSource : public ByteSource {
 public:
  explicit ZstdSource(std::unique_ptr<RawInput> input)
      : input_(std::move(input)), context_(ZSTD_createDCtx()) {
    input_buffer_.resize(ZSTD_DStreamInSize());
    input_view_ = ZSTD_inBuffer{input_buffer_.data(), 0, 0};
  }
  ~ZstdSource() override { ZSTD_freeDCtx(context_); }
  Result<size_t> Read(char* out, size_t capacity) override {
    ZSTD_outBuffer output{out, capacity, 0};
    while (output.pos == 0) {
      if (input_view_.pos == input_view_.size) {
        if (file_eof_) {
          if (last_result_ != 0) return Status::Corruption("truncated zstd stream");
          return size_t{0};
        }
        auto n = input_->Read(input_buffer_.data(), input_buffer_.size());
        if (!n.ok()) return n.status();
        if (*n == 0) {
          file_eof_ = true;
          continue;
        }
        input_view_ = ZSTD_inBuffer{input_buffer_.data(), *n, 0};
      }
      size_t result = ZSTD_decompressStream(context_, &output, &input_view_);
      if (ZSTD_isError(result)) {
        return Status::Corruption(std::string("zstd error: ") + ZSTD_getErrorName(result));
      }
      last_result_ = result;
    }
    return output.pos;
  }
  uint64_t consumed() const override { return input_->consumed(); }

 private:
  std::unique_ptr<RawInput> input_;
  ZSTD_DCtx* context_;
  std::vector<char> input_buffer_;
  ZSTD_inBuffer input_view_;
  bool file_eof_ = false;
  size_t last_result_ = 0;
};

class XzSource : public ByteSource {
 public:
  explicit XzSource(std::unique_ptr<RawInput> input) : input_(std::move(input)) {
    input_buffer_.resize(kCompressedChunk);
    ok_ = lzma_stream_decoder(&stream_, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK;
  }
  ~XzSource() override { lzma_end(&stream_); }
  Result<size_t> Read(char* out, size_t capacity) override {
    if (!ok_) return Status::Internal("cannot start the xz decoder");
    if (finished_) return size_t{0};
    stream_.next_out = reinterpret_cast<uint8_t*>(out);
    stream_.avail_out = capacity;
    while (stream_.avail_out == capacity) {
      lzma_action action = LZMA_RUN;
      if (stream_.avail_in == 0 && !file_eof_) {
        auto n = input_->Read(reinterpret_cast<char*>(input_buffer_.data()), input_buffer_.size());
        if (!n.ok()) return n.status();
        if (*n == 0) file_eof_ = true;
        stream_.next_in = input_buffer_.data();
        stream_.avail_in = *n;
      }
      if (file_eof_ && stream_.avail_in == 0) action = LZMA_FINISH;
      lzma_ret result = lzma_code(&stream_, action);
      if (result == LZMA_STREAM_END) {
        finished_ = true;
        break;
      }
      if (result != LZMA_OK) {
        return Status::Corruption(result == LZMA_BUF_ERROR ? "truncated xz stream"
                                                           : "xz error " + std::to_string(result));
      }
    }
    return capacity - stream_.avail_out;
  }
  uint64_t consumed() const override { return input_->consumed(); }

 private:
  std::unique_ptr<RawInput> input_;
  lzma_stream stream_ = LZMA_STREAM_INIT;
  std::vector<uint8_t> input_buffer_;
  bool ok_ = false;
  bool file_eof_ = false;
  bool finished_ = false;
};

// A format neardup cannot read, recognised by its first bytes or its name (without a compression
// suffix): its name, or null.
const char* UnsupportedFormat(std::string_view head, std::string_view path) {
  auto starts = [&](std::string_view magic) { return head.substr(0, magic.size()) == magic; };
  if (starts("PAR1") && head.size() > 4 && static_cast<unsigned char>(head[4]) < 0x20) {
    return "Parquet";
  }
  if (starts(std::string_view("ARROW1\0\0", 8))) return "Arrow IPC";
  if (starts("Obj\x01")) return "Avro";
  if (starts("PK\x03\x04")) return "ZIP (also .xlsx, .docx, .ods)";
  if (starts("BZh") && head.size() >= 10 && head.substr(4, 6) == "1AY&SY") return "bzip2";
  if (starts("\x04\x22\x4d\x18")) return "LZ4";
  if (starts("7z\xbc\xaf\x27\x1c")) return "7-Zip";
  static const std::pair<const char*, const char*> kByName[] = {
      {".parquet", "Parquet"},   {".pq", "Parquet"},      {".arrow", "Arrow IPC"},
      {".feather", "Arrow IPC"}, {".orc", "ORC"},         {".avro", "Avro"},
      {".xlsx", "Excel"},        {".xls", "Excel"},       {".ods", "OpenDocument spreadsheet"},
      {".zip", "ZIP"},           {".bz2", "bzip2"},       {".lz4", "LZ4"},
      {".7z", "7-Zip"},          {".tar", "tar archive"}, {".tgz", "tar archive"},
  };
  const std::string_view base = StripCompression(path);
  for (const auto& [suffix, name] : kByName) {
    if (EndsWith(base, suffix)) return name;
  }
  return nullptr;
}

Status UnsupportedFormatError(const std::string& path, const char* format) {
  return Status::Unsupported(
      path + ": unsupported format (" + format +
      "); neardup reads JSONL (.jsonl, .ndjson, .json), CSV (.csv), TSV (.tsv) and plain text, "
      "each optionally gzip, zstd or xz compressed" +
      (std::string_view(format) == "Parquet"
           ? ". There is no Parquet library in Debian 12: convert it to JSONL, or read it with "
             "neardup.dask (Dask reads Parquet when pyarrow is installed)"
           : std::string(": convert it first")));
}

// Whether `path` is a stream (pipe, socket, terminal, character device) rather than a file:
// read once, front to back.
bool IsStreamPath(const std::string& path) {
  if (path == "-") return true;
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode) && !S_ISDIR(info.st_mode);
}

constexpr size_t kReadChunk = size_t{1} << 16;

}  // namespace

// The input formats, chosen by name (see the header).
enum class Format { kJsonl, kCsv, kTsv, kText, kTextLines };

bool IsDelimitedFormat(Format format) { return format == Format::kCsv || format == Format::kTsv; }

// State that outlives one file: the JSON parser, the CSV parser, the spooled copies of streams.
struct ReaderState {
  simdjson::dom::parser parser;
  std::map<std::string, FILE*> spooled;  // stream input -> its copy in an anonymous temporary file
  csv_parser csv{};
  bool csv_initialised = false;
  ~ReaderState() {
    for (auto& [path, file] : spooled) std::fclose(file);
    if (csv_initialised) csv_free(&csv);
  }
};

// One CSV/TSV record as libcsv delivered it, with the line it starts on.
struct CsvRow {
  std::vector<std::string> fields;
  uint64_t line = 0;
};

struct DocumentReader::Impl {
  Result<bool> Next(Document* doc);
  Status Rewind();
  Status OpenFile(size_t index);
  Status Skip(const std::string& reason, const std::string& message);
  Status Fallback(const std::string& reason, const std::string& message);
  Result<bool> ReadLine(std::string* line, bool* too_long);
  // The next CSV/TSV document of the current file (false at its end).
  Result<bool> NextDelimited(const std::string& path, Document* doc);
  Status StartCsv();
  static void CsvField(void* data, size_t size, void* self);
  static void CsvRowEnd(int terminator, void* self);
  Status ReadCsvHeader(const std::string& path, const CsvRow& header);
  // Open's steps: files_ = `files` (format checked, sizes counted, streams noted); the streams
  // copied to temporary files (options_.spool_stdin).
  Status SetFiles(std::vector<std::string> files);
  Status SpoolStreams();

  DocumentReaderOptions options_;
  std::vector<std::string> files_;
  std::set<std::string> streams_;  // files_ that are streams (read once unless spooled)
  std::map<std::string, uint64_t> skipped_;
  std::map<std::string, uint64_t> fallbacks_;
  uint64_t bytes_read_ = 0;
  uint64_t total_input_bytes_ = 0;
  uint64_t finished_input_bytes_ = 0;
  bool first_pass_ = true;

  size_t current_file_ = 0;
  bool file_open_ = false;
  Format current_format_ = Format::kJsonl;
  uint64_t current_line_ = 0;
  std::unique_ptr<ByteSource> source_;
  std::string buffer_;
  size_t buffer_pos_ = 0;
  bool source_eof_ = false;
  bool at_file_start_ = false;  // a byte-order mark may follow
  std::string line_;
  std::unique_ptr<ReaderState> state_;

  // CSV/TSV: rows parsed but not yet returned, the header's columns and the chosen ones.
  std::deque<CsvRow> csv_rows_;
  CsvRow csv_row_;              // the row being parsed
  uint64_t csv_row_start_ = 0;  // the line it starts on
  size_t csv_row_bytes_ = 0;    // bytes fed since it started
  bool csv_header_read_ = false;
  bool csv_file_done_ = false;
  std::vector<std::string> csv_columns_;
  int csv_text_ = -1, csv_id_ = -1, csv_score_ = -1, csv_metadata_ = -1, csv_fingerprint_ = -1;
};

DocumentReader::DocumentReader() : impl_(std::make_unique<Impl>()) {}
DocumentReader::~DocumentReader() = default;

Result<bool> DocumentReader::Next(Document* doc) { return impl_->Next(doc); }
Status DocumentReader::Rewind() { return impl_->Rewind(); }
const std::vector<std::string>& DocumentReader::files() const { return impl_->files_; }
const std::map<std::string, uint64_t>& DocumentReader::skipped() const { return impl_->skipped_; }
const std::map<std::string, uint64_t>& DocumentReader::fallbacks() const {
  return impl_->fallbacks_;
}
uint64_t DocumentReader::bytes_read() const { return impl_->bytes_read_; }
uint64_t DocumentReader::total_input_bytes() const { return impl_->total_input_bytes_; }

bool IsStreamInput(const std::string& path) { return IsStreamPath(path); }

namespace {

using LeftOut = std::vector<std::pair<const char*, std::string>>;  // (skip reason, message)

// The files that `inputs` name, directories listed (recursively, following symbolic links to
// directories), in input order; "-" sets *has_stdin instead. Entries of directories that are not
// read go to *left_out, reported once the inputs are known.
Status ListInputs(const std::vector<std::string>& inputs, const DocumentReaderOptions& options,
                  std::vector<std::string>* files, bool* has_stdin, LeftOut* left_out) {
  namespace fs = std::filesystem;
  for (const std::string& input : inputs) {
    if (input == "-") {
      *has_stdin = true;
      continue;
    }
    if (options.memory_inputs.count(input)) {
      files->push_back(input);
      continue;
    }
    std::error_code error;
    fs::file_status status = fs::status(input, error);
    if (error || !fs::exists(status)) {
      std::error_code link_error;
      if (fs::is_symlink(fs::symlink_status(input, link_error))) {
        return Status::NotFound(input + ": broken symbolic link (its target does not exist)");
      }
      return Status::NotFound(input + ": no such file or directory");
    }
    if (!fs::is_directory(status)) {
      files->push_back(input);
      continue;
    }
    NoteInput(input, /*directory=*/true);
    fs::recursive_directory_iterator it(input, fs::directory_options::follow_directory_symlink,
                                        error);
    if (error) return Status::IoError(input + ": cannot list directory: " + error.message());
    for (; it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (error) return Status::IoError(input + ": cannot list directory: " + error.message());
      std::error_code file_error;
      const fs::file_status entry = it->status(file_error);
      if (fs::is_regular_file(entry)) {
        files->push_back(it->path().string());
      } else if (it->is_symlink(file_error) && !fs::exists(entry)) {
        left_out->emplace_back(kSkipBrokenSymlink, it->path().string() +
                                                       ": broken symbolic link (its target does "
                                                       "not exist)");
      } else if (!fs::is_directory(entry)) {
        // A pipe, socket or device inside a directory is not read: it could block for ever.
        left_out->emplace_back(kSkipNotRegular, it->path().string() +
                                                    ": not a regular file (a pipe, socket or "
                                                    "device inside a directory is not read)");
      }
    }
  }
  return Status::Ok();
}

// `files` sorted, each file once: the same file named twice (a.jsonl twice, ./a.jsonl and
// a.jsonl, or a file and its directory) is read once.
std::vector<std::string> DistinctFiles(std::vector<std::string> files,
                                       const DocumentReaderOptions& options) {
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<std::string> unique;
  for (std::string& file : files) {
    struct stat info;
    if (!options.memory_inputs.count(file) && ::stat(file.c_str(), &info) == 0 &&
        !seen.insert({info.st_dev, info.st_ino}).second) {
      continue;
    }
    unique.push_back(std::move(file));
  }
  return unique;
}

// Copies the stream input `stream`, open as `source`, to `spool`.
Status CopyStream(const std::string& stream, FILE* source, FILE* spool) {
  std::vector<char> chunk(kReadChunk);
  size_t n;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), source)) > 0) {
    if (std::fwrite(chunk.data(), 1, n, spool) != n) {
      return Status::IoError("cannot spool " + stream + " to a temporary file: " + ErrnoText());
    }
  }
  if (std::ferror(source)) return Status::IoError(stream + ": cannot read: " + ErrnoText());
  return Status::Ok();
}

}  // namespace

Status DocumentReader::Impl::SetFiles(std::vector<std::string> files) {
  namespace fs = std::filesystem;
  for (const std::string& file : files) {
    if (options_.memory_inputs.count(file)) {
      total_input_bytes_ += options_.memory_inputs.at(file)->size();
      continue;
    }
    if (IsStreamPath(file)) {
      streams_.insert(file);
      continue;
    }
    NoteInput(file);
    // Formats that cannot be read are refused before anything is read, by name or first bytes.
    const char* format = nullptr;
    if (FILE* probe = std::fopen(file.c_str(), "rb")) {
      char head[16];
      const size_t n = std::fread(head, 1, sizeof(head), probe);
      std::fclose(probe);
      format = UnsupportedFormat(std::string_view(head, n), file);
    } else {
      format = UnsupportedFormat({}, file);
    }
    if (format != nullptr && !options_.text_lines) return UnsupportedFormatError(file, format);
    std::error_code error;
    uint64_t size = fs::file_size(file, error);
    if (!error) total_input_bytes_ += size;
  }
  files_ = std::move(files);
  return Status::Ok();
}

// Streams are copied to anonymous temporary files so that Rewind() can read them again.
Status DocumentReader::Impl::SpoolStreams() {
  for (const std::string& stream : streams_) {
    FILE* source = stream == "-" ? stdin : std::fopen(stream.c_str(), "rb");
    if (!source) return Status::IoError(stream + ": cannot open: " + ErrnoText());
    FILE* spool = std::tmpfile();
    if (!spool) {
      if (source != stdin) std::fclose(source);
      return Status::IoError("cannot create a temporary file to spool " +
                             (stream == "-" ? std::string("standard input") : stream) + ": " +
                             ErrnoText());
    }
    state_->spooled[stream] = spool;  // closed with state_, copied or not
    const Status copied = CopyStream(stream, source, spool);
    if (source != stdin) std::fclose(source);
    NEARDUP_RETURN_IF_ERROR(copied);
    std::fflush(spool);
  }
  return Status::Ok();
}

Result<std::unique_ptr<DocumentReader>> DocumentReader::Open(const std::vector<std::string>& inputs,
                                                             DocumentReaderOptions options) {
  if (inputs.empty()) return Status::InvalidArgument("no input given");
  std::unique_ptr<DocumentReader> reader(new DocumentReader());
  Impl& impl = *reader->impl_;
  impl.options_ = std::move(options);
  impl.state_ = std::make_unique<ReaderState>();
  LeftOut left_out;
  bool has_stdin = false;
  std::vector<std::string> files;
  NEARDUP_RETURN_IF_ERROR(ListInputs(inputs, impl.options_, &files, &has_stdin, &left_out));
  files = DistinctFiles(std::move(files), impl.options_);
  if (has_stdin) files.insert(files.begin(), "-");
  NEARDUP_RETURN_IF_ERROR(impl.SetFiles(std::move(files)));
  for (const auto& [reason, message] : left_out)
    NEARDUP_RETURN_IF_ERROR(impl.Skip(reason, message));
  if (impl.options_.spool_stdin) NEARDUP_RETURN_IF_ERROR(impl.SpoolStreams());
  return reader;
}

uint64_t DocumentReader::skipped_total() const {
  uint64_t total = 0;
  for (const auto& [reason, count] : impl_->skipped_) total += count;
  return total;
}

uint64_t DocumentReader::input_bytes_consumed() const {
  return impl_->finished_input_bytes_ + (impl_->source_ ? impl_->source_->consumed() : 0);
}

Status DocumentReader::Impl::Rewind() {
  for (const std::string& stream : streams_) {
    if (!state_->spooled.count(stream)) {
      return Status::Unsupported(
          (stream == "-" ? std::string("standard input") : stream + " (a pipe or other stream)") +
          " cannot be read twice (it was not spooled)");
    }
  }
  source_.reset();
  file_open_ = false;
  current_file_ = 0;
  first_pass_ = false;
  finished_input_bytes_ = 0;
  return Status::Ok();
}

Status DocumentReader::Impl::OpenFile(size_t index) {
  const std::string& path = files_[index];
  buffer_.clear();
  buffer_pos_ = 0;
  source_eof_ = false;
  current_line_ = 0;
  at_file_start_ = true;
  csv_rows_.clear();
  csv_row_ = CsvRow();
  csv_row_bytes_ = 0;
  csv_header_read_ = false;
  csv_file_done_ = false;
  const std::string_view base = StripCompression(path);
  if (options_.text_lines) {
    current_format_ = Format::kTextLines;
  } else if (IsJsonlPath(path)) {
    current_format_ = Format::kJsonl;
  } else if (EndsWith(base, ".csv")) {
    current_format_ = Format::kCsv;
  } else if (EndsWith(base, ".tsv")) {
    current_format_ = Format::kTsv;
  } else if (path == "-" || (streams_.count(path) && !EndsWith(base, ".txt"))) {
    // Standard input, and a pipe whose name says nothing (/dev/fd/63 from <(...)): JSONL.
    current_format_ = options_.stdin_is_text ? Format::kText : Format::kJsonl;
  } else {
    current_format_ = Format::kText;
  }
  if (auto memory = options_.memory_inputs.find(path); memory != options_.memory_inputs.end()) {
    source_ = std::make_unique<MemorySource>(memory->second);
  } else {
    std::unique_ptr<RawInput> raw;
    if (auto spooled = state_->spooled.find(path); spooled != state_->spooled.end()) {
      std::rewind(spooled->second);
      raw = std::make_unique<RawInput>(spooled->second, false);
    } else if (path == "-") {
      raw = std::make_unique<RawInput>(stdin, false);
    } else {
      FILE* file = std::fopen(path.c_str(), "rb");
      if (!file) return Status::IoError(path + ": cannot open: " + ErrnoText());
      raw = std::make_unique<RawInput>(file, true);
    }
    std::string head;
    Status peeked = raw->Peek(16, &head);
    if (!peeked.ok()) return peeked.WithContext(path);
    if (!options_.text_lines) {
      if (const char* format = UnsupportedFormat(head, path == "-" ? "" : path)) {
        return UnsupportedFormatError(path == "-" ? "standard input" : path, format);
      }
    }
    const auto* magic = reinterpret_cast<const unsigned char*>(head.data());
    switch (DetectCompression(magic, head.size())) {
      case Compression::kGzip:
        source_ = std::make_unique<GzipSource>(std::move(raw));
        break;
      case Compression::kZstd:
        source_ = std::make_unique<ZstdSource>(std::move(raw));
        break;
      case Compression::kXz:
        source_ = std::make_unique<XzSource>(std::move(raw));
        break;
      case Compression::kNone:
        source_ = std::make_unique<PlainSource>(std::move(raw));
        break;
    }
  }
  if (IsDelimitedFormat(current_format_)) NEARDUP_RETURN_IF_ERROR(StartCsv());
  file_open_ = true;
  return Status::Ok();
}

Status DocumentReader::Impl::Skip(const std::string& reason, const std::string& message) {
  if (options_.strict) return Status::InvalidArgument(message);
  if (first_pass_) {
    ++skipped_[reason];
    if (options_.on_warning) options_.on_warning(message + " (skipped)");
  }
  return Status::Ok();
}

Status DocumentReader::Impl::Fallback(const std::string& reason, const std::string& message) {
  if (options_.strict) return Status::InvalidArgument(message);
  if (first_pass_) {
    ++fallbacks_[reason];
    if (options_.on_warning) options_.on_warning(message);
  }
  return Status::Ok();
}

// Reads one line (without its '\n' or "\r\n") into *line. Returns false at end of file.
// Lines longer than max_document_bytes are consumed but not stored; *too_long is set.
Result<bool> DocumentReader::Impl::ReadLine(std::string* line, bool* too_long) {
  line->clear();
  *too_long = false;
  bool any = false;
  for (;;) {
    if (buffer_pos_ == buffer_.size()) {
      if (source_eof_) break;
      buffer_.resize(kReadChunk);
      auto n = source_->Read(buffer_.data(), buffer_.size());
      if (!n.ok()) return n.status();
      buffer_.resize(*n);
      buffer_pos_ = 0;
      bytes_read_ += *n;
      if (*n == 0) {
        source_eof_ = true;
        break;
      }
      if (at_file_start_) {
        at_file_start_ = false;
        if (std::string_view(buffer_).substr(0, 3) == kByteOrderMark) buffer_pos_ = 3;
        if (buffer_pos_ == buffer_.size()) continue;
      }
    }
    any = true;
    const char* start = buffer_.data() + buffer_pos_;
    size_t available = buffer_.size() - buffer_pos_;
    const void* newline = std::memchr(start, '\n', available);
    size_t take =
        newline ? static_cast<size_t>(static_cast<const char*>(newline) - start) : available;
    if (!*too_long) {
      if (line->size() + take > options_.max_document_bytes) {
        *too_long = true;
        line->clear();
      } else {
        line->append(start, take);
      }
    }
    buffer_pos_ += take;
    if (newline) {
      ++buffer_pos_;
      if (!line->empty() && line->back() == '\r') line->pop_back();
      return true;
    }
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return any;
}

namespace {

// Reads the rest of `source` into *text (a byte-order mark removed). Returns true if the document
// is larger than `max_bytes` (then *text is left empty).
template <typename Source>
Result<bool> ReadWholeDocument(Source* source, size_t max_bytes, std::string* text,
                               uint64_t* bytes_read) {
  bool too_long = false;
  std::vector<char> chunk(kReadChunk);
  for (;;) {
    auto n = source->Read(chunk.data(), chunk.size());
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    *bytes_read += *n;
    if (!too_long && text->size() + *n > max_bytes) {
      too_long = true;
      text->clear();
      text->shrink_to_fit();
    }
    if (!too_long) text->append(chunk.data(), *n);
  }
  if (std::string_view(*text).substr(0, 3) == kByteOrderMark) text->erase(0, 3);
  return too_long;
}

// Why a JSONL record is skipped, or what was assumed for it (a fallback).
struct RecordProblem {
  const char* reason;
  std::string message;
};

// Why a whole-file document (read by ReadWholeDocument) is skipped, if it is.
std::optional<RecordProblem> CheckWholeDocument(const std::string& text, bool too_long,
                                                const DocumentReaderOptions& options,
                                                const std::string& path) {
  if (too_long) {
    return RecordProblem{kSkipTooLarge, path + ": document larger than " +
                                            std::to_string(options.max_document_bytes) + " bytes"};
  }
  if (!options.allow_invalid_utf8_text && !simdjson::validate_utf8(text.data(), text.size())) {
    return RecordProblem{kSkipInvalidUtf8, path + ": " + InvalidUtf8Message(text)};
  }
  if (IsBlank(text)) return RecordProblem{kSkipEmptyText, path + ": empty document"};
  return std::nullopt;
}

// The fingerprint and text fields; a problem if the record must be skipped.
std::optional<RecordProblem> ReadTextFields(simdjson::dom::object object,
                                            const DocumentReaderOptions& options,
                                            const std::string& where, Document* doc) {
  doc->fingerprint.clear();
  if (!options.fingerprint_field.empty()) {
    simdjson::dom::element fingerprint_value;
    std::string_view fingerprint_text;
    if (FindField(object, options.fingerprint_field, &fingerprint_value) == simdjson::SUCCESS &&
        !fingerprint_value.is_null()) {
      if (fingerprint_value.get_string().get(fingerprint_text)) {
        return RecordProblem{kSkipInvalidJson, where + ": field \"" + options.fingerprint_field +
                                                   "\" is not a string"};
      }
      doc->fingerprint.assign(fingerprint_text);
    }
  }
  simdjson::dom::element text_value;
  std::string_view text;
  if (FindField(object, options.text_field, &text_value) != simdjson::SUCCESS ||
      text_value.is_null()) {
    if (doc->fingerprint.empty()) {
      return RecordProblem{kSkipMissingText,
                           where + ": missing field \"" + options.text_field + "\""};
    }
  } else if (text_value.get_string().get(text)) {
    return RecordProblem{kSkipNonStringText,
                         where + ": field \"" + options.text_field + "\" is not a string"};
  } else if (IsBlank(text) && doc->fingerprint.empty()) {
    return RecordProblem{kSkipEmptyText, where + ": empty text"};
  }
  doc->text.assign(text);
  return std::nullopt;
}

// The id (the location if there is none: a fallback).
std::optional<RecordProblem> ReadId(simdjson::dom::object object,
                                    const DocumentReaderOptions& options, const std::string& where,
                                    Document* doc) {
  doc->id.clear();
  simdjson::dom::element id_value;
  if (FindField(object, options.id_field, &id_value) == simdjson::SUCCESS) {
    std::string_view id_text;
    if (!id_value.get_string().get(id_text)) {
      doc->id.assign(id_text);
    } else if (id_value.is_number()) {
      doc->id = simdjson::minify(id_value);
    }
  }
  if (!doc->id.empty()) return std::nullopt;
  doc->id = where;
  return RecordProblem{kFallbackMissingId, where + ": no id in field \"" + options.id_field +
                                               "\" (missing, null or empty; using the location)"};
}

// The score, if a score field is named (missing or non-numeric: a fallback, no score).
std::optional<RecordProblem> ReadScore(simdjson::dom::object object,
                                       const DocumentReaderOptions& options,
                                       const std::string& where, Document* doc) {
  doc->score.reset();
  if (options.score_field.empty()) return std::nullopt;
  simdjson::dom::element score_value;
  if (FindField(object, options.score_field, &score_value) != simdjson::SUCCESS ||
      score_value.is_null()) {
    return RecordProblem{kFallbackMissingScore,
                         where + ": no score field \"" + options.score_field +
                             "\" (ranked below every document that has one)"};
  }
  double score = 0;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  if (!score_value.get_double().get(score)) {
    doc->score = score;
  } else if (!score_value.get_int64().get(integer)) {
    doc->score = static_cast<double>(integer);
  } else if (!score_value.get_uint64().get(unsigned_integer)) {
    doc->score = static_cast<double>(unsigned_integer);
  } else {
    return RecordProblem{kFallbackNonNumericScore,
                         where + ": score field \"" + options.score_field +
                             "\" is not a number (ranked below every document that has one)"};
  }
  return std::nullopt;
}

// The metadata: any JSON value, kept as its compact JSON text.
void ReadMetadata(simdjson::dom::object object, const DocumentReaderOptions& options,
                  Document* doc) {
  doc->metadata.clear();
  if (options.metadata_field.empty()) return;
  simdjson::dom::element metadata_value;
  if (FindField(object, options.metadata_field, &metadata_value) == simdjson::SUCCESS &&
      !metadata_value.is_null()) {
    doc->metadata = simdjson::minify(metadata_value);
  }
}

// Parses the JSONL record in *line (padded in place for simdjson) into *doc. Returns the problem
// if the record is skipped; problems that only fall back (the record is kept) go to *fallbacks.
std::optional<RecordProblem> ParseRecord(simdjson::dom::parser& parser, std::string* line,
                                         const DocumentReaderOptions& options,
                                         const std::string& where, Document* doc,
                                         std::vector<RecordProblem>* fallbacks) {
  line->reserve(line->size() + simdjson::SIMDJSON_PADDING);
  simdjson::dom::element root;
  auto parse_error = parser.parse(line->data(), line->size(), false).get(root);
  if (parse_error) {
    return RecordProblem{kSkipInvalidJson,
                         where + ": invalid JSON (" + simdjson::error_message(parse_error) + ")"};
  }
  simdjson::dom::object object;
  if (root.get_object().get(object)) {
    return RecordProblem{kSkipInvalidJson, where + ": invalid JSON (not an object)"};
  }
  if (std::optional<RecordProblem> skip = ReadTextFields(object, options, where, doc)) return skip;
  if (std::optional<RecordProblem> fallback = ReadId(object, options, where, doc)) {
    fallbacks->push_back(std::move(*fallback));
  }
  if (std::optional<RecordProblem> fallback = ReadScore(object, options, where, doc)) {
    fallbacks->push_back(std::move(*fallback));
  }
  ReadMetadata(object, options, doc);
  doc->location = where;
  doc->from_jsonl = true;
  if (options.keep_raw_line) {
    doc->raw_line = *line;
  } else {
    doc->raw_line.clear();
  }
  return std::nullopt;
}

}  // namespace

void DocumentReader::Impl::CsvField(void* data, size_t size, void* self) {
  auto* impl = static_cast<Impl*>(self);
  if (size == 0 || data == nullptr) {
    impl->csv_row_.fields.emplace_back();
  } else {
    impl->csv_row_.fields.emplace_back(static_cast<const char*>(data), size);
  }
}

void DocumentReader::Impl::CsvRowEnd(int /*terminator*/, void* self) {
  auto* impl = static_cast<Impl*>(self);
  impl->csv_row_.line = impl->csv_row_start_;
  impl->csv_rows_.push_back(std::move(impl->csv_row_));
  impl->csv_row_ = CsvRow();
}

Status DocumentReader::Impl::StartCsv() {
  if (state_->csv_initialised) csv_free(&state_->csv);
  state_->csv_initialised = false;
  // CSV is read strictly (RFC 4180: a stray quote makes the record malformed); TSV leniently: a
  // quote inside a field is text, as tab-separated files mostly do not quote (a field that
  // starts with a quote is still read as quoted, as pandas writes it).
  const unsigned char strict = current_format_ == Format::kCsv ? CSV_STRICT : 0;
  if (csv_init(&state_->csv, strict | CSV_STRICT_FINI) != 0) {
    return Status::Internal("cannot start the CSV parser");
  }
  state_->csv_initialised = true;
  csv_set_delim(&state_->csv, current_format_ == Format::kTsv ? CSV_TAB : CSV_COMMA);
  // Spaces around fields belong to them (libcsv would trim them by default).
  csv_set_space_func(&state_->csv, [](unsigned char) { return 0; });
  csv_row_ = CsvRow();
  csv_row_bytes_ = 0;
  return Status::Ok();
}

Status DocumentReader::Impl::ReadCsvHeader(const std::string& path, const CsvRow& header) {
  csv_columns_ = header.fields;
  auto find = [&](const std::string& name) -> int {
    if (name.empty()) return -1;
    for (size_t i = 0; i < csv_columns_.size(); ++i) {
      if (csv_columns_[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  csv_text_ = find(options_.text_field);
  csv_id_ = find(options_.id_field);
  csv_score_ = find(options_.score_field);
  csv_metadata_ = find(options_.metadata_field);
  csv_fingerprint_ = find(options_.fingerprint_field);
  if (csv_text_ < 0 && csv_fingerprint_ < 0) {
    std::string columns;
    for (const std::string& column : csv_columns_) {
      columns += (columns.empty() ? "\"" : ", \"") + column + "\"";
    }
    return Status::InvalidArgument(
        path + ":" + std::to_string(header.line) + ": no column \"" + options_.text_field +
        "\" in the header row (columns: " + columns + "); name the text column with --text-field");
  }
  return Status::Ok();
}

namespace {

// The document of one CSV/TSV record; the problem if it is skipped, fallbacks in *fallbacks.
std::optional<RecordProblem> CsvRecord(const CsvRow& row, int text_column, int id_column,
                                       int score_column, int metadata_column,
                                       int fingerprint_column, const DocumentReaderOptions& options,
                                       const std::string& where, Document* doc,
                                       std::vector<RecordProblem>* fallbacks) {
  auto field = [&](int column) -> const std::string* {
    return column >= 0 && static_cast<size_t>(column) < row.fields.size() ? &row.fields[column]
                                                                          : nullptr;
  };
  doc->fingerprint.clear();
  if (const std::string* fingerprint = field(fingerprint_column)) doc->fingerprint = *fingerprint;
  const std::string* text = field(text_column);
  if (text == nullptr) {
    if (doc->fingerprint.empty()) {
      return RecordProblem{kSkipMissingText, where + ": no value in column \"" +
                                                 options.text_field + "\" (the record has " +
                                                 std::to_string(row.fields.size()) + " fields)"};
    }
    doc->text.clear();
  } else {
    if (!options.allow_invalid_utf8_text && !simdjson::validate_utf8(text->data(), text->size())) {
      return RecordProblem{kSkipInvalidUtf8, where + ": " + InvalidUtf8Message(*text) +
                                                 " of column \"" + options.text_field + "\""};
    }
    if (IsBlank(*text) && doc->fingerprint.empty()) {
      return RecordProblem{kSkipEmptyText, where + ": empty text"};
    }
    doc->text = *text;
  }
  doc->id.clear();
  if (const std::string* id = field(id_column); id != nullptr && !id->empty()) {
    if (!simdjson::validate_utf8(id->data(), id->size())) {
      return RecordProblem{kSkipInvalidUtf8, where + ": invalid UTF-8 in the id"};
    }
    doc->id = *id;
  } else {
    doc->id = where;
    fallbacks->push_back({kFallbackMissingId, where + ": no id in column \"" + options.id_field +
                                                  "\" (missing or empty; using the location)"});
  }
  doc->score.reset();
  if (!options.score_field.empty()) {
    const std::string* score = field(score_column);
    char* end = nullptr;
    const double value = score && !score->empty() ? std::strtod(score->c_str(), &end) : 0;
    if (score == nullptr || score->empty()) {
      fallbacks->push_back(
          {kFallbackMissingScore, where + ": no score in column \"" + options.score_field +
                                      "\" (ranked below every document that has one)"});
    } else if (end != score->c_str() + score->size()) {
      fallbacks->push_back({kFallbackNonNumericScore,
                            where + ": score column \"" + options.score_field +
                                "\" is not a number (ranked below every document that has one)"});
    } else {
      doc->score = value;
    }
  }
  doc->metadata.clear();
  if (const std::string* metadata = field(metadata_column); metadata && !metadata->empty()) {
    if (simdjson::validate_utf8(metadata->data(), metadata->size())) {
      JsonWriter(&doc->metadata).String(*metadata);  // a cell is a JSON string
    }
  }
  doc->location = where;
  doc->raw_line.clear();
  doc->from_jsonl = false;
  return std::nullopt;
}

}  // namespace

Result<bool> DocumentReader::Impl::NextDelimited(const std::string& path, Document* doc) {
  for (;;) {
    if (!csv_rows_.empty()) {
      CsvRow row = std::move(csv_rows_.front());
      csv_rows_.pop_front();
      if (!csv_header_read_) {
        NEARDUP_RETURN_IF_ERROR(ReadCsvHeader(path, row));
        csv_header_read_ = true;
        continue;
      }
      const std::string where = path + ":" + std::to_string(row.line);
      std::vector<RecordProblem> fallbacks;
      if (auto skip = CsvRecord(row, csv_text_, csv_id_, csv_score_, csv_metadata_,
                                csv_fingerprint_, options_, where, doc, &fallbacks)) {
        NEARDUP_RETURN_IF_ERROR(Skip(skip->reason, skip->message));
        continue;
      }
      for (const RecordProblem& fallback : fallbacks) {
        NEARDUP_RETURN_IF_ERROR(Fallback(fallback.reason, fallback.message));
      }
      doc->file_index = static_cast<uint32_t>(current_file_);
      doc->line = row.line;
      return true;
    }
    if (csv_file_done_) return false;
    bool too_long = false;
    auto got = ReadLine(&line_, &too_long);
    if (!got.ok()) return got.status().WithContext(path + ":" + std::to_string(current_line_ + 1));
    if (!*got) {
      csv_file_done_ = true;
      if (csv_fini(&state_->csv, CsvField, CsvRowEnd, this) != 0) {
        csv_row_ = CsvRow();
        NEARDUP_RETURN_IF_ERROR(
            Skip(kSkipInvalidCsv, path + ":" + std::to_string(csv_row_start_) +
                                      ": malformed CSV (a quoted field is "
                                      "not closed before the end of the file)"));
      }
      continue;
    }
    ++current_line_;
    if (state_->csv.pstate == 0) {  // between records: one starts on this line
      csv_row_start_ = current_line_;
      csv_row_bytes_ = 0;
    }
    if (too_long || csv_row_bytes_ + line_.size() > options_.max_document_bytes) {
      NEARDUP_RETURN_IF_ERROR(Skip(
          kSkipTooLarge, path + ":" + std::to_string(csv_row_start_) + ": record longer than " +
                             std::to_string(options_.max_document_bytes) + " bytes"));
      NEARDUP_RETURN_IF_ERROR(StartCsv());  // reading goes on at the next line
      continue;
    }
    csv_row_bytes_ += line_.size() + 1;
    line_.push_back('\n');
    if (csv_parse(&state_->csv, line_.data(), line_.size(), CsvField, CsvRowEnd, this) !=
        line_.size()) {
      const int error = csv_error(&state_->csv);
      NEARDUP_RETURN_IF_ERROR(Skip(
          kSkipInvalidCsv,
          path + ":" + std::to_string(csv_row_start_) + ": malformed " +
              (current_format_ == Format::kTsv ? "TSV" : "CSV") + " (" +
              (error == CSV_EPARSE ? std::string("a quote inside an unquoted field, or text after "
                                                 "a closing quote")
                                   : std::string(csv_strerror(error))) +
              ")"));
      NEARDUP_RETURN_IF_ERROR(StartCsv());  // reading goes on at the next line
    }
  }
}

Result<bool> DocumentReader::Impl::Next(Document* doc) {
  for (;;) {
    if (!file_open_) {
      if (current_file_ >= files_.size()) return false;
      Status opened = OpenFile(current_file_);
      if (!opened.ok()) {
        ++current_file_;
        if (opened.code() == StatusCode::kUnsupported) return opened;  // never skipped quietly
        NEARDUP_RETURN_IF_ERROR(Skip(kSkipUnreadable, opened.message()));
        continue;
      }
    }
    const std::string path = files_[current_file_];
    auto close_file = [&] {
      finished_input_bytes_ += source_->consumed();
      source_.reset();
      file_open_ = false;
      ++current_file_;
    };
    if (current_format_ == Format::kText) {
      // The whole file is one document.
      std::string text;
      Result<bool> too_long =
          ReadWholeDocument(source_.get(), options_.max_document_bytes, &text, &bytes_read_);
      close_file();
      if (!too_long.ok()) return too_long.status().WithContext(path);
      if (auto skip = CheckWholeDocument(text, *too_long, options_, path)) {
        NEARDUP_RETURN_IF_ERROR(Skip(skip->reason, skip->message));
        continue;
      }
      SetPlainDocument(doc, std::move(text), path, static_cast<uint32_t>(current_file_ - 1), 0);
      return true;
    }
    if (IsDelimitedFormat(current_format_)) {
      auto got = NextDelimited(path, doc);
      if (!got.ok()) {
        close_file();
        return got.status();
      }
      if (*got) return true;
      close_file();
      continue;
    }

    bool too_long = false;
    auto got = ReadLine(&line_, &too_long);
    if (!got.ok()) {
      Status error = got.status().WithContext(path + ":" + std::to_string(current_line_ + 1));
      close_file();
      return error;
    }
    if (!*got) {
      close_file();
      continue;
    }
    ++current_line_;
    const std::string where = path + ":" + std::to_string(current_line_);
    if (too_long) {
      NEARDUP_RETURN_IF_ERROR(Skip(
          kSkipTooLarge,
          where + ": line longer than " + std::to_string(options_.max_document_bytes) + " bytes"));
      continue;
    }
    if (line_.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    const bool jsonl = current_format_ == Format::kJsonl;
    if (!(options_.allow_invalid_utf8_text && !jsonl) &&
        !simdjson::validate_utf8(line_.data(), line_.size())) {
      NEARDUP_RETURN_IF_ERROR(Skip(kSkipInvalidUtf8, where + ": " + InvalidUtf8Message(line_)));
      continue;
    }
    if (!jsonl) {  // text_lines: the line is the document
      SetPlainDocument(doc, line_, where, static_cast<uint32_t>(current_file_), current_line_);
      return true;
    }
    std::vector<RecordProblem> fallbacks;
    if (auto skip = ParseRecord(state_->parser, &line_, options_, where, doc, &fallbacks)) {
      NEARDUP_RETURN_IF_ERROR(Skip(skip->reason, skip->message));
      continue;
    }
    for (const RecordProblem& fallback : fallbacks) {
      NEARDUP_RETURN_IF_ERROR(Fallback(fallback.reason, fallback.message));
    }
    doc->file_index = static_cast<uint32_t>(current_file_);
    doc->line = current_line_;
    return true;
  }
}

}  // namespace neardup
