// Command-line flags shared by `neardup dedup`, `neardup explain` and `neardup eval`: the
// registry's fingerprint, reading and dedup options (neardup/options.h) on a CLI11 subcommand,
// turned into DedupOptions, so explain and eval judge pairs by exactly the rule dedup applies.
//
// Internal, header-only (CLI11 is header-only); included by src/cli/*_command.cc only.
#ifndef NEARDUP_CLI_DEDUP_FLAGS_H_
#define NEARDUP_CLI_DEDUP_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string_view>
#include <vector>

#include "cli/option_flags.h"
#include "neardup/dedup.h"
#include "neardup/options.h"

namespace neardup {

class DedupFlags {
 public:
  // Declares the flags on `app` (not the INPUT... arguments). `with_keep` adds --keep (dedup
  // only).
  void Declare(CLI::App* app, bool with_keep) {
    std::vector<std::string_view> skip;
    if (!with_keep) skip.push_back("keep");
    flags_.Declare(app, kFingerprintScope | kReaderScope | kDedupScope, skip);
  }

  // The options the flags choose (the library's defaults for those not given), checked by
  // ValidateDedupOptions; errors name the flag.
  Status ToOptions(DedupOptions* options) const {
    OptionValues values(OptionNaming::kFlag);
    NEARDUP_RETURN_IF_ERROR(flags_.Collect(&values));
    *options = DedupOptions{};
    return values.ApplyTo(options);
  }

 private:
  cli::RegistryFlags flags_;
};

}  // namespace neardup

#endif  // NEARDUP_CLI_DEDUP_FLAGS_H_
