// Crash test: a child process writes to a store (single adds, atomic batches, removes, with
// flushes and compactions along the way), announcing each operation through a pipe before issuing
// it and reporting it again once acknowledged; the parent kills it with SIGKILL at a random
// moment, many times over, and proves after reopening that every acknowledged write is there
// (no tolerance), and that the one announced but unacknowledged operation is all there or not at
// all. Run for a simhash-rule store (bare fingerprints) and a dedup-rule store (documents with
// their sketches, some written by check-and-add; after each kill the rule must still find every
// acknowledged document as an exact duplicate of its text). NEARDUP_CRASH_ROUNDS sets the number
// of rounds (default 20 per rule; bench/crash_rounds.sh runs 200).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "neardup/sketch.h"
#include "neardup/store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

// Every document id maps to a text (a dedup-rule store), a fingerprint and metadata derived from
// it, so a reader can tell a complete document from a damaged one.
std::string TextOf(uint64_t n) {
  std::mt19937_64 words(n);
  std::string text = "document " + std::to_string(n);
  for (int i = 0; i < 40; ++i) text += " w" + std::to_string(words() % 5000);
  return text;
}
std::string IdOf(uint64_t n) { return "https://crash.example/doc/" + std::to_string(n); }
std::string MetadataOf(uint64_t n) { return R"({"n":)" + std::to_string(n) + "}"; }

// The document n of a store of `rule`: a dedup-rule store's fingerprint is its text's.
struct CrashDoc {
  Fingerprint fingerprint;
  DocumentSketch sketch;
};
// Sketches as a client makes them: from the store's resolved rule (its LSH plan, and unit sets
// when its `edited` reason is on). Every dedup-rule store here is made with CrashOptions.
const DocumentSketcher& Sketcher(const DocumentStore& store) {
  static const DocumentSketcher* sketcher =
      DocumentSketcher::Create(FingerprintOptions{}, *store.LshOptions(), store.SketchesNeedUnits())
          ->release();
  return *sketcher;
}
CrashDoc DocOf(uint64_t n, StoreRule rule, const DocumentStore& store) {
  CrashDoc doc;
  if (rule == StoreRule::kSimHash) {
    doc.fingerprint = Fingerprint::From64(n * 0x9E3779B97F4A7C15ull + 1);
  } else if (!Sketcher(store).Sketch(TextOf(n), &doc.fingerprint, &doc.sketch).ok()) {
    ADD_FAILURE() << "cannot sketch document " << n;
  }
  return doc;
}
Fingerprint FingerprintOf(uint64_t n, StoreRule rule, const DocumentStore& store) {
  return DocOf(n, rule, store).fingerprint;
}

StoreOptions CrashOptions(StoreRule rule) {
  StoreOptions options;
  options.rule = rule;
  options.sync_mode = SyncMode::kEveryWrite;
  options.memtable_limit = 40;     // flushes happen often, so kills land inside them too
  options.compaction_trigger = 3;  // and inside compactions
  return options;
}

// The child: runs until killed. Messages: the op code before issuing it ('A' n add n, 'B' n batch
// n..n+4, 'R' n remove n) and the same code in lower case once it is acknowledged.
[[noreturn]] void WriterChild(const std::string& dir, StoreRule rule, int ack_fd, uint64_t first,
                              unsigned seed) {
  auto opened = DocumentStore::Open(dir, CrashOptions(rule));
  if (!opened.ok()) ::_exit(3);
  DocumentStore& store = **opened;
  std::mt19937 rng(seed);
  uint64_t next = first;
  auto send = [&](char op, uint64_t n) {
    char message[9];
    message[0] = op;
    std::memcpy(message + 1, &n, 8);
    if (::write(ack_fd, message, 9) != 9) ::_exit(4);
  };
  while (true) {
    const unsigned choice = rng() % 10;
    if (choice < 6) {
      uint64_t n = next++;
      const std::string id = IdOf(n), metadata = MetadataOf(n);
      const CrashDoc doc = DocOf(n, rule, store);
      DocumentInput input{id, doc.fingerprint, metadata};
      if (rule == StoreRule::kDedup) input.sketch = &doc.sketch;
      send('A', n);
      if (rule == StoreRule::kDedup && choice % 2 == 0) {
        // Check-and-add: the text duplicates nothing stored, so it is added.
        auto checked = store.CheckAndAdd(input, 3, false);
        if (!checked.ok() || !checked->added) ::_exit(5);
      } else if (!store.Add(input).ok()) {
        ::_exit(5);
      }
      send('a', n);
    } else if (choice < 9) {
      uint64_t n = next;
      next += 5;
      std::vector<std::string> ids, metas;
      std::vector<CrashDoc> made;
      std::vector<DocumentInput> docs;
      for (uint64_t i = n; i < n + 5; ++i) {
        ids.push_back(IdOf(i));
        metas.push_back(MetadataOf(i));
        made.push_back(DocOf(i, rule, store));
      }
      for (int i = 0; i < 5; ++i) {
        docs.push_back({ids[i], made[i].fingerprint, metas[i]});
        if (rule == StoreRule::kDedup) docs.back().sketch = &made[i].sketch;
      }
      send('B', n);
      if (!store.AddBatch(docs).ok()) ::_exit(6);
      send('b', n);
    } else if (next > first) {
      uint64_t n = first + rng() % (next - first);
      send('R', n);
      Status status = store.Remove(IdOf(n));
      if (status.ok()) {
        send('r', n);
      } else if (status.code() == StatusCode::kNotFound) {
        send('n', n);  // already removed: nothing changed
      } else {
        ::_exit(7);
      }
    }
  }
}

class CrashRecoveryTest : public ::testing::TestWithParam<StoreRule> {};

TEST_P(CrashRecoveryTest, AcknowledgedWritesSurviveKill9) {
  const StoreRule rule = GetParam();
  const std::string dir =
      (fs::temp_directory_path() /
       ("neardup_crash_test_" + std::to_string(::getpid()) + "_" + StoreRuleName(rule)))
          .string();
  fs::remove_all(dir);
  int rounds = 20;
  if (const char* env = std::getenv("NEARDUP_CRASH_ROUNDS")) rounds = std::max(1, std::atoi(env));
  std::mt19937 rng(2024);
  std::map<uint64_t, bool> expected;  // n -> present (true) or removed (false)
  uint64_t next_first = 0;
  int killed_with_inflight = 0;
  uint64_t acknowledged_total = 0;
  uint64_t present_checked = 0;  // acknowledged documents found after the kills
  for (int round = 0; round < rounds; ++round) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const uint64_t first = next_first;
    next_first += 1000000;  // id ranges never overlap between rounds
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(pipe_fds[0]);
      WriterChild(dir, rule, pipe_fds[1], first, static_cast<unsigned>(round));
    }
    ::close(pipe_fds[1]);
    // Let it run for a random number of acknowledged writes (or a time bound), then kill it.
    const int target = 1 + static_cast<int>(rng() % 160);  // messages: two per operation
    int seen = 0;
    std::vector<std::pair<char, uint64_t>> acks;
    auto read_ack = [&](bool* eof) {
      char message[9];
      size_t got = 0;
      while (got < 9) {
        ssize_t n = ::read(pipe_fds[0], message + got, 9 - got);
        if (n <= 0) {
          *eof = true;
          return;
        }
        got += static_cast<size_t>(n);
      }
      uint64_t value;
      std::memcpy(&value, message + 1, 8);
      acks.push_back({message[0], value});
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    bool eof = false;
    while (seen < target && !eof && std::chrono::steady_clock::now() < deadline) {
      read_ack(&eof);
      ++seen;
    }
    ::kill(child, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited early with " << WEXITSTATUS(wstatus);
    // Acks written before the kill are still in the pipe.
    eof = false;
    while (!eof) read_ack(&eof);
    ::close(pipe_fds[0]);
    // Every announced op is followed by its acknowledgement except, at most, the last one.
    std::optional<std::pair<char, uint64_t>> inflight;
    for (const auto& [op, n] : acks) {
      if (op == 'A' || op == 'B' || op == 'R') {
        ASSERT_FALSE(inflight.has_value()) << "round " << round << ": two operations in flight";
        inflight = std::make_pair(op, n);
        continue;
      }
      ASSERT_TRUE(inflight.has_value() && inflight->second == n &&
                  std::tolower(inflight->first) == (op == 'n' ? 'r' : op))
          << "round " << round << ": acknowledgement without announcement";
      inflight.reset();
      ++acknowledged_total;
      if (op == 'a') {
        expected[n] = true;
      } else if (op == 'b') {
        for (uint64_t i = n; i < n + 5; ++i) expected[i] = true;
      } else if (op == 'r') {
        expected[n] = false;
      }
    }

    auto opened = DocumentStore::Open(dir, CrashOptions(rule));
    ASSERT_TRUE(opened.ok()) << "round " << round << ": " << opened.status().ToString();
    DocumentStore& store = **opened;
    // The operation in flight at the kill was not acknowledged: it landed whole or not at all.
    // Its documents are checked here and recorded as observed, so later rounds must keep them.
    std::vector<uint64_t> inflight_ids;
    if (inflight) {
      const auto [op, n] = *inflight;
      if (op == 'B') {
        for (uint64_t i = n; i < n + 5; ++i) inflight_ids.push_back(i);
      } else {
        inflight_ids.push_back(n);
      }
      int present = 0;
      for (uint64_t i : inflight_ids) {
        auto doc = store.Get(IdOf(i));
        if (doc.ok()) {
          ++present;
          EXPECT_EQ(doc->fingerprint, FingerprintOf(i, rule, store));
          EXPECT_EQ(doc->metadata, MetadataOf(i));
        }
        expected[i] = doc.ok();
      }
      EXPECT_TRUE(present == 0 || present == static_cast<int>(inflight_ids.size()))
          << "round " << round << ": an operation landed partially (" << present << " of "
          << inflight_ids.size() << ")";
      if ((op == 'R') == (present == 0)) ++killed_with_inflight;  // it had landed
    }
    // Every acknowledged write is there, exactly, with no tolerance.
    for (const auto& [n, should_exist] : expected) {
      auto doc = store.Get(IdOf(n));
      if (should_exist) {
        ASSERT_TRUE(doc.ok()) << "round " << round << ": acknowledged " << IdOf(n) << " lost";
        ++present_checked;
        EXPECT_EQ(doc->fingerprint, FingerprintOf(n, rule, store));
        EXPECT_EQ(doc->metadata, MetadataOf(n));
      } else {
        EXPECT_FALSE(doc.ok()) << "round " << round << ": removed " << IdOf(n) << " is back";
      }
    }
    // Search agrees with Get for a sample of present documents.
    int checked = 0;
    for (const auto& [n, should_exist] : expected) {
      if (!should_exist || (n % 7) != 0 || ++checked > 20) continue;
      auto hits = store.Search(FingerprintOf(n, rule, store), 0);
      ASSERT_TRUE(hits.ok());
      bool found = false;
      for (const auto& hit : *hits) found |= hit.id == IdOf(n);
      EXPECT_TRUE(found) << IdOf(n);
      if (rule == StoreRule::kDedup) {
        // The rule finds it: an exact duplicate of its text.
        const CrashDoc doc = DocOf(n, rule, store);
        DocumentInput probe{"probe", doc.fingerprint, ""};
        probe.sketch = &doc.sketch;
        CheckOptions lookup;
        lookup.add = AddMode::kNever;
        auto checked = store.CheckBatch(std::span<const DocumentInput>(&probe, 1), lookup);
        ASSERT_TRUE(checked.ok());
        bool exact = false;
        for (const auto& d : (*checked)[0].duplicates) {
          exact |= d.id == IdOf(n) && d.reason == DuplicateReason::kExact;
        }
        EXPECT_TRUE(exact) << "round " << round << ": the rule does not find " << IdOf(n);
      }
    }
    ASSERT_TRUE(store.Close().ok());
  }
  std::printf(
      "crash rounds (%s rule): %d, acknowledged operations checked: %llu, documents checked "
      "present: %llu, rounds where the unacknowledged operation in flight had landed: %d\n",
      StoreRuleName(rule), rounds, static_cast<unsigned long long>(acknowledged_total),
      static_cast<unsigned long long>(present_checked), killed_with_inflight);
  // The rounds did what they claim: the children acknowledged operations (about 40 a round) and
  // their documents were looked up after the kills (every one found: the ASSERTs above).
  EXPECT_GE(acknowledged_total, static_cast<uint64_t>(rounds));
  EXPECT_GT(present_checked, 0u);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Rules, CrashRecoveryTest,
                         ::testing::Values(StoreRule::kSimHash, StoreRule::kDedup),
                         [](const ::testing::TestParamInfo<StoreRule>& info) {
                           return std::string(StoreRuleName(info.param));
                         });

}  // namespace
}  // namespace neardup
