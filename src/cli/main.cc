// Entry point of the neardup command-line tool: dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "cli/command.h"
#include "cli/report.h"
#include "neardup/output_file.h"

namespace neardup::cli {

std::vector<Command>& RegisteredCommands() {
  static std::vector<Command> commands;
  return commands;
}

namespace {

// Levenshtein distance, for "did you mean".
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace
}  // namespace neardup::cli

int main(int argc, char** argv) {
  using namespace neardup::cli;
  // Every file any command reads is recorded while it runs, and no output may be written over one
  // (neardup/output_file.h): one rule for every command.
  neardup::InputScope input_scope;
  CLI::App app{"neardup: find near-duplicate text with SimHash"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "neardup 0.1.0");
  // Every option's default is shown in --help (inherited by the subcommands added below).
  app.option_defaults()->always_capture_default();
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    // The deepest parsed command ("index add"); errors found by the top level still name it.
    const CLI::App* deepest = failed;
    for (;;) {
      std::vector<CLI::App*> parsed = deepest->get_subcommands();
      if (parsed.empty()) break;
      deepest = parsed.front();
    }
    std::string command;
    for (const CLI::App* app = deepest; app && app->get_parent(); app = app->get_parent()) {
      command = app->get_name() + (command.empty() ? "" : " " + command);
    }
    return std::string("neardup: error: ") + e.what() + "\nRun 'neardup " +
           (command.empty() ? "" : command + " ") + "--help' for more information.\n";
  });
  std::vector<Command> commands = RegisteredCommands();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::map<CLI::App*, RunFunction> runners;
  for (const Command& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    runners[sub] = command.setup(sub);
  }
  // Set after the subcommands are added: CLI11 copies a parent's footer into new subcommands.
  app.footer(
      "Examples:\n"
      "  neardup dedup corpus.jsonl -o out/       # keep.txt, remove.txt, clusters.jsonl\n"
      "  neardup explain --file corpus.jsonl ID_A ID_B\n"
      "  neardup fingerprint corpus.jsonl > fingerprints.jsonl\n"
      "Every command has --help; `man neardup` after cmake --install.");

  // An unknown command gets a clear message (and a suggestion), not "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    const std::string given = argv[1];
    bool known = false;
    std::string best;
    size_t best_distance = 3;  // suggest only close matches
    for (const Command& command : commands) {
      if (command.name == given) known = true;
      size_t distance = EditDistance(given, command.name);
      if (distance < best_distance) {
        best_distance = distance;
        best = command.name;
      }
    }
    if (!known) {
      PrintError("unknown command '" + given + "'" +
                 (best.empty() ? "" : "; did you mean '" + best + "'?") + " (see neardup --help)");
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  for (CLI::App* sub : app.get_subcommands()) {
    auto it = runners.find(sub);
    if (it != runners.end() && it->second) return it->second();
  }
  PrintError("no command given; see neardup --help");
  return kExitUsage;
}
