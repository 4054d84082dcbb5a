// Power-cut test: writers run against a store whose file layer is the fault-injection file system
// (tests/fault_injection_fs.h); at a random moment the "power" goes off — every unsynced byte is
// dropped (or torn), unsynced new names vanish, unsynced renames are undone — and the store is
// reopened. For each SyncMode the documented promise (docs/storage_format.md) is checked:
//   kEveryWrite, kGroupCommit: every acknowledged write survives;
//   kNone: every write acknowledged before the last successful Flush() survives;
// and in every mode the store opens cleanly and each batch is there whole or not at all. Run for a
// simhash-rule store (bare fingerprints) and a dedup-rule store (documents with their sketches:
// the rule must find every surviving document as an exact duplicate of its text).
// NEARDUP_POWER_CUT_ROUNDS sets the rounds per mode (default 6; bench/crash_rounds.sh runs more).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "fault_injection_fs.h"
#include "neardup/sketch.h"
#include "neardup/store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

std::string TextOf(uint64_t n) {
  std::mt19937_64 words(n);
  std::string text = "power " + std::to_string(n);
  for (int i = 0; i < 30; ++i) text += " v" + std::to_string(words() % 4000);
  return text;
}
// Sketches as a client makes them: from the store's resolved rule (its LSH plan, and unit sets
// when its `edited` reason is on). Every dedup-rule store here has the default rule.
const DocumentSketcher& Sketcher(const DocumentStore& store) {
  static const DocumentSketcher* sketcher =
      DocumentSketcher::Create(FingerprintOptions{}, *store.LshOptions(), store.SketchesNeedUnits())
          ->release();
  return *sketcher;
}
// Document n of a store of `rule`: a dedup-rule store's carries the sketch of its text.
struct Made {
  Fingerprint fingerprint;
  DocumentSketch sketch;
};
Made Make(uint64_t n, StoreRule rule, const DocumentStore& store) {
  Made made;
  if (rule == StoreRule::kSimHash) {
    made.fingerprint = Fingerprint::From64(n * 0x9E3779B97F4A7C15ull + 11);
  } else {
    EXPECT_TRUE(Sketcher(store).Sketch(TextOf(n), &made.fingerprint, &made.sketch).ok());
  }
  return made;
}
Fingerprint FpOf(uint64_t n, StoreRule rule, const DocumentStore& store) {
  return Make(n, rule, store).fingerprint;
}
std::string IdOf(uint64_t n) { return "id-" + std::to_string(n); }
std::string MetaOf(uint64_t n) { return "{\"n\":" + std::to_string(n) + "}"; }

// What happened to one id, as seen by the writers.
struct IdHistory {
  bool add_acked = false;
  uint64_t add_seq = 0;  // global sequence number of the acknowledgement
  bool remove_issued = false;
  bool remove_acked = false;
  int batch = -1;  // index into batches
};

struct Round {
  std::mutex mu;
  std::map<uint64_t, IdHistory> ids;
  std::vector<std::vector<uint64_t>> batches;
  std::atomic<uint64_t> seq{0};
  std::atomic<int> running{0};  // writers not yet stopped
};

void Writer(DocumentStore* store, StoreRule rule, Round* round, uint64_t first, unsigned seed,
            const std::atomic<bool>* stop) {
  struct Stopped {
    std::atomic<int>* running;
    ~Stopped() { --*running; }
  } stopped{&round->running};
  std::mt19937 rng(seed);
  uint64_t next = first;
  std::vector<uint64_t> mine;
  while (!stop->load()) {
    const unsigned choice = rng() % 10;
    if (choice < 5) {
      const uint64_t n = next++;
      const std::string id = IdOf(n), meta = MetaOf(n);
      const Made made = Make(n, rule, *store);
      DocumentInput input{id, made.fingerprint, meta};
      if (rule == StoreRule::kDedup) input.sketch = &made.sketch;
      Status status = store->Add(input);
      std::lock_guard<std::mutex> lock(round->mu);
      IdHistory& h = round->ids[n];
      if (!status.ok()) break;  // the power is off: a writer stops at its first failed write
      h.add_acked = true;
      h.add_seq = ++round->seq;
      mine.push_back(n);
    } else if (choice < 8) {
      std::vector<uint64_t> ns;
      std::vector<std::string> ids, metas;
      for (int i = 0; i < 4; ++i) {
        ns.push_back(next);
        ids.push_back(IdOf(next));
        metas.push_back(MetaOf(next));
        ++next;
      }
      std::vector<Made> made;
      std::vector<DocumentInput> docs;
      for (int i = 0; i < 4; ++i) made.push_back(Make(ns[i], rule, *store));
      for (int i = 0; i < 4; ++i) {
        docs.push_back({ids[i], made[i].fingerprint, metas[i]});
        if (rule == StoreRule::kDedup) docs.back().sketch = &made[i].sketch;
      }
      int batch;
      {
        std::lock_guard<std::mutex> lock(round->mu);
        batch = static_cast<int>(round->batches.size());
        round->batches.push_back(ns);
        for (uint64_t n : ns) round->ids[n].batch = batch;
      }
      Status status = store->AddBatch(docs);
      std::lock_guard<std::mutex> lock(round->mu);
      if (!status.ok()) break;
      const uint64_t s = ++round->seq;
      for (uint64_t n : ns) {
        round->ids[n].add_acked = true;
        round->ids[n].add_seq = s;
        mine.push_back(n);
      }
    } else if (!mine.empty()) {
      const size_t pick = rng() % mine.size();
      const uint64_t n = mine[pick];
      mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(pick));
      {
        std::lock_guard<std::mutex> lock(round->mu);
        round->ids[n].remove_issued = true;
      }
      Status status = store->Remove(IdOf(n));
      std::lock_guard<std::mutex> lock(round->mu);
      if (!status.ok()) break;
      round->ids[n].remove_acked = true;
    }
  }
}

void RunMode(SyncMode mode, const char* name, StoreRule rule = StoreRule::kSimHash) {
  int rounds = 6;
  if (const char* env = std::getenv("NEARDUP_POWER_CUT_ROUNDS"))
    rounds = std::max(1, std::atoi(env));
  std::mt19937_64 rng(std::hash<std::string>{}(name));
  uint64_t dropped_total = 0, checked_total = 0;
  int rounds_with_promises = 0;  // rounds in which at least one write was promised to survive
  for (int r = 0; r < rounds; ++r) {
    const std::string dir =
        (fs::temp_directory_path() / ("neardup_power_cut_" + std::to_string(::getpid()) + "_" +
                                      name + "_" + StoreRuleName(rule)))
            .string();
    fs::remove_all(dir);
    testing_fs::FaultInjectionFileSystem fault_fs;
    StoreOptions options;
    options.rule = rule;
    options.sync_mode = mode;
    options.group_commit_interval_ms = 1;
    options.memtable_limit = 25 + rng() % 50;  // flushes (and compactions) happen mid-run
    options.compaction_trigger = 3;
    options.expected_size = 1000;
    options.env = &fault_fs;
    Round round;
    uint64_t flushed_seq = 0;  // kNone: acknowledgements up to here are flushed
    {
      auto opened = DocumentStore::Open(dir, options);
      ASSERT_TRUE(opened.ok()) << opened.status().ToString();
      DocumentStore& store = **opened;
      std::atomic<bool> stop{false};
      const int threads = mode == SyncMode::kGroupCommit ? 4 : 1;
      std::vector<std::thread> writers;
      round.running = threads;
      for (int t = 0; t < threads; ++t)
        writers.emplace_back(Writer, &store, rule, &round, uint64_t(t) * 1000000,
                             unsigned(r * 10 + t), &stop);
      const uint64_t cut_at = 20 + rng() % 150;
      const uint64_t flush_at = cut_at / 2;
      // Until the cut, or until every writer has stopped (a refused write: reported below).
      while (round.seq.load() < cut_at && round.running.load() > 0) {
        if (mode == SyncMode::kNone && flushed_seq == 0 && round.seq.load() >= flush_at) {
          const uint64_t before = round.seq.load();
          if (store.Flush().ok()) flushed_seq = before;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      const bool writers_failed = round.seq.load() < cut_at;
      fault_fs.SetActive(false);  // the power goes off
      stop = true;
      for (std::thread& t : writers) t.join();
      ASSERT_FALSE(writers_failed) << name << " round " << r
                                   << ": every writer stopped before the power cut (a write "
                                      "was refused with the power on)";
      (void)store.Close();  // fails: nothing more reaches the disk
    }
    dropped_total += fault_fs.PowerCut(&rng, /*torn=*/r % 2 == 1);
    StoreOptions reopen;
    reopen.rule = rule;
    auto opened = DocumentStore::Open(dir, reopen);
    ASSERT_TRUE(opened.ok()) << name << " round " << r << ": " << opened.status().ToString();
    DocumentStore& store = **opened;
    const bool every_ack_survives = mode != SyncMode::kNone;
    const uint64_t checked_before = checked_total;
    for (const auto& [n, h] : round.ids) {
      auto doc = store.Get(IdOf(n));
      if (doc.ok()) {
        EXPECT_EQ(doc->fingerprint, FpOf(n, rule, store));
        EXPECT_EQ(doc->metadata, MetaOf(n));
        if (rule == StoreRule::kDedup) {  // the rule finds it by its text
          const Made made = Make(n, rule, store);
          DocumentInput probe{"probe", made.fingerprint, ""};
          probe.sketch = &made.sketch;
          CheckOptions lookup;
          lookup.add = AddMode::kNever;
          auto checked = store.CheckBatch(std::span<const DocumentInput>(&probe, 1), lookup);
          ASSERT_TRUE(checked.ok());
          bool exact = false;
          for (const auto& d : (*checked)[0].duplicates) exact |= d.id == IdOf(n);
          EXPECT_TRUE(exact) << name << " round " << r << ": the rule does not find " << IdOf(n);
        }
      }
      const bool promised = h.add_acked && !h.remove_issued &&
                            (every_ack_survives || (flushed_seq > 0 && h.add_seq <= flushed_seq));
      if (promised) {
        ++checked_total;
        EXPECT_TRUE(doc.ok()) << name << " round " << r << ": acknowledged " << IdOf(n)
                              << " lost at the power cut";
      }
      if (every_ack_survives && h.remove_acked) {
        EXPECT_FALSE(doc.ok()) << name << " round " << r << ": removed " << IdOf(n) << " is back";
      }
    }
    rounds_with_promises += checked_total > checked_before ? 1 : 0;
    for (const auto& batch : round.batches) {
      int present = 0;
      for (uint64_t n : batch) present += store.Get(IdOf(n)).ok() || round.ids[n].remove_issued;
      int removed = 0;
      for (uint64_t n : batch) removed += round.ids[n].remove_issued ? 1 : 0;
      if (removed == 0) {
        EXPECT_TRUE(present == 0 || present == 4)
            << name << " round " << r << ": a batch survived partially (" << present << " of 4)";
      }
    }
    ASSERT_TRUE(store.Close().ok());
    fs::remove_all(dir);
  }
  std::printf(
      "power cut %s (%s rule): %d rounds, %llu promised documents checked, %llu unsynced bytes "
      "dropped\n",
      name, StoreRuleName(rule), rounds, static_cast<unsigned long long>(checked_total),
      static_cast<unsigned long long>(dropped_total));
  // The test checked what it claims: with a sync per write every round acknowledged writes before
  // the cut (at least 20 operations run), and each was found above; without syncs, the writes
  // after the flush were unsynced and the cut dropped them.
  if (mode != SyncMode::kNone) {
    EXPECT_EQ(rounds_with_promises, rounds) << name << ": a round promised nothing to check";
  } else {
    EXPECT_GT(rounds_with_promises, 0) << name << ": no round flushed before the cut";
    EXPECT_GT(dropped_total, 0u) << name << ": the power cut dropped no unsynced byte";
  }
}

TEST(StorePowerCutTest, EveryWriteKeepsEveryAcknowledgedWrite) {
  RunMode(SyncMode::kEveryWrite, "every");
}
TEST(StorePowerCutTest, GroupCommitKeepsEveryAcknowledgedWrite) {
  RunMode(SyncMode::kGroupCommit, "group");
}
TEST(StorePowerCutTest, NoSyncKeepsWhatWasFlushed) { RunMode(SyncMode::kNone, "none"); }
TEST(StorePowerCutTest, DedupRuleEveryWrite) {
  RunMode(SyncMode::kEveryWrite, "every", StoreRule::kDedup);
}
TEST(StorePowerCutTest, DedupRuleGroupCommit) {
  RunMode(SyncMode::kGroupCommit, "group", StoreRule::kDedup);
}
TEST(StorePowerCutTest, DedupRuleNoSync) { RunMode(SyncMode::kNone, "none", StoreRule::kDedup); }

// The fault layer itself: without a sync nothing survives; synced bytes do.
TEST(FaultInjectionFileSystemTest, DropsUnsyncedBytesAndNames) {
  const std::string dir =
      (fs::temp_directory_path() / ("neardup_fault_fs_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  testing_fs::FaultInjectionFileSystem fault_fs;
  std::mt19937_64 rng(1);
  {
    auto a = fault_fs.NewWritableFile(dir + "/a");
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE((*a)->Append("synced").ok());
    ASSERT_TRUE((*a)->Sync().ok());
    ASSERT_TRUE(fault_fs.SyncDir(dir).ok());
    ASSERT_TRUE((*a)->Append("-lost").ok());
    auto b = fault_fs.NewWritableFile(dir + "/b");  // name never synced
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE((*b)->Append("x").ok());
    ASSERT_TRUE((*b)->Sync().ok());
  }
  fault_fs.PowerCut(&rng, false);
  EXPECT_EQ(fs::file_size(dir + "/a"), 6u);
  EXPECT_FALSE(fs::exists(dir + "/b"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace neardup
