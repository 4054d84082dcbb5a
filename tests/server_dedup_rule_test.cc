// The dedup rule through the real server (issue 19): a corpus with planted near-duplicates of every
// kind (and a bucket larger than the bucket window) streamed through `neardup serve` with POST
// /v1/check one document at a time, "add": "always", links exactly the documents `neardup dedup`
// links (the same duplicate components). Also: each duplicate carries reason, similarity and
// distance; the batch form checks in order against the earlier documents of the batch; a text
// query applies the rule; bare fingerprints are refused by a dedup-rule store; the answers survive
// a restart; the `edited` reason (issue 25) of a store created with --edited, its reason and
// recorded options through the API.
#include <gtest/gtest.h>
#include <httplib.h>
#include <simdjson.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/json_writer.h"
#include "neardup/dedup.h"
#include "planted_corpus.h"
#include "server_process.h"
#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing::ServerProcess;
using namespace testing_corpus;  // NOLINT: SampleTexts, PlantedCorpus, ...

class ServerDedupRuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_server_dedup_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    fs::remove(dir_ + ".jsonl");
  }
  std::string dir_;
};

std::string CheckBody(const std::string& id, const std::string& text, const std::string& add) {
  std::string body;
  JsonWriter w(&body);
  w.BeginObject().Key("id").String(id).Key("text").String(text).Key("add").String(add).EndObject();
  return body;
}

// The ids of the duplicates of one /v1/check result object, checking each carries the fields.
std::vector<std::string> DuplicateIds(simdjson::dom::element result) {
  std::vector<std::string> ids;
  for (simdjson::dom::element d : result["duplicates"].get_array()) {
    ids.push_back(std::string(d["id"].get_string().value()));
    const std::string_view reason = d["reason"].get_string().value();
    EXPECT_TRUE(reason == "exact_duplicate" || reason == "whitespace_duplicate" ||
                reason == "contained" || reason == "near_duplicate" || reason == "edited")
        << reason;
    const double similarity = d["similarity"].get_double().value();
    EXPECT_GE(similarity, 0.5);
    EXPECT_LE(similarity, 1.0);
    EXPECT_GE(d["distance"].get_int64().value(), 0);
  }
  return ids;
}

// Streams `corpus` through a server started with `flags` (one /v1/check each, "add": "always")
// and runs dedup with `options` on the same documents: their duplicate components must be the
// same. Returns how many streamed duplicates had reason `count_reason`.
size_t ExpectStreamingEqualsDedup(const std::string& dir, const Corpus& corpus,
                                  const std::vector<std::string>& flags, DedupOptions options,
                                  const std::string& count_reason) {
  {
    std::ofstream out(dir + ".jsonl", std::ios::binary);
    for (size_t i = 0; i < corpus.ids.size(); ++i) {
      out << testing_files::JsonLine(corpus.ids[i], corpus.texts[i]);
    }
  }
  std::vector<std::pair<std::string, std::string>> streamed;
  size_t counted = 0;
  {
    ServerProcess server(dir, flags);
    auto client = server.Client();
    simdjson::dom::parser parser;
    for (size_t i = 0; i < corpus.ids.size(); ++i) {
      auto res = client->Post("/v1/check", CheckBody(corpus.ids[i], corpus.texts[i], "always"),
                              "application/json");
      EXPECT_TRUE(res);
      if (!res) return counted;
      EXPECT_EQ(res->status, 200) << res->body;
      simdjson::dom::element result = parser.parse(res->body).value();
      EXPECT_TRUE(result["added"].get_bool().value());
      for (const std::string& id : DuplicateIds(result)) streamed.push_back({corpus.ids[i], id});
      for (simdjson::dom::element d : result["duplicates"].get_array()) {
        counted += d["reason"].get_string().value() == count_reason;
      }
    }
  }
  options.threads = 2;
  auto report = RunDedup({dir + ".jsonl"}, options);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  if (!report.ok()) return counted;
  std::vector<std::pair<std::string, std::string>> batch;
  for (const DuplicatePair& pair : report->pairs) {
    batch.push_back({report->documents[pair.a].id, report->documents[pair.b].id});
  }
  const auto s = Components(streamed), b = Components(batch);
  EXPECT_GT(b.size(), 20u);
  EXPECT_EQ(s, b) << "streamed " << s.size() << " components, dedup " << b.size();
  return counted;
}

TEST_F(ServerDedupRuleTest, StreamingThroughTheServerEqualsDedup) {
  ExpectStreamingEqualsDedup(dir_, PlantedCorpus(400, 100),
                             {"--rule", "dedup", "--memtable-limit", "150"}, DedupOptions{}, "");
}

// The same with the `edited` reason off (--edited 0 on both sides: the rule of every store made
// before the reason was on by default).
TEST_F(ServerDedupRuleTest, StreamingWithTheEditedReasonOffEqualsDedup) {
  DedupOptions off;
  off.edited_threshold = 0;
  ExpectStreamingEqualsDedup(dir_, PlantedCorpus(400, 100),
                             {"--rule", "dedup", "--memtable-limit", "150", "--edited", "0"}, off,
                             "");
}

// The same with the `edited` reason on (issue 25), and lightly edited copies (12 % of the words
// replaced) among the documents: some pairs only `edited` accepts.
TEST_F(ServerDedupRuleTest, StreamingWithTheEditedReasonEqualsDedup) {
  Corpus corpus = PlantedCorpus(300, 40);
  std::mt19937_64 rng(25);
  const std::vector<std::string> base = SampleTexts(150);
  for (size_t i = 0; i < base.size(); i += 2) {
    corpus.ids.push_back("d" + std::to_string(i));
    corpus.texts.push_back(SubstituteWords(base[i], 0.12, rng));
  }
  DedupOptions options;
  options.edited_threshold = 0.7;
  const size_t edited = ExpectStreamingEqualsDedup(
      dir_, corpus, {"--rule", "dedup", "--memtable-limit", "150", "--edited", "0.7"}, options,
      "edited");
  EXPECT_GT(edited, 0u);
}

TEST_F(ServerDedupRuleTest, BatchFormQueryAndRefusals) {
  const std::vector<std::string> texts = SampleTexts(5);
  ASSERT_GE(texts.size(), 4u);
  const std::string& a = texts[5];  // poems: no two alike
  const std::string& other = texts[6];
  {
    ServerProcess server(dir_, {"--rule", "dedup"});
    auto client = server.Client();
    simdjson::dom::parser parser;
    // The batch form: in order, each document also against the earlier added ones.
    std::string body;
    {
      JsonWriter w(&body);
      w.BeginObject().Key("add").String("if_unique").Key("documents").BeginArray();
      w.BeginObject().Key("id").String("a").Key("text").String(a).EndObject();
      w.BeginObject().Key("id").String("a2").Key("text").String(a + "  ").EndObject();
      w.BeginObject().Key("id").String("o").Key("text").String(other).EndObject();
      w.EndArray().EndObject();
    }
    auto res = client->Post("/v1/check", body, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    simdjson::dom::array results = parser.parse(res->body)["results"].get_array().value();
    ASSERT_EQ(results.size(), 3u);
    EXPECT_TRUE(results.at(0)["added"].get_bool().value());
    EXPECT_FALSE(results.at(1)["added"].get_bool().value());
    EXPECT_EQ(DuplicateIds(results.at(1)), std::vector<std::string>{"a"});
    EXPECT_EQ(std::string(results.at(1)["duplicates"].at(0)["reason"].get_string().value()),
              "whitespace_duplicate");
    EXPECT_TRUE(results.at(2)["added"].get_bool().value());
    // "add": "never" is a pure lookup.
    res = client->Post("/v1/check", CheckBody("n", a, "never"), "application/json");
    ASSERT_TRUE(res);
    simdjson::dom::element never = parser.parse(res->body).value();
    EXPECT_FALSE(never["added"].get_bool().value());
    EXPECT_EQ(DuplicateIds(never), std::vector<std::string>{"a"});
    EXPECT_EQ(std::string(never["duplicates"].at(0)["reason"].get_string().value()),
              "exact_duplicate");
    // A text query applies the rule.
    std::string query;
    {
      JsonWriter w(&query);
      w.BeginObject().Key("text").String(a).EndObject();
    }
    res = client->Post("/v1/query", query, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    simdjson::dom::element found = parser.parse(res->body).value();
    EXPECT_EQ(std::string(found["rule"].get_string().value()), "dedup");
    EXPECT_EQ(found["results"].get_array().size(), 1u);
    // Bare fingerprints are refused, saying what to do instead.
    res = client->Post("/v1/documents", R"({"id":"f","fingerprint":"00000000000000ff"})",
                       "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_NE(res->body.find("--rule simhash"), std::string::npos) << res->body;
    // Stats name the rule.
    res = client->Get("/v1/stats");
    ASSERT_TRUE(res);
    EXPECT_NE(res->body.find(R"("rule":"dedup")"), std::string::npos) << res->body;
    // The default rule: 41 bands (down to the `edited` reason's floor), the reason on at 0.8.
    EXPECT_NE(res->body.find(R"("bands":41)"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find(R"("edited":0.8,"edited_min_jaccard":0.45)"), std::string::npos)
        << res->body;
    // ... with the recorded containment options (dedup's defaults for this store).
    EXPECT_NE(res->body.find(R"("containment":0.9,"containment_min_shingles":30,)"
                             R"("containment_min_ratio":0.6)"),
              std::string::npos)
        << res->body;
    EXPECT_EQ(server.Terminate(), 0);
  }
  {
    // After a restart: the same answer, from the flushed segment.
    ServerProcess server(dir_, {"--rule", "dedup"});
    auto client = server.Client();
    auto res = client->Post("/v1/check", CheckBody("n", a + "\n", "never"), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    simdjson::dom::parser parser;
    simdjson::dom::element again = parser.parse(res->body).value();
    EXPECT_EQ(DuplicateIds(again), std::vector<std::string>{"a"});
  }
}

// A store created by `neardup serve --edited 0.7` answers a lightly edited copy (every 12th of
// 300 words replaced: shingle Jaccard about 0.6, below the 0.8 threshold) with reason "edited" and
// its unit-set Jaccard, says its options in /v1/stats, and keeps them after a restart without the
// flags.
TEST_F(ServerDedupRuleTest, TheEditedReasonOfAStoreCreatedWithIt) {
  std::string original, copy;
  for (int i = 0; i < 300; ++i) {
    original += (i ? " " : "") + std::string("token") + std::to_string(i);
    copy += (i ? " " : "") + std::string(i % 12 == 6 ? "changed" : "token") + std::to_string(i);
  }
  for (int run = 0; run < 2; ++run) {
    std::vector<std::string> flags = {"--rule", "dedup"};
    if (run == 0) {
      flags.insert(flags.end(),
                   {"--threshold", "0.8", "--edited", "0.7", "--edited-min-jaccard", "0.3"});
    }
    ServerProcess server(dir_, flags);
    auto client = server.Client();
    simdjson::dom::parser parser;
    if (run == 0) {
      auto res = client->Post("/v1/check", CheckBody("original", original, "if_unique"),
                              "application/json");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
    }
    auto res = client->Post("/v1/check", CheckBody("copy", copy, "never"), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    simdjson::dom::element result = parser.parse(res->body).value();
    EXPECT_EQ(DuplicateIds(result), std::vector<std::string>{"original"}) << res->body;
    simdjson::dom::element first = result["duplicates"].at(0).value();
    EXPECT_EQ(first["reason"].get_string().value(), "edited") << res->body;
    EXPECT_GE(first["similarity"].get_double().value(), 0.7);
    res = client->Get("/v1/stats");
    ASSERT_TRUE(res);
    EXPECT_NE(res->body.find(R"("edited":0.7,"edited_min_jaccard":0.3)"), std::string::npos)
        << res->body;
    EXPECT_NE(res->body.find(R"("verification_form":"narrowed32-elias-fano+units20")"),
              std::string::npos)
        << res->body;
    EXPECT_EQ(server.Terminate(), 0);
  }
}

}  // namespace
}  // namespace neardup
