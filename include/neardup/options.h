// The option registry: every user-settable option of neardup in one table (name, type, default,
// range or choices, help, and how it sets the options structs of the API). The command-line flags,
// the Python keywords, the HTTP service's configuration and the fingerprint-options string a store
// records in its MANIFEST are all made from it (after DuckDB's settings), so an option has one
// name, one default and one validation everywhere.
//
//   - A front end collects the options the user gave in an OptionValues (Set with a typed value,
//     SetText with the command-line text form), then ApplyTo() fills FingerprintOptions,
//     DocumentReaderOptions, DedupOptions or StoreOptions: options not given keep the struct's
//     value, so the struct's default is the option's default.
//   - Each option has a key (its name in the API and in the MANIFEST string) and, when users may
//     set it, a flag: the Python keyword, and the command-line flag "--" + flag with '_' -> '-'.
//     A negated flag is a switch that turns its key off (no_nfkc sets nfkc = false); its key is a
//     keyword too, in the positive sense (nfkc=False).
//   - Errors name the option as the user spelled it (OptionNaming): "--shingle: ..." on the
//     command line, "shingle: ..." for a keyword.
//
// Thread safety: the registry is immutable; an OptionValues is a plain value.
#ifndef NEARDUP_OPTIONS_H_
#define NEARDUP_OPTIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "neardup/dedup.h"
#include "neardup/document_reader.h"
#include "neardup/export.h"
#include "neardup/fingerprinter.h"
#include "neardup/status.h"
#include "neardup/store.h"

namespace neardup {

enum class OptionType {
  kBool,    // a switch: given = true (or false for the negation of a key)
  kInt,     // a whole number in [min, max]
  kDouble,  // a number in [min, max]
  kString,  // any text
  kPath,    // a file or directory name
  kChoice,  // one of `choices`
};

// What an option configures (bits of OptionSpec::scope).
enum OptionScope : uint32_t {
  kFingerprintScope = 1,  // FingerprintOptions: every command that fingerprints text
  kReaderScope = 2,       // DocumentReaderOptions and the thread count: every command that reads
  kDedupScope = 4,        // the rest of DedupOptions: dedup, explain, eval
  kStoreScope = 8,        // StoreOptions of a store: index, serve, Python Store
  kServerScope = 16,      // service::ServerOptions: serve (neardup/server.h ApplyServerOptions)
  kCommandScope = 32,     // one command-line command's own switch (plan --list, serve --no-text)
};

struct OptionSpec {
  const char* key;   // the option's name in the API and the MANIFEST string
  const char* flag;  // keyword / command-line name, or nullptr when users cannot set it
  bool negated;      // the flag is a switch that sets `key` to false
  OptionType type;
  uint32_t scope;
  const char* default_text;  // the default as the command line shows it (nullptr: none to show)
  double min;                // kInt / kDouble range
  double max;
  const char* choices;  // kChoice: the values, '|'-separated
  const char* help;
  const char* aliases;     // other accepted flags, '|'-separated ("" for none); "!name": a switch's
                           // negation on the command line only (--no-boilerplate); "~name": an
                           // old name, still accepted, with a warning (OptionValues::deprecated())
  const char* short_flag;  // a one-letter command-line form ("-k"), or nullptr
  bool recorded;           // written in the fingerprint-options string (FingerprintOptionsToString)
};

// Every option, in a stable order (fingerprint options in the order of the MANIFEST string).
NEARDUP_EXPORT std::span<const OptionSpec> AllOptions();
// The option named `name` (its flag, an alias, or its key), or nullptr.
NEARDUP_EXPORT const OptionSpec* FindOption(std::string_view name);
// The option users name `name` (its flag or an alias; never a key alone), or nullptr.
NEARDUP_EXPORT const OptionSpec* FindFlag(std::string_view name);

// How errors name an option.
enum class OptionNaming {
  kKeyword,  // "shingle", "no_nfkc" (Python, the API)
  kFlag,     // "--shingle", "--no-nfkc" (the command line)
};
// The name of `spec` for users of `naming` (its flag, else its key).
NEARDUP_EXPORT std::string OptionDisplayName(const OptionSpec& spec, OptionNaming naming);

// A value as a front end has it.
using OptionValue = std::variant<bool, int64_t, double, std::string>;

// The options a user gave, by key. Values are checked when set (type, range, choices).
class NEARDUP_EXPORT OptionValues {
 public:
  explicit OptionValues(OptionNaming naming = OptionNaming::kKeyword) : naming_(naming) {}

  // Sets the option `name` (flag, alias or key). For a negated flag, true means the switch is
  // given (its key becomes false). InvalidArgument naming the option for an unknown name, a value
  // of another type (a double for an integer option, a number for a string ...) or a bad value.
  Status Set(std::string_view name, const OptionValue& value);
  // The same from text as typed on a command line ("0.7", "jieba"; a switch takes "1"/"0",
  // "true"/"false").
  Status SetText(std::string_view name, std::string_view text);

  bool Has(std::string_view key) const { return values_.count(std::string(key)) > 0; }
  // The value of `key`, or nullptr when it was not given.
  const OptionValue* Find(std::string_view key) const;
  void Erase(std::string_view key) {
    values_.erase(std::string(key));
    spelled_.erase(std::string(key));
  }
  const std::map<std::string, OptionValue>& values() const { return values_; }
  // The old names given ("max_k is an old name: use indexed_k"), which front ends warn about
  // (the command line: neardup: warning: ...; Python: DeprecationWarning).
  const std::vector<std::string>& deprecated() const { return deprecated_; }
  OptionNaming naming() const { return naming_; }
  // How this set names `key` in errors: as the user spelled it, else by its flag.
  std::string NameOf(std::string_view key) const;

  // Sets the fields of the options given in the target's scope; the others keep their values.
  // A profile other than the target's starts from that profile's options (profile=yanyiwu:
  // YanyiwuSimhashOptions(top_k), which reads only top_k, idf, jieba_dir and
  // replace_invalid_utf8). InvalidArgument naming the option for contradictory values.
  Status ApplyTo(FingerprintOptions* options) const;
  Status ApplyTo(DocumentReaderOptions* options) const;
  // Fingerprint, reader and dedup options, then ValidateDedupOptions (its errors renamed).
  Status ApplyTo(DedupOptions* options) const;
  Status ApplyTo(StoreOptions* options) const;

  // A library error about an option named by its key (ValidateDedupOptions: "k (the SimHash
  // join radius) must be ..."), with the option named as this set names it.
  Status Renamed(const Status& status) const;

 private:
  OptionNaming naming_;
  std::map<std::string, OptionValue> values_;   // by key
  std::map<std::string, std::string> spelled_;  // by key: the name the user gave it by
  std::vector<std::string> deprecated_;
};

// The fingerprint options in force in `options`, by flag (keyword), each in its flag's sense
// (no_nfkc = !normalize.nfkc): what a front end shows as the options of a fingerprinter.
NEARDUP_EXPORT std::map<std::string, OptionValue> FingerprintOptionsInForce(
    const FingerprintOptions& options);

// The fingerprint options a store works with: those it recorded (`recorded`, a
// FingerprintOptionsToString; empty for a store created without them, whose fingerprints are
// `store_bits` wide), changed by `given`, which may only repeat them: a given option with another
// value than the recorded one is InvalidArgument listing each such option (as `given` names it)
// with both values. `where` (the store's directory) starts the message.
NEARDUP_EXPORT Result<FingerprintOptions> FingerprintOptionsForStore(std::string_view where,
                                                                     std::string_view recorded,
                                                                     int store_bits,
                                                                     const OptionValues& given);

// Creates the store at `dir` with `options`, recording the fingerprint options `given` chooses
// (FingerprintOptions{} changed by them; checked by building a Fingerprinter first).
// *fingerprint gets them.
NEARDUP_EXPORT Result<std::unique_ptr<DocumentStore>> CreateStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const OptionValues& given,
    FingerprintOptions* fingerprint);

// Opens the store at `dir` to fingerprint text for it: an existing store with the fingerprint
// options it recorded (FingerprintOptionsForStore: a given option must agree), a missing one (only
// with options.create_if_missing) created by CreateStoreWithFingerprintOptions. *fingerprint gets
// the options to fingerprint texts for this store with.
NEARDUP_EXPORT Result<std::unique_ptr<DocumentStore>> OpenStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const OptionValues& given,
    FingerprintOptions* fingerprint);

// The key=value pairs of a fingerprint-options string, values unescaped, in order.
// InvalidArgument for a pair without '=' or a bad %-escape.
NEARDUP_EXPORT Result<std::map<std::string, std::string>> ParseOptionString(std::string_view text);

}  // namespace neardup

#endif  // NEARDUP_OPTIONS_H_
