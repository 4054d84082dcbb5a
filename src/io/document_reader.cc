// DocumentReader implementation: input expansion, streaming (de)compression, JSONL parsing.
#include "neardup/document_reader.h"

#include <lzma.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <simdjson.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

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
  PlainSource(FILE* file, bool owned, std::string name)
      : file_(file), owned_(owned), name_(std::move(name)) {}
  ~PlainSource() override {
    if (owned_) std::fclose(file_);
  }
  Result<size_t> Read(char* out, size_t capacity) override {
    size_t n = std::fread(out, 1, capacity, file_);
    if (n == 0 && std::ferror(file_)) return Status::IoError("read failed: " + ErrnoText());
    consumed_ += n;
    return n;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  FILE* file_;
  bool owned_;
  std::string name_;
  uint64_t consumed_ = 0;
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

class GzipSource : public ByteSource {
 public:
  GzipSource(gzFile file, std::string name) : file_(file), name_(std::move(name)) {}
  ~GzipSource() override { gzclose(file_); }
  Result<size_t> Read(char* out, size_t capacity) override {
    int n = gzread(file_, out, static_cast<unsigned>(std::min<size_t>(capacity, 1 << 30)));
    int errnum = Z_OK;
    const char* message = gzerror(file_, &errnum);
    if (n < 0 || (n == 0 && errnum == Z_BUF_ERROR)) {
      // Z_BUF_ERROR at the end: the stream stopped before the gzip trailer (truncated file).
      std::string text = message && *message ? message : "truncated or corrupt data";
      if (text.rfind(name_ + ": ", 0) == 0) text = text.substr(name_.size() + 2);
      return Status::Corruption("gzip error: " + text);
    }
    return static_cast<size_t>(n);
  }
  uint64_t consumed() const override {
    z_off_t offset = gzoffset(file_);
    return offset < 0 ? 0 : static_cast<uint64_t>(offset);
  }

 private:
  gzFile file_;
  std::string name_;
};

class ZstdSource : public ByteSource {
 public:
  ZstdSource(FILE* file, std::string name)
      : file_(file), name_(std::move(name)), context_(ZSTD_createDCtx()) {
    input_buffer_.resize(ZSTD_DStreamInSize());
    input_ = ZSTD_inBuffer{input_buffer_.data(), 0, 0};
  }
  ~ZstdSource() override {
    ZSTD_freeDCtx(context_);
    std::fclose(file_);
  }
  Result<size_t> Read(char* out, size_t capacity) override {
    ZSTD_outBuffer output{out, capacity, 0};
    while (output.pos == 0) {
      if (input_.pos == input_.size) {
        if (file_eof_) {
          if (last_result_ != 0) {
            return Status::Corruption("truncated zstd stream");
          }
          return size_t{0};
        }
        size_t n = std::fread(input_buffer_.data(), 1, input_buffer_.size(), file_);
        if (n == 0 && std::ferror(file_)) {
          return Status::IoError("read failed: " + ErrnoText());
        }
        if (n == 0) {
          file_eof_ = true;
          continue;
        }
        consumed_ += n;
        input_ = ZSTD_inBuffer{input_buffer_.data(), n, 0};
      }
      size_t result = ZSTD_decompressStream(context_, &output, &input_);
      if (ZSTD_isError(result)) {
        return Status::Corruption(std::string("zstd error: ") + ZSTD_getErrorName(result));
      }
      last_result_ = result;
    }
    return output.pos;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  FILE* file_;
  std::string name_;
  ZSTD_DCtx* context_;
  std::vector<char> input_buffer_;
  ZSTD_inBuffer input_;
  bool file_eof_ = false;
  size_t last_result_ = 0;
  uint64_t consumed_ = 0;
};

class XzSource : public ByteSource {
 public:
  XzSource(FILE* file, std::string name) : file_(file), name_(std::move(name)) {
    input_buffer_.resize(size_t{1} << 16);
    ok_ = lzma_stream_decoder(&stream_, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK;
  }
  ~XzSource() override {
    lzma_end(&stream_);
    std::fclose(file_);
  }
  Result<size_t> Read(char* out, size_t capacity) override {
    if (!ok_) return Status::Internal("cannot start the xz decoder");
    if (finished_) return size_t{0};
    stream_.next_out = reinterpret_cast<uint8_t*>(out);
    stream_.avail_out = capacity;
    while (stream_.avail_out == capacity) {
      lzma_action action = LZMA_RUN;
      if (stream_.avail_in == 0 && !file_eof_) {
        size_t n = std::fread(input_buffer_.data(), 1, input_buffer_.size(), file_);
        if (n == 0 && std::ferror(file_)) return Status::IoError("read failed: " + ErrnoText());
        if (n == 0) file_eof_ = true;
        consumed_ += n;
        stream_.next_in = input_buffer_.data();
        stream_.avail_in = n;
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
  uint64_t consumed() const override { return consumed_; }

 private:
  FILE* file_;
  std::string name_;
  lzma_stream stream_ = LZMA_STREAM_INIT;
  std::vector<uint8_t> input_buffer_;
  bool ok_ = false;
  bool file_eof_ = false;
  bool finished_ = false;
  uint64_t consumed_ = 0;
};

constexpr size_t kReadChunk = size_t{1} << 16;

}  // namespace

struct JsonState {
  simdjson::dom::parser parser;
  FILE* spooled_stdin = nullptr;
  ~JsonState() {
    if (spooled_stdin) std::fclose(spooled_stdin);
  }
};

struct DocumentReader::Impl {
  Result<bool> Next(Document* doc);
  Status Rewind();
  Status OpenFile(size_t index);
  Status Skip(const std::string& reason, const std::string& message);
  Status Fallback(const std::string& reason, const std::string& message);
  Result<bool> ReadLine(std::string* line, bool* too_long);

  DocumentReaderOptions options_;
  std::vector<std::string> files_;
  std::map<std::string, uint64_t> skipped_;
  std::map<std::string, uint64_t> fallbacks_;
  uint64_t bytes_read_ = 0;
  uint64_t total_input_bytes_ = 0;
  uint64_t finished_input_bytes_ = 0;
  bool first_pass_ = true;

  size_t current_file_ = 0;
  bool file_open_ = false;
  bool current_is_jsonl_ = false;
  uint64_t current_line_ = 0;
  std::unique_ptr<ByteSource> source_;
  std::string buffer_;
  size_t buffer_pos_ = 0;
  bool source_eof_ = false;
  bool at_file_start_ = false;  // a byte-order mark may follow
  std::string line_;
  std::unique_ptr<JsonState> json_;
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

Result<std::unique_ptr<DocumentReader>> DocumentReader::Open(const std::vector<std::string>& inputs,
                                                             DocumentReaderOptions options) {
  if (inputs.empty()) return Status::InvalidArgument("no input given");
  std::unique_ptr<DocumentReader> reader(new DocumentReader());
  reader->impl_->options_ = std::move(options);
  reader->impl_->json_ = std::make_unique<JsonState>();
  bool has_stdin = false;
  std::vector<std::string> files;
  namespace fs = std::filesystem;
  for (const std::string& input : inputs) {
    if (input == "-") {
      has_stdin = true;
      continue;
    }
    if (reader->impl_->options_.memory_inputs.count(input)) {
      files.push_back(input);
      continue;
    }
    std::error_code error;
    fs::file_status status = fs::status(input, error);
    if (error || !fs::exists(status))
      return Status::NotFound(input + ": no such file or directory");
    if (fs::is_directory(status)) {
      fs::recursive_directory_iterator it(input, fs::directory_options::follow_directory_symlink,
                                          error);
      if (error) return Status::IoError(input + ": cannot list directory: " + error.message());
      for (; it != fs::recursive_directory_iterator(); it.increment(error)) {
        if (error) return Status::IoError(input + ": cannot list directory: " + error.message());
        std::error_code file_error;
        if (it->is_regular_file(file_error)) files.push_back(it->path().string());
      }
    } else {
      files.push_back(input);
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  {
    // The same file named twice (./a.jsonl and a.jsonl, or a file and its directory) is read once.
    std::set<std::pair<dev_t, ino_t>> seen;
    std::vector<std::string> unique;
    for (std::string& file : files) {
      struct stat info;
      if (!reader->impl_->options_.memory_inputs.count(file) && ::stat(file.c_str(), &info) == 0 &&
          !seen.insert({info.st_dev, info.st_ino}).second) {
        continue;
      }
      unique.push_back(std::move(file));
    }
    files = std::move(unique);
  }
  if (has_stdin) files.insert(files.begin(), "-");
  for (const std::string& file : files) {
    if (file == "-") continue;
    if (auto memory = reader->impl_->options_.memory_inputs.find(file);
        memory != reader->impl_->options_.memory_inputs.end()) {
      reader->impl_->total_input_bytes_ += memory->second->size();
      continue;
    }
    std::error_code error;
    uint64_t size = fs::file_size(file, error);
    if (!error) reader->impl_->total_input_bytes_ += size;
  }
  reader->impl_->files_ = std::move(files);
  if (has_stdin && reader->impl_->options_.spool_stdin) {
    FILE* spool = std::tmpfile();
    if (!spool)
      return Status::IoError("cannot create a temporary file to spool stdin: " + ErrnoText());
    reader->impl_->json_->spooled_stdin = spool;
    std::vector<char> chunk(kReadChunk);
    size_t n;
    while ((n = std::fread(chunk.data(), 1, chunk.size(), stdin)) > 0) {
      if (std::fwrite(chunk.data(), 1, n, spool) != n) {
        return Status::IoError("cannot spool stdin to a temporary file: " + ErrnoText());
      }
    }
    std::fflush(spool);
  }
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
  for (const std::string& file : files_) {
    if (file == "-" && !json_->spooled_stdin) {
      return Status::Unsupported("standard input cannot be read twice (it was not spooled)");
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
  if (path == "-") {
    current_is_jsonl_ = !options_.stdin_is_text && !options_.text_lines;
    if (json_->spooled_stdin) {
      std::rewind(json_->spooled_stdin);
      source_ = std::make_unique<PlainSource>(json_->spooled_stdin, false, "-");
    } else {
      source_ = std::make_unique<PlainSource>(stdin, false, "-");
    }
    file_open_ = true;
    return Status::Ok();
  }
  current_is_jsonl_ = IsJsonlPath(path) && !options_.text_lines;
  if (auto memory = options_.memory_inputs.find(path); memory != options_.memory_inputs.end()) {
    source_ = std::make_unique<MemorySource>(memory->second);
    file_open_ = true;
    return Status::Ok();
  }
  FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return Status::IoError(path + ": cannot open: " + ErrnoText());
  unsigned char magic[6];
  size_t magic_size = std::fread(magic, 1, sizeof(magic), file);
  if (std::ferror(file) || std::fseek(file, 0, SEEK_SET) != 0) {
    Status error = Status::IoError(path + ": cannot read: " + ErrnoText());
    std::fclose(file);
    return error;
  }
  switch (DetectCompression(magic, magic_size)) {
    case Compression::kGzip: {
      std::fclose(file);
      gzFile gz = gzopen(path.c_str(), "rb");
      if (!gz) return Status::IoError(path + ": cannot open: " + ErrnoText());
      gzbuffer(gz, 1 << 17);
      source_ = std::make_unique<GzipSource>(gz, path);
      break;
    }
    case Compression::kZstd:
      source_ = std::make_unique<ZstdSource>(file, path);
      break;
    case Compression::kXz:
      source_ = std::make_unique<XzSource>(file, path);
      break;
    case Compression::kNone:
      source_ = std::make_unique<PlainSource>(file, true, path);
      break;
  }
  at_file_start_ = true;
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
    return RecordProblem{kSkipInvalidUtf8, path + ": invalid UTF-8"};
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

Result<bool> DocumentReader::Impl::Next(Document* doc) {
  for (;;) {
    if (!file_open_) {
      if (current_file_ >= files_.size()) return false;
      Status opened = OpenFile(current_file_);
      if (!opened.ok()) {
        ++current_file_;
        NEARDUP_RETURN_IF_ERROR(Skip(kSkipUnreadable, opened.message()));
        continue;
      }
    }
    const std::string& path = files_[current_file_];
    auto close_file = [&] {
      finished_input_bytes_ += source_->consumed();
      source_.reset();
      file_open_ = false;
      ++current_file_;
    };
    if (!current_is_jsonl_ && !options_.text_lines) {
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
    if (!(options_.allow_invalid_utf8_text && !current_is_jsonl_) &&
        !simdjson::validate_utf8(line_.data(), line_.size())) {
      NEARDUP_RETURN_IF_ERROR(Skip(kSkipInvalidUtf8, where + ": invalid UTF-8"));
      continue;
    }
    if (!current_is_jsonl_) {  // text_lines: the line is the document
      SetPlainDocument(doc, line_, where, static_cast<uint32_t>(current_file_), current_line_);
      return true;
    }
    std::vector<RecordProblem> fallbacks;
    if (auto skip = ParseRecord(json_->parser, &line_, options_, where, doc, &fallbacks)) {
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
