// Tests of DocumentReader: JSONL, plain text, directories, gzip, zstd, malformed lines, --strict.
#include "neardup/document_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "neardup/output_file.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

class DocumentReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neardup_reader_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content) {
    fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }
  std::string WriteGzip(const std::string& name, const std::string& content) {
    std::string path = (dir_ / name).string();
    gzFile file = gzopen(path.c_str(), "wb");
    gzwrite(file, content.data(), static_cast<unsigned>(content.size()));
    gzclose(file);
    return path;
  }
  std::string WriteZstd(const std::string& name, const std::string& content) {
    std::string compressed(ZSTD_compressBound(content.size()), '\0');
    size_t size =
        ZSTD_compress(compressed.data(), compressed.size(), content.data(), content.size(), 3);
    compressed.resize(size);
    return Write(name, compressed);
  }

  static std::string ReadBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  static std::vector<Document> ReadAll(DocumentReader* reader, Status* error = nullptr) {
    std::vector<Document> docs;
    Document doc;
    for (;;) {
      auto got = reader->Next(&doc);
      if (!got.ok()) {
        if (error) *error = got.status();
        break;
      }
      if (!*got) break;
      docs.push_back(doc);
    }
    return docs;
  }

  fs::path dir_;
};

TEST_F(DocumentReaderTest, ReadsJsonlWithIdsAndGeneratedIds) {
  std::string path = Write("a.jsonl",
                           "{\"id\": \"x1\", \"text\": \"hello world\"}\n"
                           "\n"
                           "{\"text\": \"no id here\"}\r\n"
                           "{\"id\": 42, \"text\": \"numeric id\", \"score\": 3.5}");
  DocumentReaderOptions options;
  options.score_field = "score";
  auto reader = DocumentReader::Open({path}, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].id, "x1");
  EXPECT_EQ(docs[0].text, "hello world");
  EXPECT_EQ(docs[0].line, 1u);
  EXPECT_EQ(docs[1].id, path + ":3");
  EXPECT_EQ(docs[1].text, "no id here");
  EXPECT_EQ(docs[2].id, "42");
  ASSERT_TRUE(docs[2].score.has_value());
  EXPECT_DOUBLE_EQ(*docs[2].score, 3.5);
  EXPECT_EQ((*reader)->skipped_total(), 0u);
}

TEST_F(DocumentReaderTest, MemoryInputsFollowTheRulesOfAFileOfThatName) {
  DocumentReaderOptions options;
  options.score_field = "score";
  options.memory_inputs["<documents>.jsonl"] = std::make_shared<const std::string>(
      "{\"id\": \"x1\", \"text\": \"hello world\"}\n"
      "{\"text\": \"no id here\"}\n"
      "{\"id\": \"e\", \"text\": \"  \"}\n"
      "{\"id\": 42, \"text\": \"numeric id\", \"score\": 3.5}\n");
  options.memory_inputs["notes.txt"] = std::make_shared<const std::string>("one plain document");
  const std::string file = Write("z.jsonl", "{\"id\": \"f\", \"text\": \"from a file\"}\n");
  auto reader = DocumentReader::Open({file, "notes.txt", "<documents>.jsonl"}, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  // Canonical order, as for files: sorted names ("/tmp/.../z.jsonl" < "<documents>.jsonl" <
  // "notes.txt").
  for (int pass = 0; pass < 2; ++pass) {  // Rewind() reads the bytes again
    if (pass == 1) {
      ASSERT_TRUE((*reader)->Rewind().ok());
    }
    auto docs = ReadAll(reader->get());
    ASSERT_EQ(docs.size(), 5u);
    EXPECT_EQ(docs[0].text, "from a file");
    EXPECT_EQ(docs[1].id, "x1");
    EXPECT_EQ(docs[2].id, "<documents>.jsonl:2");
    EXPECT_EQ(docs[2].location, "<documents>.jsonl:2");
    EXPECT_EQ(docs[3].id, "42");
    ASSERT_TRUE(docs[3].score.has_value());
    EXPECT_DOUBLE_EQ(*docs[3].score, 3.5);
    EXPECT_EQ(docs[4].text, "one plain document");
    EXPECT_EQ(docs[4].id, "notes.txt");
  }
  EXPECT_EQ((*reader)->skipped().at(kSkipEmptyText), 1u);
  EXPECT_EQ((*reader)->files().size(), 3u);
}

TEST_F(DocumentReaderTest, CustomFieldNames) {
  std::string path = Write("b.jsonl", "{\"key\": \"k\", \"body\": \"the body\", \"text\": 5}\n");
  DocumentReaderOptions options;
  options.id_field = "key";
  options.text_field = "body";
  auto reader = DocumentReader::Open({path}, options);
  ASSERT_TRUE(reader.ok());
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].id, "k");
  EXPECT_EQ(docs[0].text, "the body");
}

TEST_F(DocumentReaderTest, SkipsMalformedLinesAndCountsReasons) {
  std::string path = Write("bad.jsonl",
                           "{\"id\": \"ok1\", \"text\": \"fine\"}\n"
                           "{not json}\n"
                           "{\"id\": \"m\"}\n"
                           "{\"id\": \"n\", \"text\": 17}\n"
                           "{\"id\": \"u\", \"text\": \"bad \xff byte\"}\n"
                           "[1, 2]\n"
                           "{\"id\": \"ok2\", \"text\": \"also fine\"}\n");
  std::vector<std::string> warnings;
  DocumentReaderOptions options;
  options.on_warning = [&](const std::string& message) { warnings.push_back(message); };
  auto reader = DocumentReader::Open({path}, options);
  ASSERT_TRUE(reader.ok());
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].id, "ok1");
  EXPECT_EQ(docs[1].id, "ok2");
  EXPECT_EQ(docs[1].line, 7u);
  const auto& skipped = (*reader)->skipped();
  EXPECT_EQ(skipped.at(kSkipInvalidJson), 2u);
  EXPECT_EQ(skipped.at(kSkipMissingText), 1u);
  EXPECT_EQ(skipped.at(kSkipNonStringText), 1u);
  EXPECT_EQ(skipped.at(kSkipInvalidUtf8), 1u);
  ASSERT_EQ(warnings.size(), 5u);
  EXPECT_NE(warnings[0].find(path + ":2"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[3].find(path + ":5"), std::string::npos) << warnings[3];
}

TEST_F(DocumentReaderTest, StrictStopsAtFirstMalformedLineNamingIt) {
  std::string path = Write("bad.jsonl",
                           "{\"id\": \"ok1\", \"text\": \"fine\"}\n"
                           "{\"id\": \"m\"}\n");
  DocumentReaderOptions options;
  options.strict = true;
  auto reader = DocumentReader::Open({path}, options);
  ASSERT_TRUE(reader.ok());
  Status error;
  auto docs = ReadAll(reader->get(), &error);
  EXPECT_EQ(docs.size(), 1u);
  EXPECT_FALSE(error.ok());
  EXPECT_NE(error.message().find(path + ":2"), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("text"), std::string::npos) << error.message();
}

TEST_F(DocumentReaderTest, ReadsGzipAndZstd) {
  std::string content;
  for (int i = 0; i < 5000; ++i) {
    content += "{\"id\": \"d" + std::to_string(i) + "\", \"text\": \"document number " +
               std::to_string(i) + "\"}\n";
  }
  std::string gz = WriteGzip("c.jsonl.gz", content);
  std::string zst = WriteZstd("d.jsonl.zst", content);
  for (const std::string& path : {gz, zst}) {
    auto reader = DocumentReader::Open({path}, {});
    ASSERT_TRUE(reader.ok()) << path;
    auto docs = ReadAll(reader->get());
    ASSERT_EQ(docs.size(), 5000u) << path;
    EXPECT_EQ(docs[4999].id, "d4999");
    EXPECT_EQ(docs[4999].text, "document number 4999");
    EXPECT_EQ((*reader)->bytes_read(), content.size());
  }
}

TEST_F(DocumentReaderTest, CorruptCompressedFileIsAnError) {
  std::string path = Write("broken.jsonl.zst", std::string("\x28\xb5\x2f\xfd garbage bytes", 17));
  auto reader = DocumentReader::Open({path}, {});
  ASSERT_TRUE(reader.ok());
  Status error;
  ReadAll(reader->get(), &error);
  EXPECT_FALSE(error.ok());
  EXPECT_NE(error.message().find("broken.jsonl.zst"), std::string::npos) << error.message();
}

TEST_F(DocumentReaderTest, TruncatedGzipIsAnError) {
  std::string content;
  for (int i = 0; i < 2000; ++i) content += "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  std::string whole = WriteGzip("whole.jsonl.gz", content);
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string path = Write("cut.jsonl.gz", bytes.substr(0, bytes.size() / 2));
  auto reader = DocumentReader::Open({path}, {});
  ASSERT_TRUE(reader.ok());
  Status error;
  ReadAll(reader->get(), &error);
  EXPECT_FALSE(error.ok());
  EXPECT_NE(error.message().find("cut.jsonl.gz"), std::string::npos) << error.message();
}

TEST_F(DocumentReaderTest, ConcatenatedGzipMembersAndZeroPaddingLikeGunzip) {
  const std::string one = ReadBytes(WriteGzip("one.gz", "{\"id\":\"1\",\"text\":\"first\"}\n"));
  const std::string two = ReadBytes(WriteGzip("two.gz", "{\"id\":\"2\",\"text\":\"second\"}\n"));
  const std::string path = Write("both.jsonl.gz", one + two + std::string(512, '\0'));
  auto reader = DocumentReader::Open({path}, {});
  ASSERT_TRUE(reader.ok());
  Status error;
  auto docs = ReadAll(reader->get(), &error);
  EXPECT_TRUE(error.ok()) << error.ToString();
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1].text, "second");
}

TEST_F(DocumentReaderTest, DirectoryOfTextFilesInSortedOrder) {
  Write("texts/b.txt", "second file");
  Write("texts/a.txt", "first file");
  Write("texts/sub/c.txt", "third file");
  WriteGzip("texts/sub/d.txt.gz", "fourth file, compressed");
  auto reader = DocumentReader::Open({(dir_ / "texts").string()}, {});
  ASSERT_TRUE(reader.ok());
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].text, "first file");
  EXPECT_EQ(docs[0].id, (dir_ / "texts" / "a.txt").string());
  EXPECT_EQ(docs[1].text, "second file");
  EXPECT_EQ(docs[2].text, "third file");
  EXPECT_EQ(docs[3].text, "fourth file, compressed");
}

TEST_F(DocumentReaderTest, InputOrderDoesNotMatter) {
  std::string a = Write("a.jsonl", "{\"id\": \"a\", \"text\": \"A\"}\n");
  std::string b = Write("b.jsonl", "{\"id\": \"b\", \"text\": \"B\"}\n");
  auto forward = DocumentReader::Open({a, b}, {});
  auto backward = DocumentReader::Open({b, a}, {});
  ASSERT_TRUE(forward.ok() && backward.ok());
  auto x = ReadAll(forward->get());
  auto y = ReadAll(backward->get());
  ASSERT_EQ(x.size(), 2u);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(x[0].id, y[0].id);
  EXPECT_EQ(x[1].id, y[1].id);
}

TEST_F(DocumentReaderTest, RewindReadsAgain) {
  std::string a = Write("a.jsonl", "{\"id\": \"a\", \"text\": \"A\"}\n{\"bad\n");
  auto reader = DocumentReader::Open({a}, {});
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(ReadAll(reader->get()).size(), 1u);
  ASSERT_TRUE((*reader)->Rewind().ok());
  EXPECT_EQ(ReadAll(reader->get()).size(), 1u);
  EXPECT_EQ((*reader)->skipped_total(), 1u);  // counted once
}

TEST_F(DocumentReaderTest, MissingInputIsNotFound) {
  auto reader = DocumentReader::Open({(dir_ / "nope.jsonl").string()}, {});
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
  EXPECT_NE(reader.status().message().find("nope.jsonl"), std::string::npos);
}

TEST_F(DocumentReaderTest, OverLongLineIsSkipped) {
  std::string path = Write("long.jsonl", "{\"id\": \"big\", \"text\": \"" + std::string(5000, 'x') +
                                             "\"}\n{\"id\": \"small\", \"text\": \"y\"}\n");
  DocumentReaderOptions options;
  options.max_document_bytes = 1000;
  auto reader = DocumentReader::Open({path}, options);
  ASSERT_TRUE(reader.ok());
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].id, "small");
  EXPECT_EQ((*reader)->skipped().at(kSkipTooLarge), 1u);
}

// Issue 12: the one reader's input handling.
TEST_F(DocumentReaderTest, NestedFieldsByteOrderMarkAndFallbacksCounted) {
  std::string path = Write("n.jsonl",
                           "\xEF\xBB\xBF{\"meta\":{\"id\":\"n1\"},\"body\":{\"text\":\"one\"}}\n"
                           "{\"meta\":{\"id\":null},\"body\":{\"text\":\"two\"}}\n"
                           "{\"meta.id\":\"dotted\",\"body\":{\"text\":\"three\"}}\n");
  DocumentReaderOptions options;
  options.id_field = "meta.id";
  options.text_field = "body.text";
  std::vector<std::string> warnings;
  options.on_warning = [&](const std::string& message) { warnings.push_back(message); };
  auto reader = DocumentReader::Open({path}, options);
  ASSERT_TRUE(reader.ok());
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].id, "n1");  // the byte-order mark does not hide the first line
  EXPECT_EQ(docs[1].id, path + ":2");
  EXPECT_EQ(docs[2].id, "dotted");  // a key with a dot in its name is found too
  EXPECT_EQ((*reader)->fallbacks().at(kFallbackMissingId), 1u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(path + ":2: no id"), std::string::npos) << warnings[0];
  // With strict a missing id is an error naming the place.
  options.strict = true;
  auto strict = DocumentReader::Open({path}, options);
  ASSERT_TRUE(strict.ok());
  Status error;
  ReadAll(strict->get(), &error);
  EXPECT_NE(error.message().find(path + ":2"), std::string::npos) << error.ToString();
}

TEST_F(DocumentReaderTest, CompressionByContentAndOneFileNamedTwice) {
  std::string gz = WriteGzip("really_gzip.jsonl", "{\"id\":\"g\",\"text\":\"gz\"}\n");
  std::string zst = WriteZstd("really_zstd.txt", "plain text in zstd");
  std::string plain = Write("plain.jsonl.gz", "{\"id\":\"p\",\"text\":\"not compressed\"}\n");
  auto reader = DocumentReader::Open(
      {gz, zst, plain, dir_.string(), (dir_ / "." / "plain.jsonl.gz").string()}, {});
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->files().size(), 3u);  // the directory and "./" name the same three files
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].id, "p");
  EXPECT_EQ(docs[1].id, "g");
  EXPECT_EQ(docs[2].text, "plain text in zstd");
}

TEST_F(DocumentReaderTest, MetadataAndFingerprintFields) {
  std::string path =
      Write("m.jsonl",
            "{\"id\":\"a\",\"text\":\"x\",\"metadata\":{\"k\": [1, \"v\"]}}\n"
            "{\"id\":\"b\",\"fingerprint\":\"f773be40a3f0a3e5\",\"metadata\":\"m\"}\n");
  DocumentReaderOptions options;
  options.metadata_field = "metadata";
  options.fingerprint_field = "fingerprint";
  auto reader = DocumentReader::Open({path}, options);
  ASSERT_TRUE(reader.ok());
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].metadata, "{\"k\":[1,\"v\"]}");  // compact JSON text of the value
  EXPECT_EQ(docs[1].metadata, "\"m\"");
  EXPECT_EQ(docs[1].fingerprint, "f773be40a3f0a3e5");
  EXPECT_TRUE(docs[1].text.empty());
}

TEST_F(DocumentReaderTest, CsvRecordsWithQuotedLineBreaksKeepTheLineTheyStartOn) {
  DocumentReaderOptions options;
  options.id_field = "url";
  options.score_field = "score";
  options.memory_inputs["in.csv"] = std::make_shared<const std::string>(
      "\xEF\xBB\xBFurl,text,score\r\n"
      "u1,\"first, with \"\"quotes\"\"\",3.5\r\n"
      "u2,\"two\nlines\",x\r\n"
      "\r\n"
      ",\"no id\",1\n"
      "u4, spaced ,\n");
  auto reader = DocumentReader::Open({"in.csv"}, options);
  ASSERT_TRUE(reader.ok());
  auto docs = ReadAll(reader->get());
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].id, "u1");
  EXPECT_EQ(docs[0].text, "first, with \"quotes\"");
  EXPECT_EQ(docs[0].location, "in.csv:2");
  EXPECT_EQ(docs[0].score, 3.5);
  EXPECT_EQ(docs[1].text, "two\nlines");
  EXPECT_EQ(docs[1].line, 3u);
  EXPECT_FALSE(docs[1].score.has_value());
  EXPECT_EQ(docs[2].id, "in.csv:6");    // no id: the location, as a counted fallback
  EXPECT_EQ(docs[3].text, " spaced ");  // spaces belong to the field
  EXPECT_EQ(docs[3].line, 7u);
  EXPECT_EQ((*reader)->fallbacks().at(kFallbackMissingId), 1u);
  EXPECT_EQ((*reader)->fallbacks().at(kFallbackNonNumericScore), 1u);
  EXPECT_EQ((*reader)->fallbacks().at(kFallbackMissingScore), 1u);
}

TEST_F(DocumentReaderTest, InputScopeProtectsWhatWasReadUntilItEnds) {
  const std::string input = Write("in.jsonl", "{\"id\":\"a\",\"text\":\"x\"}\n");
  Write("dir/b.jsonl", "{\"id\":\"b\",\"text\":\"y\"}\n");
  OutputFileOptions force;
  force.force = true;
  {
    InputScope scope;
    {
      InputScope nested;  // scopes nest: the record lives until the outermost one ends
      ASSERT_TRUE(DocumentReader::Open({input, (dir_ / "dir").string()}, {}).ok());
    }
    EXPECT_EQ(CheckOutputPath(input, force).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(CheckOutputPath((dir_ / "dir" / "new.txt").string(), force).code(),
              StatusCode::kInvalidArgument);
    EXPECT_TRUE(CheckOutputPath((dir_ / "elsewhere.txt").string(), force).ok());
    ASSERT_TRUE(WriteOutputFile((dir_ / "once.txt").string(), "1", force).ok());
    EXPECT_EQ(WriteOutputFile((dir_ / "." / "once.txt").string(), "2", force).code(),
              StatusCode::kInvalidArgument);  // one run, one output per file
    EXPECT_FALSE(
        CheckOutputPaths({(dir_ / "x").string(), (dir_ / "sub" / ".." / "x").string()}, force)
            .ok());
  }
  // Outside a scope (a later call of the library in the same process) nothing is remembered.
  EXPECT_TRUE(CheckOutputPath(input, force).ok());
  EXPECT_TRUE(WriteOutputFile((dir_ / "once.txt").string(), "3", force).ok());
}

TEST_F(DocumentReaderTest, StreamsAreReadOnceUnlessSpooled) {
  EXPECT_TRUE(IsStreamInput("-"));
  EXPECT_FALSE(IsStreamInput(Write("f.jsonl", "")));
  EXPECT_FALSE(IsStreamInput(dir_.string()));
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(IsStreamInput(fifo));
  std::thread writer([&] { std::ofstream(fifo) << "{\"id\":\"p\",\"text\":\"from a pipe\"}\n"; });
  DocumentReaderOptions options;
  options.spool_stdin = true;
  auto reader = DocumentReader::Open({fifo}, options);
  writer.join();
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(ReadAll(reader->get()).size(), 1u);  // no .jsonl name: a pipe is JSONL like stdin
  ASSERT_TRUE((*reader)->Rewind().ok());
  EXPECT_EQ(ReadAll(reader->get()).size(), 1u);
}

}  // namespace
}  // namespace neardup
