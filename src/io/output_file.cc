// OutputFile implementation: identity checks against the inputs, temporary file, atomic rename.
#include "neardup/output_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "neardup/document_reader.h"

namespace neardup {

namespace {

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

Status CheckOutputPath(const std::string& path, const OutputFileOptions& options) {
  if (path == "-") return Status::Ok();
  if (path.empty()) return Status::InvalidArgument("empty output path");
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return Status::Ok();  // does not exist yet
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

struct OutputFile::Impl {
  std::string path;
  std::string temporary;
  OutputFileOptions options;
  FILE* file = nullptr;
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
  return out;
}

OutputFile::~OutputFile() {
  if (impl_->file && impl_->file != stdout) std::fclose(impl_->file);
  if (!impl_->committed && !impl_->temporary.empty()) ::unlink(impl_->temporary.c_str());
}

Status OutputFile::Write(std::string_view bytes) {
  if (impl_->failed) return Status::IoError(impl_->path + ": write failed");
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
  bool ok = std::fflush(impl_->file) == 0 && ::fsync(::fileno(impl_->file)) == 0;
  ok = std::fclose(impl_->file) == 0 && ok;
  impl_->file = nullptr;
  if (!ok) return Status::IoError(shown + ": write failed: " + ErrnoText());
  NEARDUP_RETURN_IF_ERROR(CheckOutputPath(impl_->path, impl_->options));
  if (::rename(impl_->temporary.c_str(), impl_->path.c_str()) != 0) {
    return Status::IoError(shown + ": cannot rename the temporary file into place: " + ErrnoText());
  }
  impl_->committed = true;
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
