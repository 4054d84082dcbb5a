// Test helper: reading files and cutting text into lines, writing one JSONL document, and listing
// the shared corpus's files, for the tests that drive the tool and the library through real files.
#ifndef NEARDUP_TESTS_TEST_FILES_H_
#define NEARDUP_TESTS_TEST_FILES_H_

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_writer.h"

namespace neardup::testing_files {

// The whole file as bytes ("" if it cannot be read).
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The lines of `text`, without their newlines.
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// One JSONL record {"id": id, "text": text} with its newline.
inline std::string JsonLine(const std::string& id, const std::string& text) {
  std::string line;
  JsonWriter json(&line);
  json.BeginObject().Key("id").String(id).Key("text").String(text).EndObject();
  return line + "\n";
}

// The JSONL files of a corpus folder (default: ../shared/corpus), sorted by path; empty if the
// folder is missing.
inline std::vector<std::string> CorpusFiles(
    const std::filesystem::path& dir = std::filesystem::path(NEARDUP_SHARED_DIR) / "corpus") {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace neardup::testing_files

#endif  // NEARDUP_TESTS_TEST_FILES_H_
