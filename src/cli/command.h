// The command registry of the neardup tool: each subcommand lives in its own file and registers
// itself here, so main.cc never changes when a command is added.
//
// A command file defines a setup function that declares the subcommand's options on the CLI11 app
// it is given and returns the function that runs it (returning the process exit code), then
// registers it with a file-scope `CommandRegistrar`.
#ifndef NEARDUP_CLI_COMMAND_H_
#define NEARDUP_CLI_COMMAND_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace neardup::cli {

// Conventional exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran but failed (I/O error, bad data)
inline constexpr int kExitUsage = 2;    // bad command line

using RunFunction = std::function<int()>;
using SetupFunction = std::function<RunFunction(CLI::App* subcommand)>;

struct Command {
  std::string name;
  std::string description;
  SetupFunction setup;
};

// All registered commands, in registration order.
std::vector<Command>& RegisteredCommands();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, SetupFunction setup) {
    RegisteredCommands().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_COMMAND_H_
