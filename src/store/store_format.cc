// Checksums, file naming and POSIX file helpers of the store; see store_format.h.
#include "store/store_format.h"

#include "neardup/env.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace neardup::store {

uint64_t Checksum(const void* bytes, size_t size) { return XXH3_64bits(bytes, size); }

std::string SegmentFileName(uint64_t number) {
  char name[48];
  std::snprintf(name, sizeof(name), "seg-%06llu.ndseg", static_cast<unsigned long long>(number));
  return name;
}

std::string WalFileName(uint64_t number) {
  char name[48];
  std::snprintf(name, sizeof(name), "wal-%06llu.ndwal", static_cast<unsigned long long>(number));
  return name;
}

bool ParseFileName(std::string_view name, bool* is_segment, uint64_t* number) {
  std::string_view suffix;
  if (name.starts_with("seg-") && name.ends_with(".ndseg")) {
    *is_segment = true;
    suffix = ".ndseg";
  } else if (name.starts_with("wal-") && name.ends_with(".ndwal")) {
    *is_segment = false;
    suffix = ".ndwal";
  } else {
    return false;
  }
  std::string_view digits = name.substr(4, name.size() - 4 - suffix.size());
  if (digits.empty()) return false;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *number);
  return ec == std::errc() && ptr == digits.data() + digits.size();
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  return Status::IoError(path + ": " + what + ": " + std::strerror(err));
}

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(path + ": no such file");
    return ErrnoStatus("open", path, err);
  }
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("read", path, err);
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path, errno);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open directory", dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus("fsync directory", dir, err);
  return Status::Ok();
}

Status WriteFileAtomically(Env* env, const std::string& dir, const std::string& name,
                           std::string_view contents) {
  const std::string path = JoinPath(dir, name);
  const std::string temp = path + ".tmp";
  {
    Result<std::unique_ptr<WritableFile>> file = env->NewWritableFile(temp);
    if (!file.ok()) return file.status();
    Status status = (*file)->Append(contents);
    if (status.ok()) status = (*file)->Sync();
    if (!status.ok()) return status;
  }
  NEARDUP_RETURN_IF_ERROR(env->Rename(temp, path));
  return env->SyncDir(dir);
}

}  // namespace neardup::store
