// The store's write-ahead log is bounded and never loses a record silently (issue 24): rewrites of
// the same ids and remove/re-add pairs (which never grow the memtable) flush by log size
// (StoreOptions::wal_flush_bytes), so reopening replays a bounded log; a damaged last record is
// dropped with its bytes kept aside as *.corrupt, reported in Stats() (and so in /v1/stats,
// /metrics and a CLI warning); an impossible record length is named as such.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "neardup/store.h"
#include "server_process.h"
#include "simhash_store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

Fingerprint FpOf(int n) { return Fingerprint::From64(uint64_t(n) * 0x9E3779B97F4A7C15ull + 7); }
std::string IdOf(int n) { return "doc-" + std::to_string(n); }

class StoreLogBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_log_bounds_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    options_.compaction_trigger = 0;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `body` on the store in a child that exits without closing it (as if killed), so what it
  // wrote stays in the log.
  template <typename Body>
  void WriteAndDie(Body body) {
    pid_t child = ::fork();
    if (child == 0) {
      auto store = DocumentStore::Open(dir_, options_);
      if (!store.ok()) ::_exit(2);
      ::_exit(body(**store) ? 0 : 3);
    }
    int wstatus = 0;
    ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
    ASSERT_EQ(WEXITSTATUS(wstatus), 0);
  }
  std::string Log() const {
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().extension() == ".ndwal") return entry.path().string();
    }
    return "";
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static void Write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  // Offset of the last record of a log whose records are all `record_size` bytes.
  static size_t LastRecord(const std::string& log) {
    // Walk the records: header 32 bytes, then u64 checksum | u32 length | u32 type | payload.
    size_t pos = 32, last = 32;
    while (pos + 16 <= log.size()) {
      uint32_t length;
      std::memcpy(&length, log.data() + pos + 8, 4);
      last = pos;
      pos += 16 + length;
    }
    return last;
  }

  std::string dir_;
  StoreOptions options_ = testing_store::SimHashStoreOptions();  // bare fingerprints
};

TEST_F(StoreLogBoundsTest, RewritesAndRemoveReaddPairsFlushByLogSize) {
  options_.wal_flush_bytes = 256 << 10;
  options_.memtable_limit = 1 << 20;  // never reached: only the log size can trigger a flush
  options_.sync_mode = SyncMode::kNone;
  const std::string metadata(1000, 'm');
  uint64_t largest_log = 0;
  {
    auto store = DocumentStore::Open(dir_, options_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<std::string> ids;
    for (int i = 0; i < 100; ++i) ids.push_back(IdOf(i));
    for (int round = 0; round < 40; ++round) {
      std::vector<DocumentInput> batch;
      for (int i = 0; i < 100; ++i) batch.push_back({ids[i], FpOf(i), metadata});
      ASSERT_TRUE((*store)->AddBatch(batch).ok());
      largest_log = std::max(largest_log, (*store)->Stats().wal_bytes);
    }
    for (int i = 0; i < 3000; ++i) {
      Status removed = (*store)->Remove(ids[0]);
      ASSERT_TRUE(removed.ok()) << i << ": " << removed.ToString();
      ASSERT_TRUE((*store)->Add({ids[0], FpOf(0), metadata}).ok());
      largest_log = std::max(largest_log, (*store)->Stats().wal_bytes);
    }
    const StoreStats stats = (*store)->Stats();
    std::printf(
        "4 MB of rewrites + 3000 remove/re-add pairs: %llu flushes, largest log %llu bytes "
        "(bound 256 KiB + one batch)\n",
        static_cast<unsigned long long>(stats.flushes),
        static_cast<unsigned long long>(largest_log));
    EXPECT_GT(stats.flushes, 10u);
    EXPECT_LE(stats.memtable_entries, 100u);
    EXPECT_EQ(stats.documents, 100u);
  }
  // One batch of 100 x ~1 KB may cross the bound before the flush that follows it.
  EXPECT_LT(largest_log, (256u << 10) + 120u * 1100u);
}

TEST_F(StoreLogBoundsTest, DamagedLastRecordIsWarnedKeptAsideAndCounted) {
  options_.sync_mode = SyncMode::kEveryWrite;
  WriteAndDie([](DocumentStore& store) {
    return store.Add({"keep", FpOf(1), "a"}).ok() && store.Add({"victim", FpOf(2), "b"}).ok() &&
           store.Remove("victim").ok();  // the acknowledged remove is the last record
  });
  const std::string log_path = Log();
  const std::string log = Read(log_path);
  const size_t last = LastRecord(log);
  std::string damaged = log;
  damaged[damaged.size() - 3] ^= 0x5A;  // inside the remove's id
  Write(log_path, damaged);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const StoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.wal_dropped_bytes, log.size() - last);
  EXPECT_NE(stats.wal_dropped.find("bytes dropped at offset " + std::to_string(last)),
            std::string::npos)
      << stats.wal_dropped;
  EXPECT_NE(stats.wal_dropped.find("fails its checksum"), std::string::npos) << stats.wal_dropped;
  ASSERT_FALSE(stats.wal_dropped_file.empty());
  EXPECT_EQ(Read(stats.wal_dropped_file), damaged.substr(last));
  // The damaged remove is lost (unavoidable), not silently: the document is back.
  EXPECT_TRUE((*store)->Get("victim").ok());
  ASSERT_TRUE((*store)->Close().ok());
  // The file kept aside survives the next opens (never cleaned up as a leftover).
  auto again = DocumentStore::Open(dir_, options_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Stats().wal_dropped_bytes, 0u);
  EXPECT_TRUE(fs::exists(stats.wal_dropped_file));
}

TEST_F(StoreLogBoundsTest, GrownLengthOfTheLastRecordIsReported) {
  for (uint32_t grow : {1u, 100u}) {
    fs::remove_all(dir_);
    WriteAndDie([](DocumentStore& store) {
      return store.Add({"a", FpOf(1), ""}).ok() && store.Remove("a").ok();
    });
    const std::string log_path = Log();
    std::string log = Read(log_path);
    const size_t last = LastRecord(log);
    uint32_t length;
    std::memcpy(&length, log.data() + last + 8, 4);
    length += grow;
    std::memcpy(log.data() + last + 8, &length, 4);
    Write(log_path, log);
    auto store = DocumentStore::Open(dir_, options_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const StoreStats stats = (*store)->Stats();
    EXPECT_EQ(stats.wal_dropped_bytes, log.size() - last) << grow;
    EXPECT_NE(stats.wal_dropped.find("runs past the end of the file"), std::string::npos)
        << stats.wal_dropped;
    EXPECT_TRUE(fs::exists(stats.wal_dropped_file)) << grow;
  }
}

TEST_F(StoreLogBoundsTest, ImpossibleRecordLengthIsNamed) {
  WriteAndDie([](DocumentStore& store) {
    return store.Add({"a", FpOf(1), ""}).ok() && store.Add({"b", FpOf(2), ""}).ok();
  });
  const std::string log_path = Log();
  std::string log = Read(log_path);
  const uint32_t huge = 0xfffffff0u;
  std::memcpy(log.data() + 32 + 8, &huge, 4);  // the first record's length
  Write(log_path, log);
  auto store = DocumentStore::Open(dir_, options_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  const std::string& message = store.status().message();
  EXPECT_NE(message.find("record length of 4294967280 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("length field is damaged"), std::string::npos) << message;
  EXPECT_EQ(message.find("followed by more data"), std::string::npos) << message;
}

// The same through `neardup serve`: a warning on stderr, /v1/stats and /metrics.
TEST_F(StoreLogBoundsTest, ServeWarnsAndReportsTheDroppedTail) {
  WriteAndDie([](DocumentStore& store) {
    return store.Add({"keep", FpOf(1), ""}).ok() && store.Remove("keep").ok();
  });
  const std::string log_path = Log();
  std::string log = Read(log_path);
  log[log.size() - 2] ^= 0x01;
  Write(log_path, log);
  {
    const std::string command = std::string(NEARDUP_BINARY) + " index stats " + dir_ + " 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string output;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
    ::pclose(pipe);
    EXPECT_NE(output.find("neardup: warning: " + log_path + ": "), std::string::npos) << output;
    EXPECT_NE(output.find("bytes dropped at offset"), std::string::npos) << output;
  }
  testing::ServerProcess server(dir_, {"--no-text"});
  auto stats = server.Client()->Get("/v1/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->body.find(R"("wal_dropped_bytes":0)"), std::string::npos) << stats->body;
  EXPECT_NE(stats->body.find("fails its checksum"), std::string::npos) << stats->body;
  auto metrics = server.Client()->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_GT(testing::MetricValue(metrics->body, "neardup_store_wal_dropped_bytes"), 0);
}

}  // namespace
}  // namespace neardup
