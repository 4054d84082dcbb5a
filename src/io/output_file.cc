// OutputFile implementation: identity checks against the inputs, temporary file, atomic rename.
#include "neardup/output_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

Result<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path,
                                                       const OutputFileOptions& options) {
  NEARDUP_RETURN_IF_ERROR(CheckOutputPath(path, options));
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->path_ = path;
  out->options_ = options;
  if (path == "-") {
    out->file_ = stdout;
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
  out->temporary_ = buffer.data();
  out->file_ = ::fdopen(fd, "wb");
  if (!out->file_) {
    ::close(fd);
    return Status::IoError(path + ": cannot open: " + ErrnoText());
  }
  return out;
}

OutputFile::~OutputFile() {
  if (file_ && file_ != stdout) std::fclose(file_);
  if (!committed_ && !temporary_.empty()) ::unlink(temporary_.c_str());
}

Status OutputFile::Write(std::string_view bytes) {
  if (failed_) return Status::IoError(path_ + ": write failed");
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    failed_ = true;
    return Status::IoError((path_ == "-" ? std::string("standard output") : path_) +
                           ": write failed: " + ErrnoText());
  }
  return Status::Ok();
}

Status OutputFile::Commit() {
  const std::string shown = path_ == "-" ? std::string("standard output") : path_;
  if (failed_) return Status::IoError(shown + ": write failed");
  if (file_ == stdout) {
    if (std::fflush(stdout) != 0) return Status::IoError(shown + ": write failed: " + ErrnoText());
    committed_ = true;
    return Status::Ok();
  }
  bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  ok = std::fclose(file_) == 0 && ok;
  file_ = nullptr;
  if (!ok) return Status::IoError(shown + ": write failed: " + ErrnoText());
  NEARDUP_RETURN_IF_ERROR(CheckOutputPath(path_, options_));
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    return Status::IoError(shown + ": cannot rename the temporary file into place: " + ErrnoText());
  }
  committed_ = true;
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
