// The fields of FingerprintOptions by their registry key (src/common/option_registry.cc), for the
// files that fill the options structs from an OptionValues
// (src/fingerprint/fingerprint_options.cc).
//
// Internal header. Pure functions; thread-safe.
#ifndef NEARDUP_COMMON_OPTION_FIELDS_H_
#define NEARDUP_COMMON_OPTION_FIELDS_H_

#include <string>
#include <string_view>

#include "neardup/fingerprinter.h"
#include "neardup/options.h"

namespace neardup {

// The field's value as the fingerprint-options string writes it (before escaping).
std::string FingerprintFieldText(std::string_view key, const FingerprintOptions& options);
// Sets the field `key` from a value the registry checked.
void SetFingerprintField(std::string_view key, const OptionValue& value,
                         FingerprintOptions* options);
// The profile a checked profile value names.
HashProfile ProfileNamed(std::string_view name);
// A value escaped as in the fingerprint-options string.
std::string EscapeOptionValue(std::string_view value);

}  // namespace neardup

#endif  // NEARDUP_COMMON_OPTION_FIELDS_H_
