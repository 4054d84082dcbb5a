// Test helper: reading files and cutting text into lines, and writing one JSONL document, for the
// tests that drive the tool and the library through real files.
#ifndef NEARDUP_TESTS_TEST_FILES_H_
#define NEARDUP_TESTS_TEST_FILES_H_

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

}  // namespace neardup::testing_files

#endif  // NEARDUP_TESTS_TEST_FILES_H_
