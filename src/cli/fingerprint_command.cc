// `neardup fingerprint [INPUT...]`: writes one JSONL line {"id", "fingerprint", "bits",
// "features"} per input document, in input order, computed on every core.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "common/json_writer.h"
#include "common/parallel.h"
#include "neardup/fingerprinter.h"

namespace neardup::cli {
namespace {

struct FingerprintCommandArgs {
  FingerprintFlags fingerprint;
  InputFlags input;
  std::string format = "hex";
  bool explain = false;
  int explain_features = 20;
};

std::string FormatFingerprint(const Fingerprint& fp, const std::string& format) {
  if (format == "binary") return ToBinary(fp);
  if (format == "decimal") return ToDecimal(fp);  // 64-bit only, checked before
  return ToHex(fp);
}

int RunFingerprintCommand(const FingerprintCommandArgs& args) {
  FingerprintOptions options;
  Status status = args.fingerprint.ToOptions(&options);
  if (!status.ok()) {
    PrintError(status);
    return kExitUsage;
  }
  if (args.format == "decimal" && options.bits != 64) {
    PrintError(
        "--format decimal: only for 64-bit fingerprints (use hex or binary with --bits 128)");
    return kExitUsage;
  }
  auto reader = InputBatchReader::Open(args.input, &args.fingerprint);
  if (!reader.ok()) {
    PrintError(reader.status());
    return kExitFailure;
  }
  auto fingerprinter = Fingerprinter::Create(options);
  if (!fingerprinter.ok()) {
    PrintError(fingerprinter.status());
    return kExitFailure;
  }
  const Fingerprinter& engine = **fingerprinter;
  return (*reader)->ProcessAll([&](const InputDocument& document, std::string* line) -> Status {
    auto details = engine.ComputeDetails(document.text, args.explain);
    if (!details.ok()) return details.status();
    JsonWriter json(line);
    json.BeginObject();
    json.Key("id").String(document.id);
    json.Key("fingerprint").String(FormatFingerprint(details->fingerprint, args.format));
    json.Key("bits").Int(details->fingerprint.bits);
    json.Key("features").Uint(details->feature_count);
    if (details->whole_text_fallback) json.Key("whole_text_fallback").Bool(true);
    if (args.explain) {
      json.Key("top_features").BeginArray();
      size_t shown = std::min(details->features.size(),
                              static_cast<size_t>(std::max(0, args.explain_features)));
      for (size_t f = 0; f < shown; ++f) {
        json.BeginArray().String(details->features[f].text).Double(details->features[f].weight);
        json.EndArray();
      }
      json.EndArray();
    }
    json.EndObject();
    line->push_back('\n');
    return Status::Ok();
  });
}

const CommandRegistrar kRegistrar(
    "fingerprint", "compute SimHash fingerprints of documents (JSONL out)",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<FingerprintCommandArgs>();
      args->fingerprint.Add(app);
      args->input.Add(app);
      app->add_option("--format", args->format, "hex | binary | decimal (64-bit only)")
          ->check(CLI::IsMember({"hex", "binary", "decimal"}));
      app->add_flag("--explain", args->explain, "also print the heaviest features and weights");
      app->add_option("--explain-features", args->explain_features,
                      "how many features --explain prints");
      app->footer(
          "Output: one JSON object per document, in input order whatever --threads:\n"
          "  {\"id\":\"...\",\"fingerprint\":\"f773be40a3f0a3e5\",\"bits\":64,\"features\":123}\n"
          "Malformed records are reported on stderr as file:line: reason (skipped).\n"
          "Examples:\n"
          "  neardup fingerprint corpus.jsonl > fingerprints.jsonl\n"
          "  neardup fingerprint --lines titles.txt --bits 128\n"
          "  echo '{\"id\":\"a\",\"text\":\"hello world\"}' | neardup fingerprint --explain");
      return [args] { return RunFingerprintCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
