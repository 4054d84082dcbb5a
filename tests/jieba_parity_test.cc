// Parity of the C++ jieba segmenter and keyword extractor with Python jieba 0.42.1 on the Chinese
// documents of the shared corpus plus edge cases: tokens must be identical and
// extract_tags(topK=20) must give the same words in the same order with weights equal within 1e-9
// relative.
//
// Python's output comes from scripts/jieba_reference.py (one process, cached per document in the
// build tree). Documents compared: every zh_*.jsonl document with NEARDUP_LARGE_TESTS=1; an evenly
// spaced subset of 6,000 by default; 600 under NEARDUP_SANITIZER_BUILD=1.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_writer.h"
#include "neardup/jieba.h"

#include "shared_data.h"

namespace neardup {
namespace {

struct Document {
  std::string name;  // file:line, or the edge case's name
  std::string text;
};

bool EnvFlag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "1";
}

std::string BuildDirectory() {
  std::error_code error;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return ::testing::TempDir();
  return exe.parent_path().string();
}

std::vector<Document> CorpusDocuments() {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path corpus = std::filesystem::path(NEARDUP_SHARED_DIR) / "corpus";
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("zh_") && name.ends_with(".jsonl")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Document> documents;
  simdjson::dom::parser parser;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line;
    size_t line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      if (line.empty()) continue;
      std::string_view text;
      auto error = parser.parse(line)["text"].get(text);
      EXPECT_FALSE(error) << file << ":" << line_number << ": " << simdjson::error_message(error);
      if (error) continue;
      documents.push_back(
          {file.filename().string() + ":" + std::to_string(line_number), std::string(text)});
    }
  }
  return documents;
}

std::vector<Document> EdgeCases() {
  std::vector<Document> cases = {
      {"empty", ""},
      {"whitespace only", " \t\n\r\n  \u3000\u00a0\r"},
      {"punctuation only", "，。！？、；：“”‘’（）《》【】…—·!?.,;:'\"()[]{}<>/\\|@$^*~`"},
      {"emoji", "今天天气很好😀👍🏽，我们去公园玩吧🎉🇨🇳"},
      {"traditional", "臺灣的繁體中文與簡體中文有許多差異，例如「資訊」與「信息」。"},
      {"ascii mixed", "我用Python写了一个hello world程序，version 2.0版本release了"},
      {"digits", "2024年3月15日，GDP增长了5.2%，达到126万亿元，同比增长1.5倍，编号0012345"},
      {"c++", "C++是一种编程语言，C#和F#也是，还有Objective-C和.NET框架、node.js、A&B"},
      {"url", "访问https://www.example.com/path_to/page-1.html?q=中文&x=1#frag或者ftp://a.b"},
      {"full width", "全角字符ＡＢＣａｂｃ１２３，全角空格\u3000和标点！＠＃％＆"},
      {"crlf", "第一行\r\n第二行\r第三行\n第四行\r\n\r\n结束"},
      {"stop words", "The cat is on the mat and this is THE end of IT, which one has all"},
      {"hmm unknown names", "韩玉赏鉴和吕小鹏在杭研大厦与郑洺、李铮见面"},
      {"numbers and dots", "版本1.2.3和3.14159以及50%和.5和5.和a.b.c和x_y-z"},
      {"control characters", "中文\x01\x02\x7f控制字符\t制表\v垂直\f换页"},
      {"cjk extension", "𠀀𠀁𪚥龘龖鿕鿖鿿㐀㐁"},
      {"only han unknown", "鑫鑫鑫鑫鑫垚垚垚淼淼犇犇犇骉骉"},
  };
  // A long line of about 200 KB: a repeated paragraph with varying numbers, no newline.
  std::string long_line;
  for (int i = 0; long_line.size() < 200 * 1024; ++i) {
    long_line += "这是一个很长的句子，用来测试分词器在处理超长文本时的正确性和性能，编号" +
                 std::to_string(i) + "，English words mixed in " + std::to_string(i * 7) + "。";
  }
  cases.push_back({"200 KB line", long_line});
  // A long run of characters outside the dictionary's words goes through the HMM in one piece.
  std::string long_hmm;
  for (int i = 0; i < 3000; ++i) long_hmm += (i % 3 == 0 ? "鑫" : (i % 3 == 1 ? "垚" : "犇"));
  cases.push_back({"long hmm run", long_hmm});
  return cases;
}

struct Reference {
  std::vector<std::string> tokens;
  std::vector<std::string> tokens_no_hmm;
  std::vector<std::pair<std::string, double>> tags;
};

bool RelativelyEqual(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

std::string Quote(std::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

// Counts a mismatch between our tokens and Python's, reporting the first ten in detail.
void CompareTokens(const std::string& name, const std::vector<std::string_view>& tokens,
                   const std::vector<std::string>& expected, size_t* mismatches) {
  size_t first_diff = 0;
  while (first_diff < std::min(tokens.size(), expected.size()) &&
         tokens[first_diff] == expected[first_diff]) {
    ++first_diff;
  }
  if (first_diff == tokens.size() && tokens.size() == expected.size()) return;
  if (++*mismatches > 10) return;
  std::ostringstream message;
  message << name << ": tokens differ at token " << first_diff << ":";
  for (size_t i = first_diff; i < std::min(first_diff + 8, tokens.size()); ++i) {
    message << " " << Quote(tokens[i]);
  }
  message << "  vs python:";
  for (size_t i = first_diff; i < std::min(first_diff + 8, expected.size()); ++i) {
    message << " " << Quote(expected[i]);
  }
  ADD_FAILURE() << message.str();
}

TEST(JiebaParityTest, MatchesPythonJiebaOnCorpusAndEdgeCases) {
  NEARDUP_SKIP_WITHOUT_SHARED_CORPUS();
  auto extractor_result = KeywordExtractor::Default();
  ASSERT_TRUE(extractor_result.ok()) << extractor_result.status().ToString();
  const KeywordExtractor& extractor = **extractor_result;
  const JiebaSegmenter& segmenter = extractor.segmenter();

  const std::vector<Document> corpus = CorpusDocuments();
  ASSERT_GT(corpus.size(), 10000u) << "the shared corpus should hold about 18,500 zh documents";
  size_t wanted = 6000;
  if (EnvFlag("NEARDUP_LARGE_TESTS")) wanted = corpus.size();
  if (EnvFlag("NEARDUP_SANITIZER_BUILD")) wanted = 600;
  wanted = std::min(wanted, corpus.size());
  std::vector<Document> documents;
  for (size_t i = 0; i < wanted; ++i) documents.push_back(corpus[i * corpus.size() / wanted]);
  for (Document& edge : EdgeCases()) documents.push_back(std::move(edge));

  // Ask Python.
  const std::string dir = BuildDirectory();
  const std::string input_path = dir + "/jieba_parity_input." + std::to_string(getpid()) + ".jsonl";
  const std::string output_path =
      dir + "/jieba_parity_output." + std::to_string(getpid()) + ".jsonl";
  const std::string cache_path = dir + "/jieba_reference_cache.jsonl";
  {
    std::string lines;
    for (const Document& document : documents) {
      lines += "{\"text\":";
      AppendJsonString(document.text, &lines);
      lines += "}\n";
    }
    std::ofstream(input_path, std::ios::binary) << lines;
  }
  const std::string command = std::string("/usr/bin/python3 ") + NEARDUP_SOURCE_DIR +
                              "/scripts/jieba_reference.py --input '" + input_path +
                              "' --output '" + output_path + "' --cache '" + cache_path + "'";
  const int status = std::system(command.c_str());
  std::filesystem::remove(input_path);
  ASSERT_EQ(status, 0) << "the reference script failed (is python3-jieba installed?): " << command;

  std::vector<Reference> references;
  {
    std::ifstream in(output_path, std::ios::binary);
    std::string line;
    simdjson::dom::parser parser;
    while (std::getline(in, line)) {
      Reference reference;
      simdjson::dom::element root;
      ASSERT_FALSE(parser.parse(line).get(root)) << "bad reference line " << references.size();
      for (std::string_view token : root["tokens"].get_array()) {
        reference.tokens.emplace_back(token);
      }
      for (std::string_view token : root["tokens_no_hmm"].get_array()) {
        reference.tokens_no_hmm.emplace_back(token);
      }
      for (simdjson::dom::array tag : root["tags"].get_array()) {
        std::string_view word = tag.at(0).get_string();
        double weight = tag.at(1).get_double();
        reference.tags.emplace_back(std::string(word), weight);
      }
      references.push_back(std::move(reference));
    }
  }
  std::filesystem::remove(output_path);
  ASSERT_EQ(references.size(), documents.size());

  size_t token_mismatches = 0;
  size_t no_hmm_token_mismatches = 0;
  size_t tag_mismatches = 0;
  size_t tokens_compared = 0;
  size_t bytes_compared = 0;
  std::vector<std::string_view> tokens;
  for (size_t d = 0; d < documents.size(); ++d) {
    const Document& document = documents[d];
    const Reference& reference = references[d];
    bytes_compared += document.text.size();
    tokens.clear();
    segmenter.Cut(document.text, &tokens);
    tokens_compared += tokens.size();
    CompareTokens(document.name + " (HMM)", tokens, reference.tokens, &token_mismatches);
    tokens.clear();
    segmenter.Cut(document.text, &tokens, /*hmm=*/false);
    CompareTokens(document.name + " (no HMM)", tokens, reference.tokens_no_hmm,
                  &no_hmm_token_mismatches);

    const std::vector<Keyword> tags = extractor.ExtractTags(document.text, 20);
    bool same_tags = tags.size() == reference.tags.size();
    for (size_t i = 0; same_tags && i < tags.size(); ++i) {
      same_tags = tags[i].word == reference.tags[i].first &&
                  RelativelyEqual(tags[i].weight, reference.tags[i].second);
    }
    if (!same_tags && ++tag_mismatches <= 10) {
      std::ostringstream message;
      message.precision(17);
      message << document.name << ": tags differ:";
      for (size_t i = 0; i < std::max(tags.size(), reference.tags.size()); ++i) {
        message << "\n  " << i << ": ";
        if (i < tags.size()) message << Quote(tags[i].word) << " " << tags[i].weight;
        message << "  python: ";
        if (i < reference.tags.size()) {
          message << Quote(reference.tags[i].first) << " " << reference.tags[i].second;
        }
      }
      ADD_FAILURE() << message.str();
    }
  }
  std::cout << "jieba parity: compared " << documents.size() << " documents (" << wanted << " of "
            << corpus.size() << " zh corpus documents + " << documents.size() - wanted
            << " edge cases), " << bytes_compared << " bytes, " << tokens_compared
            << " tokens; token mismatches: " << token_mismatches
            << ", HMM=False token mismatches: " << no_hmm_token_mismatches
            << ", tag mismatches: " << tag_mismatches << std::endl;
  EXPECT_EQ(token_mismatches, 0u);
  EXPECT_EQ(no_hmm_token_mismatches, 0u);
  EXPECT_EQ(tag_mismatches, 0u);
}

}  // namespace
}  // namespace neardup
