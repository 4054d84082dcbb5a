// Tests of DocumentStore: add/get/search/remove semantics, persistence across reopen, flush and
// compaction, check-and-add atomicity, concurrency, and search exactness against a brute-force
// oracle over segments + memtable.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "neardup/env.h"
#include "neardup/store.h"
#include "simhash_store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_store_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<DocumentStore> OpenStore(
      StoreOptions options = testing_store::SimHashStoreOptions()) {
    auto store = DocumentStore::Open(dir_, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }
  std::string dir_;
};

Fingerprint Fp(uint64_t v) { return Fingerprint::From64(v); }

TEST_F(StoreTest, AddGetSearchRemove) {
  auto store = OpenStore();
  ASSERT_TRUE(store);
  bool replaced = true;
  ASSERT_TRUE(store->Add({"https://a.example/", Fp(0xFF00), R"({"lang":"en"})"}, &replaced).ok());
  EXPECT_FALSE(replaced);
  ASSERT_TRUE(store->Add({"b", Fp(0xFF03), ""}).ok());
  ASSERT_TRUE(store->Add({"c", Fp(~uint64_t{0}), ""}).ok());

  auto got = store->Get("https://a.example/");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->fingerprint, Fp(0xFF00));
  EXPECT_EQ(got->metadata, R"({"lang":"en"})");
  EXPECT_EQ(store->Get("missing").status().code(), StatusCode::kNotFound);

  auto hits = store->Search(Fp(0xFF01), 3);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 2u);
  EXPECT_EQ((*hits)[0].distance, 1);  // both at distance 1: sorted by id
  EXPECT_EQ((*hits)[0].id, "b");
  EXPECT_EQ((*hits)[1].id, "https://a.example/");

  // Re-adding an id replaces it.
  ASSERT_TRUE(store->Add({"b", Fp(0x1234567812345678), "v2"}, &replaced).ok());
  EXPECT_TRUE(replaced);
  EXPECT_EQ(store->Get("b")->metadata, "v2");
  EXPECT_EQ(store->Search(Fp(0xFF01), 3)->size(), 1u);
  EXPECT_EQ(store->Stats().documents, 3u);

  ASSERT_TRUE(store->Remove("c").ok());
  EXPECT_EQ(store->Remove("c").code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Get("c").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Stats().documents, 2u);
}

TEST_F(StoreTest, RejectsBadInput) {
  auto store = OpenStore();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Add({"", Fp(1), ""}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Add({std::string(5000, 'x'), Fp(1), ""}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Add({"a", Fp(1), std::string(10000, 'm')}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Add({"a", Fingerprint::From128(1, 2), ""}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Search(Fp(1), -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Search(Fp(1), 65).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Stats().documents, 0u);
}

TEST_F(StoreTest, PersistsAcrossReopenWithAndWithoutFlush) {
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.memtable_limit = 100;        // several segments
  options.compaction_trigger = 0;
  {
    auto store = OpenStore(options);
    ASSERT_TRUE(store);
    for (int i = 0; i < 450; ++i) {
      ASSERT_TRUE(store
                      ->Add({"doc" + std::to_string(i), Fp(uint64_t(i) * 0x9E3779B97F4A7C15ull),
                             "m" + std::to_string(i)})
                      .ok());
    }
    ASSERT_TRUE(store->Remove("doc7").ok());
    ASSERT_TRUE(store->Add({"doc8", Fp(42), "replaced"}).ok());
    EXPECT_GE(store->Stats().segments, 4u);
    EXPECT_GT(store->Stats().memtable_entries, 0u);
    // Destroyed without Close: the destructor closes; test the log path separately below.
  }
  {
    auto store = OpenStore(options);
    ASSERT_TRUE(store);
    EXPECT_EQ(store->Stats().documents, 449u);
    EXPECT_EQ(store->Get("doc7").status().code(), StatusCode::kNotFound);
    EXPECT_EQ(store->Get("doc8")->metadata, "replaced");
    EXPECT_EQ(store->Get("doc449")->metadata, "m449");
    // Write to the log only and drop the store without Close by leaking nothing: use a child.
    ASSERT_TRUE(store->Add({"late", Fp(7), "x"}).ok());
    ASSERT_TRUE(store->Compact().ok());
    EXPECT_EQ(store->Stats().segments, 1u);
    EXPECT_EQ(store->Stats().documents, 450u);
    EXPECT_EQ(store->Get("doc7").status().code(), StatusCode::kNotFound);
    EXPECT_EQ(store->Get("doc8")->metadata, "replaced");
  }
  pid_t child = ::fork();
  if (child == 0) {
    // Child: writes, then exits without closing (as if killed), leaving data only in the log.
    auto store = DocumentStore::Open(dir_, options);
    if (!store.ok()) ::_exit(3);
    if (!(*store)->Add({"child", Fp(99), "from child"}).ok()) ::_exit(4);
    if (!(*store)->Remove("doc1").ok()) ::_exit(5);
    ::_exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  ASSERT_EQ(WEXITSTATUS(wstatus), 0);
  auto store = OpenStore(options);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Get("child")->metadata, "from child");
  EXPECT_EQ(store->Get("doc1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Stats().documents, 450u);
}

TEST_F(StoreTest, SecondOpenOfSameDirectoryFails) {
  auto store = OpenStore();
  ASSERT_TRUE(store);
  pid_t child = ::fork();
  if (child == 0) {
    auto second = DocumentStore::Open(dir_, {});
    ::_exit(second.ok() ? 1 : 0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
}

TEST_F(StoreTest, CheckAndAdd) {
  auto store = OpenStore();
  ASSERT_TRUE(store);
  auto first = store->CheckAndAdd({"p1", Fp(0b1111), ""}, 3, false);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->added);
  EXPECT_TRUE(first->duplicates.empty());
  auto second = store->CheckAndAdd({"p2", Fp(0b0111), ""}, 3, false);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->added);
  ASSERT_EQ(second->duplicates.size(), 1u);
  EXPECT_EQ(second->duplicates[0].id, "p1");
  EXPECT_EQ(second->duplicates[0].distance, 1);
  // A kSimHash store verifies no shingles: the similarity is unset, the reason near_duplicate.
  EXPECT_FALSE(second->duplicates[0].similarity.has_value());
  EXPECT_EQ(second->duplicates[0].reason, DuplicateReason::kNearDuplicate);
  EXPECT_EQ(store->Get("p2").status().code(), StatusCode::kNotFound);
  auto third = store->CheckAndAdd({"p3", Fp(0b0111), ""}, 3, true);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->added);
  EXPECT_EQ(third->duplicates.size(), 1u);
  // Re-checking an id against itself does not count as a duplicate.
  auto again = store->CheckAndAdd({"p1", Fp(0b1111), ""}, 0, false);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->added);
  EXPECT_TRUE(again->replaced);
}

// Many threads race to CheckAndAdd near-identical documents: exactly one per cluster may win.
TEST_F(StoreTest, ConcurrentCheckAndAddAdmitsOnePerCluster) {
  auto store = OpenStore();
  ASSERT_TRUE(store);
  constexpr int kClusters = 20;
  constexpr int kThreads = 8;
  std::atomic<int> added{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int c = 0; c < kClusters; ++c) {
        // Cluster c: a base value with bit t flipped, so members are within 2 of each other.
        uint64_t base = (uint64_t(c) + 1) * 0x9E3779B97F4A7C15ull;
        auto r = store->CheckAndAdd(
            {"c" + std::to_string(c) + "-t" + std::to_string(t), Fp(base ^ (1ull << t)), ""}, 3,
            false);
        if (r.ok() && r->added) added.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(added.load(), kClusters);
  EXPECT_EQ(store->Stats().documents, uint64_t{kClusters});
}

// Search over segments + memtable (with replacements and removals) equals a brute-force scan of
// the expected live set, for k within and beyond the tables' max_k, 64 and 128 bits.
void CheckExactness(const std::string& dir, int bits) {
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.bits = bits;
  options.memtable_limit = 300;
  options.compaction_trigger = 3;
  options.sync_mode = SyncMode::kNone;
  auto opened = DocumentStore::Open(dir, options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto& store = *opened;
  std::mt19937_64 rng(bits);
  std::map<std::string, Fingerprint> expected;
  std::vector<Fingerprint> centers;
  for (int i = 0; i < 20; ++i) centers.push_back(Fingerprint{bits == 128 ? rng() : 0, rng(), bits});
  auto near = [&](const Fingerprint& c) {
    Fingerprint fp = c;
    int flips = static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      int b = static_cast<int>(rng() % bits);
      if (b < 64)
        fp.lo ^= 1ull << b;
      else
        fp.hi ^= 1ull << (b - 64);
    }
    return fp;
  };
  for (int i = 0; i < 2000; ++i) {
    std::string id = "id" + std::to_string(rng() % 1500);
    if (rng() % 10 == 0 && expected.count(id)) {
      ASSERT_TRUE(store->Remove(id).ok());
      expected.erase(id);
      continue;
    }
    Fingerprint fp = near(centers[rng() % centers.size()]);
    ASSERT_TRUE(store->Add({id, fp, ""}).ok());
    expected[id] = fp;
  }
  auto check = [&] {
    EXPECT_EQ(store->Stats().documents, expected.size());
    for (int q = 0; q < 40; ++q) {
      Fingerprint query = near(centers[q % centers.size()]);
      for (int k : {0, 2, 3, 6}) {
        auto hits = store->Search(query, k);
        ASSERT_TRUE(hits.ok());
        std::vector<std::pair<int, std::string>> want, got;
        for (const auto& [id, fp] : expected) {
          int d = HammingDistance(fp, query);
          if (d <= k) want.push_back({d, id});
        }
        std::sort(want.begin(), want.end());
        for (const auto& h : *hits) got.push_back({h.distance, h.id});
        ASSERT_EQ(got, want) << "k=" << k;
      }
    }
  };
  check();
  ASSERT_TRUE(store->Compact().ok());
  check();
  ASSERT_TRUE(store->Close().ok());
  opened = DocumentStore::Open(dir, options);
  ASSERT_TRUE(opened.ok());
  check();
}

TEST_F(StoreTest, SearchIsExact64) { CheckExactness(dir_, 64); }
TEST_F(StoreTest, SearchIsExact128) { CheckExactness(dir_, 128); }

// The memtable indexes what was added at its first search (not at each add): readers that all
// arrive at once after a batch of adds (and after replacements) each find every document, once.
TEST_F(StoreTest, ConcurrentFirstSearchesOfTheMemtableSeeEveryDocumentOnce) {
  StoreOptions options;
  options.rule = StoreRule::kSimHash;
  options.memtable_limit = 100000;
  options.sync_mode = SyncMode::kNone;
  auto store = OpenStore(options);
  ASSERT_TRUE(store);
  constexpr int kDocs = 3000;
  auto fp_of = [](int i, int round) {
    return Fp((uint64_t(i) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(round) << 62));
  };
  for (int round = 0; round < 3; ++round) {
    // Round 0 adds every id, rounds 1 and 2 replace every third one with a new fingerprint.
    std::vector<std::string> ids;
    std::vector<DocumentInput> docs;
    for (int i = 0; i < kDocs; ++i) {
      if (round > 0 && i % 3 != 0) continue;
      ids.push_back("d" + std::to_string(i));
    }
    for (size_t j = 0; j < ids.size(); ++j) {
      const int i = std::stoi(ids[j].substr(1));
      docs.push_back({ids[j], fp_of(i, round), ""});
    }
    ASSERT_TRUE(store->AddBatch(docs).ok());
    EXPECT_EQ(store->Stats().memtable_entries, uint64_t{kDocs});
    std::atomic<int> wrong{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t) {
      readers.emplace_back([&, t] {
        for (int n = 0; n < kDocs; ++n) {
          const int i = (n + t * 751) % kDocs;
          const int newest = i % 3 == 0 ? round : 0;
          auto hits = store->Search(fp_of(i, newest), 0);
          if (!hits.ok() || hits->size() != 1 || (*hits)[0].id != "d" + std::to_string(i))
            wrong.fetch_add(1);
          if (newest > 0) {  // the replaced version is gone
            auto old = store->Search(fp_of(i, 0), 0);
            if (!old.ok() || !old->empty()) wrong.fetch_add(1);
          }
        }
      });
    }
    for (auto& reader : readers) reader.join();
    EXPECT_EQ(wrong.load(), 0) << "round " << round;
  }
  EXPECT_EQ(store->Stats().segments, 0u);  // all of it was in the memtable
}

// The operating system's Env, whose log syncs block while the gate is closed.
class GatedSyncEnv : public Env {
 public:
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits until a log sync is blocked at the gate.
  void WaitForBlockedSync() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return blocked_ > 0; });
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return Wrap(Env::Default()->NewWritableFile(path));
  }
  Result<std::unique_ptr<WritableFile>> ReopenWritableFile(const std::string& path) override {
    return Wrap(Env::Default()->ReopenWritableFile(path));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return Env::Default()->Rename(from, to);
  }
  Status Remove(const std::string& path) override { return Env::Default()->Remove(path); }
  Status SyncDir(const std::string& dir) override { return Env::Default()->SyncDir(dir); }

 private:
  class File : public WritableFile {
   public:
    File(GatedSyncEnv* env, std::unique_ptr<WritableFile> base)
        : env_(env), base_(std::move(base)) {}
    Status Append(std::string_view data) override { return base_->Append(data); }
    Status Sync() override {
      if (path().find("wal-") != std::string::npos) {
        std::unique_lock<std::mutex> lock(env_->mu_);
        ++env_->blocked_;
        env_->cv_.notify_all();
        env_->cv_.wait(lock, [&] { return env_->open_; });
        --env_->blocked_;
      }
      return base_->Sync();
    }
    Status Truncate(uint64_t size) override { return base_->Truncate(size); }
    const std::string& path() const override { return base_->path(); }

   private:
    GatedSyncEnv* env_;
    std::unique_ptr<WritableFile> base_;
  };
  Result<std::unique_ptr<WritableFile>> Wrap(Result<std::unique_ptr<WritableFile>> file) {
    if (!file.ok()) return file.status();
    return std::unique_ptr<WritableFile>(new File(this, std::move(*file)));
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int blocked_ = 0;
};

// Group commit: a writer alone in the queue waits the window for others; writers that queued up
// while the previous group synced its log commit at once, without a second wait.
TEST_F(StoreTest, WritersQueuedDuringASyncDoNotWaitTheGroupCommitWindowAgain) {
  GatedSyncEnv env;
  StoreOptions options;
  options.rule = StoreRule::kSimHash;
  options.sync_mode = SyncMode::kGroupCommit;
  options.group_commit_interval_ms = 1000;
  options.env = &env;
  auto store = OpenStore(options);
  ASSERT_TRUE(store);
  using Clock = std::chrono::steady_clock;
  env.Close();
  const auto start = Clock::now();
  std::thread first([&] { EXPECT_TRUE(store->Add({"a", Fp(1), ""}).ok()); });
  env.WaitForBlockedSync();  // "a" waited the window alone and now syncs
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(900));
  std::vector<std::thread> queued;
  for (int i = 0; i < 3; ++i) {
    queued.emplace_back([&, i] {
      EXPECT_TRUE(store->Add({"q" + std::to_string(i), Fp(100 + i), ""}).ok());
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // they queue behind "a"
  const auto released = Clock::now();
  env.Open();
  first.join();
  for (auto& t : queued) t.join();
  EXPECT_LT(Clock::now() - released, std::chrono::milliseconds(600));
  EXPECT_EQ(store->Stats().documents, 4u);
  // One log sync for "a", one for the three queued behind it.
  EXPECT_EQ(store->Stats().wal_syncs, 2u);
}

TEST_F(StoreTest, ReadersRunDuringWritesAndCompaction) {
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.memtable_limit = 200;
  options.compaction_trigger = 2;
  options.sync_mode = SyncMode::kGroupCommit;
  options.group_commit_interval_ms = 1;
  auto store = OpenStore(options);
  ASSERT_TRUE(store);
  // A fixed set that never changes must always be found by readers.
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(store->Add({"fixed" + std::to_string(i), Fp(uint64_t(i) << 40), ""}).ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread reader([&] {
    while (!stop.load()) {
      for (int i = 0; i < 50; ++i) {
        auto hits = store->Search(Fp(uint64_t(i) << 40), 0);
        if (!hits.ok() || hits->empty() || (*hits)[0].id != "fixed" + std::to_string(i)) {
          failures.fetch_add(1);
        }
      }
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        (void)store->Add({"w" + std::to_string(t) + "-" + std::to_string(i),
                          Fp((uint64_t(t) << 60) | (uint64_t(i) * 2654435761u)), ""});
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->Stats().documents, 50u + 4 * 500);
  EXPECT_GT(store->Stats().flushes, 0u);
  // Group commit: concurrent writers shared fsyncs.
  EXPECT_LT(store->Stats().wal_syncs, store->Stats().writes);
}

}  // namespace
}  // namespace neardup

namespace neardup {
namespace {

std::string RunCommand(const std::string& command, int* exit_code) {
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  int status = ::pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

// The command line sees the same data as the library.
TEST_F(StoreTest, CommandLineRoundTrip) {
  const std::string bin = NEARDUP_BINARY;
  int code = -1;
  // Bare fingerprints: a simhash-rule store (a dedup-rule store refuses them, see below).
  RunCommand(bin + " index create " + dir_ + " --rule simhash 2>&1", &code);
  ASSERT_EQ(code, 0);
  RunCommand(bin + " index create " + dir_ + " 2>&1", &code);
  EXPECT_NE(code, 0);  // exists already
  const std::string input = dir_ + "-input.jsonl";
  {
    std::ofstream out(input);
    out << R"({"id":"a","fingerprint":"00000000000000ff","metadata":{"n":1}})"
        << "\n"
        << R"({"id":"b","fingerprint":"00000000000000fe"})"
        << "\n"
        << R"({"id":"c","fingerprint":"ff00000000000000"})"
        << "\n";
  }
  RunCommand(bin + " index add " + dir_ + " " + input + " 2>&1", &code);
  ASSERT_EQ(code, 0);
  std::string query =
      RunCommand(bin + " index query " + dir_ + " --fingerprint 00000000000000fc -k 2", &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(query.find(R"("id":"b")"), std::string::npos) << query;
  EXPECT_NE(query.find(R"("id":"a")"), std::string::npos) << query;
  EXPECT_EQ(query.find(R"("id":"c")"), std::string::npos) << query;
  RunCommand(bin + " index remove " + dir_ + " b", &code);
  EXPECT_EQ(code, 0);
  std::string get = RunCommand(bin + " index get " + dir_ + " a b 2>&1", &code);
  EXPECT_NE(code, 0);  // b is gone
  // Metadata comes back as the JSON value it was given, not as an escaped string.
  EXPECT_NE(get.find(R"("metadata":{"n":1})"), std::string::npos) << get;
  EXPECT_NE(get.find(R"(no document "b")"), std::string::npos) << get;
  // A malformed record is reported with file and line, skipped and counted, like in every other
  // command; with --strict it stops the command and nothing of the batch is added.
  {
    std::ofstream out(input);
    out << R"({"id":"d","fingerprint":"0000000000000001"})"
        << "\n"
        << R"({"id":"e","fingerprint":"xyz"})"
        << "\n";
  }
  std::string strict =
      RunCommand(bin + " index add --strict " + dir_ + " " + input + " 2>&1", &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(strict.find(input + ":2"), std::string::npos) << strict;
  std::string stats = RunCommand(bin + " index stats " + dir_, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(stats.find(R"("documents":2)"), std::string::npos) << stats;
  std::string bad = RunCommand(bin + " index add " + dir_ + " " + input + " 2>&1", &code);
  EXPECT_EQ(code, 0) << bad;
  EXPECT_NE(bad.find(input + ":2"), std::string::npos) << bad;
  EXPECT_NE(bad.find("1 record skipped"), std::string::npos) << bad;
  stats = RunCommand(bin + " index stats " + dir_, &code);
  EXPECT_NE(stats.find(R"("documents":3)"), std::string::npos) << stats;
  auto store = DocumentStore::Open(dir_, {});
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Get("a")->metadata, R"({"n":1})");
  fs::remove(input);
}

}  // namespace
}  // namespace neardup
