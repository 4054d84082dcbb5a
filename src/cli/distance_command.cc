// `neardup distance A B`: the Hamming distance of two fingerprints (hex, binary or d:decimal), or
// with --text of the fingerprints of two texts.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
#include "cli/report.h"
#include "common/json_writer.h"
#include "neardup/fingerprinter.h"

namespace neardup::cli {
namespace {

struct DistanceCommandArgs {
  FingerprintFlags fingerprint;
  std::string a;
  std::string b;
  bool texts = false;
  bool json = false;
};

int RunDistanceCommand(const DistanceCommandArgs& args) {
  Fingerprint fa, fb;
  if (args.texts) {
    FingerprintOptions options;
    Status status = args.fingerprint.ToOptions(&options);
    if (!status.ok()) {
      PrintError(status);
      return kExitUsage;
    }
    auto fingerprinter = Fingerprinter::Create(options);
    if (!fingerprinter.ok()) {
      PrintError(fingerprinter.status());
      return kExitFailure;
    }
    auto ra = (*fingerprinter)->Compute(args.a);
    auto rb = (*fingerprinter)->Compute(args.b);
    if (!ra.ok() || !rb.ok()) {
      PrintError(std::string("text ") + (ra.ok() ? "B" : "A") + ": " +
                 (ra.ok() ? rb : ra).status().message());
      return kExitFailure;
    }
    fa = *ra;
    fb = *rb;
  } else {
    auto ra = ParseFingerprint(args.a);
    auto rb = ParseFingerprint(args.b);
    if (!ra.ok() || !rb.ok()) {
      PrintError(std::string("fingerprint ") + (ra.ok() ? "B" : "A") + ": " +
                 (ra.ok() ? rb : ra).status().message());
      return kExitUsage;
    }
    fa = *ra;
    fb = *rb;
    if (fa.bits != fb.bits) {
      PrintError("fingerprints of different widths (" + std::to_string(fa.bits) + " and " +
                 std::to_string(fb.bits) + " bits)");
      return kExitUsage;
    }
  }
  int distance = HammingDistance(fa, fb);
  if (args.json) {
    std::string line;
    JsonWriter json(&line);
    json.BeginObject();
    json.Key("a").String(ToHex(fa));
    json.Key("b").String(ToHex(fb));
    json.Key("bits").Int(fa.bits);
    json.Key("distance").Int(distance);
    json.EndObject();
    std::printf("%s\n", line.c_str());
  } else {
    std::printf("%d\n", distance);
  }
  return kExitOk;
}

const CommandRegistrar kRegistrar(
    "distance", "Hamming distance of two fingerprints (or, with --text, of two texts)",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<DistanceCommandArgs>();
      app->add_option("a", args->a, "first fingerprint (16/32 hex, 64/128 binary, d:decimal)")
          ->required();
      app->add_option("b", args->b, "second fingerprint")->required();
      app->add_flag("--text", args->texts, "A and B are texts: fingerprint them first");
      app->add_flag("--json", args->json, "print {\"a\",\"b\",\"bits\",\"distance\"}");
      args->fingerprint.Add(app);
      app->footer(
          "Examples:\n"
          "  neardup distance f773be40a3f0a3e5 f773be40a3f0a3e7\n"
          "  neardup distance --text \"the quick brown fox\" \"the quick brown fox!\"\n"
          "  neardup distance --json d:17830487165380198885 f773be40a3f0a3e5");
      return [args] { return RunDistanceCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
