// The fingerprint options from the option registry's values:
// OptionValues::ApplyTo(FingerprintOptions) with the profiles' rule, and the fingerprint options of
// a store (FingerprintOptionsForStore and opening a store to fingerprint text for it); see
// neardup/options.h.
#include <memory>
#include <string>

#include "common/option_fields.h"
#include "neardup/options.h"

namespace neardup {

Status OptionValues::ApplyTo(FingerprintOptions* options) const {
  const OptionValue* profile = Find("profile");
  if (profile != nullptr) {
    const HashProfile wanted = ProfileNamed(std::get<std::string>(*profile));
    if (wanted != options->profile) {
      const bool replace_invalid = options->normalize.replace_invalid_utf8;
      *options =
          wanted == HashProfile::kYanyiwuSimhash ? YanyiwuSimhashOptions() : FingerprintOptions{};
      options->normalize.replace_invalid_utf8 = replace_invalid;
    }
  }
  if (options->profile == HashProfile::kYanyiwuSimhash) {
    // The profile fixes every option but these.
    for (const auto& [key, value] : values_) {
      const OptionSpec* spec = FindOption(key);
      if (spec == nullptr || !(spec->scope & kFingerprintScope) || key == "profile") continue;
      if (key == "top_k" || key == "idf" || key == "jieba_dir" || key == "replace_invalid_utf8") {
        SetFingerprintField(key, value, options);
      } else if (key == "bits") {
        if (std::get<int64_t>(value) != 64) {
          return Status::InvalidArgument(NameOf("bits") + ": the yanyiwu profile is 64-bit only");
        }
      } else {
        return Status::InvalidArgument(NameOf(key) + ": not an option of the yanyiwu profile");
      }
    }
    return Status::Ok();
  }
  for (const auto& [key, value] : values_) {
    const OptionSpec* spec = FindOption(key);
    if (spec != nullptr && (spec->scope & kFingerprintScope) && key != "profile") {
      SetFingerprintField(key, value, options);
    }
  }
  return Status::Ok();
}

Result<FingerprintOptions> FingerprintOptionsForStore(std::string_view where,
                                                      std::string_view recorded, int store_bits,
                                                      const OptionValues& given) {
  FingerprintOptions base;
  if (recorded.empty()) {
    base.bits = store_bits;
  } else {
    Result<FingerprintOptions> parsed = ParseFingerprintOptions(recorded);
    if (!parsed.ok()) return parsed.status().WithContext(std::string(where));
    base = std::move(*parsed);
  }
  FingerprintOptions wanted = base;
  NEARDUP_RETURN_IF_ERROR(given.ApplyTo(&wanted));
  if (wanted.bits != store_bits) {
    return Status::InvalidArgument(std::string(where) + ": the store holds " +
                                   std::to_string(store_bits) + "-bit fingerprints, not " +
                                   given.NameOf("bits") + " " + std::to_string(wanted.bits));
  }
  if (recorded.empty()) return wanted;
  std::string differences;
  for (const OptionSpec& spec : AllOptions()) {
    if (!spec.recorded) continue;
    const std::string had = FingerprintFieldText(spec.key, base),
                      want = FingerprintFieldText(spec.key, wanted);
    if (had == want) continue;
    if (!differences.empty()) differences += ", ";
    // The option given that asks for it (a profile change changes options nobody gave).
    const std::string asked =
        given.Has(spec.key) ? given.NameOf(spec.key) : given.NameOf("profile");
    differences += std::string(spec.key) + "=" + EscapeOptionValue(had) + ", not " + spec.key +
                   "=" + EscapeOptionValue(want) + " (" + asked + ")";
  }
  if (!differences.empty()) {
    return Status::InvalidArgument(
        std::string(where) +
        ": the store was created with other fingerprint options: " + differences +
        "; fingerprints made with other options are not comparable (give the options the store "
        "was created with, or none to use them)");
  }
  return wanted;
}

Result<std::unique_ptr<DocumentStore>> CreateStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const OptionValues& given,
    FingerprintOptions* fingerprint) {
  *fingerprint = FingerprintOptions{};
  NEARDUP_RETURN_IF_ERROR(given.ApplyTo(fingerprint));
  Result<std::unique_ptr<Fingerprinter>> checked = Fingerprinter::Create(*fingerprint);
  if (!checked.ok()) return given.Renamed(checked.status());  // names a missing file or option
  options.bits = fingerprint->bits;
  options.fingerprint_options = FingerprintOptionsToString(*fingerprint);
  options.create_if_missing = true;
  return DocumentStore::Open(dir, options);
}

Result<std::unique_ptr<DocumentStore>> OpenStoreWithFingerprintOptions(
    const std::string& dir, StoreOptions options, const OptionValues& given,
    FingerprintOptions* fingerprint) {
  const bool create = options.create_if_missing;
  options.create_if_missing = false;
  options.fingerprint_options.clear();
  auto opened = DocumentStore::Open(dir, options);
  if (!opened.ok()) {
    if (create && opened.status().code() == StatusCode::kNotFound) {
      return CreateStoreWithFingerprintOptions(dir, options, given, fingerprint);
    }
    return opened.status();
  }
  const StoreStats stats = (*opened)->Stats();
  Result<FingerprintOptions> resolved =
      FingerprintOptionsForStore(dir, stats.fingerprint_options, stats.bits, given);
  if (!resolved.ok()) {
    // The store was only opened to read its options: closing it writes nothing.
    [[maybe_unused]] Status closed = (*opened)->Close();
    return resolved.status();
  }
  *fingerprint = std::move(*resolved);
  return opened;
}

}  // namespace neardup
