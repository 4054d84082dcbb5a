// The dedup options from the option registry's values: OptionValues::ApplyTo(DedupOptions), then
// the library's checks with the options named as the user gave them; see neardup/options.h.
#include "neardup/options.h"

namespace neardup {

Status OptionValues::ApplyTo(DedupOptions* options) const {
  NEARDUP_RETURN_IF_ERROR(ApplyTo(&options->fingerprint));
  NEARDUP_RETURN_IF_ERROR(ApplyTo(&options->reader));
  const OptionValue* bands = Find("bands");
  const OptionValue* rows = Find("rows");
  if (bands != nullptr || rows != nullptr) {
    options->lsh.parameters =
        LshParameters{bands != nullptr ? static_cast<int>(std::get<int64_t>(*bands)) : 0,
                      rows != nullptr ? static_cast<int>(std::get<int64_t>(*rows)) : 0};
  }
  for (const auto& [key, value] : values_) {
    if (key == "threshold") options->lsh.threshold = std::get<double>(value);
    if (key == "bucket_window") {
      options->lsh.bucket_window = static_cast<uint32_t>(std::get<int64_t>(value));
    }
    if (key == "candidates") {
      const std::string& c = std::get<std::string>(value);
      options->candidates = c == "lsh"       ? DedupOptions::Candidates::kLsh
                            : c == "simhash" ? DedupOptions::Candidates::kSimHash
                                             : DedupOptions::Candidates::kLshAndSimHash;
    }
    if (key == "k") options->k = static_cast<int>(std::get<int64_t>(value));
    if (key == "keep") {
      Status parsed =
          ParseKeepPolicy(std::get<std::string>(value), &options->keep, &options->keep_field);
      if (!parsed.ok()) return Renamed(parsed);
    }
    if (key == "verify_threshold") options->verify_threshold = std::get<double>(value);
    if (key == "temp_dir") options->temp_directory = std::get<std::string>(value);
    if (key == "in_memory") options->spill = !std::get<bool>(value);
    if (key == "threads") options->threads = static_cast<int>(std::get<int64_t>(value));
    if (key == "containment_threshold") options->containment_threshold = std::get<double>(value);
    if (key == "containment_min_shingles") {
      options->containment_min_shingles = std::get<double>(value);
    }
    if (key == "containment_min_ratio") options->containment_min_ratio = std::get<double>(value);
    if (key == "edited_threshold") options->edited_threshold = std::get<double>(value);
    if (key == "edited_min_jaccard") options->edited_min_jaccard = std::get<double>(value);
    if (key == "boilerplate") options->boilerplate = std::get<bool>(value);
    if (key == "boilerplate_min_documents") {
      options->boilerplate_options.min_documents = static_cast<uint32_t>(std::get<int64_t>(value));
    }
    if (key == "boilerplate_sketch_mb") {
      options->boilerplate_sketch_bytes = static_cast<size_t>(std::get<int64_t>(value)) << 20;
    }
  }
  return Renamed(ValidateDedupOptions(*options));
}

}  // namespace neardup
