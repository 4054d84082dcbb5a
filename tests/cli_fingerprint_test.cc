// End-to-end tests of the `fingerprint`, `keywords`, `distance` and `idf` commands: runs the built
// neardup binary on small fixture files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

// Documents of each language in the fixture (sanitizer builds run the binary several times
// slower, so they use fewer).
#if defined(__SANITIZE_ADDRESS__)
constexpr int kPairs = 40;
#else
constexpr int kPairs = 150;
#endif

struct CommandRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Runs `neardup <args>` (a shell-quoted argument string) and captures its output.
CommandRun Neardup(const std::string& args) {
  // Per-process names: two builds' test runs may share /tmp.
  const std::string prefix = ::testing::TempDir() + "/cli_fp_" + std::to_string(getpid());
  std::string out_path = prefix + "_out.txt";
  std::string err_path = prefix + "_err.txt";
  std::string command =
      std::string(NEARDUP_BINARY) + " " + args + " >" + out_path + " 2>" + err_path;
  int status = std::system(command.c_str());
  CommandRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  return run;
}

size_t CountLines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

size_t CountOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class CliFingerprintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir();
    dir_ += "/cli_fp_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    // 2 x kPairs real documents (Chinese and English) with a malformed line 3 and a non-string
    // text.
    // The repository's own sample corpus: this test runs without ../shared.
    std::ifstream zh(std::string(NEARDUP_SOURCE_DIR) + "/sample/zh_poetry.jsonl");
    std::ifstream en(std::string(NEARDUP_SOURCE_DIR) + "/sample/en_spamassassin.jsonl");
    std::string jsonl, line;
    for (int i = 0; i < kPairs && std::getline(zh, line); ++i) {
      jsonl += line + "\n";
      if (i == 1) jsonl += "{\"id\": \"broken\", \"text\": \n";
      if (i == 5) jsonl += "{\"id\": \"number\", \"text\": 12}\n";
      if (std::getline(en, line)) jsonl += line + "\n";
    }
    corpus_ = dir_ + "/cli_fp_corpus.jsonl";
    WriteFile(corpus_, jsonl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  std::string corpus_;
};

TEST_F(CliFingerprintTest, SameOutputWhateverTheThreadCount) {
  CommandRun one = Neardup("fingerprint --threads 1 " + corpus_);
  CommandRun two = Neardup("fingerprint --threads 2 " + corpus_);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(one.out, two.out);
  // Two of the sample's spam mails are markup only: no features, warned and counted as skipped.
  // The sanitizer build reads fewer pairs, which may hold none of them: then no count is printed.
  const size_t no_features = CountOf(one.err, "no features");
  if (no_features > 0) {
    EXPECT_NE(one.err.find("no_features: " + std::to_string(no_features)), std::string::npos)
        << one.err;
  } else {
    EXPECT_EQ(one.err.find("no_features"), std::string::npos) << one.err;
  }
  EXPECT_EQ(CountLines(one.out) + no_features, 2u * kPairs);
  EXPECT_NE(one.out.find("\"fingerprint\":\""), std::string::npos);
  // The malformed lines are reported with file:line and skipped.
  EXPECT_NE(one.err.find("cli_fp_corpus.jsonl:4"), std::string::npos) << one.err;
  EXPECT_NE(one.err.find("invalid JSON"), std::string::npos) << one.err;
  EXPECT_NE(one.err.find("cli_fp_corpus.jsonl:13"), std::string::npos) << one.err;
  EXPECT_EQ(one.out.find("\"broken\""), std::string::npos);
  // Keywords too.
  CommandRun k1 = Neardup("keywords --threads 1 " + corpus_);
  CommandRun k2 = Neardup("keywords --threads 2 " + corpus_);
  ASSERT_EQ(k1.exit_code, 0) << k1.err;
  EXPECT_EQ(k1.out, k2.out);
  EXPECT_EQ(CountLines(k1.out) + CountOf(k1.err, "no features"), 2u * kPairs);
}

TEST_F(CliFingerprintTest, StrictStopsAtMalformedLine) {
  CommandRun run = Neardup("fingerprint --strict --threads 1 " + corpus_);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("cli_fp_corpus.jsonl:4"), std::string::npos) << run.err;
}

TEST_F(CliFingerprintTest, CompatProfileOnPlainTextLines) {
  std::string path = dir_ + "/cli_fp_lines.txt";
  WriteFile(path, "我来到北京清华大学\n你好世界\nbad \xff byte\n");
  CommandRun run = Neardup("fingerprint --profile yanyiwu --format decimal --lines " + path);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // --lines ids are file:line, as in every command.
  EXPECT_NE(run.out.find("{\"id\":\"" + path + ":1\",\"fingerprint\":\"18353917987193416477\""),
            std::string::npos)
      << run.out;
  EXPECT_EQ(CountLines(run.out), 2u);
  EXPECT_NE(run.err.find("cli_fp_lines.txt:3: invalid UTF-8 at byte 4 (skipped)"),
            std::string::npos)
      << run.err;
  CommandRun replaced = Neardup("fingerprint --replace-invalid-utf8 --lines " + path);
  ASSERT_EQ(replaced.exit_code, 0) << replaced.err;
  EXPECT_EQ(CountLines(replaced.out), 3u);
}

TEST_F(CliFingerprintTest, KeywordsExtractTags) {
  std::string path = dir_ + "/cli_fp_kw.txt";
  WriteFile(path, "我来到北京清华大学\n");
  CommandRun run = Neardup("keywords --extract-tags --top-k 2 --lines " + path);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("[\"清华大学\","), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("[\"来到\","), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("北京"), std::string::npos) << run.out;
}

TEST_F(CliFingerprintTest, Distance) {
  CommandRun run = Neardup("distance f773be40a3f0a3e5 f773be40a3f0a3e4");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "1\n");
  run = Neardup("distance --json d:0 0xffffffffffffffff");
  EXPECT_EQ(run.out,
            "{\"a\":\"0000000000000000\",\"b\":\"ffffffffffffffff\",\"bits\":64,"
            "\"distance\":64}\n");
  run = Neardup("distance --text 'same words here' 'Same   WORDS here'");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "0\n");
  run = Neardup("distance nothex 1234");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("fingerprint A"), std::string::npos);
  run = Neardup("distance 0123456789abcdef 0123456789abcdef0123456789abcdef");
  EXPECT_EQ(run.exit_code, 2);
}

TEST_F(CliFingerprintTest, IdfTableRoundTrip) {
  std::string docs = dir_ + "/cli_fp_idf_docs.txt";
  std::string table = dir_ + "/cli_fp_idf.txt";
  WriteFile(docs, "apple banana\napple cherry\napple banana date\nelder\n");
  std::remove(table.c_str());  // idf refuses an existing output file (without --force)
  CommandRun run = Neardup("idf --lines --min-df 1 --threads 2 -o " + table + " " + docs);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadFile(table),
            "apple 0.28768207\nbanana 0.69314718\ncherry 1.38629436\ndate 1.38629436\n"
            "elder 1.38629436\n");
  // The table is usable for TF-IDF weighting.
  CommandRun weighted =
      Neardup("keywords --weighting tfidf --shingle 1 --idf " + table + " --lines " + docs);
  ASSERT_EQ(weighted.exit_code, 0) << weighted.err;
  EXPECT_NE(weighted.out.find("[\"cherry\",1.38629436]"), std::string::npos) << weighted.out;
}

TEST_F(CliFingerprintTest, HelpAndUsageErrors) {
  for (const char* command : {"fingerprint", "keywords", "distance", "idf"}) {
    CommandRun help = Neardup(std::string(command) + " --help");
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_NE(help.out.find("Usage"), std::string::npos) << command;
  }
  EXPECT_EQ(Neardup("fingerprint --bits 96 " + corpus_).exit_code, 2);
  EXPECT_EQ(Neardup("fingerprint --no-such-flag").exit_code, 2);
  CommandRun missing = Neardup("fingerprint /nonexistent/file.jsonl");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/file.jsonl"), std::string::npos) << missing.err;
}

}  // namespace
