// OutputFile implementation: identity checks against the inputs (those given and those the
// InputScope recorded), temporary file, compression by name, atomic rename.
#include "neardup/output_file.h"

#include <fcntl.h>
#include <lzma.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "neardup/document_reader.h"

namespace neardup {

namespace {

namespace fs = std::filesystem;

std::string ErrnoText() { return std::strerror(errno); }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// `path` made absolute, with ".", ".." and the symbolic links of its existing part resolved: two
// names of one place compare equal.
std::string CanonicalPath(const std::string& path) {
  std::error_code error;
  fs::path absolute = fs::absolute(path, error);
  if (error) return path;
  fs::path canonical = fs::weakly_canonical(absolute, error);
  return error ? absolute.lexically_normal().string() : canonical.string();
}

// What the open InputScopes recorded (one record for the process; empty outside a scope).
struct InputRecord {
  std::mutex mu;
  int scopes = 0;
  std::map<std::pair<dev_t, ino_t>, std::string> files;  // identity -> the name it was read by
  std::map<std::string, std::string> directories;        // canonical path -> the name given
  std::map<std::string, std::string> outputs;            // canonical path -> the name written
};

InputRecord& Record() {
  static InputRecord* const record = new InputRecord;  // never destroyed: used until exit
  return *record;
}

// The problem with writing `path` (canonical: `canonical`) that the scope's record shows, if any.
Status CheckAgainstRecord(const std::string& path, const std::string& canonical,
                          const struct stat* info) {
  InputRecord& record = Record();
  std::lock_guard<std::mutex> lock(record.mu);
  if (record.scopes == 0) return Status::Ok();
  for (const auto& [directory, given] : record.directories) {
    if (canonical.size() > directory.size() &&
        canonical.compare(0, directory.size(), directory) == 0 &&
        (directory.back() == '/' || canonical[directory.size()] == '/')) {
      return Status::InvalidArgument(path + ": is inside " + given +
                                     ", a directory this command reads (a later run over it would "
                                     "read the output as input); write it elsewhere");
    }
  }
  if (auto it = record.outputs.find(canonical); it != record.outputs.end()) {
    return Status::InvalidArgument(path + ": already written by this command (as " + it->second +
                                   "); give each output its own name");
  }
  if (info != nullptr) {
    if (auto it = record.files.find({info->st_dev, info->st_ino}); it != record.files.end()) {
      return Status::InvalidArgument(path + ": is an input of this command (" + it->second +
                                     "); refusing to write over it");
    }
  }
  return Status::Ok();
}

void NoteOutput(const std::string& path) {
  InputRecord& record = Record();
  std::lock_guard<std::mutex> lock(record.mu);
  if (record.scopes > 0) record.outputs.emplace(CanonicalPath(path), path);
}

}  // namespace

InputScope::InputScope() {
  InputRecord& record = Record();
  std::lock_guard<std::mutex> lock(record.mu);
  ++record.scopes;
}

InputScope::~InputScope() {
  InputRecord& record = Record();
  std::lock_guard<std::mutex> lock(record.mu);
  if (--record.scopes == 0) {
    record.files.clear();
    record.directories.clear();
    record.outputs.clear();
  }
}

void NoteInput(const std::string& path, bool directory) {
  if (path == "-" || path.empty()) return;
  InputRecord& record = Record();
  {
    std::lock_guard<std::mutex> lock(record.mu);
    if (record.scopes == 0) return;
  }
  struct stat info;
  const bool exists = ::stat(path.c_str(), &info) == 0;
  std::string canonical = directory ? CanonicalPath(path) : std::string();
  std::lock_guard<std::mutex> lock(record.mu);
  if (exists) record.files.emplace(std::make_pair(info.st_dev, info.st_ino), path);
  if (directory) record.directories.emplace(std::move(canonical), path);
}

const char* OutputCompression(std::string_view path) {
  if (EndsWith(path, ".gz")) return "gzip";
  if (EndsWith(path, ".zst")) return "zstd";
  if (EndsWith(path, ".xz")) return "xz";
  return "";
}

Status CheckOutputPath(const std::string& path, const OutputFileOptions& options) {
  if (path == "-") return Status::Ok();
  if (path.empty()) return Status::InvalidArgument("empty output path");
  struct stat info;
  const bool exists = ::stat(path.c_str(), &info) == 0;
  NEARDUP_RETURN_IF_ERROR(CheckAgainstRecord(path, CanonicalPath(path), exists ? &info : nullptr));
  if (!exists) return Status::Ok();  // does not exist yet
  for (const std::string& input : options.inputs) {
    if (input != "-" && IsSameFile(path, input)) {
      return Status::InvalidArgument(path + ": is an input of this command (" + input +
                                     "); refusing to write over it");
    }
  }
  if (S_ISDIR(info.st_mode)) return Status::InvalidArgument(path + ": is a directory");
  if (!options.force) {
    return Status::AlreadyExists(path + ": already exists (OutputFileOptions::force replaces it)");
  }
  return Status::Ok();
}

Status CheckOutputPaths(const std::vector<std::string>& paths, const OutputFileOptions& options) {
  std::map<std::string, std::string> seen;  // canonical path -> the name given
  for (const std::string& path : paths) {
    NEARDUP_RETURN_IF_ERROR(CheckOutputPath(path, options));
    if (path == "-") continue;
    auto [it, inserted] = seen.emplace(CanonicalPath(path), path);
    if (!inserted) {
      return Status::InvalidArgument(path + ": names the same file as the output " + it->second +
                                     "; give each output its own name");
    }
  }
  return Status::Ok();
}

namespace {

// Compresses what is written to it into a FILE: gzip, zstd or xz.
class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual Status Write(std::string_view bytes, FILE* file) = 0;
  virtual Status Finish(FILE* file) = 0;

 protected:
  static Status Put(const void* data, size_t size, FILE* file) {
    if (size > 0 && std::fwrite(data, 1, size, file) != size) {
      return Status::IoError("write failed: " + ErrnoText());
    }
    return Status::Ok();
  }
};

constexpr size_t kCompressedChunk = size_t{1} << 16;

class GzipCompressor : public Compressor {
 public:
  GzipCompressor() {
    ok_ = deflateInit2(&stream_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~GzipCompressor() override { deflateEnd(&stream_); }
  Status Write(std::string_view bytes, FILE* file) override { return Run(bytes, Z_NO_FLUSH, file); }
  Status Finish(FILE* file) override { return Run({}, Z_FINISH, file); }

 private:
  Status Run(std::string_view bytes, int flush, FILE* file) {
    if (!ok_) return Status::Internal("cannot start the gzip compressor");
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    stream_.avail_in = static_cast<uInt>(bytes.size());
    for (;;) {
      unsigned char out[kCompressedChunk];
      stream_.next_out = out;
      stream_.avail_out = sizeof(out);
      const int result = deflate(&stream_, flush);
      if (result == Z_STREAM_ERROR) return Status::Internal("gzip compression failed");
      NEARDUP_RETURN_IF_ERROR(Put(out, sizeof(out) - stream_.avail_out, file));
      if (flush == Z_FINISH ? result == Z_STREAM_END : stream_.avail_out != 0) break;
    }
    return Status::Ok();
  }
  z_stream stream_{};
  bool ok_ = false;
};

class ZstdCompressor : public Compressor {
 public:
  ZstdCompressor() : context_(ZSTD_createCCtx()) {
    ZSTD_CCtx_setParameter(context_, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(context_, ZSTD_c_checksumFlag, 1);
  }
  ~ZstdCompressor() override { ZSTD_freeCCtx(context_); }
  Status Write(std::string_view bytes, FILE* file) override {
    return Run(bytes, ZSTD_e_continue, file);
  }
  Status Finish(FILE* file) override { return Run({}, ZSTD_e_end, file); }

 private:
  Status Run(std::string_view bytes, ZSTD_EndDirective mode, FILE* file) {
    ZSTD_inBuffer input{bytes.data(), bytes.size(), 0};
    for (;;) {
      char out[kCompressedChunk];
      ZSTD_outBuffer output{out, sizeof(out), 0};
      const size_t remaining = ZSTD_compressStream2(context_, &output, &input, mode);
      if (ZSTD_isError(remaining)) {
        return Status::Internal(std::string("zstd compression failed: ") +
                                ZSTD_getErrorName(remaining));
      }
      NEARDUP_RETURN_IF_ERROR(Put(out, output.pos, file));
      if (mode == ZSTD_e_end ? remaining == 0 : input.pos == input.size) break;
    }
    return Status::Ok();
  }
  ZSTD_CCtx* context_;
};

class XzCompressor : public Compressor {
 public:
  XzCompressor() { ok_ = lzma_easy_encoder(&stream_, 6, LZMA_CHECK_CRC64) == LZMA_OK; }
  ~XzCompressor() override { lzma_end(&stream_); }
  Status Write(std::string_view bytes, FILE* file) override { return Run(bytes, LZMA_RUN, file); }
  Status Finish(FILE* file) override { return Run({}, LZMA_FINISH, file); }

 private:
  Status Run(std::string_view bytes, lzma_action action, FILE* file) {
    if (!ok_) return Status::Internal("cannot start the xz compressor");
    stream_.next_in = reinterpret_cast<const uint8_t*>(bytes.data());
    stream_.avail_in = bytes.size();
    for (;;) {
      uint8_t out[kCompressedChunk];
      stream_.next_out = out;
      stream_.avail_out = sizeof(out);
      const lzma_ret result = lzma_code(&stream_, action);
      if (result != LZMA_OK && result != LZMA_STREAM_END) {
        return Status::Internal("xz compression failed (" + std::to_string(result) + ")");
      }
      NEARDUP_RETURN_IF_ERROR(Put(out, sizeof(out) - stream_.avail_out, file));
      if (action == LZMA_FINISH ? result == LZMA_STREAM_END : stream_.avail_in == 0) break;
    }
    return Status::Ok();
  }
  lzma_stream stream_ = LZMA_STREAM_INIT;
  bool ok_ = false;
};

std::unique_ptr<Compressor> CompressorFor(std::string_view path) {
  const std::string_view kind = OutputCompression(path);
  if (kind == "gzip") return std::make_unique<GzipCompressor>();
  if (kind == "zstd") return std::make_unique<ZstdCompressor>();
  if (kind == "xz") return std::make_unique<XzCompressor>();
  return nullptr;
}

}  // namespace

struct OutputFile::Impl {
  std::string path;
  std::string temporary;
  OutputFileOptions options;
  FILE* file = nullptr;
  std::unique_ptr<Compressor> compressor;  // by the name's extension; null: written as is
  bool failed = false;
  bool committed = false;
};

OutputFile::OutputFile() : impl_(std::make_unique<Impl>()) {}

const std::string& OutputFile::path() const { return impl_->path; }

Result<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path,
                                                       const OutputFileOptions& options) {
  NEARDUP_RETURN_IF_ERROR(CheckOutputPath(path, options));
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->impl_->path = path;
  out->impl_->options = options;
  if (path == "-") {
    out->impl_->file = stdout;
    return out;
  }
  std::filesystem::path target(path);
  std::string name = target.filename().string();
  std::filesystem::path directory = target.parent_path();
  std::string pattern =
      (directory.empty() ? std::filesystem::path(".") : directory) / ("." + name + ".tmp.XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  int fd = ::mkstemp(buffer.data());
  if (fd < 0) return Status::IoError(path + ": cannot create a temporary file: " + ErrnoText());
  ::fchmod(
      fd, 0666 & ~[] {
        mode_t mask = ::umask(0);
        ::umask(mask);
        return mask;
      }());
  out->impl_->temporary = buffer.data();
  out->impl_->file = ::fdopen(fd, "wb");
  if (!out->impl_->file) {
    ::close(fd);
    return Status::IoError(path + ": cannot open: " + ErrnoText());
  }
  out->impl_->compressor = CompressorFor(path);
  return out;
}

OutputFile::~OutputFile() {
  if (impl_->file && impl_->file != stdout) std::fclose(impl_->file);
  if (!impl_->committed && !impl_->temporary.empty()) ::unlink(impl_->temporary.c_str());
}

Status OutputFile::Write(std::string_view bytes) {
  if (impl_->failed) return Status::IoError(impl_->path + ": write failed");
  if (impl_->compressor) {
    Status written = impl_->compressor->Write(bytes, impl_->file);
    if (!written.ok()) impl_->failed = true;
    return written.WithContext(impl_->path);
  }
  if (std::fwrite(bytes.data(), 1, bytes.size(), impl_->file) != bytes.size()) {
    impl_->failed = true;
    return Status::IoError((impl_->path == "-" ? std::string("standard output") : impl_->path) +
                           ": write failed: " + ErrnoText());
  }
  return Status::Ok();
}

Status OutputFile::Commit() {
  const std::string shown = impl_->path == "-" ? std::string("standard output") : impl_->path;
  if (impl_->failed) return Status::IoError(shown + ": write failed");
  if (impl_->file == stdout) {
    if (std::fflush(stdout) != 0) return Status::IoError(shown + ": write failed: " + ErrnoText());
    impl_->committed = true;
    return Status::Ok();
  }
  if (impl_->compressor) {
    Status finished = impl_->compressor->Finish(impl_->file);
    if (!finished.ok()) {
      impl_->failed = true;
      return finished.WithContext(shown);
    }
  }
  bool ok = std::fflush(impl_->file) == 0 && ::fsync(::fileno(impl_->file)) == 0;
  ok = std::fclose(impl_->file) == 0 && ok;
  impl_->file = nullptr;
  if (!ok) return Status::IoError(shown + ": write failed: " + ErrnoText());
  NEARDUP_RETURN_IF_ERROR(CheckOutputPath(impl_->path, impl_->options));
  if (::rename(impl_->temporary.c_str(), impl_->path.c_str()) != 0) {
    return Status::IoError(shown + ": cannot rename the temporary file into place: " + ErrnoText());
  }
  impl_->committed = true;
  NoteOutput(impl_->path);
  return Status::Ok();
}

Status WriteOutputFile(const std::string& path, std::string_view bytes,
                       const OutputFileOptions& options) {
  auto file = OutputFile::Create(path, options);
  if (!file.ok()) return file.status();
  NEARDUP_RETURN_IF_ERROR((*file)->Write(bytes));
  return (*file)->Commit();
}

}  // namespace neardup
