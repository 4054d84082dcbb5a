// End-to-end tests of the real `neardup` binary: `index` and `serve` take the shared fingerprint
// flags, a new store records them in its MANIFEST, an existing store is used with the options it
// recorded, and a flag that asks for another value is refused with an error naming the flag.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "server_process.h"
#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing_files::ReadFile;

// The value of "key":"..." in a one-line JSON object ("" if absent).
// The values these tests read hold no escaped quote.
std::string JsonString(const std::string& json, const std::string& key) {
  const std::string opening = "\"" + key + "\":\"";
  const size_t start = json.find(opening);
  if (start == std::string::npos) return "";
  const size_t begin = start + opening.size();
  const size_t end = json.find('"', begin);
  if (end == std::string::npos) return "";
  return json.substr(begin, end - begin);
}

const char* kText =
    "The committee met on Tuesday to review the annual budget and agreed to postpone the vote on "
    "the new library building until the engineers deliver their final report";

class CliStoreOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neardup_cli_store_options_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "docs.jsonl") << "{\"id\":\"a\",\"text\":\"" << kText << "\"}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the binary in the test's directory (at most 60 s); returns the exit code.
  int Run(const std::string& args, std::string* out = nullptr, std::string* err = nullptr) {
    fs::path out_file = dir_ / ".stdout", err_file = dir_ / ".stderr";
    std::string command = "cd " + dir_.string() + " && timeout 60 " + std::string(NEARDUP_BINARY) +
                          " " + args + " >" + out_file.string() + " 2>" + err_file.string();
    int status = std::system(command.c_str());
    if (out) *out = ReadFile(out_file);
    if (err) *err = ReadFile(err_file);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // `neardup fingerprint FLAGS docs.jsonl`: the hex fingerprint of kText.
  std::string Fingerprint(const std::string& flags) {
    std::string out;
    EXPECT_EQ(Run("fingerprint " + flags + " docs.jsonl", &out), 0);
    return JsonString(out, "fingerprint");
  }
  std::string StoredFingerprint(const std::string& store, const std::string& id) {
    std::string out, err;
    EXPECT_EQ(Run("index get " + store + " " + id, &out, &err), 0) << err;
    return JsonString(out, "fingerprint");
  }
  std::string RecordedOptions(const std::string& store) {
    std::string out;
    EXPECT_EQ(Run("index stats " + store, &out), 0);
    return JsonString(out, "fingerprint_options");
  }

  fs::path dir_;
};

TEST_F(CliStoreOptionsTest, IndexCreateRecordsTheFlagsAndAddAndQueryUseThem) {
  const std::string flags = "--tokenizer char --ngram 5 --no-casefold";
  const std::string expected = Fingerprint(flags);
  ASSERT_FALSE(expected.empty());
  ASSERT_NE(expected, Fingerprint("")) << "the flags must change the fingerprint for this test";

  std::string out, err;
  ASSERT_EQ(Run("index create s " + flags, &out, &err), 0) << err;
  EXPECT_NE(err.find("tokenizer=char"), std::string::npos)
      << "create says what it recorded: " << err;
  const std::string recorded = RecordedOptions("s");
  EXPECT_NE(recorded.find("tokenizer=char"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find("ngram=5"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find("case_fold=0"), std::string::npos) << recorded;

  // Without flags, add uses the recorded options.
  ASSERT_EQ(Run("index add s docs.jsonl", &out, &err), 0) << err;
  EXPECT_EQ(StoredFingerprint("s", "a"), expected);
  // Giving the same flags again is fine.
  ASSERT_EQ(Run("index add s docs.jsonl --ngram 5 --tokenizer char", &out, &err), 0) << err;
  EXPECT_EQ(StoredFingerprint("s", "a"), expected);

  // A text query without flags fingerprints with the recorded options: distance 0.
  ASSERT_EQ(Run(std::string("index query s --text \"") + kText + "\"", &out, &err), 0) << err;
  EXPECT_EQ(JsonString(out, "id"), "a") << out;
  EXPECT_NE(out.find("\"distance\":0"), std::string::npos) << out;
}

TEST_F(CliStoreOptionsTest, AnotherValueIsRefusedNamingTheFlagAndChangesNothing) {
  std::string out, err;
  ASSERT_EQ(Run("index create s --tokenizer char --ngram 5", &out, &err), 0) << err;
  ASSERT_EQ(Run("index add s docs.jsonl", &out, &err), 0) << err;
  const std::string before = StoredFingerprint("s", "a");

  std::ofstream(dir_ / "more.jsonl") << "{\"id\":\"b\",\"text\":\"another document\"}\n";
  EXPECT_EQ(Run("index add s more.jsonl --ngram 4", &out, &err), 1);
  EXPECT_NE(err.find("--ngram"), std::string::npos) << err;
  EXPECT_NE(err.find("ngram=5, not ngram=4"), std::string::npos) << err;
  EXPECT_NE(Run("index get s b", &out, &err), 0) << "a refused add adds nothing";
  EXPECT_EQ(StoredFingerprint("s", "a"), before);

  EXPECT_EQ(Run("index query s --text hello --tokenizer icu", &out, &err), 1);
  EXPECT_NE(err.find("--tokenizer"), std::string::npos) << err;
  EXPECT_NE(err.find("tokenizer=char, not tokenizer=icu"), std::string::npos) << err;

  EXPECT_EQ(Run("index add s more.jsonl --bits 128", &out, &err), 1);
  EXPECT_NE(err.find("--bits 128"), std::string::npos) << err;
  EXPECT_NE(err.find("64-bit"), std::string::npos) << err;

  EXPECT_EQ(Run("index add s more.jsonl --profile yanyiwu", &out, &err), 1);
  EXPECT_NE(err.find("--profile"), std::string::npos) << err;
  EXPECT_EQ(RecordedOptions("s").find("profile=neardup"), 0u);
}

TEST_F(CliStoreOptionsTest, A128BitStoreFingerprintsTextAt128Bits) {
  std::string out, err;
  ASSERT_EQ(Run("index create s --bits 128", &out, &err), 0) << err;
  ASSERT_EQ(Run("index add s docs.jsonl", &out, &err), 0) << err;
  EXPECT_EQ(StoredFingerprint("s", "a"), Fingerprint("--bits 128"));
  EXPECT_EQ(StoredFingerprint("s", "a").size(), 32u);
}

TEST_F(CliStoreOptionsTest, InvalidFlagsCreateNoStore) {
  std::string out, err;
  EXPECT_NE(Run("index create s --idf missing_idf.txt --weighting tfidf", &out, &err), 0);
  EXPECT_NE(err.find("missing_idf.txt"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "s" / "MANIFEST")) << "nothing is created for unusable options";
}

// Contradictory or out-of-range store, server and plan flags are usage errors (exit 2) of every
// command, before anything is created.
TEST_F(CliStoreOptionsTest, ConflictingOrBadFlagsAreUsageErrors) {
  std::string err;
  EXPECT_EQ(Run("index create s --rule simhash --threshold 0.6", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("--rule simhash"), std::string::npos) << err;
  EXPECT_EQ(Run("index create s --indexed-k 16", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("index create s --max-k 16", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("index create s --max-k 3 --indexed-k 3", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("index create s --memory-budget lots", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("--memory-budget"), std::string::npos) << err;
  EXPECT_EQ(Run("index create s --bands 5", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("index create s --profile yanyiwu --tokenizer char", nullptr, &err), 2) << err;
  EXPECT_FALSE(fs::exists(dir_ / "s")) << "nothing is created for a usage error";
  EXPECT_EQ(Run("serve s --rule simhash --bands 4 --rows 2", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("serve s --port 70000", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("serve s --timeout 0", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("serve s --max-body-bytes 0", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("serve s --token a --token-file token.txt", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("serve s --sync every --group-commit-ms 5", nullptr, &err), 2) << err;
  EXPECT_FALSE(fs::exists(dir_ / "s")) << "serve creates no store for a usage error";
  EXPECT_EQ(Run("index add s docs.jsonl --memtable-limit 0", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("plan --containment 0.8", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("--containment"), std::string::npos) << err;
  EXPECT_EQ(Run("plan --threshold 0.5 --list", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("plan --threshold 1.5", nullptr, &err), 2) << err;
  // The store's sync flags: one set of values wherever a store is written, one check.
  EXPECT_EQ(Run("serve s --sync sometimes", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("serve s --group-commit-ms 1001", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("index add s docs.jsonl --sync sometimes", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("index add s docs.jsonl --group-commit-ms 5", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("--group-commit-ms is the window of --sync group, not of --sync every"),
            std::string::npos)
      << err;
  EXPECT_EQ(Run("index add s docs.jsonl --sync none --group-commit-ms 5", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("serve s --token-file no-such-file", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("no-such-file: cannot read the token file"), std::string::npos) << err;
  // plan's flags are the registry's: its budget in the one budget form, its k checked.
  EXPECT_EQ(Run("plan --memory-budget lots", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("--memory-budget"), std::string::npos) << err;
  EXPECT_EQ(Run("plan -k 40", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("plan --bits 96", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("plan -n 0", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("plan -k 20", nullptr, &err), 2) << err;  // the planner: at most bits/4
  std::string plan;
  EXPECT_EQ(Run("plan -k 3 -n 1e9 --memory-budget 64G", &plan, &err), 0) << err;
  EXPECT_NE(plan.find("memory budget 68.719477 GB"), std::string::npos) << plan;
  EXPECT_EQ(Run("plan -k 3 -n 1e9 --memory-budget 64e9", &plan, &err), 0) << err;
  EXPECT_NE(plan.find("memory budget 64.000000 GB"), std::string::npos) << plan;
  EXPECT_EQ(Run("plan -n 1e9 --memory-budget 40/fp", &plan, &err), 0) << err;
  EXPECT_NE(plan.find("memory budget 40 bytes per fingerprint (40.000000 GB)"), std::string::npos)
      << plan;
  EXPECT_EQ(Run("plan --threshold 0.5 --memory-budget 1G", nullptr, &err), 2) << err;
  // A flag of the other form of `index query` is refused, not ignored.
  ASSERT_EQ(Run("index create q", nullptr, &err), 0) << err;
  ASSERT_EQ(Run("index add q docs.jsonl", nullptr, &err), 0) << err;
  EXPECT_EQ(Run("index query q --text hello -o out", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("--output"), std::string::npos) << err;
  EXPECT_EQ(Run("index query q --text hello --lines", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("--lines"), std::string::npos) << err;
  EXPECT_EQ(Run("index query q --text hello --batch 5", nullptr, &err), 2) << err;
  EXPECT_EQ(Run("index query q docs.jsonl --limit 3", nullptr, &err), 2) << err;
  // A dedup-rule store's text queries apply its rule: -k would mean nothing.
  EXPECT_EQ(Run("index query q --text hello -k 5", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("dedup-rule store"), std::string::npos) << err;
  EXPECT_EQ(Run("index query q docs.jsonl -k 5", nullptr, &err), 2) << err;
  std::string out;
  EXPECT_EQ(Run("index query q --fingerprint 0123456789abcdef -k 5", &out, &err), 0) << err;
  EXPECT_EQ(Run("serve q --port 0 --no-text", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("dedup-rule store"), std::string::npos) << err;
  // The old names still work, with a warning each.
  ASSERT_EQ(Run("index create s --max-k 4 --expected-documents 1e5", nullptr, &err), 0) << err;
  EXPECT_NE(err.find("warning: --max-k is an old name: use --indexed-k"), std::string::npos) << err;
  EXPECT_NE(err.find("warning: --expected-documents is an old name: use --expected-size"),
            std::string::npos)
      << err;
  std::string stats;
  ASSERT_EQ(Run("index stats s", &stats, &err), 0) << err;
  EXPECT_NE(stats.find("\"indexed_k\":4"), std::string::npos) << stats;
  // max_k: indexed_k's old name, kept for one release as a deprecated alias.
  EXPECT_NE(stats.find("\"max_k\":4"), std::string::npos) << stats;
  ASSERT_EQ(Run("index stats s --no-verify", &stats, &err), 0) << err;
  EXPECT_NE(stats.find("\"indexed_k\":4"), std::string::npos) << stats;
  // index add takes every sync mode serve takes.
  ASSERT_EQ(Run("index add s docs.jsonl --sync group --group-commit-ms 1", nullptr, &err), 0)
      << err;
  ASSERT_EQ(Run("index add s docs.jsonl --sync none", nullptr, &err), 0) << err;
}

TEST_F(CliStoreOptionsTest, ServeRecordsTheFlagsOfANewStoreAndRefusesOthersLater) {
  const std::string store = (dir_ / "served").string();
  const std::string expected = Fingerprint("--tokenizer char --ngram 3");
  {
    testing::ServerProcess server(store, {"--tokenizer", "char", "--ngram", "3"});
    ASSERT_GT(server.port(), 0);
    httplib::Client client("127.0.0.1", server.port());
    auto added =
        client.Post("/v1/documents", std::string("{\"id\":\"a\",\"text\":\"") + kText + "\"}",
                    "application/json");
    ASSERT_TRUE(added);
    EXPECT_EQ(added->status, 200) << added->body;
    // /v1/stats names the table radius indexed_k; max_k is its deprecated alias for one release.
    auto stats = client.Get("/v1/stats");
    ASSERT_TRUE(stats);
    EXPECT_NE(stats->body.find("\"indexed_k\":3,\"max_k\":3"), std::string::npos) << stats->body;
    EXPECT_EQ(server.Terminate(), 0);
  }
  EXPECT_EQ(StoredFingerprint(store, "a"), expected);
  EXPECT_NE(RecordedOptions(store).find("ngram=3"), std::string::npos);

  // Restarted without flags: the recorded options fingerprint the query text (distance 0).
  {
    testing::ServerProcess server(store, {});
    ASSERT_GT(server.port(), 0);
    httplib::Client client("127.0.0.1", server.port());
    auto found = client.Post("/v1/query", std::string("{\"text\":\"") + kText + "\",\"k\":0}",
                             "application/json");
    ASSERT_TRUE(found);
    EXPECT_EQ(found->status, 200) << found->body;
    EXPECT_NE(found->body.find("\"a\""), std::string::npos) << found->body;
    EXPECT_EQ(server.Terminate(), 0);
  }

  // Restarted with another value: refused at start, naming the flag.
  std::string out, err;
  EXPECT_EQ(Run("serve " + store + " --port 0 --ngram 4", &out, &err), 1);
  EXPECT_NE(err.find("--ngram"), std::string::npos) << err;
  EXPECT_NE(err.find("ngram=3, not ngram=4"), std::string::npos) << err;
  // index create's line names the table radius as the stats do (serve's start-up line too).
  ASSERT_EQ(Run("index create " + (dir_ / "created").string(), &out, &err), 0) << err;
  EXPECT_NE(err.find("64-bit, indexed_k 3)"), std::string::npos) << err;
}

// --edited (issue 25; on by default at 0.8): `index create` records the reason (index stats and
// the create line say it); a store created with it off (--edited 0, as every store made before the
// default turned it on) is added to and queried with the default options and answers with it off,
// its recorded rule never rewritten; `serve` asking such a store for it, even for the default
// value, is refused naming the option, not silently ignored (`index add` takes no rule flag).
TEST_F(CliStoreOptionsTest, TheEditedReasonIsRecordedOrRefusedNeverIgnored) {
  std::string out, err;
  ASSERT_EQ(Run("index create e --edited 0.7 --edited-min-jaccard 0.4", &out, &err), 0) << err;
  EXPECT_NE(err.find("edited 0.7 (shingle Jaccard >= 0.4)"), std::string::npos) << err;
  ASSERT_EQ(Run("index stats e", &out, &err), 0) << err;
  EXPECT_NE(out.find(R"("edited":0.7,"edited_min_jaccard":0.4)"), std::string::npos) << out;
  ASSERT_EQ(Run("index add e docs.jsonl", &out, &err), 0) << err;

  // The default: on at 0.8, the LSH plan reaching its floor (41 x 3 at 0.5).
  ASSERT_EQ(Run("index create dflt", &out, &err), 0) << err;
  EXPECT_NE(err.find("41 bands of 3 rows"), std::string::npos) << err;
  EXPECT_NE(err.find("edited 0.8 (shingle Jaccard >= 0.45)"), std::string::npos) << err;
  ASSERT_EQ(Run("index stats dflt", &out, &err), 0) << err;
  EXPECT_NE(out.find(R"("edited":0.8,"edited_min_jaccard":0.45)"), std::string::npos) << out;

  // A lightly edited copy (every 12th of 300 words replaced: shingle Jaccard ~0.6, below the
  // threshold 0.8; its words 0.85 alike): a duplicate only by the `edited` reason.
  std::string original, copy;
  for (int i = 0; i < 300; ++i) {
    original += (i ? " " : "") + std::string("token") + std::to_string(i);
    copy += (i ? " " : "") + std::string(i % 12 == 6 ? "changed" : "token") + std::to_string(i);
  }
  std::ofstream(dir_ / "original.jsonl")
      << "{\"id\":\"original\",\"text\":\"" << original << "\"}\n";
  std::ofstream(dir_ / "copy.jsonl") << "{\"id\":\"copy\",\"text\":\"" << copy << "\"}\n";
  ASSERT_EQ(Run("index create on --threshold 0.8", &out, &err), 0) << err;
  ASSERT_EQ(Run("index add on original.jsonl", &out, &err), 0) << err;
  ASSERT_EQ(Run("index query on copy.jsonl", &out, &err), 0) << err;
  EXPECT_NE(out.find(R"("reason":"edited")"), std::string::npos) << out;

  ASSERT_EQ(Run("index create plain --edited 0 --threshold 0.8", &out, &err), 0) << err;
  EXPECT_NE(err.find("edited off"), std::string::npos) << err;
  const std::string plain = (dir_ / "plain").string();
  const std::string manifest_path = (dir_ / "plain" / "MANIFEST").string();
  auto manifest_version = [&] {
    const std::string bytes = ReadFile(manifest_path);
    uint32_t version = 0;
    if (bytes.size() >= 12) std::memcpy(&version, bytes.data() + 8, 4);  // after the magic
    return version;
  };
  EXPECT_EQ(manifest_version(), 4u);
  // The default options: added to and queried with the reason off, the rule kept as recorded.
  ASSERT_EQ(Run("index add plain original.jsonl", &out, &err), 0) << err;
  ASSERT_EQ(Run("index query plain copy.jsonl", &out, &err), 0) << err;
  EXPECT_EQ(out.find(R"("reason")"), std::string::npos) << out;
  EXPECT_NE(err.find("0 duplicate stored ones"), std::string::npos) << err;
  ASSERT_EQ(Run("index compact plain", &out, &err), 0) << err;
  ASSERT_EQ(Run("index stats plain", &out, &err), 0) << err;
  EXPECT_NE(out.find(R"("verification_form":"narrowed32-elias-fano",)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("edited":0,)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("documents":1,)"), std::string::npos) << out;
  EXPECT_EQ(manifest_version(), 4u);
  // Served with the default options: it starts, says the reason is off, adds and answers with it
  // off (the copy is no duplicate), and /v1/stats shows edited 0.
  {
    testing::ServerProcess server(plain, {"--rule", "dedup"});
    ASSERT_GT(server.port(), 0);
    httplib::Client client("127.0.0.1", server.port());
    auto checked =
        client.Post("/v1/check", "{\"id\":\"copy\",\"text\":\"" + copy + "\",\"add\":\"never\"}",
                    "application/json");
    ASSERT_TRUE(checked);
    EXPECT_EQ(checked->status, 200) << checked->body;
    EXPECT_NE(checked->body.find(R"("duplicates":[])"), std::string::npos) << checked->body;
    auto added =
        client.Post("/v1/documents", std::string("{\"id\":\"a\",\"text\":\"") + kText + "\"}",
                    "application/json");
    ASSERT_TRUE(added);
    EXPECT_EQ(added->status, 200) << added->body;
    auto stats = client.Get("/v1/stats");
    ASSERT_TRUE(stats);
    EXPECT_NE(stats->body.find(R"("edited":0,)"), std::string::npos) << stats->body;
    EXPECT_NE(stats->body.find(R"("documents":2,)"), std::string::npos) << stats->body;
    EXPECT_EQ(server.Terminate(), 0);
  }
  EXPECT_EQ(manifest_version(), 4u);
  // Refused at start like any other recorded option (--ngram, --containment): exit 1, also for
  // the default value given explicitly.
  EXPECT_EQ(Run("serve " + plain + " --port 0 --edited 0.8", &out, &err), 1) << err;
  EXPECT_NE(err.find("created with edited threshold 0, not 0.8"), std::string::npos) << err;
  EXPECT_EQ(Run("serve " + plain + " --port 0 --edited 0.7", &out, &err), 1) << err;
  EXPECT_NE(err.find("created with edited threshold 0, not 0.7"), std::string::npos) << err;
  // `index add` takes no rule flags: a usage error.
  EXPECT_EQ(Run("index add " + plain + " docs.jsonl --edited 0.7", &out, &err), 2) << err;
  EXPECT_NE(err.find("--edited"), std::string::npos) << err;
  EXPECT_EQ(Run("index create bad --edited 1.5", &out, &err), 2) << err;
  EXPECT_NE(err.find("--edited"), std::string::npos) << err;
  EXPECT_EQ(Run("index create sim --rule simhash --edited 0.7", &out, &err), 2) << err;
  EXPECT_NE(err.find("--edited"), std::string::npos) << err;
}

}  // namespace
}  // namespace neardup
