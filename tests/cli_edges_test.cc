// End-to-end tests of the real `neardup` binary for issue 22, the edges a new user hits: pipes and
// process substitution, compressed standard input, CSV/TSV, refused formats, broken symbolic
// links, one input protection for every output (labelled pairs, collisions, -o inside an input
// directory), compressed --write-kept, ids with control characters in keep.txt / remove.txt,
// negative thread counts, the error prefix everywhere, `index add` skipping and counting bad
// records, read-only opens while `serve` runs, serve's no-token warning, eval on any labelled
// pairs file with --json, the man page, and the cost of fingerprinting a large mixed-script
// document, counted in instructions (valgrind), not by the clock.
#include <gtest/gtest.h>
#include <lzma.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "neardup/document_reader.h"
#include "neardup/fingerprint.h"
#include "test_files.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing_files::JsonLine;
using testing_files::Lines;
using testing_files::ReadFile;

const char* kBase =
    "The committee met on Tuesday to review the annual budget and agreed to postpone the vote on "
    "the new library building until the engineers deliver their final report on the foundations";
const char* kOther =
    "Bright orange fish swim slowly around the coral reef while divers photograph the turtles "
    "that rest on the sandy bottom near the wreck of an old cargo ship";
const char* kThird =
    "A violent storm swept across the northern coast last night, tearing roofs from houses and "
    "leaving thousands of families without electricity until the morning";

class CliEdgesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neardup_cli_edges_" + std::to_string(::getpid()) + "_" +
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
  // Runs `script` with bash in the test's directory ("$N" is the binary); returns the exit code
  // and captures standard output and error.
  int Bash(const std::string& script, std::string* out = nullptr, std::string* err = nullptr) {
    Write(".script.sh", "N=" + std::string(NEARDUP_BINARY) + "\n" + script + "\n");
    const fs::path out_file = dir_ / ".stdout", err_file = dir_ / ".stderr";
    const std::string command = "cd " + dir_.string() + " && bash .script.sh >" +
                                out_file.string() + " 2>" + err_file.string() + " </dev/null";
    const int status = std::system(command.c_str());
    if (out) *out = ReadFile(out_file);
    if (err) *err = ReadFile(err_file);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int Run(const std::string& args, std::string* out = nullptr, std::string* err = nullptr) {
    return Bash("$N " + args, out, err);
  }
  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  // Three documents: a and b near-duplicates, c unrelated.
  std::string Corpus() {
    return JsonLine("a", kBase) + JsonLine("b", std::string(kBase) + " again") +
           JsonLine("c", kOther);
  }

  fs::path dir_;
};

// ---- Reading ----

TEST_F(CliEdgesTest, PipesAndProcessSubstitutionAreReadAsStreams) {
  Write("a.jsonl", JsonLine("a", kBase) + JsonLine("c", kOther));
  Write("b.jsonl", JsonLine("b", kBase) + JsonLine("d", kThird));
  // Process substitution (/dev/fd/63): every record read, the copy found, nothing skipped.
  std::string out, err;
  ASSERT_EQ(Bash("$N dedup a.jsonl <(cat b.jsonl) -o out --json", &out, &err), 0) << err;
  EXPECT_EQ(err.find("Illegal seek"), std::string::npos) << err;
  EXPECT_EQ(err.find("skipped)"), std::string::npos) << err;
  EXPECT_NE(out.find("\"documents_read\":4"), std::string::npos) << out;
  EXPECT_NE(out.find("\"documents_removed\":1"), std::string::npos) << out;
  // A named pipe, read through the two passes of dedup (spooled once).
  ASSERT_EQ(Bash("mkfifo fifo.jsonl && (cat b.jsonl > fifo.jsonl &) && "
                 "$N dedup a.jsonl fifo.jsonl -o out2 --json",
                 &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("\"documents_read\":4"), std::string::npos) << out;
  EXPECT_EQ(Lines(ReadFile(dir_ / "out2" / "remove.txt")).size(), 1u);
  // --write-kept would read the inputs again: refused up front for a pipe, naming it.
  EXPECT_EQ(Bash("$N dedup a.jsonl <(cat b.jsonl) -o out3 --write-kept kept.jsonl", &out, &err), 2);
  EXPECT_NE(err.find("neardup: error: --write-kept cannot re-read /dev/fd/"), std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(dir_ / "out3"));
}

TEST_F(CliEdgesTest, CompressedStandardInputIsDecompressed) {
  const std::string jsonl = Corpus();
  {
    gzFile file = gzopen((dir_ / "in.jsonl.gz").c_str(), "wb");
    gzwrite(file, jsonl.data(), static_cast<unsigned>(jsonl.size()));
    gzclose(file);
    std::string compressed(ZSTD_compressBound(jsonl.size()), '\0');
    compressed.resize(
        ZSTD_compress(compressed.data(), compressed.size(), jsonl.data(), jsonl.size(), 3));
    Write("in.jsonl.zst", compressed);
    std::string xz(jsonl.size() + 1024, '\0');
    size_t xz_size = 0;
    ASSERT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr,
                                      reinterpret_cast<const uint8_t*>(jsonl.data()), jsonl.size(),
                                      reinterpret_cast<uint8_t*>(xz.data()), &xz_size, xz.size()),
              LZMA_OK);
    xz.resize(xz_size);
    Write("in.jsonl.xz", xz);
  }
  for (const char* file : {"in.jsonl.gz", "in.jsonl.zst", "in.jsonl.xz"}) {
    std::string out, err;
    ASSERT_EQ(Bash(std::string("cat ") + file + " | $N fingerprint -", &out, &err), 0)
        << file << ": " << err;
    EXPECT_EQ(Lines(out).size(), 3u) << file << ": " << out << err;
    EXPECT_EQ(err.find("skipped"), std::string::npos) << file << ": " << err;
    // The same through dedup, which spools standard input for its second pass.
    ASSERT_EQ(Bash(std::string("cat ") + file + " | $N dedup - --json -o out", &out, &err), 0)
        << err;
    EXPECT_NE(out.find("\"documents_removed\":1"), std::string::npos) << file << ": " << out;
    fs::remove_all(dir_ / "out");
  }
}

TEST_F(CliEdgesTest, CsvAndTsvAreReadWithTheirHeaderRow) {
  // Quoted fields holding commas, doubled quotes and a line break; a record missing its text.
  Write("docs.csv",
        "url,body,lang\n"
        "u1,\"" +
            std::string(kBase) +
            ", said \"\"the clerk\"\"\",en\n"
            "u2,\"" +
            std::string(kBase) +
            ",\nsaid \"\"the clerk\"\"\",en\n"
            "u3,\"" +
            std::string(kOther) +
            "\",en\n"
            "u4,,en\n");
  std::string out, err;
  ASSERT_EQ(Run("fingerprint docs.csv --id-field url --text-field body", &out, &err), 0) << err;
  std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 3u) << out << err;
  EXPECT_NE(lines[0].find("\"id\":\"u1\""), std::string::npos);
  EXPECT_NE(lines[2].find("\"id\":\"u3\""), std::string::npos);
  // u4 starts on line 6 (u2's quoted text spans lines 3 and 4).
  EXPECT_NE(err.find("neardup: warning: docs.csv:6: empty text (skipped)"), std::string::npos)
      << err;
  ASSERT_EQ(Run("dedup docs.csv --id-field url --text-field body -o out", &out, &err), 0) << err;
  EXPECT_EQ(ReadFile(dir_ / "out" / "remove.txt"), "u2\n");
  // Without --text-field: an error naming the columns, not a document of the whole file.
  EXPECT_EQ(Run("fingerprint docs.csv", &out, &err), 1);
  EXPECT_NE(err.find("neardup: error: docs.csv:1: no column \"text\" in the header row (columns: "
                     "\"url\", \"body\", \"lang\")"),
            std::string::npos)
      << err;
  // TSV: quotes inside a field are text (a field that starts with one is quoted, as pandas
  // writes it); a malformed CSV record is skipped with its place, the others read.
  Write("docs.tsv", "id\ttext\nt1\t" + std::string(kOther) + "\nt2\tan \"unclosed\" quote\nt3\t" +
                        std::string(kThird) + "\n");
  ASSERT_EQ(Run("fingerprint docs.tsv", &out, &err), 0) << err;
  EXPECT_EQ(Lines(out).size(), 3u) << out << err;
  Write("bad.csv", "id,text\nb1,\"" + std::string(kOther) + "\"\nb2,a \"quote\" inside\nb3,\"" +
                       std::string(kThird) + "\"\n");
  ASSERT_EQ(Run("fingerprint bad.csv", &out, &err), 0) << err;
  EXPECT_EQ(Lines(out).size(), 2u) << out;
  EXPECT_NE(err.find("neardup: warning: bad.csv:3: malformed CSV"), std::string::npos) << err;
  EXPECT_NE(err.find("invalid_csv: 1"), std::string::npos) << err;
}

TEST_F(CliEdgesTest, UnsupportedFormatsAreRefusedBeforeAnyWork) {
  // A real Parquet file starts and ends with PAR1; the first page header is binary.
  Write("table.parquet",
        std::string("PAR1\x15\x04\x15\x10\x15\x14L\x15\x02\x15\x00\x12\x00", 16) + "PAR1");
  Write("renamed.txt", std::string("PAR1\x15\x04\x15\x10\x15\x14", 10));
  Write("sheet.xlsx", std::string("PK\x03\x04\x14\x00\x06\x00", 8));
  Write("ok.jsonl", JsonLine("a", kBase));
  for (const char* file : {"table.parquet", "renamed.txt", "sheet.xlsx"}) {
    std::string out, err;
    EXPECT_EQ(Run(std::string("dedup ok.jsonl ") + file + " -o out", &out, &err), 1) << file;
    EXPECT_NE(err.find(std::string("neardup: error: ") + file + ": unsupported format"),
              std::string::npos)
        << err;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << file;
  }
  std::string err;
  Run("fingerprint table.parquet", nullptr, &err);
  EXPECT_NE(err.find("There is no Parquet library in Debian 12"), std::string::npos) << err;
}

TEST_F(CliEdgesTest, ABrokenSymbolicLinkInADirectoryIsACountedWarning) {
  Write("docs/a.jsonl", Corpus());
  fs::create_symlink("missing.jsonl", dir_ / "docs" / "gone.jsonl");
  std::string out, err;
  ASSERT_EQ(Run("dedup docs -o out --json", &out, &err), 0) << err;
  EXPECT_NE(err.find("neardup: warning: docs/gone.jsonl: broken symbolic link"), std::string::npos)
      << err;
  EXPECT_NE(out.find("\"broken_symlink\":1"), std::string::npos) << out;
  // Named directly, it is an error saying what it is.
  EXPECT_EQ(Run("fingerprint docs/gone.jsonl", &out, &err), 1);
  EXPECT_NE(err.find("broken symbolic link"), std::string::npos) << err;
}

// ---- Outputs ----

TEST_F(CliEdgesTest, NoOutputIsWrittenOverAnyFileACommandReads) {
  // eval's labelled pairs file is an input like its documents.
  const std::string pairs =
      "set\tid_a\tid_b\tlabel\ns\ta\tb\tnear_dup_real\ns\ta\tc\tnegative_random\n";
  Write("dev/pairs.tsv", pairs);
  Write("dev/docs.jsonl", Corpus());
  for (const char* target : {"dev/pairs.tsv", "dev/docs.jsonl"}) {
    std::string out, err;
    EXPECT_EQ(Run(std::string("eval --devpairs dev --markdown ") + target + " -f", &out, &err), 1)
        << target;
    EXPECT_NE(err.find(std::string("neardup: error: ") + target + ": is an input of this command"),
              std::string::npos)
        << err;
  }
  EXPECT_EQ(ReadFile(dir_ / "dev" / "pairs.tsv"), pairs);
  EXPECT_EQ(ReadFile(dir_ / "dev" / "docs.jsonl"), Corpus());
  // The same through another name of the file (a hard link), and for an IDF table read by dedup.
  fs::create_hard_link(dir_ / "dev" / "pairs.tsv", dir_ / "alias.tsv");
  std::string err;
  EXPECT_EQ(Run("eval --devpairs dev --markdown alias.tsv -f", nullptr, &err), 1);
  EXPECT_EQ(ReadFile(dir_ / "dev" / "pairs.tsv"), pairs);
  ASSERT_EQ(Run("idf dev/docs.jsonl -o table.idf", nullptr, &err), 0) << err;
  const std::string table = ReadFile(dir_ / "table.idf");
  EXPECT_EQ(Run("dedup dev/docs.jsonl --weighting tfidf --idf table.idf -o out "
                "--write-kept table.idf -f",
                nullptr, &err),
            1);
  EXPECT_NE(err.find("table.idf: is an input of this command"), std::string::npos) << err;
  EXPECT_EQ(ReadFile(dir_ / "table.idf"), table);
}

TEST_F(CliEdgesTest, OutputNamesNeverCollideAndNeverLandInAnInputDirectory) {
  Write("x.jsonl", Corpus());
  ASSERT_EQ(Run("dedup x.jsonl -o out"), 0);
  const std::string keep = ReadFile(dir_ / "out" / "keep.txt");
  for (const char* name : {"keep.txt", "summary.json", "./remove.txt"}) {
    std::string err;
    EXPECT_EQ(
        Run(std::string("dedup x.jsonl -o out --write-kept out/") + name + " -f", nullptr, &err), 1)
        << name;
    EXPECT_NE(err.find("names the same file as the output"), std::string::npos) << err;
  }
  EXPECT_EQ(ReadFile(dir_ / "out" / "keep.txt"), keep);
  // -o inside an input directory: the next run over the directory would read the outputs.
  Write("data/x.jsonl", Corpus());
  std::string err;
  EXPECT_EQ(Run("dedup data -o data/out", nullptr, &err), 1);
  EXPECT_NE(err.find("neardup: error: data/out/clusters.jsonl: is inside data, a directory this "
                     "command reads"),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(dir_ / "data" / "out"));
  EXPECT_EQ(Run("dedup data --write-kept data/kept.jsonl", nullptr, &err), 1);
  EXPECT_FALSE(fs::exists(dir_ / "data" / "kept.jsonl"));
}

TEST_F(CliEdgesTest, WriteKeptIsCompressedByItsExtension) {
  Write("x.jsonl", Corpus());
  ASSERT_EQ(Run("dedup x.jsonl -q --write-kept plain.jsonl -o o1"), 0);
  const std::string plain = ReadFile(dir_ / "plain.jsonl");
  ASSERT_EQ(Lines(plain).size(), 2u);
  for (const char* name : {"kept.jsonl.gz", "kept.jsonl.zst", "kept.jsonl.xz"}) {
    std::string err;
    ASSERT_EQ(
        Run(std::string("dedup x.jsonl -q -o o_") + name + " --write-kept " + name, nullptr, &err),
        0)
        << err;
    // The file is compressed (its magic number), and reads back as the kept lines.
    const std::string bytes = ReadFile(dir_ / name);
    EXPECT_NE(bytes, plain) << name;
    auto reader = DocumentReader::Open({(dir_ / name).string()}, {});
    ASSERT_TRUE(reader.ok());
    Document doc;
    std::vector<std::string> ids;
    for (auto got = (*reader)->Next(&doc); got.ok() && *got; got = (*reader)->Next(&doc)) {
      ids.push_back(doc.id);
    }
    EXPECT_EQ(ids, (std::vector<std::string>{"a", "c"})) << name;
  }
  EXPECT_EQ(ReadFile(dir_ / "kept.jsonl.gz").substr(0, 2), "\x1f\x8b");
  EXPECT_EQ(ReadFile(dir_ / "kept.jsonl.zst").substr(0, 4), "\x28\xb5\x2f\xfd");
  EXPECT_EQ(ReadFile(dir_ / "kept.jsonl.xz").substr(0, 6), std::string("\xfd"
                                                                       "7zXZ\0",
                                                                       6));
}

TEST_F(CliEdgesTest, IdsWithControlCharactersTakeOneLineInTheLineFiles) {
  Write("x.jsonl", JsonLine("line\nbreak", kBase) + JsonLine("\"quoted", kBase) +
                       JsonLine("tab\there", kOther) + JsonLine("plain\\back", kThird));
  ASSERT_EQ(Run("dedup x.jsonl -q -o out"), 0);
  const std::vector<std::string> keep = Lines(ReadFile(dir_ / "out" / "keep.txt"));
  const std::vector<std::string> remove = Lines(ReadFile(dir_ / "out" / "remove.txt"));
  EXPECT_EQ(keep, (std::vector<std::string>{"\"line\\nbreak\"", "\"tab\\there\"", "plain\\back"}));
  EXPECT_EQ(remove, (std::vector<std::string>{"\"\\\"quoted\""}));
}

// ---- Command line ----

TEST_F(CliEdgesTest, NegativeThreadCountsAreRefused) {
  Write("x.jsonl", Corpus());
  for (const char* command : {"dedup x.jsonl -j -3", "fingerprint x.jsonl --threads -1",
                              "serve store --poll-threads -2", "eval --threads -1"}) {
    std::string err;
    EXPECT_EQ(Run(command, nullptr, &err), 2) << command;
    EXPECT_NE(err.find("must be 0 (all cores) to 65536"), std::string::npos) << command << err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "store"));
}

TEST_F(CliEdgesTest, EveryErrorCarriesTheDocumentedPrefix) {
  Write("x.jsonl", Corpus());
  ASSERT_EQ(Run("index create st"), 0);
  const char* failing[] = {
      "plan --threshold 1.5",
      "index query st",
      "index query missing-store --text hello",
      "index get st nobody",
      "serve st --memory-budget nonsense",
      "serve st --token-file no-such-token-file",
      "dedup no-such-input.jsonl",
      "dedup x.jsonl --threshold 2",
      "eval --pairs p.tsv",
      "explain --file x.jsonl a nobody",
      "fingerprint x.jsonl --bits 7",
      "nosuchcommand",
  };
  for (const char* command : failing) {
    std::string out, err;
    EXPECT_NE(Run(command, &out, &err), 0) << command;
    ASSERT_FALSE(err.empty()) << command;
    for (const std::string& line : Lines(err)) {
      EXPECT_TRUE(line.rfind("neardup: error: ", 0) == 0 ||
                  line.rfind("neardup: warning: ", 0) == 0 || line.rfind("Run 'neardup", 0) == 0)
          << command << ": " << line;
    }
  }
}

TEST_F(CliEdgesTest, IndexAddSkipsAndCountsBadRecordsAndReportsReplacedOnes) {
  ASSERT_EQ(Run("index create st"), 0);
  Write("docs.jsonl", JsonLine("a", kBase) + JsonLine(std::string(5000, 'x'), kOther) +
                          JsonLine("c", kThird) + JsonLine("a", kOther));
  std::string out, err;
  ASSERT_EQ(Run("index add st docs.jsonl", &out, &err), 0) << err;
  EXPECT_NE(err.find("neardup: warning: docs.jsonl:2: id of 5000 bytes, more than 2048 (skipped)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("id_too_large: 1"), std::string::npos) << err;
  // Line 4 repeats id "a": it replaces line 1's document, and says so.
  EXPECT_NE(err.find("added 3 documents to st (2 new, 1 document replaced)"), std::string::npos)
      << err;
  ASSERT_EQ(Run("index add st docs.jsonl", &out, &err), 0) << err;
  EXPECT_NE(err.find("added 3 documents to st (0 new, 3 documents replaced)"), std::string::npos)
      << err;
  ASSERT_EQ(Run("index stats st", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"documents\":2"), std::string::npos) << out;
}

// The replaced count is the store's live count before and after, so it holds across batches,
// flushed segments and removed ids (a removed id added again is new, not a replacement).
TEST_F(CliEdgesTest, IndexAddCountsReplacementsAcrossBatchesSegmentsAndRemovals) {
  ASSERT_EQ(Run("index create st"), 0);
  Write("first.jsonl", JsonLine("a", kBase) + JsonLine("b", kOther) + JsonLine("c", kThird));
  std::string out, err;
  ASSERT_EQ(Run("index add st first.jsonl --batch 1 --memtable-limit 1 --no-compact", &out, &err),
            0)
      << err;
  EXPECT_NE(err.find("added 3 documents to st (3 new, 0 documents replaced)"), std::string::npos)
      << err;
  ASSERT_EQ(Run("index remove st b", &out, &err), 0) << err;
  // "a" is stored (in a segment), "b" was removed, "c" is stored, "d" is new, "a" again in a later
  // batch of the same run.
  Write("second.jsonl", JsonLine("a", kOther) + JsonLine("b", kBase) + JsonLine("c", kBase) +
                            JsonLine("d", kThird) + JsonLine("a", kThird));
  ASSERT_EQ(Run("index add st second.jsonl --batch 2 --memtable-limit 2", &out, &err), 0) << err;
  EXPECT_NE(err.find("added 5 documents to st (2 new, 3 documents replaced)"), std::string::npos)
      << err;
  ASSERT_EQ(Run("index stats st", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"documents\":4"), std::string::npos) << out;
}

// index add merges all segments at its end only when the run added at least as many documents as
// the store held, so a few documents added to a large store do not rewrite it; it says so.
TEST_F(CliEdgesTest, IndexAddMergesAllOnlyWhenTheInputIsAsLargeAsTheStore) {
  ASSERT_EQ(Run("index create st"), 0);
  std::string many, few;
  for (int i = 0; i < 12; ++i) {
    many += JsonLine("m" + std::to_string(i), std::string(kBase) + " " + std::to_string(i));
  }
  for (int i = 0; i < 3; ++i) {
    few += JsonLine("f" + std::to_string(i), std::string(kOther) + " " + std::to_string(i));
  }
  Write("many.jsonl", many);
  Write("few.jsonl", few);
  std::string out, err;
  auto segments = [&] {
    EXPECT_EQ(Run("index stats st", &out, &err), 0) << err;
    const size_t at = out.find("\"segments\":");
    return at == std::string::npos ? -1 : std::atoi(out.c_str() + at + 11);
  };
  ASSERT_EQ(Run("index add st many.jsonl --batch 2 --memtable-limit 2", &out, &err), 0) << err;
  EXPECT_EQ(err.find("no final merge"), std::string::npos) << err;
  EXPECT_EQ(segments(), 1);
  ASSERT_EQ(Run("index add st few.jsonl --batch 1 --memtable-limit 1", &out, &err), 0) << err;
  EXPECT_NE(err.find("no final merge: 3 documents added to a store of 12 documents"),
            std::string::npos)
      << err;
  EXPECT_GT(segments(), 1);
  ASSERT_EQ(Run("index compact st", &out, &err), 0) << err;
  EXPECT_EQ(segments(), 1);
  ASSERT_EQ(Run("index stats st", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"documents\":15"), std::string::npos) << out;
}

// A `neardup serve` child with its standard error in a file; the port from its first stdout line.
class Serve {
 public:
  Serve(const fs::path& dir, const std::vector<std::string>& extra, const fs::path& err_file) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      FILE* err = std::fopen(err_file.c_str(), "w");
      if (err) ::dup2(::fileno(err), 2);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<std::string> args = {NEARDUP_BINARY, "serve", dir.string(), "--port", "0"};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::unsetenv("NEARDUP_TOKEN");
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line_ += c;
    ::close(out[0]);
  }
  ~Serve() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& line() const { return line_; }

 private:
  pid_t pid_ = -1;
  std::string line_;
};

TEST_F(CliEdgesTest, ReadsOpenTheStoreReadOnlyWhileServeRuns) {
  ASSERT_EQ(Run("index create st"), 0);
  Write("docs.jsonl", Corpus());
  ASSERT_EQ(Run("index add st docs.jsonl"), 0);
  std::string out, err;
  ASSERT_EQ(Run("index get st a", &out, &err), 0) << err;
  const std::string fingerprint = out.substr(out.find("\"fingerprint\":\"") + 15, 16);
  Serve serve(dir_ / "st", {"--host", "127.0.0.1"}, dir_ / "serve.err");
  ASSERT_NE(serve.line().find("listening on"), std::string::npos) << ReadFile(dir_ / "serve.err");
  ASSERT_EQ(Run("index stats st", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"documents\":3"), std::string::npos) << out;
  ASSERT_EQ(Run("index get st c", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"id\":\"c\""), std::string::npos) << out;
  ASSERT_EQ(Run("index query st --fingerprint " + fingerprint + " -k 3", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"id\":\"a\""), std::string::npos) << out;
  // Writes still need the store to themselves.
  EXPECT_EQ(Run("index add st docs.jsonl", &out, &err), 1);
  EXPECT_NE(err.find("already open by another process"), std::string::npos) << err;
}

TEST_F(CliEdgesTest, ServeWarnsWithoutATokenOnANonLoopbackAddress) {
  {
    Serve serve(dir_ / "st", {"--host", "0.0.0.0"}, dir_ / "open.err");
    ASSERT_NE(serve.line().find("listening on"), std::string::npos) << ReadFile(dir_ / "open.err");
  }
  EXPECT_NE(ReadFile(dir_ / "open.err")
                .find("neardup: warning: no token: anyone who can reach 0.0.0.0 may add and "
                      "remove documents"),
            std::string::npos)
      << ReadFile(dir_ / "open.err");
  {
    Serve serve(dir_ / "st", {"--host", "127.0.0.1"}, dir_ / "loopback.err");
    ASSERT_NE(serve.line().find("listening on"), std::string::npos);
  }
  EXPECT_EQ(ReadFile(dir_ / "loopback.err").find("no token"), std::string::npos);
  Write("token", "secret-token-of-the-test\n");
  { Serve serve(dir_ / "st", {"--host", "0.0.0.0", "--token-file", "token"}, dir_ / "token.err"); }
  EXPECT_EQ(ReadFile(dir_ / "token.err").find("no token"), std::string::npos);
}

// ---- eval ----

TEST_F(CliEdgesTest, EvalJsonListsTheErrorsOfClustersAndOfPairs) {
  // a ~ b are near-duplicates (labelled negative here: a false positive), c is unrelated to a
  // (labelled positive: missed), under both methods.
  Write("dev/pairs.tsv",
        "set\tid_a\tid_b\tlabel\ns\ta\tc\tnear_dup_real\n"
        "s\ta\tb\tnegative_random\n");
  Write("dev/docs.jsonl", Corpus());
  std::string out, err;
  ASSERT_EQ(Run("eval --devpairs dev -o out", &out, &err), 0) << err;
  const std::string json = ReadFile(dir_ / "out" / "eval.json");
  const size_t missed = json.find("\"missed\":[{\"kind\":\"missed\"");
  const size_t pairs = json.find(
      "\"pair_errors\":[{\"kind\":\"missed\",\"set\":\"s\","
      "\"label\":\"near_dup_real\",\"jaccard\":");
  ASSERT_NE(missed, std::string::npos) << json;
  ASSERT_NE(pairs, std::string::npos) << json;
  EXPECT_LT(missed, pairs);
  EXPECT_NE(json.find("\"a\":\"a\",\"b\":\"c\"},{\"kind\":\"false_positive\",\"set\":\"s\","
                      "\"label\":\"negative_random\",",
                      pairs),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"a\":\"a\",\"b\":\"b\"}]}"), std::string::npos) << json;
}

TEST_F(CliEdgesTest, EvalScoresAnyLabelledPairsFileAndPrintsJson) {
  Write("labels.tsv", "s\ta\tb\tnear_dup_real\ns\ta\tc\tnegative_random\n");  // no header line
  Write("docs.jsonl", Corpus());
  std::string out, err;
  ASSERT_EQ(Run("eval --pairs labels.tsv --docs docs.jsonl --json", &out, &err), 0) << err;
  EXPECT_EQ(out.find("| method |"), std::string::npos) << "Markdown instead of JSON";
  EXPECT_NE(out.find("\"documents\":3,"), std::string::npos) << out;  // no corpus mixed in
  EXPECT_NE(out.find("\"labelled_pairs\":2,"), std::string::npos) << out;
  EXPECT_NE(out.find("{\"method\":\"dedup: same cluster\",\"overall\":{\"positives\":1,"
                     "\"flagged_positives\":1,\"negatives\":1,\"flagged_negatives\":0,"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"precision\":1,\"recall\":1,\"f1\":1,\"false_positive_rate\":0"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"after_normalisation\":{\"positives\":0"), std::string::npos) << out;
  // --devpairs alone mixes no corpus in; the Markdown prints n/a for an empty figure.
  Write("dev/pairs.tsv", "set\tid_a\tid_b\tlabel\ns\ta\tb\tnear_dup_real\n");
  Write("dev/docs.jsonl", Corpus());
  ASSERT_EQ(Run("eval --devpairs dev", &out, &err), 0) << err;
  EXPECT_NE(out.find("Documents: 3 ("), std::string::npos) << out;
  EXPECT_NE(out.find("| n/a (0/0) |"), std::string::npos) << out;
  EXPECT_EQ(out.find("1.000 (0/0)"), std::string::npos) << out;
  // A corpus is mixed in when named; "" names none.
  Write("corpus/more.jsonl", JsonLine("z", kThird));
  ASSERT_EQ(Run("eval --devpairs dev --corpus corpus --json", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"documents\":4,"), std::string::npos) << out;
  ASSERT_EQ(Run("eval --devpairs dev --corpus '' --json", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"documents\":3,"), std::string::npos) << out;
  // --pairs without its documents is a usage error.
  EXPECT_EQ(Run("eval --pairs labels.tsv", &out, &err), 1);
  EXPECT_NE(err.find("--pairs needs the documents the pairs name"), std::string::npos) << err;
}

TEST_F(CliEdgesTest, HelpAndManPageSayWhatIsSo) {
  std::string out, err;
  ASSERT_EQ(Run("eval --help", &out, &err), 0);
  EXPECT_EQ(out.find(fs::path(NEARDUP_SOURCE_DIR).parent_path().string() + "/shared"),
            std::string::npos)
      << out;
  ASSERT_EQ(Run("man", &out, &err), 0);
  EXPECT_EQ(out.find(fs::path(NEARDUP_SOURCE_DIR).parent_path().string() + "/shared"),
            std::string::npos);
  const std::string environment = out.substr(out.find(".SH ENVIRONMENT"));
  for (const char* variable : {"NEARDUP_SHARED", "NEARDUP_TOKEN", "TMPDIR"}) {
    EXPECT_NE(environment.find(std::string(".B ") + variable), std::string::npos) << variable;
  }
  // docs/fingerprints.md: invalid UTF-8 is reported with its byte offset.
  Write("bad.jsonl", JsonLine("ok", kBase) + "{\"id\":\"x\",\"text\":\"ab\xff\"}\n");
  ASSERT_EQ(Run("fingerprint bad.jsonl", &out, &err), 0);
  EXPECT_NE(err.find("neardup: warning: bad.jsonl:2: invalid UTF-8 at byte 20 (skipped)"),
            std::string::npos)
      << err;
  // neardup plan and docs/dedup.md give the same memory of the LSH stage.
  ASSERT_EQ(Run("plan --threshold 0.5", &out, &err), 0);
  EXPECT_NE(out.find("about 7 bytes per document on each thread during the LSH stage"),
            std::string::npos)
      << out;
  const std::string dedup_md = ReadFile(fs::path(NEARDUP_SOURCE_DIR) / "docs" / "dedup.md");
  EXPECT_NE(dedup_md.find("plus about 7 bytes per document\nper thread during the LSH stage"),
            std::string::npos);
  EXPECT_EQ(dedup_md.find("the output says which rule gave k"), std::string::npos);
}

// ---- Cost ----

// Deterministic mixed-script text of about `bytes` bytes: words of fifteen scripts (Latin with
// precomposed and combining accents, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, Simplified
// and Traditional Chinese, Japanese, Hangul, full-width forms) in pseudo-random order.
std::string MixedScriptText(size_t bytes) {
  static const std::vector<std::vector<std::string>> kPools = {
      {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "seven", "wizards"},
      {"café", "naïve", "résumé", "señor", "über", "straße", "façade"},
      {"e\u0301te\u0301", "man\u0303ana", "a\u0308rger", "o\u0302te\u0301"},
      {"привет", "мир", "сегодня", "хорошая", "погода", "документ"},
      {"καλημέρα", "κόσμε", "ελληνικά", "γράμματα"},
      {"مرحبا", "بالعالم", "النص", "العربي"},
      {"שלום", "עולם", "טקסט", "עברי"},
      {"नमस्ते", "दुनिया", "हिन्दी", "पाठ"},
      {"สวัสดีชาวโลก", "ภาษาไทย"},
      {"我们今天去公园散步", "天气很好", "重复文档检测", "這是繁體中文的句子"},
      {"こんにちは世界", "カタカナ", "ひらがなの文章"},
      {"안녕하세요", "세계", "한국어", "문장"},
      {"\uff21\uff22\uff23", "\ufb01le", "x\u00b2", "\u2460"},
  };
  std::string text;
  text.reserve(bytes + 64);
  uint64_t state = 12345;
  while (text.size() < bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto& pool = kPools[(state >> 33) % kPools.size()];
    text += pool[(state >> 40) % pool.size()];
    text += (state >> 20) % 17 == 0 ? "\n" : ((state >> 24) % 11 == 0 ? ". " : " ");
  }
  return text;
}

// Instructions spent fingerprinting each of `files` (in order), counted by callgrind in one run of
// `neardup fingerprint -j 1`: one profile part is dumped before each document is fingerprinted.
// Empty if the run failed.
std::vector<uint64_t> InstructionsPerDocument(const fs::path& dir,
                                              const std::vector<std::string>& files) {
  const fs::path out = dir / "callgrind.out";
  std::string command =
      "cd " + dir.string() +
      " && valgrind --tool=callgrind --dump-before='*Fingerprinter::ComputeDetails*' "
      "--callgrind-out-file=" +
      out.string() + " " + NEARDUP_BINARY + " fingerprint -j 1";
  for (const std::string& file : files) command += " " + file;
  command += " >/dev/null 2>" + (dir / "valgrind.err").string();
  if (std::system(command.c_str()) != 0) return {};
  std::vector<uint64_t> parts;
  for (size_t i = 0; i < files.size(); ++i) {
    // Part 1 is the start-up, part i + 2 document i; the last document's part is dumped at exit.
    const fs::path file =
        i + 1 < files.size() ? fs::path(out.string() + "." + std::to_string(i + 2)) : out;
    const std::string text = ReadFile(file);
    const size_t at = text.find("\ntotals: ");
    if (at == std::string::npos) return {};
    parts.push_back(std::strtoull(text.c_str() + at + 9, nullptr, 10));
  }
  return parts;
}

TEST_F(CliEdgesTest, FingerprintingCostGrowsLinearlyWithDocumentSize) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "instruction counts need the optimised build (valgrind cannot run ASan code)";
#endif
  if (std::getenv("NEARDUP_SANITIZER_BUILD") != nullptr) {
    GTEST_SKIP() << "instruction counts need the optimised build (valgrind cannot run ASan code)";
  }
  if (std::system("valgrind --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "valgrind is not installed (scripts/setup.sh --with-tests installs it)";
  }
  // The sizes (10 and 20 MB) take minutes under valgrind: with NEARDUP_LARGE_TESTS=1.
  // The quick form doubles 1 MB, where the quadratic normaliser already cost 4x per doubling.
  const bool large = std::getenv("NEARDUP_LARGE_TESTS") != nullptr;
  const size_t megabytes = large ? 10 : 1;
  // A tiny document first takes the one-time loads (jieba's dictionary) out of the measures.
  Write("a_warm_up.txt", MixedScriptText(2000));
  Write("b_single.txt", MixedScriptText(megabytes * 1000000));
  Write("c_double.txt", MixedScriptText(2 * megabytes * 1000000));
  const std::vector<uint64_t> parts =
      InstructionsPerDocument(dir_, {"a_warm_up.txt", "b_single.txt", "c_double.txt"});
  ASSERT_EQ(parts.size(), 3u) << ReadFile(dir_ / "valgrind.err");
  const double ratio = static_cast<double>(parts[2]) / static_cast<double>(parts[1]);
  std::printf("instructions: %zu MB %llu, %zu MB %llu: ratio %.3f (linear: 2)\n", megabytes,
              static_cast<unsigned long long>(parts[1]), 2 * megabytes,
              static_cast<unsigned long long>(parts[2]), ratio);
  EXPECT_GT(ratio, 1.5);
  EXPECT_LT(ratio, 2.6) << "fingerprinting cost grows faster than the document";
}

}  // namespace
}  // namespace neardup
