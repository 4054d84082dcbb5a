// Command-line flags made from the option registry (neardup/options.h): each registry option
// becomes a CLI11 flag with its name, aliases, help, default and choices, and the flags given on
// a command line are collected into an OptionValues, checked by the registry.
//
// Internal, header-only (CLI11 is header-only); included by src/cli/ only. Not thread-safe.
#ifndef NEARDUP_CLI_OPTION_FLAGS_H_
#define NEARDUP_CLI_OPTION_FLAGS_H_

#include <CLI/CLI.hpp>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/report.h"
#include "neardup/options.h"
#include "neardup/status.h"

namespace neardup::cli {

class RegistryFlags {
 public:
  // Declares on `app` the flag of every registry option of `scopes` (but the keys in `skip`).
  void Declare(CLI::App* app, uint32_t scopes, const std::vector<std::string_view>& skip = {}) {
    for (const OptionSpec& spec : AllOptions()) {
      if (!(spec.scope & scopes) || spec.flag == nullptr) continue;
      bool skipped = false;
      for (std::string_view key : skip) skipped |= key == spec.key;
      if (!skipped) DeclareOne(app, spec);
    }
  }

  // Declares on `app` the flags of the registry options `keys`, in that order.
  void DeclareKeys(CLI::App* app, std::span<const std::string_view> keys) {
    for (std::string_view key : keys) {
      const OptionSpec* spec = FindOption(key);
      if (spec != nullptr && spec->key == key && spec->flag != nullptr) DeclareOne(app, *spec);
    }
  }

  // Declares on `app` the flag of the registry option `key` under this command's `names` (CLI11
  // form, "-k,--max-distance,--indexed-k"): help, default, type and checks stay the registry's.
  // For a command whose established spelling differs (plan's -k and -n).
  void DeclareKeyAs(CLI::App* app, std::string_view key, const std::string& names) {
    const OptionSpec* spec = FindOption(key);
    if (spec != nullptr && spec->key == key && spec->flag != nullptr) DeclareOne(app, *spec, names);
  }

  // Shows `text` as the default of the declared option `key` in this command's help (for a
  // command whose value when the flag is not given differs from the registry's default).
  void ShowDefault(std::string_view key, const std::string& text) {
    if (CLI::Option* option = OptionOf(key)) option->default_str(text);
  }

  // The options given on the parsed command line, added to `values` (errors name the flag).
  Status Collect(OptionValues* values) const {
    for (const Flag& flag : flags_) {
      if (!flag.given()) continue;
      if (flag.spec->type == OptionType::kBool) {
        NEARDUP_RETURN_IF_ERROR(values->Set(flag.spec->flag, flag.on));
      } else {
        NEARDUP_RETURN_IF_ERROR(values->SetText(flag.spec->flag, flag.text));
      }
    }
    return Status::Ok();
  }

  // Whether the option `key` was given.
  bool Given(std::string_view key) const {
    for (const Flag& flag : flags_) {
      if (key == flag.spec->key && flag.given()) return true;
    }
    return false;
  }

  // The declared CLI11 option of `key` (nullptr if not declared here).
  CLI::Option* OptionOf(std::string_view key) const {
    for (const Flag& flag : flags_) {
      if (key == flag.spec->key) return flag.option;
    }
    return nullptr;
  }

 private:
  struct Flag {
    const OptionSpec* spec = nullptr;
    CLI::Option* option = nullptr;
    CLI::Option* old_name = nullptr;  // the old name ("~name" alias), hidden from --help
    std::string text;                 // a valued option's text
    bool on = false;                  // a switch
    bool given() const {
      return option->count() > 0 || (old_name != nullptr && old_name->count() > 0);
    }
  };

  static std::vector<std::string> Split(const char* list) {
    std::vector<std::string> out;
    if (list == nullptr) return out;
    std::string_view rest(list);
    while (!rest.empty()) {
      const size_t bar = rest.find('|');
      out.emplace_back(rest.substr(0, bar));
      if (bar == std::string_view::npos) break;
      rest.remove_prefix(bar + 1);
    }
    return out;
  }

  static std::string Dashed(std::string name) {
    for (char& c : name) c = c == '_' ? '-' : c;
    return (name.size() == 1 ? "-" : "--") + name;
  }

  void DeclareOne(CLI::App* app, const OptionSpec& spec, const std::string& command_names = "") {
    std::string names;
    if (spec.short_flag != nullptr && Dashed(spec.flag) != spec.short_flag) {
      names = std::string(spec.short_flag) + ",";
    }
    names += Dashed(spec.flag);
    // An alias "!name" is the switch's negation (--no-boilerplate beside --boilerplate); "~name" an
    // old name, declared apart below.
    std::string old_name;
    for (const std::string& alias : Split(spec.aliases)) {
      if (alias[0] == '~') {
        old_name = Dashed(alias.substr(1));
        continue;
      }
      names += alias[0] == '!' ? ",!" + Dashed(alias.substr(1)) : "," + Dashed(alias);
    }
    if (!command_names.empty()) {
      names = command_names;  // the command's own spellings replace the registry's (and old) ones
      old_name.clear();
    }
    Flag& flag = flags_.emplace_back();
    flag.spec = &spec;
    if (spec.type == OptionType::kBool) {
      flag.option = app->add_flag(names, flag.on, spec.help);
      if (!old_name.empty()) flag.old_name = app->add_flag(old_name, flag.on)->group("");
    } else {
      flag.option = app->add_option(names, flag.text, spec.help);
      DescribeValue(spec, flag.option);
      if (!old_name.empty()) {
        flag.old_name = app->add_option(old_name, flag.text)->group("");
        DescribeValue(spec, flag.old_name);
      }
    }
    if (flag.old_name != nullptr) {
      // Still accepted, with a warning: a script using it goes on working and is told.
      const std::string warning =
          old_name + " is an old name: use " + OptionDisplayName(spec, OptionNaming::kFlag);
      flag.old_name->each([warning](const std::string&) { PrintWarning(warning); });
      flag.old_name->excludes(flag.option);
    }
  }

  // The type, default, choices and the registry's check of a valued option's flag.
  static void DescribeValue(const OptionSpec& spec, CLI::Option* option) {
    option->type_name(spec.type == OptionType::kInt      ? "INT"
                      : spec.type == OptionType::kDouble ? "FLOAT"
                                                         : "TEXT");
    if (spec.default_text != nullptr) option->default_str(spec.default_text);
    if (spec.choices != nullptr) option->check(CLI::IsMember(Split(spec.choices)));
    // The registry's check while parsing, so that a bad value is a usage error (exit 2) of every
    // command, whatever it does with the option later.
    option->check(CLI::Validator(
        [&spec](std::string& text) -> std::string {
          OptionValues probe(OptionNaming::kFlag);
          const Status status = probe.SetText(spec.flag, text);
          if (status.ok()) return "";
          const std::string name = OptionDisplayName(spec, OptionNaming::kFlag);
          const std::string& message = status.message();
          if (message.rfind(name + ": ", 0) == 0) return message.substr(name.size() + 2);
          if (message.rfind(name + " ", 0) == 0) return message.substr(name.size() + 1);
          return message;
        },
        ""));
  }

  std::deque<Flag> flags_;  // stable addresses: CLI11 writes into them
};

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_OPTION_FLAGS_H_
