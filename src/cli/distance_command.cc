// `neardup distance A B`: the Hamming distance of two fingerprints (hex, binary or d:decimal), or
// with --text of the fingerprints of two texts.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/fingerprint_flags.h"
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
      std::fprintf(stderr, "neardup distance: %s\n", status.message().c_str());
      return kExitUsage;
    }
    auto fingerprinter = Fingerprinter::Create(options);
    if (!fingerprinter.ok()) {
      std::fprintf(stderr, "neardup distance: %s\n", fingerprinter.status().ToString().c_str());
      return kExitFailure;
    }
    auto ra = (*fingerprinter)->Compute(args.a);
    auto rb = (*fingerprinter)->Compute(args.b);
    if (!ra.ok() || !rb.ok()) {
      std::fprintf(stderr, "neardup distance: text %s: %s\n", ra.ok() ? "B" : "A",
                   (ra.ok() ? rb : ra).status().message().c_str());
      return kExitFailure;
    }
    fa = *ra;
    fb = *rb;
  } else {
    auto ra = ParseFingerprint(args.a);
    auto rb = ParseFingerprint(args.b);
    if (!ra.ok() || !rb.ok()) {
      std::fprintf(stderr, "neardup distance: fingerprint %s: %s\n", ra.ok() ? "B" : "A",
                   (ra.ok() ? rb : ra).status().message().c_str());
      return kExitUsage;
    }
    fa = *ra;
    fb = *rb;
    if (fa.bits != fb.bits) {
      std::fprintf(stderr, "neardup distance: fingerprints of different widths (%d and %d bits)\n",
                   fa.bits, fb.bits);
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
      return [args] { return RunDistanceCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
