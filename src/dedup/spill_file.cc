// SpillFile: anonymous, unlinked temporary files for dedup's intermediate data; see spill_file.h.
#include "dedup/spill_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace neardup {

namespace {

constexpr size_t kBufferBytes = 1 << 18;  // 256 KiB: dedup keeps one per band

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

std::string SpillFile::ResolveDirectory(const std::string& directory) {
  if (!directory.empty()) return directory;
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir && *tmpdir ? std::string(tmpdir) : std::string("/tmp");
}

Result<SpillFile> SpillFile::Create(const std::string& directory) {
  std::string dir = ResolveDirectory(directory);
  int fd = -1;
#ifdef O_TMPFILE
  fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (fd < 0) {
    // No O_TMPFILE (or not on this file system): a named file, unlinked at once.
    std::string path = dir + "/neardup-spill.XXXXXX";
    fd = ::mkstemp(path.data());
    if (fd < 0) {
      return Status::IoError("temporary directory " + dir +
                             ": cannot create a file: " + ErrnoText());
    }
    ::unlink(path.c_str());
  }
  return SpillFile(fd, std::move(dir));
}

SpillFile::SpillFile(SpillFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      directory_(std::move(other.directory_)),
      size_(other.size_),
      buffer_(std::move(other.buffer_)) {}

SpillFile& SpillFile::operator=(SpillFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    directory_ = std::move(other.directory_);
    size_ = other.size_;
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status SpillFile::Append(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  size_ += bytes;
  if (buffer_.size() + bytes > kBufferBytes) NEARDUP_RETURN_IF_ERROR(Flush());
  if (bytes >= kBufferBytes) {
    buffer_.assign(p, p + bytes);
    return Flush();
  }
  buffer_.insert(buffer_.end(), p, p + bytes);
  return Status::Ok();
}

Status SpillFile::Flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::IoError("temporary file in " + directory_ + ": write failed: " + ErrnoText());
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  if (buffer_.capacity() > kBufferBytes) std::vector<char>().swap(buffer_);
  return Status::Ok();
}

Status SpillFile::ReadAt(uint64_t offset, void* data, size_t bytes) const {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::IoError("temporary file in " + directory_ + ": read failed" +
                             (n == 0 ? std::string(": unexpected end") : ": " + ErrnoText()));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace neardup
