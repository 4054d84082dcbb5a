// `neardup index` with the dedup rule (issue 19), through the real binary: a new store applies
// dedup's rule; `index query DIR INPUT... -o OUT` checks a corpus against the store without adding
// it and writes dedup-style outputs (clusters.jsonl, keep.txt, remove.txt, summary.json) under the
// usual output protection; `index add --check if-new` adds only what duplicates nothing and prints
// the others; `index query --text` answers with reasons and similarities.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing_files::ReadFile;

const char* kA =
    "The quick brown fox jumps over the lazy dog while the farmer watches from the porch and the "
    "children play in the field behind the old red barn near the river bend";
const char* kC =
    "Bright orange fish swim slowly around the coral reef while divers photograph the turtles "
    "that rest on the sandy bottom near the wreck of an old cargo ship";
const char* kD =
    "A committee of engineers reviewed the storage engine design and asked for a write-ahead log "
    "with checksums on every record and a recovery tool for damaged segment files";

std::string Line(const std::string& id, const std::string& text) {
  return "{\"id\":\"" + id + "\",\"text\":\"" + text + "\"}\n";
}

class CliIndexDedupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neardup_cli_index_dedup_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name, std::ios::binary) << content;
  }
  int Run(const std::string& args, std::string* out = nullptr, std::string* err = nullptr) {
    const fs::path out_file = dir_ / ".stdout", err_file = dir_ / ".stderr";
    const std::string command = "cd " + dir_.string() + " && " + std::string(NEARDUP_BINARY) + " " +
                                args + " >" + out_file.string() + " 2>" + err_file.string();
    const int status = std::system(command.c_str());
    if (out) *out = ReadFile(out_file);
    if (err) *err = ReadFile(err_file);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  fs::path dir_;
};

TEST_F(CliIndexDedupTest, QueryACorpusAgainstTheStoreAndAddOnlyWhatIsNew) {
  std::string out, err;
  ASSERT_EQ(Run("index create st", &out, &err), 0) << err;
  // The default rule: LSH planned down to the `edited` reason's floor (0.45), 41 x 3.
  EXPECT_NE(err.find("rule dedup, threshold 0.5, 41 bands of 3 rows"), std::string::npos) << err;
  EXPECT_NE(err.find("edited 0.8 (shingle Jaccard >= 0.45)"), std::string::npos) << err;
  Write("base.jsonl", Line("a", kA) + Line("c", kC));
  ASSERT_EQ(Run("index add st base.jsonl", &out, &err), 0) << err;
  ASSERT_EQ(Run("index stats st", &out, &err), 0) << err;
  EXPECT_NE(out.find(R"("rule":"dedup","threshold":0.5,"bands":41,"rows":3)"), std::string::npos)
      << out;
  EXPECT_NE(out.find(R"("documents":2)"), std::string::npos) << out;

  // Week 2: a near-duplicate of a, a whitespace copy of c, something new.
  std::string spaced = kC;
  spaced.insert(spaced.find(' '), "   ");
  Write("week2.jsonl", Line("b", std::string(kA) + " again") + Line("e", spaced) + Line("d", kD));
  ASSERT_EQ(Run("index query st week2.jsonl -o out", &out, &err), 0) << err;
  EXPECT_EQ(ReadFile(dir_ / "out/remove.txt"), "b\ne\n");
  EXPECT_EQ(ReadFile(dir_ / "out/keep.txt"), "d\n");
  const std::string clusters = ReadFile(dir_ / "out/clusters.jsonl");
  EXPECT_NE(clusters.find(R"("kept":{"id":"a","in_store":true)"), std::string::npos) << clusters;
  EXPECT_NE(clusters.find(R"("id":"b","location":"week2.jsonl:1")"), std::string::npos) << clusters;
  EXPECT_NE(clusters.find(R"("reason":"near_duplicate")"), std::string::npos) << clusters;
  EXPECT_NE(clusters.find(R"("kept":{"id":"c","in_store":true)"), std::string::npos) << clusters;
  EXPECT_NE(clusters.find(R"("reason":"whitespace_duplicate","similarity":1)"), std::string::npos)
      << clusters;
  EXPECT_NE(ReadFile(dir_ / "out/summary.json").find(R"("documents":3,"removed":2)"),
            std::string::npos);
  // Nothing was added; outputs are protected like dedup's.
  ASSERT_EQ(Run("index stats st", &out, &err), 0);
  EXPECT_NE(out.find(R"("documents":2)"), std::string::npos) << out;
  EXPECT_EQ(Run("index query st week2.jsonl -o out", &out, &err), 1);
  EXPECT_NE(err.find("exists"), std::string::npos) << err;
  EXPECT_EQ(Run("index query st week2.jsonl -o out --force", &out, &err), 0) << err;

  // Add only what is new; the others are printed with their duplicates.
  ASSERT_EQ(Run("index add st week2.jsonl --check if-new", &out, &err), 0) << err;
  EXPECT_NE(err.find("added 1 document"), std::string::npos) << err;
  std::istringstream lines(out);
  std::string line;
  int printed = 0;
  while (std::getline(lines, line)) {
    ++printed;
    EXPECT_NE(line.find(R"("added":false)"), std::string::npos) << line;
  }
  EXPECT_EQ(printed, 2) << out;
  ASSERT_EQ(Run("index stats st", &out, &err), 0);
  EXPECT_NE(out.find(R"("documents":3)"), std::string::npos) << out;

  // One text.
  ASSERT_EQ(Run(std::string("index query st --text '") + kA + "'", &out, &err), 0) << err;
  EXPECT_NE(out.find(R"({"id":"a",)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("reason":"exact_duplicate","similarity":1,"distance":0)"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace neardup
