// Store health and exclusivity: a write that fails for lack of space leaves the store degraded
// (reported in Health()/Stats()) and writes work again once space is back; two openers of one
// directory are refused with an error naming it; a read-only open (`index stats`) writes nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "neardup/store.h"
#include "simhash_store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

Fingerprint FpOf(int n) { return Fingerprint::From64(uint64_t(n) * 0x9E3779B97F4A7C15ull + 3); }
std::string IdOf(int n) { return "doc-" + std::to_string(n); }

std::string TestDir(const char* name) {
  std::string dir =
      (fs::temp_directory_path() / ("neardup_health_" + std::to_string(::getpid()) + "_" + name))
          .string();
  fs::remove_all(dir);
  return dir;
}

// A full disk, simulated with RLIMIT_FSIZE (writes past the limit fail with EFBIG, as they fail
// with ENOSPC on a full file system), in a child process so the limit touches nothing else.
// Exit codes name the step that went wrong.
int DiskFullChild(const std::string& dir) {
  ::signal(SIGXFSZ, SIG_IGN);
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.memtable_limit = 1000000;    // keep everything in the log
  options.compaction_trigger = 0;
  auto opened = DocumentStore::Open(dir, options);
  if (!opened.ok()) return 10;
  DocumentStore& store = **opened;
  for (int i = 0; i < 10; ++i)
    if (!store.Add({IdOf(i), FpOf(i), "before"}).ok()) return 11;
  if (store.Health().state != StoreState::kOk) return 12;
  // "Disk full": no file may grow past its current size (+ a few bytes, so a record is cut).
  const uint64_t log_bytes = store.Stats().wal_bytes;
  struct rlimit old_limit;
  ::getrlimit(RLIMIT_FSIZE, &old_limit);
  struct rlimit full = old_limit;
  full.rlim_cur = log_bytes + 20;
  if (::setrlimit(RLIMIT_FSIZE, &full) != 0) return 13;
  std::string big_metadata(200, 'x');
  for (int attempt = 0; attempt < 3; ++attempt) {
    Status status = store.Add({IdOf(100), FpOf(100), big_metadata});
    if (status.ok()) return 14;  // the write cannot have fit
  }
  StoreHealth health = store.Health();
  if (health.state != StoreState::kDegraded) return 15;
  if (health.write_errors != 3) return 16;
  if (health.reason.find(".ndwal") == std::string::npos) return 17;  // names the log
  if (store.Stats().health.state != StoreState::kDegraded) return 18;
  if (store.Get(IdOf(100)).ok()) return 19;  // the failed write is not visible
  if (!store.Get(IdOf(3)).ok()) return 20;   // reads still work
  if (!store.Search(FpOf(3), 0).ok()) return 21;
  // Space is freed: the next write repairs the log and succeeds, and the store is ok again.
  if (::setrlimit(RLIMIT_FSIZE, &old_limit) != 0) return 22;
  if (!store.Add({IdOf(101), FpOf(101), big_metadata}).ok()) return 23;
  health = store.Health();
  if (health.state != StoreState::kOk || health.recoveries != 1 || !health.reason.empty())
    return 24;
  if (!store.Close().ok()) return 25;
  // The log holds whole records only: everything acknowledged, nothing that failed.
  auto reopened = DocumentStore::Open(dir, options);
  if (!reopened.ok()) return 26;
  for (int i = 0; i < 10; ++i)
    if (!(*reopened)->Get(IdOf(i)).ok()) return 27;
  if ((*reopened)->Get(IdOf(100)).ok()) return 28;
  if (!(*reopened)->Get(IdOf(101)).ok()) return 29;
  return 0;
}

TEST(StoreHealthTest, FullDiskDegradesThenRecoversWhenSpaceIsFreed) {
  const std::string dir = TestDir("full");
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(DiskFullChild(dir));
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0)
      << "failed at step " << WEXITSTATUS(wstatus) << " of DiskFullChild";
  fs::remove_all(dir);
}

TEST(StoreHealthTest, SecondWriterIsRefusedNamingTheDirectoryAReaderIsNot) {
  const std::string dir = TestDir("lock");
  auto first = DocumentStore::Open(dir, testing_store::SimHashStoreOptions());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE((*first)->Add({"durable", Fingerprint::From64(42), {}}).ok());
  // Another process (flock locks belong to the open file description, so a child really is a
  // second opener).
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto second = DocumentStore::Open(dir, testing_store::SimHashStoreOptions());
    if (second.ok()) ::_exit(1);
    if (second.status().message().find(dir) == std::string::npos) ::_exit(2);
    // A read-only open is not refused: it reads a snapshot beside the writer (issue 22).
    StoreOptions read_only;
    read_only.rule = StoreRule::kSimHash;  // bare fingerprints
    read_only.read_only = true;
    auto reader = DocumentStore::Open(dir, read_only);
    if (!reader.ok()) ::_exit(3);
    if ((*reader)->Get("durable").status().code() != StatusCode::kOk) ::_exit(4);
    if ((*reader)->Add({"x", Fingerprint::From64(1), {}}).ok()) ::_exit(5);  // still read-only
    ::_exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  // In the same process, too.
  auto again = DocumentStore::Open(dir, testing_store::SimHashStoreOptions());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find(dir), std::string::npos) << again.status().ToString();
  ASSERT_TRUE((*first)->Close().ok());
  EXPECT_EQ((*first)->Health().state, StoreState::kClosed);
  fs::remove_all(dir);
}

// Every file's name, size and modification time.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> Snapshot(const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
  for (const auto& entry : fs::directory_iterator(dir))
    out[entry.path().filename().string()] = {entry.file_size(), entry.last_write_time()};
  return out;
}

TEST(StoreHealthTest, ReadOnlyOpenWritesNothing) {
  const std::string dir = TestDir("ro");
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.memtable_limit = 50;
  options.compaction_trigger = 0;
  // A writer that dies without closing: up to two segments (memtables are flushed in the
  // background, so a flush may not have finished at the exit) and the rest in the log.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = DocumentStore::Open(dir, options);
    if (!store.ok()) ::_exit(2);
    for (int i = 0; i < 120; ++i)
      if (!(*store)->Add({IdOf(i), FpOf(i), "m"}).ok()) ::_exit(3);
    ::_exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_EQ(WEXITSTATUS(wstatus), 0);
  const auto before = Snapshot(dir);
  {
    StoreOptions read_only;
    read_only.rule = StoreRule::kSimHash;  // bare fingerprints
    read_only.read_only = true;
    auto store = DocumentStore::Open(dir, read_only);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->Stats().documents, 120u);
    const auto stats = (*store)->Stats();
    EXPECT_EQ(stats.segment_entries + stats.memtable_entries, 120u);
    EXPECT_EQ(stats.segment_entries % 50, 0u);
    EXPECT_GE(stats.memtable_entries, 20u);
    EXPECT_TRUE((*store)->Get(IdOf(119)).ok());
    EXPECT_FALSE((*store)->Add({IdOf(500), FpOf(500), ""}).ok());
    EXPECT_FALSE((*store)->Flush().ok());
    EXPECT_FALSE((*store)->Compact().ok());
    EXPECT_TRUE((*store)->Close().ok());
  }
  EXPECT_EQ(Snapshot(dir), before);
  // `neardup index stats` is such an open.
  const std::string command = std::string(NEARDUP_BINARY) + " index stats " + dir + " > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(Snapshot(dir), before);
  // A read-only open of a directory without a store creates nothing.
  const std::string empty = TestDir("ro_empty");
  StoreOptions read_only;
  read_only.rule = StoreRule::kSimHash;  // bare fingerprints
  read_only.read_only = true;
  EXPECT_FALSE(DocumentStore::Open(empty, read_only).ok());
  EXPECT_FALSE(fs::exists(empty));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace neardup
