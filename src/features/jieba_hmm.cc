// Loading jieba's BMES HMM (finalseg/prob_start.py, prob_trans.py, prob_emit.py) with a small
// parser for the Python literals these files hold. Floats are parsed with strtod, which rounds
// correctly as Python's float() does, so the model holds the very same doubles as Python.
#include <cerrno>
#include <cstdlib>
#include <string>

#include "features/jieba_internal.h"

namespace neardup::jieba {
namespace {

class PyLiteralParser {
 public:
  PyLiteralParser(std::string_view source, std::string_view where)
      : source_(source), where_(where) {}

  Result<PyValue> ParseValueAt(size_t pos) {
    pos_ = pos;
    PyValue value;
    NEARDUP_RETURN_IF_ERROR(ParseValue(&value, 0));
    return value;
  }

 private:
  Status Error(const std::string& what) const {
    size_t line = 1;
    size_t column = 1;
    for (size_t i = 0; i < pos_ && i < source_.size(); ++i) {
      if (source_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return Status::Corruption(std::string(where_) + ":" + std::to_string(line) + ":" +
                              std::to_string(column) + ": " + what);
  }

  void SkipSpace() {
    while (pos_ < source_.size()) {
      const char c = source_[pos_];
      if (utf8::IsAsciiSpaceByte(c)) {
        ++pos_;
      } else if (c == '\\' && pos_ + 1 < source_.size() && source_[pos_ + 1] == '\n') {
        pos_ += 2;  // explicit line joining
      } else if (c == '#') {
        while (pos_ < source_.size() && source_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  Status ParseValue(PyValue* value, int depth) {
    if (depth > 32) return Error("literal nested too deeply");
    SkipSpace();
    if (pos_ >= source_.size()) return Error("unexpected end of file");
    const char c = source_[pos_];
    if (c == '{') return ParseDict(value, depth);
    if (c == '\'' || c == '"') {
      value->kind = PyValue::kString;
      return ParseString(&value->text);
    }
    value->kind = PyValue::kNumber;
    return ParseNumber(&value->number);
  }

  Status ParseDict(PyValue* value, int depth) {
    value->kind = PyValue::kDict;
    ++pos_;  // '{'
    while (true) {
      SkipSpace();
      if (pos_ >= source_.size()) return Error("unterminated dict");
      if (source_[pos_] == '}') {
        ++pos_;
        return Status::Ok();
      }
      std::string key;
      if (source_[pos_] != '\'' && source_[pos_] != '"') return Error("expected a string key");
      NEARDUP_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (pos_ >= source_.size() || source_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      PyValue item;
      NEARDUP_RETURN_IF_ERROR(ParseValue(&item, depth + 1));
      // A repeated key is kept twice; consumers apply items in order, so the last value wins as
      // in Python.
      value->dict.emplace_back(std::move(key), std::move(item));
      SkipSpace();
      if (pos_ < source_.size() && source_[pos_] == ',') {
        ++pos_;
      } else if (pos_ < source_.size() && source_[pos_] != '}') {
        return Error("expected ',' or '}'");
      }
    }
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  Status ParseString(std::string* out) {
    const char quote = source_[pos_++];
    out->clear();
    while (true) {
      if (pos_ >= source_.size() || source_[pos_] == '\n') return Error("unterminated string");
      const char c = source_[pos_];
      if (c == quote) {
        ++pos_;
        return Status::Ok();
      }
      if (c != '\\') {
        out->push_back(c);
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= source_.size()) return Error("unterminated string");
      const char e = source_[pos_ + 1];
      pos_ += 2;
      int digits = 0;
      switch (e) {
        case '\\':
        case '\'':
        case '"':
          out->push_back(e);
          continue;
        case 'n':
          out->push_back('\n');
          continue;
        case 't':
          out->push_back('\t');
          continue;
        case 'r':
          out->push_back('\r');
          continue;
        case '\n':
          continue;
        case 'x':
          digits = 2;
          break;
        case 'u':
          digits = 4;
          break;
        case 'U':
          digits = 8;
          break;
        default:
          return Error(std::string("unsupported escape \\") + e);
      }
      char32_t cp = 0;
      for (int i = 0; i < digits; ++i) {
        const int h = pos_ < source_.size() ? HexValue(source_[pos_]) : -1;
        if (h < 0) return Error("bad hexadecimal escape");
        cp = cp * 16 + static_cast<char32_t>(h);
        ++pos_;
      }
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return Error("escape is not a scalar");
      utf8::Append(cp, out);
    }
  }

  Status ParseNumber(double* number) {
    const size_t begin = pos_;
    while (pos_ < source_.size()) {
      const char c = source_[pos_];
      if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        ++pos_;
      } else {
        break;
      }
    }
    if (pos_ == begin) return Error("expected a value");
    const std::string text(source_.substr(begin, pos_ - begin));
    char* end = nullptr;
    errno = 0;
    *number = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) {
      pos_ = begin;
      return Error("bad number '" + text + "'");
    }
    return Status::Ok();
  }

  std::string_view source_;
  std::string_view where_;
  size_t pos_ = 0;
};

int StateIndex(std::string_view letter) {
  if (letter == "B") return kB;
  if (letter == "E") return kE;
  if (letter == "M") return kM;
  if (letter == "S") return kS;
  return -1;
}

Result<PyValue> LoadAssignment(const std::string& path) {
  std::string source;
  NEARDUP_RETURN_IF_ERROR(ReadWholeFile(path, &source));
  return ParsePythonAssignment(source, "P", path);
}

Status ExpectStateDict(const PyValue& value, const std::string& where) {
  if (value.kind != PyValue::kDict) return Status::Corruption(where + ": expected a dict");
  for (const auto& [key, item] : value.dict) {
    if (StateIndex(key) < 0) return Status::Corruption(where + ": unknown state '" + key + "'");
  }
  return Status::Ok();
}

}  // namespace

Result<PyValue> ParsePythonAssignment(std::string_view source, std::string_view name,
                                      std::string_view where) {
  // Find a line starting with `name`, optional spaces, '='.
  size_t line_begin = 0;
  while (line_begin < source.size()) {
    size_t line_end = source.find('\n', line_begin);
    if (line_end == std::string_view::npos) line_end = source.size();
    std::string_view line = source.substr(line_begin, line_end - line_begin);
    if (line.substr(0, name.size()) == name) {
      size_t i = name.size();
      while (i < line.size() && line[i] == ' ') ++i;
      if (i < line.size() && line[i] == '=' && (i + 1 >= line.size() || line[i + 1] != '=')) {
        PyLiteralParser parser(source, where);
        return parser.ParseValueAt(line_begin + i + 1);
      }
    }
    line_begin = line_end + 1;
  }
  return Status::Corruption(std::string(where) + ": no assignment to " + std::string(name));
}

Result<HmmModel> LoadHmmModel(const std::string& dir) {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  HmmModel model;
  model.start.fill(kMinFloat);
  for (auto& row : model.trans) row.fill(kMinFloat);
  std::array<double, 4> absent;
  absent.fill(kMinFloat);
  model.emit.assign(kHanCount, absent);

  const std::string start_path = base + "prob_start.py";
  Result<PyValue> start = LoadAssignment(start_path);
  if (!start.ok()) return start.status();
  NEARDUP_RETURN_IF_ERROR(ExpectStateDict(*start, start_path));
  for (const auto& [key, item] : start->dict) {
    if (item.kind != PyValue::kNumber) return Status::Corruption(start_path + ": expected numbers");
    model.start[StateIndex(key)] = item.number;
  }

  const std::string trans_path = base + "prob_trans.py";
  Result<PyValue> trans = LoadAssignment(trans_path);
  if (!trans.ok()) return trans.status();
  NEARDUP_RETURN_IF_ERROR(ExpectStateDict(*trans, trans_path));
  for (const auto& [from, row] : trans->dict) {
    NEARDUP_RETURN_IF_ERROR(ExpectStateDict(row, trans_path + " [" + from + "]"));
    for (const auto& [to, item] : row.dict) {
      if (item.kind != PyValue::kNumber) {
        return Status::Corruption(trans_path + ": expected numbers");
      }
      model.trans[StateIndex(from)][StateIndex(to)] = item.number;
    }
  }

  const std::string emit_path = base + "prob_emit.py";
  Result<PyValue> emit = LoadAssignment(emit_path);
  if (!emit.ok()) return emit.status();
  NEARDUP_RETURN_IF_ERROR(ExpectStateDict(*emit, emit_path));
  for (const auto& [state, row] : emit->dict) {
    if (row.kind != PyValue::kDict) {
      return Status::Corruption(emit_path + " [" + state + "]: expected a dict");
    }
    for (const auto& [character, item] : row.dict) {
      if (item.kind != PyValue::kNumber) {
        return Status::Corruption(emit_path + " [" + state + "]: expected numbers");
      }
      // Only single Han characters of [\u4E00-\u9FD5] can ever be looked up.
      if (character.size() != 3 || utf8::ValidSequenceLength(character, 0) != 3) continue;
      const char32_t cp = utf8::Decode(character, 0, 3);
      if (!IsHan(cp)) continue;
      model.emit[cp - kHanFirst][StateIndex(state)] = item.number;
    }
  }
  return model;
}

}  // namespace neardup::jieba
