// Tests of the shared internals: Status/Result, UTF-8 primitives, JsonWriter and ParallelFor.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/json_writer.h"
#include "common/parallel.h"
#include "common/utf8.h"
#include "neardup/status.h"

#include <sys/wait.h>
#include <unistd.h>

namespace neardup {
namespace {

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  Status s = Status::Corruption("bad checksum").WithContext("seg-1.ndx");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.ToString(), "Corruption: seg-1.ndx: bad checksum");
}

TEST(StatusTest, ResultHoldsValueOrError) {
  Result<int> good = 42;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  Result<int> bad = Status::NotFound("no such id");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
}

TEST(Utf8Test, ValidatesAndLocatesInvalidBytes) {
  EXPECT_TRUE(utf8::IsValid("plain ascii"));
  EXPECT_TRUE(utf8::IsValid("中文 русский 😀"));
  EXPECT_EQ(utf8::FindInvalid("ab\xFF"
                              "cd"),
            2u);
  EXPECT_EQ(utf8::FindInvalid("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(utf8::FindInvalid("x\xED\xA0\x80"), 1u);     // surrogate
  EXPECT_EQ(utf8::FindInvalid("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8::FindInvalid("\xE4\xB8"), 0u);          // truncated
  EXPECT_EQ(utf8::ReplaceInvalid("a\xFF"
                                 "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(Utf8Test, DecodeAndAppendRoundTrip) {
  std::string text = "a中😀";
  std::string rebuilt;
  for (size_t i = 0; i < text.size();) {
    size_t len = utf8::ValidSequenceLength(text, i);
    ASSERT_GT(len, 0u);
    utf8::Append(utf8::Decode(text, i, len), &rebuilt);
    i += len;
  }
  EXPECT_EQ(rebuilt, text);
}

TEST(JsonWriterTest, WritesEscapedCompactJson) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject()
      .Key("id")
      .String("a\"b\\c\n\x01")
      .Key("n")
      .Int(-3)
      .Key("list")
      .BeginArray()
      .Uint(1)
      .Double(0.5)
      .Bool(true)
      .Null()
      .EndArray()
      .EndObject();
  EXPECT_EQ(out, R"({"id":"a\"b\\c\n\u0001","n":-3,"list":[1,0.5,true,null]})");
}

TEST(JsonWriterTest, InvalidUtf8BecomesReplacementCharacter) {
  std::string out;
  AppendJsonString("x\xFFy", &out);
  EXPECT_EQ(out, "\"x\xEF\xBF\xBDy\"");
}

TEST(ParallelForTest, CoversEveryIndexOnceWhateverTheThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    std::vector<std::atomic<int>> hits(1000);
    ParallelFor(hits.size(), threads, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    });
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
  }
  int calls = 0;
  ParallelFor(0, 4, [&](size_t, size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// Chunks shrink as the work runs out, so an expensive item near the end is not stuck in a big
// chunk with many others while the other threads sit idle; min_chunk is honoured.
TEST(ParallelForTest, ChunksShrinkTowardsTheEndAndHonourMinChunk) {
  for (size_t min_chunk : {size_t{1}, size_t{7}}) {
    const size_t n = 10000;
    std::mutex mutex;
    std::vector<std::pair<size_t, size_t>> chunks;
    ParallelFor(
        n, 2,
        [&](size_t begin, size_t end) {
          std::lock_guard<std::mutex> lock(mutex);
          chunks.emplace_back(begin, end);
        },
        min_chunk);
    std::sort(chunks.begin(), chunks.end());
    size_t next = 0;
    for (const auto& [begin, end] : chunks) {
      ASSERT_EQ(begin, next);
      ASSERT_LT(begin, end);
      if (end != n) {
        ASSERT_GE(end - begin, min_chunk);
      }
      ASSERT_LE(end - begin, n / 4) << "one chunk holds too much of the work";
      next = end;
    }
    ASSERT_EQ(next, n);
    EXPECT_LE(chunks.back().second - chunks.back().first, std::max<size_t>(min_chunk, n / 1000));
  }
}

// The helper threads are kept between calls (their thread_local state survives), a call made
// while another one runs (nested, or from another thread) still covers every index, and a child
// process after fork() gets helpers of its own.
TEST(ParallelForTest, KeepsItsHelpersAndStaysCorrectWhenCallsOverlap) {
  // How many calls each helper has worked in, counted in a thread_local of the helper.
  const std::thread::id caller = std::this_thread::get_id();
  static std::atomic<int> call_number{0};
  auto helper_calls = [caller] {
    const int call = ++call_number;
    std::mutex mutex;
    std::set<int> seen;
    ParallelFor(
        64, 2,
        [&](size_t, size_t) {
          thread_local int calls_here = 0;
          thread_local int last_call = 0;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          std::lock_guard<std::mutex> lock(mutex);
          if (std::this_thread::get_id() == caller) return;
          if (last_call != call) ++calls_here;
          last_call = call;
          seen.insert(calls_here);
        },
        1);
    return seen;
  };
  (void)helper_calls();
  (void)helper_calls();
  const std::set<int> third = helper_calls();
  ASSERT_FALSE(third.empty()) << "no helper thread worked";
  EXPECT_EQ(*third.begin(), 3) << "the helper of the third call is not the one of the first";

  std::vector<std::atomic<int>> hits(400);
  ParallelFor(20, 3, [&](size_t begin, size_t end) {
    for (size_t outer = begin; outer < end; ++outer) {
      ParallelFor(20, 3, [&](size_t b, size_t e) {
        for (size_t inner = b; inner < e; ++inner) hits[outer * 20 + inner].fetch_add(1);
      });
    }
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "nested, index " << i;

  std::vector<std::atomic<int>> a(5000), b(5000);
  auto cover = [](std::vector<std::atomic<int>>* v) {
    for (int round = 0; round < 20; ++round) {
      ParallelFor(v->size(), 2, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) (*v)[i].fetch_add(1);
      });
    }
  };
  std::thread other(cover, &a);
  cover(&b);
  other.join();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].load(), 20) << "concurrent, index " << i;
    ASSERT_EQ(b[i].load(), 20) << "concurrent, index " << i;
  }

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::vector<std::atomic<int>> in_child(1000);
    ParallelFor(in_child.size(), 2, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) in_child[i].fetch_add(1);
    });
    bool all_once = true;
    for (auto& hit : in_child) all_once = all_once && hit.load() == 1;
    _exit(all_once ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "ParallelFor in a child process after fork()";
}

// The caller runs `alongside` (once) and takes no chunk; the chunks still cover every index once,
// with one thread or several, and with nothing to do.
TEST(ParallelForTest, AlongsideRunsOnTheCallerWhileOthersTakeTheChunks) {
  const std::thread::id caller = std::this_thread::get_id();
  for (int threads : {1, 2, 3}) {
    std::vector<std::atomic<int>> hits(3000);
    std::atomic<int> on_caller{0};
    int alongside_calls = 0;
    ParallelForAlongside(
        hits.size(), threads,
        [&](size_t begin, size_t end) {
          if (std::this_thread::get_id() == caller) on_caller.fetch_add(1);
          for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        },
        4, [&] { ++alongside_calls; });
    EXPECT_EQ(alongside_calls, 1);
    EXPECT_EQ(on_caller.load(), 0) << threads << " threads";
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
  }
  int alongside_calls = 0, chunks = 0;
  ParallelForAlongside(
      0, 2, [&](size_t, size_t) { ++chunks; }, 1, [&] { ++alongside_calls; });
  EXPECT_EQ(alongside_calls, 1);
  EXPECT_EQ(chunks, 0);
}

}  // namespace
}  // namespace neardup
