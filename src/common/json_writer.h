// JsonWriter: appends compact JSON (objects, arrays, escaped strings, numbers) to a std::string.
//
// Internal helper shared by the command-line tool, dedup output and the server. It writes what it
// is told in order; the caller is responsible for balanced Begin/End calls.
#ifndef NEARDUP_COMMON_JSON_WRITER_H_
#define NEARDUP_COMMON_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace neardup {

// Appends `text` as a quoted JSON string. Control characters and '"' '\\' are escaped; bytes that
// are not valid UTF-8 are written as U+FFFD so the output is always valid JSON.
void AppendJsonString(std::string_view text, std::string* out);

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);  // shortest round-trip form; NaN/Inf written as null
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // Appends already-serialised JSON as one value.
  JsonWriter& Raw(std::string_view json);
  // Stored document metadata (the store keeps a JSON value's text as opaque bytes): written raw
  // when it is valid JSON, as a string otherwise (bytes stored by an older writer), null if empty.
  // The one place the CLI and the server turn stored metadata into JSON.
  JsonWriter& Metadata(std::string_view metadata);

 private:
  void Separate();
  std::string* out_;
  bool need_comma_ = false;
};

}  // namespace neardup

#endif  // NEARDUP_COMMON_JSON_WRITER_H_
