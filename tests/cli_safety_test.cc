// End-to-end regression tests of the real `neardup` binary for issue 12: outputs never written over
// an input, existing outputs refused without --force, shared ids, counted fallbacks, a run that
// reads nothing, one reader for every command (index add included: extra fields, numeric ids, bad
// lines, gzip, directories, several inputs, raw metadata), BOM / xz / gzip by content / a file
// named twice, explain's unknown ids and k rule, and the small defects (fingerprint --format
// decimal
// --bits 128, index remove with a missing id, a mistyped command, eval's scoring and paths).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing_files::ReadFile;

size_t CountLines(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

// Two near-duplicate English paragraphs and one unrelated one, as JSONL lines.
const char* kBase =
    "The committee met on Tuesday to review the annual budget and agreed to postpone the vote on "
    "the new library building until the engineers deliver their final report on the foundations "
    "and the cost of the repairs to the old town hall next spring";
const char* kOther =
    "Bright orange fish swim slowly around the coral reef while divers photograph the turtles "
    "that rest on the sandy bottom near the wreck of an old cargo ship";

std::string Line(const std::string& id_json, const std::string& text,
                 const std::string& extra = "") {
  return "{\"id\":" + id_json + ",\"text\":\"" + text + "\"" + extra + "}\n";
}

class CliSafetyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neardup_cli_safety_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& name, const std::string& content) {
    fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  fs::path WriteGzip(const std::string& name, const std::string& content) {
    fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    gzFile file = gzopen(path.c_str(), "wb");
    gzwrite(file, content.data(), static_cast<unsigned>(content.size()));
    gzclose(file);
    return path;
  }
  // Runs the binary from the test's directory; returns the exit code, captures stdout/stderr.
  int Run(const std::string& args, std::string* out = nullptr, std::string* err = nullptr,
          const std::string& environment = "") {
    fs::path out_file = dir_ / ".stdout", err_file = dir_ / ".stderr";
    std::string command = "cd " + dir_.string() + " && " + environment + " " +
                          std::string(NEARDUP_BINARY) + " " + args + " >" + out_file.string() +
                          " 2>" + err_file.string();
    int status = std::system(command.c_str());
    if (out) *out = ReadFile(out_file);
    if (err) *err = ReadFile(err_file);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Corpus() {
    return Line("\"a\"", kBase) + Line("\"b\"", std::string(kBase) + " again") +
           Line("\"c\"", kOther);
  }

  fs::path dir_;
};

// ---- No data loss ----

TEST_F(CliSafetyTest, WriteKeptOverTheInputIsRefusedAndTheInputSurvives) {
  const std::string corpus = Corpus();
  Write("self.jsonl", corpus);
  std::string err;
  EXPECT_EQ(Run("dedup self.jsonl -o o --write-kept self.jsonl", nullptr, &err), 1);
  EXPECT_NE(err.find("neardup: error: self.jsonl: is an input"), std::string::npos) << err;
  EXPECT_EQ(ReadFile(dir_ / "self.jsonl"), corpus);
  EXPECT_FALSE(fs::exists(dir_ / "o")) << "a refused run writes nothing";
  // --force never overrides it.
  EXPECT_EQ(Run("dedup self.jsonl -o o --force --write-kept ./self.jsonl", nullptr, &err), 1);
  EXPECT_EQ(ReadFile(dir_ / "self.jsonl"), corpus);
}

TEST_F(CliSafetyTest, InputsAreComparedByIdentityNotByName) {
  const std::string corpus = Corpus();
  Write("data/in.jsonl", corpus);
  fs::create_hard_link(dir_ / "data/in.jsonl", dir_ / "alias.jsonl");
  std::string err;
  // A hard link under another name, and an input reached through its directory.
  EXPECT_EQ(Run("dedup data -o o --force --write-kept alias.jsonl", nullptr, &err), 1);
  EXPECT_NE(err.find("is an input"), std::string::npos) << err;
  EXPECT_EQ(ReadFile(dir_ / "data/in.jsonl"), corpus);
  // -o pointing at the folder that holds an input named like an output file.
  Write("dir2/clusters.jsonl", corpus);
  EXPECT_EQ(Run("dedup dir2/clusters.jsonl -o dir2 --force", nullptr, &err), 1);
  EXPECT_EQ(ReadFile(dir_ / "dir2/clusters.jsonl"), corpus);
  // idf -o over its input.
  EXPECT_EQ(Run("idf data/in.jsonl -o alias.jsonl --force", nullptr, &err), 1);
  EXPECT_EQ(ReadFile(dir_ / "data/in.jsonl"), corpus);
}

TEST_F(CliSafetyTest, ExistingOutputsNeedForceAndNoTemporaryFileIsLeft) {
  Write("in.jsonl", Corpus());
  ASSERT_EQ(Run("dedup in.jsonl -o o -q"), 0);
  std::string err;
  EXPECT_EQ(Run("dedup in.jsonl -o o -q", nullptr, &err), 1);
  EXPECT_NE(err.find("already exists (use --force"), std::string::npos) << err;
  EXPECT_EQ(Run("dedup in.jsonl -o o -q --force --write-kept kept.jsonl"), 0);
  EXPECT_EQ(Run("dedup in.jsonl -q --write-kept kept.jsonl", nullptr, &err), 1);
  EXPECT_NE(err.find("kept.jsonl: already exists"), std::string::npos) << err;
  EXPECT_EQ(Run("dedup in.jsonl -o o -q -f --write-kept kept.jsonl"), 0);
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
  EXPECT_EQ(CountLines(ReadFile(dir_ / "kept.jsonl")), 2u);
}

// ---- Duplicate ids ----

TEST_F(CliSafetyTest, SharedIdsAreWarnedQualifiedAndRefusedWithStrict) {
  Write("x.jsonl", Line("\"a\"", kBase) + Line("\"z\"", "some other words entirely here"));
  Write("y.jsonl", Line("\"a\"", kOther));
  std::string err;
  ASSERT_EQ(Run("dedup x.jsonl y.jsonl -o o -q", nullptr, &err), 0) << err;
  EXPECT_NE(err.find("neardup: warning: 2 documents share their id"), std::string::npos) << err;
  const std::string keep = ReadFile(dir_ / "o/keep.txt");
  EXPECT_NE(keep.find("a@x.jsonl:1\n"), std::string::npos) << keep;
  EXPECT_NE(keep.find("a@y.jsonl:1\n"), std::string::npos) << keep;
  EXPECT_EQ(keep.find("\na\n"), std::string::npos) << keep;
  EXPECT_NE(ReadFile(dir_ / "o/summary.json").find("\"duplicate_ids\":2"), std::string::npos);
  EXPECT_EQ(Run("dedup x.jsonl y.jsonl -o o2 -q --strict", nullptr, &err), 1);
  EXPECT_NE(err.find("id \"a\" is used twice"), std::string::npos) << err;
}

// ---- Silent fallbacks ----

TEST_F(CliSafetyTest, WrongIdFieldIsWarnedAndCountedEvenWithQuiet) {
  Write("in.jsonl", Corpus());
  std::string err;
  ASSERT_EQ(Run("dedup in.jsonl -o o -q --id-field uid", nullptr, &err), 0);
  EXPECT_NE(err.find("in.jsonl:1: no id in field \"uid\""), std::string::npos) << err;
  EXPECT_NE(err.find("3 records read with a fallback (missing_id: 3)"), std::string::npos) << err;
  EXPECT_NE(ReadFile(dir_ / "o/summary.json").find("\"missing_id\":3"), std::string::npos);
  // A null id too.
  Write("null.jsonl", Line("null", kBase));
  ASSERT_EQ(Run("fingerprint null.jsonl", nullptr, &err), 0);
  EXPECT_NE(err.find("null.jsonl:1: no id in field \"id\""), std::string::npos) << err;
}

TEST_F(CliSafetyTest, KeepFieldMissingOrNotNumericIsWarned) {
  Write("in.jsonl", Line("\"a\"", kBase, ",\"score\":2") +
                        Line("\"b\"", std::string(kBase) + " again", ",\"score\":\"high\"") +
                        Line("\"c\"", kOther));
  std::string err;
  ASSERT_EQ(Run("dedup in.jsonl -o o --keep field:score", nullptr, &err), 0) << err;
  EXPECT_NE(err.find("in.jsonl:2: score field \"score\" is not a number"), std::string::npos)
      << err;
  EXPECT_NE(err.find("in.jsonl:3: no score field \"score\""), std::string::npos) << err;
  EXPECT_NE(err.find("(missing_score: 1, non_numeric_score: 1)"), std::string::npos) << err;
}

TEST_F(CliSafetyTest, ARunThatReadsNothingIsAnError) {
  Write("in.jsonl", Corpus());
  std::string err;
  EXPECT_EQ(Run("dedup in.jsonl -o o --text-field body", nullptr, &err), 1);
  EXPECT_NE(err.find("in.jsonl:1: missing field \"body\" (skipped)"), std::string::npos) << err;
  EXPECT_NE(err.find("neardup: error: no document read: all 3 records skipped"), std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(dir_ / "o/keep.txt"));
  EXPECT_EQ(Run("fingerprint in.jsonl --text-field body", nullptr, &err), 1);
  Write("empty.jsonl", "");
  EXPECT_EQ(Run("keywords empty.jsonl", nullptr, &err), 1);
  EXPECT_NE(err.find("the inputs are empty"), std::string::npos) << err;
}

TEST_F(CliSafetyTest, WriteKeptCountsTheSkippedRecordsItLeavesOut) {
  Write("in.jsonl", Corpus() + "{broken\n");
  std::string err;
  ASSERT_EQ(Run("dedup in.jsonl -o o -q --write-kept kept.jsonl", nullptr, &err), 0);
  EXPECT_NE(err.find("1 skipped record (malformed or empty) is not in kept.jsonl"),
            std::string::npos)
      << err;
}

// ---- One reader ----

TEST_F(CliSafetyTest, ByteOrderMarkXzGzipByContentAndAFileNamedTwice) {
  Write("bom.jsonl", "\xEF\xBB\xBF" + Corpus());
  std::string out, err;
  ASSERT_EQ(Run("fingerprint bom.jsonl ./bom.jsonl", &out, &err), 0) << err;
  EXPECT_EQ(CountLines(out), 3u) << out;  // the BOM line is read; the second name is the same file
  EXPECT_EQ(out.rfind("{\"id\":\"a\"", 0), 0u) << out;
  WriteGzip("gz_named_plain.jsonl", Corpus());
  ASSERT_EQ(Run("fingerprint gz_named_plain.jsonl", &out, &err), 0) << err;
  EXPECT_EQ(CountLines(out), 3u) << out;
  Write("plain.jsonl", Corpus());
  if (std::system(("xz -k -c " + (dir_ / "plain.jsonl").string() + " > " +
                   (dir_ / "c.jsonl.xz").string() + " 2>/dev/null")
                      .c_str()) == 0) {
    ASSERT_EQ(Run("fingerprint c.jsonl.xz", &out, &err), 0) << err;
    EXPECT_EQ(CountLines(out), 3u) << out;
  } else {
    GTEST_SKIP() << "xz tool not installed: the .xz case was not run";
  }
}

TEST_F(CliSafetyTest, NestedFieldPaths) {
  Write("n.jsonl",
        "{\"meta\":{\"id\":\"n1\"},\"content\":{\"text\":\"" + std::string(kBase) + "\"}}\n");
  std::string out, err;
  ASSERT_EQ(Run("fingerprint n.jsonl --id-field meta.id --text-field content.text", &out, &err), 0)
      << err;
  EXPECT_EQ(out.rfind("{\"id\":\"n1\"", 0), 0u) << out;
}

TEST_F(CliSafetyTest, IndexAddReadsLikeEveryOtherCommandAndKeepsMetadataAsJson) {
  // Texts and a bare fingerprint: a simhash-rule store takes both.
  ASSERT_EQ(Run("index create st --rule simhash"), 0);
  Write("one.jsonl", Line("\"u1\"", kBase, ",\"metadata\":\"m\",\"extra\":1") + "not json\n" +
                         Line("7", kOther, ",\"metadata\":{\"k\":[1,2]}"));
  WriteGzip("more/two.jsonl.gz", "{\"id\":\"u3\",\"fingerprint\":\"f773be40a3f0a3e5\"}\n");
  std::string out, err;
  ASSERT_EQ(Run("index add st one.jsonl more", &out, &err), 0) << err;
  EXPECT_NE(err.find("one.jsonl:2: invalid JSON"), std::string::npos) << err;
  EXPECT_NE(err.find("1 record skipped"), std::string::npos) << err;
  EXPECT_NE(err.find("added 3 documents"), std::string::npos) << err;
  ASSERT_EQ(Run("index get st u1 7 u3", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"id\":\"u1\",\"fingerprint\":"), std::string::npos) << out;
  EXPECT_NE(out.find("\"metadata\":\"m\"}"), std::string::npos) << out;  // not "\"m\""
  EXPECT_NE(out.find("\"metadata\":{\"k\":[1,2]}"), std::string::npos) << out;
  EXPECT_NE(out.find("{\"id\":\"u3\",\"fingerprint\":\"f773be40a3f0a3e5\",\"metadata\":null}"),
            std::string::npos)
      << out;
  // A directory with nothing readable is an error, not "added 0 documents".
  fs::create_directories(dir_ / "emptydir");
  EXPECT_EQ(Run("index add st emptydir", &out, &err), 1);
  EXPECT_NE(err.find("no document read"), std::string::npos) << err;
  // A dedup-rule store (the default) needs texts: the bare fingerprint is skipped and counted.
  ASSERT_EQ(Run("index create dd"), 0);
  ASSERT_EQ(Run("index add dd one.jsonl more", &out, &err), 0) << err;
  EXPECT_NE(err.find("more/two.jsonl.gz:1: a bare fingerprint"), std::string::npos) << err;
  EXPECT_NE(err.find("fingerprint_without_text: 1"), std::string::npos) << err;
  EXPECT_NE(err.find("added 2 documents"), std::string::npos) << err;
}

TEST_F(CliSafetyTest, IndexRemoveReportsEveryId) {
  ASSERT_EQ(Run("index create st"), 0);
  Write("in.jsonl", Corpus());
  ASSERT_EQ(Run("index add st in.jsonl"), 0);
  std::string out, err;
  EXPECT_EQ(Run("index remove st a nosuch", &out, &err), 1);
  EXPECT_EQ(out, "removed a\n");
  EXPECT_NE(err.find("nosuch"), std::string::npos) << err;
  EXPECT_NE(err.find("removed 1 document of 2"), std::string::npos) << err;
}

// ---- explain ----

TEST_F(CliSafetyTest, ExplainUnknownIdOrForgottenFileIsAnError) {
  Write("in.jsonl", Corpus());
  std::string out, err;
  EXPECT_EQ(Run("explain in.jsonl a", &out, &err), 1);
  EXPECT_NE(err.find("give it as --file in.jsonl"), std::string::npos) << err;
  EXPECT_EQ(Run("explain --file in.jsonl a en1", &out, &err), 1);
  EXPECT_NE(err.find("id \"en1\" not found"), std::string::npos) << err;
  EXPECT_EQ(Run("explain a en1", &out, &err), 1);
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;
  ASSERT_EQ(Run("explain --text 'one two three four' 'one two three five'", &out, &err), 0) << err;
  EXPECT_NE(out.find("literal text"), std::string::npos) << out;
}

TEST_F(CliSafetyTest, ExplainAppliesTheRuleOfTheDedupRun) {
  Write("in.jsonl", Corpus());
  std::string out, err;
  for (const std::string flags : {"", " -k 3", " --verify 0.9"}) {
    ASSERT_EQ(Run("dedup in.jsonl --json -q" + flags, &out, &err), 0) << err;
    const size_t at = err.find("\"k\":");
    ASSERT_NE(at, std::string::npos) << err;
    const std::string dedup_k = err.substr(at, err.find(',', at) - at);
    const bool dedup_pairs_ab = out.find("\"id\":\"b\"") != std::string::npos;
    ASSERT_EQ(Run("explain --json --file in.jsonl a b" + flags, &out, &err), 0) << err;
    EXPECT_NE(out.find(dedup_k + ","), std::string::npos) << flags << ": " << out;
    EXPECT_EQ(out.find("\"near_duplicate\":true") != std::string::npos, dedup_pairs_ab)
        << flags << ": " << out;
  }
}

// ---- small defects ----

TEST_F(CliSafetyTest, SmallDefects) {
  Write("in.jsonl", Corpus());
  std::string out, err;
  EXPECT_EQ(Run("fingerprint in.jsonl --format decimal --bits 128", &out, &err), 2);
  EXPECT_NE(err.find("--format decimal: only for 64-bit"), std::string::npos) << err;
  EXPECT_TRUE(out.empty()) << out;
  EXPECT_EQ(Run("dedupe in.jsonl", &out, &err), 2);
  EXPECT_NE(err.find("unknown command 'dedupe'; did you mean 'dedup'?"), std::string::npos) << err;
  EXPECT_EQ(Run("dedup in.jsonl --bogus", &out, &err), 2);
  EXPECT_EQ(err.rfind("neardup: error: ", 0), 0u) << err;
  EXPECT_NE(err.find("neardup dedup --help"), std::string::npos) << err;
}

TEST_F(CliSafetyTest, DedupWithoutOutputWritesClustersToStdoutAndTheSummaryToStderr) {
  Write("in.jsonl", Corpus());
  std::string out, err;
  ASSERT_EQ(Run("dedup in.jsonl", &out, &err), 0) << err;
  ASSERT_EQ(CountLines(out), 1u) << out;  // one cluster, one JSON object a line, nothing else
  EXPECT_EQ(out.rfind("{\"cluster\":0,", 0), 0u) << out;
  EXPECT_NE(err.find("neardup: dedup: 3 documents"), std::string::npos) << err;
  EXPECT_NE(err.find("1 cluster,"), std::string::npos) << err;  // singular
  ASSERT_EQ(Run("dedup in.jsonl -o o --json", &out, &err), 0) << err;
  EXPECT_EQ(CountLines(out), 1u) << out;
  EXPECT_EQ(out.rfind("{\"documents_read\":3,", 0), 0u) << out;
}

TEST_F(CliSafetyTest, KeepLongestMeasuresTheNormalisedText) {
  // The HTML-wrapped copy has more bytes; the bare copy has one more word of text.
  const std::string html = "<html><body><div class=\\\"content\\\"><p>" + std::string(kBase) +
                           "</p></div></body></html>";
  Write("in.jsonl", Line("\"html\"", html) + Line("\"bare\"", std::string(kBase) + " today") +
                        Line("\"c\"", kOther));
  std::string err;
  ASSERT_EQ(Run("dedup in.jsonl -o o -q --keep longest", nullptr, &err), 0) << err;
  EXPECT_EQ(ReadFile(dir_ / "o/remove.txt"), "html\n");
}

TEST_F(CliSafetyTest, EvalScoresHonestlyAndReadsTheSharedFolderWhateverTheDirectory) {
  Write("shared/corpus/c.jsonl", Corpus());
  Write("shared/devpairs/docs.jsonl", Line("\"d1\"", kOther));
  Write("shared/devpairs/pairs.tsv", "set\tid_a\tid_b\tlabel\nt\ta\tb\tmystery_label\n");
  const std::string environment = "NEARDUP_SHARED=" + (dir_ / "shared").string();
  std::string out, err;
  // Only an unknown label: nothing can be scored, so no precision/recall is printed.
  EXPECT_EQ(Run("eval", &out, &err, "cd / && " + environment), 1);
  EXPECT_NE(err.find("unknown labels (mystery_label)"), std::string::npos) << err;
  EXPECT_NE(err.find("no labelled pair could be scored"), std::string::npos) << err;
  EXPECT_EQ(out.find("1.000"), std::string::npos) << out;
  Write("shared/devpairs/pairs.tsv", "set\tid_a\tid_b\tlabel\nt\ta\tb\tnear_dup_real\n");
  ASSERT_EQ(Run("eval", &out, &err, "cd / && " + environment), 0) << err;
  EXPECT_NE(out.find("| dedup: same cluster |"), std::string::npos) << out;
  // An empty corpus folder is named, not "(Success)".
  fs::create_directories(dir_ / "nothing");
  EXPECT_EQ(Run("eval --corpus nothing", &out, &err, environment), 1);
  EXPECT_NE(err.find("nothing: no .jsonl files"), std::string::npos) << err;
  EXPECT_EQ(err.find("Success"), std::string::npos) << err;
}

}  // namespace
}  // namespace neardup
