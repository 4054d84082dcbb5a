// Env::Default(): the operating system's file operations (POSIX) under a DocumentStore; see
// neardup/env.h.
#include "neardup/env.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "store/store_format.h"

namespace neardup {
namespace {

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWritableFile() override { ::close(fd_); }
  Status Append(std::string_view data) override { return store::WriteAll(fd_, data, path_); }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return store::ErrnoStatus("fdatasync", path_, errno);
    return Status::Ok();
  }
  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
      return store::ErrnoStatus("truncate", path_, errno);
    return Status::Ok();
  }
  const std::string& path() const override { return path_; }

 private:
  int fd_;
  std::string path_;
};

class PosixEnv : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return store::ErrnoStatus("create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path));
  }
  Result<std::unique_ptr<WritableFile>> ReopenWritableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return store::ErrnoStatus("open", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0)
      return store::ErrnoStatus("rename to " + to, from, errno);
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return store::ErrnoStatus("remove", path, errno);
    return Status::Ok();
  }
  Status SyncDir(const std::string& dir) override { return store::SyncDir(dir); }
};

}  // namespace

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();
  return env;
}

}  // namespace neardup
