// Opening a store from the command line with the shared fingerprint flags: a new store records the
// fingerprint options the flags choose; an existing store is used with the options it recorded,
// and a flag given with another value than the recorded one is an error naming the flag (the
// library's OpenStoreWithFingerprintOptions, neardup/options.h, with the flags given).
//
// Internal header of the command-line tool (`index` and `serve`).
#ifndef NEARDUP_CLI_STORE_FLAGS_H_
#define NEARDUP_CLI_STORE_FLAGS_H_

#include <memory>
#include <string>

#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "neardup/options.h"
#include "neardup/status.h"
#include "neardup/store.h"

namespace neardup::cli {

// Creates a store at `dir` with `options`, recording the fingerprint options `flags` choose.
inline Result<std::unique_ptr<DocumentStore>> CreateStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const FingerprintFlags& flags,
    FingerprintOptions* fingerprint) {
  OptionValues given(OptionNaming::kFlag);
  NEARDUP_RETURN_IF_ERROR(flags.Values(&given));
  return neardup::CreateStoreWithFingerprintOptions(dir, std::move(options), given, fingerprint);
}

// A damaged or torn last log record dropped at open is never silent: "neardup: warning:
// DIR/wal-N.ndwal: B bytes dropped at offset O: why; kept in FILE".
inline void WarnIfLogTailDropped(const DocumentStore& store) {
  const StoreStats stats = store.Stats();
  if (stats.wal_dropped_bytes > 0) PrintWarning(stats.wal_dropped);
}

// Opens the store at `dir` to fingerprint text for it (see neardup/options.h); a log tail dropped
// at open is warned about.
inline Result<std::unique_ptr<DocumentStore>> OpenStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const FingerprintFlags& flags,
    FingerprintOptions* fingerprint) {
  OptionValues given(OptionNaming::kFlag);
  NEARDUP_RETURN_IF_ERROR(flags.Values(&given));
  auto opened =
      neardup::OpenStoreWithFingerprintOptions(dir, std::move(options), given, fingerprint);
  if (opened.ok()) WarnIfLogTailDropped(**opened);
  return opened;
}

}  // namespace neardup::cli

#endif  // NEARDUP_CLI_STORE_FLAGS_H_
