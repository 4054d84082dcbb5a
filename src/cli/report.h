// How every neardup command talks to the user on standard error: one error prefix
// ("neardup: error: "), one warning form ("neardup: warning: file:line: reason (skipped)"), counts
// with correct plurals, and the rule that a run which read no document is an error.
//
// Internal header of the command-line tool; not thread-safe (warnings come from the reading
// thread).
#ifndef NEARDUP_CLI_REPORT_H_
#define NEARDUP_CLI_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "neardup/status.h"

namespace neardup::cli {

// "1 document", "2 documents".
inline std::string Count(uint64_t n, const std::string& singular, const std::string& plural = "") {
  return std::to_string(n) + " " + (n == 1 ? singular : (plural.empty() ? singular + "s" : plural));
}

// Prints "neardup: error: <message>" on stderr.
inline void PrintError(const std::string& message) {
  std::fprintf(stderr, "neardup: error: %s\n", message.c_str());
}
// The library names its options, never command-line flags; the tool says which flag to use.
inline std::string WithFlagNames(std::string message) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {" (OutputFileOptions::force replaces it)", " (use --force to replace it)"},
      {"write_kept_path: ", "--write-kept: "},
      {"keep policy: ", "--keep: "},
      {"keep_field: the field keep policy", "--keep field:NAME"},
      {"verify_threshold must", "--verify must"},
      {"k (the SimHash join radius) must be in", "-k must be in"},
      {"bands and rows must", "--bands and --rows must"},
      {"threshold must be in (0, 1)", "--threshold must be in (0, 1)"},
  };
  for (const auto& [library, flag] : kFlags) {
    const size_t at = message.find(library);
    if (at != std::string::npos) message.replace(at, std::string_view(library).size(), flag);
  }
  return message;
}
inline void PrintError(const Status& status) { PrintError(WithFlagNames(status.message())); }

// Prints "neardup: warning: <message>" on stderr.
inline void PrintWarning(const std::string& message) {
  std::fprintf(stderr, "neardup: warning: %s\n", message.c_str());
}

// Counts reader warnings and prints the first `limit` of them (never hidden by --quiet); the rest
// are summed up by PrintTotals(). `clear_line` is written before each one (to erase a progress
// line on a terminal).
class WarningPrinter {
 public:
  explicit WarningPrinter(uint64_t limit = 20) : state_(std::make_shared<State>()) {
    state_->limit = limit;
  }
  void set_clear_line(const char* clear_line) { state_->clear_line = clear_line; }

  // The callback for DocumentReaderOptions::on_warning.
  std::function<void(const std::string&)> Callback() const {
    auto state = state_;
    return [state](const std::string& message) {
      ++state->count;
      if (state->count <= state->limit) {
        std::fprintf(stderr, "%sneardup: warning: %s\n", state->clear_line, message.c_str());
      } else if (state->count == state->limit + 1) {
        std::fprintf(stderr, "%sneardup: warning: further warnings are counted, not shown\n",
                     state->clear_line);
      }
    };
  }
  uint64_t count() const { return state_->count; }

  // One line per kind: "3 records skipped (invalid_json: 2, empty_text: 1)".
  static void PrintTotals(const std::map<std::string, uint64_t>& skipped,
                          const std::map<std::string, uint64_t>& fallbacks) {
    auto line = [](const std::map<std::string, uint64_t>& counts, const char* what) {
      uint64_t total = 0;
      std::string detail;
      for (const auto& [reason, count] : counts) {
        total += count;
        detail += (detail.empty() ? "" : ", ") + reason + ": " + std::to_string(count);
      }
      if (total > 0) PrintWarning(Count(total, "record") + " " + what + " (" + detail + ")");
    };
    line(skipped, "skipped");
    line(fallbacks, "read with a fallback");
  }

 private:
  struct State {
    uint64_t count = 0;
    uint64_t limit = 20;
    const char* clear_line = "";
  };
  std::shared_ptr<State> state_;
};

// The error of a run that read no document at all (every record skipped, or empty inputs).
inline Status NothingRead(const std::map<std::string, uint64_t>& skipped) {
  uint64_t total = 0;
  for (const auto& [reason, count] : skipped) total += count;
  std::string message = "no document read";
  if (total > 0) {
    message += ": all " + Count(total, "record") +
               " skipped (see the warnings above; check --text-field and --id-field)";
  } else {
    message += ": the inputs are empty";
  }
  return Status::InvalidArgument(message);
}

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_REPORT_H_
