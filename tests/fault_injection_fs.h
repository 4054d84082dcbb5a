// FaultInjectionFileSystem: an Env (neardup/env.h) for tests that writes through to the real files
// but remembers what has been made durable (as LevelDB's FaultInjectionTestEnv does), so a test can
// simulate a power cut: PowerCut() drops every byte appended since the file's last Sync (keeping,
// at random, a prefix of it — a torn write), deletes files created since their directory's last
// sync, and undoes renames not followed by a directory sync. After SetActive(false) every write
// fails with IoError, as the machine is "off".
//
// Not modelled: removals are durable at once (a real power cut can bring a removed file back).
#ifndef NEARDUP_TESTS_FAULT_INJECTION_FS_H_
#define NEARDUP_TESTS_FAULT_INJECTION_FS_H_

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "neardup/env.h"

namespace neardup::testing_fs {

class FaultInjectionFileSystem : public Env {
 public:
  struct FileState {
    uint64_t size = 0;           // bytes appended
    uint64_t synced = 0;         // bytes made durable by Sync
    bool unsynced_name = false;  // created since the directory's last sync
  };

  void SetActive(bool active) {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = active;
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_) return Off(path);
    auto file = base()->NewWritableFile(path);
    if (!file.ok()) return file.status();
    files_[path] = FileState{0, 0, true};
    return std::unique_ptr<WritableFile>(new File(this, std::move(*file)));
  }
  Result<std::unique_ptr<WritableFile>> ReopenWritableFile(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_) return Off(path);
    auto file = base()->ReopenWritableFile(path);
    if (!file.ok()) return file.status();
    if (!files_.count(path)) {
      const uint64_t size = std::filesystem::file_size(path);
      files_[path] = FileState{size, size, false};  // it was there before: durable
    }
    return std::unique_ptr<WritableFile>(new File(this, std::move(*file)));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_) return Off(from);
    if (!undo_rename_.count(to)) {
      std::optional<std::string> old;
      if (std::filesystem::exists(to)) old = ReadAll(to);
      undo_rename_[to] = old;
    }
    NEARDUP_RETURN_IF_ERROR(base()->Rename(from, to));
    auto it = files_.find(from);
    if (it != files_.end()) {
      files_[to] = it->second;
      files_.erase(it);
    }
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_) return Off(path);
    files_.erase(path);
    return base()->Remove(path);
  }
  Status SyncDir(const std::string& dir) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_) return Off(dir);
    NEARDUP_RETURN_IF_ERROR(base()->SyncDir(dir));
    for (auto& [path, state] : files_)
      if (InDir(path, dir)) state.unsynced_name = false;
    for (auto it = undo_rename_.begin(); it != undo_rename_.end();)
      it = InDir(it->first, dir) ? undo_rename_.erase(it) : std::next(it);
    return Status::Ok();
  }

  // Simulates the power cut (call with the store stopped). With `torn`, keeps a random prefix of
  // each file's unsynced bytes instead of none. Returns how many unsynced bytes were dropped.
  uint64_t PowerCut(std::mt19937_64* rng, bool torn) {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = false;
    uint64_t dropped = 0;
    for (auto& [path, state] : files_) {
      if (!std::filesystem::exists(path)) continue;
      if (state.unsynced_name) {
        dropped += std::filesystem::file_size(path);
        std::filesystem::remove(path);
        continue;
      }
      const uint64_t size = std::filesystem::file_size(path);
      if (size <= state.synced) continue;
      uint64_t keep = state.synced;
      if (torn) keep += (*rng)() % (size - state.synced + 1);
      dropped += size - keep;
      std::filesystem::resize_file(path, keep);
    }
    for (auto& [path, old] : undo_rename_) {
      if (old) {
        std::ofstream(path, std::ios::binary | std::ios::trunc) << *old;
      } else {
        std::filesystem::remove(path);
      }
    }
    files_.clear();
    undo_rename_.clear();
    return dropped;
  }

 private:
  class File : public WritableFile {
   public:
    File(FaultInjectionFileSystem* fs, std::unique_ptr<WritableFile> base)
        : fs_(fs), base_(std::move(base)) {}
    Status Append(std::string_view data) override {
      std::lock_guard<std::mutex> lock(fs_->mu_);
      if (!fs_->active_) return Off(path());
      Status status = base_->Append(data);
      fs_->files_[path()].size = std::filesystem::file_size(path());
      return status;
    }
    Status Sync() override {
      std::lock_guard<std::mutex> lock(fs_->mu_);
      if (!fs_->active_) return Off(path());
      NEARDUP_RETURN_IF_ERROR(base_->Sync());
      FileState& state = fs_->files_[path()];
      state.synced = state.size;
      return Status::Ok();
    }
    Status Truncate(uint64_t size) override {
      std::lock_guard<std::mutex> lock(fs_->mu_);
      if (!fs_->active_) return Off(path());
      NEARDUP_RETURN_IF_ERROR(base_->Truncate(size));
      FileState& state = fs_->files_[path()];
      state.size = size;
      state.synced = std::min(state.synced, size);
      return Status::Ok();
    }
    const std::string& path() const override { return base_->path(); }

   private:
    FaultInjectionFileSystem* fs_;
    std::unique_ptr<WritableFile> base_;
  };

  static Env* base() { return Env::Default(); }
  static Status Off(const std::string& path) {
    return Status::IoError(path + ": simulated power cut (file system is off)");
  }
  static bool InDir(const std::string& path, const std::string& dir) {
    return std::filesystem::path(path).parent_path() == std::filesystem::path(dir) ||
           std::filesystem::path(path).parent_path() ==
               std::filesystem::path(dir).lexically_normal();
  }
  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::mutex mu_;
  bool active_ = true;
  std::map<std::string, FileState> files_;
  std::map<std::string, std::optional<std::string>> undo_rename_;  // path -> content before
};

}  // namespace neardup::testing_fs

#endif  // NEARDUP_TESTS_FAULT_INJECTION_FS_H_
