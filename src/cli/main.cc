// Entry point of the neardup command-line tool: dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/command.h"

namespace neardup::cli {

std::vector<Command>& RegisteredCommands() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace neardup::cli

int main(int argc, char** argv) {
  using namespace neardup::cli;
  CLI::App app{"neardup: find near-duplicate text with SimHash"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "neardup 0.1.0");
  std::vector<Command> commands = RegisteredCommands();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::map<CLI::App*, RunFunction> runners;
  for (const Command& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    runners[sub] = command.setup(sub);
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
  std::fputs("neardup: no command given; see neardup --help\n", stderr);
  return kExitUsage;
}
