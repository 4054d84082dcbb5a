// Runs `--help` of every neardup subcommand (the real binary) and checks the one flag vocabulary:
// shared flags have the same names, value types, defaults and meaning everywhere, numeric options
// show their defaults, and each command ends its help with examples. Also checks that the shell
// completions and the man page are generated from the same definitions.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
// GCC 12 with -fsanitize reports a false -Wmaybe-uninitialized inside <regex>'s std::function.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace neardup {
namespace {

struct Output {
  int exit_code = -1;
  std::string out;
};

Output RunNeardup(const std::string& args) {
  Output result;
  std::string command = std::string(NEARDUP_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The subcommand names listed under "Subcommands:" in a help text.
std::vector<std::string> Subcommands(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream in(help);
  std::string line;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line == "Subcommands:") {
      in_list = true;
      continue;
    }
    if (in_list) {
      std::smatch match;
      if (std::regex_search(line, match, std::regex("^  ([a-z]+) "))) {
        names.push_back(match[1]);
      } else {
        in_list = false;
      }
    }
  }
  return names;
}

// Every command path: "dedup", "index add", ...
std::vector<std::string> AllCommands() {
  std::vector<std::string> commands;
  for (const std::string& name : Subcommands(RunNeardup("--help").out)) {
    commands.push_back(name);
    for (const std::string& nested : Subcommands(RunNeardup(name + " --help").out)) {
      commands.push_back(name + " " + nested);
    }
  }
  return commands;
}

TEST(CliHelpTest, EveryCommandHasHelpWithDefaultsAndExamples) {
  std::vector<std::string> commands = AllCommands();
  ASSERT_GE(commands.size(), 10u);
  std::set<std::string> top(commands.begin(), commands.end());
  for (const char* expected : {"dedup", "explain", "eval", "fingerprint", "keywords", "distance",
                               "idf", "plan", "index", "index add", "index query"}) {
    EXPECT_TRUE(top.count(expected)) << expected;
  }
  // The generators are hidden.
  EXPECT_FALSE(top.count("completion"));
  EXPECT_FALSE(top.count("man"));
  for (const std::string& command : commands) {
    Output help = RunNeardup(command + " --help");
    EXPECT_EQ(help.exit_code, 0) << command;
    // A numeric option shows its default ("--verify FLOAT=0.4").
    std::regex no_default(
        R"((--[a-z0-9-]+) (INT|UINT|FLOAT)(?:(?::\{[^}]*\}|:[A-Z]+ in \[[^\]]*\])(?!=)|(?![:=])))");
    std::smatch match;
    std::string text = help.out;
    while (std::regex_search(text, match, no_default)) {
      ADD_FAILURE() << command << ": " << match[1] << " shows no default";
      text = match.suffix();
    }
    // Every top-level command, and `index add`, ends with examples of itself.
    const bool needs_examples = command.find(' ') == std::string::npos || command == "index add";
    if (needs_examples) {
      size_t examples = help.out.find("\nExamples:\n");
      ASSERT_NE(examples, std::string::npos) << command << "\n" << help.out;
      const std::string tail = help.out.substr(examples);
      const std::string first_word = command.substr(0, command.find(' '));
      EXPECT_GE(std::count(tail.begin(), tail.end(), '\n'), 3) << command;
      EXPECT_NE(tail.find("  neardup " + first_word), std::string::npos) << command << tail;
    }
  }
}

TEST(CliHelpTest, SharedFlagsMeanTheSameEverywhere) {
  // flag -> the exact help line (names, type, default) it must have wherever it appears.
  const std::map<std::string, std::regex> kShared = {
      {"--threads", std::regex(R"(^  -j,--threads INT=0 +worker threads \(0 = all cores\)$)")},
      {"--id-field", std::regex(R"(^  --id-field TEXT=id +JSONL field holding the document id; a )"
                                R"(dotted path reads nested objects \(meta\.id\)$)")},
      {"--text-field", std::regex(R"(^  --text-field TEXT=text +JSONL field holding the text; a )"
                                  R"(dotted path reads nested objects \(content\.text\)$)")},
      {"--lines", std::regex(R"(^  --lines +every input is plain text with one document per line)"
                             R"( \(id: file:line\)$)")},
      {"--strict", std::regex(R"(^  --strict +stop \(exit 1\) at the first malformed record, )"
                              R"(missing id or shared id instead of warning and going on$)")},
      {"--force", std::regex("^  -f,--force +replace (existing output files|an existing .*) "
                             "\\(never an input file\\)$")},
      {"--max-distance", std::regex(R"(^  -k,--max-distance INT.*=-?[0-9]+( |$))")},
      {"--bits", std::regex(R"(^  --bits INT:\{64,128\}=64 .*)")},
      {"--output", std::regex(R"(^  -o,--output TEXT.*)")},
  };
  std::map<std::string, int> seen;
  for (const std::string& command : AllCommands()) {
    Output help = RunNeardup(command + " --help");
    std::istringstream in(help.out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("  -", 0) != 0) continue;  // option lines only
      for (const auto& [flag, pattern] : kShared) {
        std::regex names("^  (-[a-z],)?" + flag + "[ ,=]");
        if (!std::regex_search(line, names)) continue;
        ++seen[flag];
        EXPECT_TRUE(std::regex_search(line, pattern)) << command << ": " << line;
      }
      // One name for the distance limit; the old ones are gone.
      EXPECT_EQ(line.find("--distance"), std::string::npos) << command << ": " << line;
      EXPECT_EQ(line.find("-k,--k"), std::string::npos) << command << ": " << line;
      if (line.rfind("  -k,", 0) == 0) {
        EXPECT_EQ(line.rfind("  -k,--max-distance", 0), 0u) << command << ": " << line;
      }
    }
  }
  // The shared flags are really shared: each appears in several commands.
  EXPECT_GE(seen["--threads"], 7) << "dedup explain eval fingerprint keywords idf index add";
  EXPECT_GE(seen["--id-field"], 7);
  EXPECT_GE(seen["--max-distance"], 5) << "dedup explain eval plan index query";
  EXPECT_GE(seen["--force"], 3) << "dedup idf eval";
}

// The long flags (every name, aliases too) of the option lines of a help text.
std::set<std::string> LongFlags(const std::string& help) {
  std::set<std::string> flags;
  std::istringstream in(help);
  std::string line;
  const std::regex name("--[a-z0-9-]+");
  while (std::getline(in, line)) {
    if (line.rfind("  -", 0) != 0) continue;
    const std::string names = line.substr(0, line.find_first_of(" =", 2));
    for (std::sregex_iterator it(names.begin(), names.end(), name), end; it != end; ++it) {
      flags.insert(it->str());
    }
  }
  return flags;
}

// The flags named in the first column of the first "| Option | Default | Meaning |" table of the
// doc `path` (under the heading line `section`, when given).
std::set<std::string> DocumentedFlags(const std::string& path, const std::string& section = "") {
  std::ifstream in(std::string(NEARDUP_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(in) << path;
  std::set<std::string> documented;
  std::string line;
  bool in_section = section.empty(), in_table = false;
  const std::regex name("`(--[a-z0-9-]+)`");
  while (std::getline(in, line)) {
    if (!in_section) {
      in_section = line == section;
      continue;
    }
    if (line.rfind("| Option | Default | Meaning |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.rfind("|", 0) != 0) break;
    const std::string first = line.substr(0, line.find('|', 1));
    for (std::sregex_iterator it(first.begin(), first.end(), name), end; it != end; ++it) {
      documented.insert((*it)[1].str());
    }
  }
  return documented;
}

// docs/api.md's table of `neardup serve` options says what the command takes: every flag it names
// exists, and every flag of serve's own (all but the shared fingerprint flags) is in it.
TEST(CliHelpTest, TheServeOptionTableOfTheDocsIsTheCommandsFlags) {
  const std::set<std::string> documented = DocumentedFlags("docs/api.md");
  ASSERT_GE(documented.size(), 20u);
  const std::set<std::string> serve = LongFlags(RunNeardup("serve --help").out);
  const std::set<std::string> shared = LongFlags(RunNeardup("fingerprint --help").out);
  for (const std::string& flag : documented) {
    EXPECT_TRUE(serve.count(flag)) << flag << " is in docs/api.md but not a flag of serve";
  }
  for (const std::string& flag : serve) {
    if (flag == "--help" || (shared.count(flag) && flag != "--bits")) continue;
    EXPECT_TRUE(documented.count(flag)) << flag << " of serve is missing from docs/api.md";
  }
}

// docs/cli.md's tables are the commands' flags: plan's table names exactly plan's flags, and the
// store flags it documents for `index` are flags of the subcommands it names (and of serve).
TEST(CliHelpTest, TheCliDocsTablesAreTheCommandsFlags) {
  const std::set<std::string> plan_documented = DocumentedFlags("docs/cli.md", "## `neardup plan`");
  ASSERT_GE(plan_documented.size(), 10u);
  const std::set<std::string> plan = LongFlags(RunNeardup("plan --help").out);
  for (const std::string& flag : plan_documented) {
    EXPECT_TRUE(plan.count(flag)) << flag << " is in docs/cli.md but not a flag of plan";
  }
  for (const std::string& flag : plan) {
    if (flag == "--help") continue;
    EXPECT_TRUE(plan_documented.count(flag)) << flag << " of plan is missing from docs/cli.md";
  }
  const std::set<std::string> store_documented =
      DocumentedFlags("docs/cli.md", "## Store flags: `index` and `serve`");
  ASSERT_GE(store_documented.size(), 5u);
  std::set<std::string> index = LongFlags(RunNeardup("index add --help").out);
  index.merge(LongFlags(RunNeardup("index stats --help").out));
  const std::set<std::string> serve = LongFlags(RunNeardup("serve --help").out);
  for (const std::string& flag : store_documented) {
    EXPECT_TRUE(index.count(flag)) << flag << " is in docs/cli.md but no flag of index add/stats";
    EXPECT_TRUE(serve.count(flag)) << flag << " is in docs/cli.md but not a flag of serve";
  }
  for (const char* flag : {"--sync", "--group-commit-ms", "--no-verify"}) {
    EXPECT_TRUE(store_documented.count(flag)) << flag;
  }
}

TEST(CliHelpTest, CompletionsAndManPageComeFromTheSameDefinitions) {
  Output bash = RunNeardup("completion bash");
  ASSERT_EQ(bash.exit_code, 0) << bash.out;
  Output zsh = RunNeardup("completion zsh");
  ASSERT_EQ(zsh.exit_code, 0) << zsh.out;
  Output man = RunNeardup("man");
  ASSERT_EQ(man.exit_code, 0) << man.out;
  EXPECT_EQ(man.out.rfind(".TH NEARDUP 1", 0), 0u);
  for (const std::string& command : AllCommands()) {
    const std::string last = command.substr(command.rfind(' ') + 1);
    EXPECT_NE(bash.out.find(last + ")"), std::string::npos) << command;
    EXPECT_NE(zsh.out.find(last), std::string::npos) << command;
    EXPECT_NE(man.out.find(".SS \"neardup " + command + "\""), std::string::npos) << command;
  }
  for (const char* option : {"--max-distance", "--write-kept", "--id-field", "--metadata-field"}) {
    EXPECT_NE(bash.out.find(option), std::string::npos) << option;
    EXPECT_NE(zsh.out.find(std::string("'") + option + "["), std::string::npos) << option;
    std::string roff = option;
    std::string escaped;
    for (char c : roff) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_NE(man.out.find(escaped), std::string::npos) << option;
  }
  // Old names (accepted with a warning, hidden from --help) are neither completed nor documented:
  // the completion offers --indexed-k and --expected-size, not --max-k or --expected-documents.
  for (const char* option : {"--indexed-k", "--expected-size"}) {
    EXPECT_NE(bash.out.find(option), std::string::npos) << option;
    EXPECT_NE(zsh.out.find(option), std::string::npos) << option;
  }
  for (const char* old_name : {"--max-k", "--expected-documents"}) {
    EXPECT_EQ(bash.out.find(old_name), std::string::npos) << old_name;
    EXPECT_EQ(zsh.out.find(old_name), std::string::npos) << old_name;
  }
  EXPECT_EQ(man.out.find("max\\-k"), std::string::npos);
  // The bash script is valid bash.
  FILE* pipe = popen("bash -n", "w");
  ASSERT_NE(pipe, nullptr);
  fwrite(bash.out.data(), 1, bash.out.size(), pipe);
  EXPECT_EQ(pclose(pipe), 0);
}

}  // namespace
}  // namespace neardup
