// `neardup report DIR`: one self-contained HTML page of a dedup (or eval) output folder
// (the library's neardup/report.h does the work).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "cli/report.h"
#include "neardup/report.h"

namespace neardup::cli {
namespace {

struct ReportCommandArgs {
  std::string directory;
  std::string output;
  bool force = false;
  bool quiet = false;
  ReportOptions options;
};

int RunReportCommand(const ReportCommandArgs& args) {
  const std::string output = args.output.empty()
                                 ? (std::filesystem::path(args.directory) / "report.html").string()
                                 : args.output;
  auto stats = WriteReport(args.directory, output, args.options, args.force);
  if (!stats.ok()) {
    PrintError(stats.status());
    return kExitFailure;
  }
  if (!stats->texts_note.empty()) {
    PrintWarning("texts unavailable for " +
                 Count(stats->texts_wanted - stats->texts_found, "document") + ": " +
                 stats->texts_note);
  }
  if (!args.quiet) {
    std::fprintf(stderr,
                 "neardup: report: %s (%s on the page), %s in the sample, %s of %s texts, %s, "
                 "%.1f MB -> %s\n",
                 Count(stats->clusters, "cluster").c_str(),
                 std::to_string(stats->clusters_embedded).c_str(),
                 Count(stats->sample, "removed document").c_str(),
                 std::to_string(stats->texts_found).c_str(),
                 std::to_string(stats->texts_wanted).c_str(), Count(stats->diffs, "diff").c_str(),
                 static_cast<double>(stats->bytes) / 1e6, output.c_str());
  }
  std::printf("%s\n", output.c_str());
  return kExitOk;
}

CommandRegistrar registrar(
    "report", "write one self-contained HTML page to look at what a dedup run decided",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<ReportCommandArgs>();
      app->add_option("directory", args->directory,
                      "the output folder of `neardup dedup -o DIR` or `neardup eval -o DIR`")
          ->required();
      app->add_option("-o,--output", args->output, "the HTML file (default: DIR/report.html)");
      app->add_flag("-f,--force", args->force,
                    "replace an existing output file (never an input file)");
      app->add_flag("-q,--quiet", args->quiet, "no summary line (warnings are still printed)");
      app->add_option("--max-clusters", args->options.max_clusters,
                      "clusters on the page, the largest first");
      app->add_option("--max-members", args->options.max_members_with_text,
                      "removed members of a cluster shown with text and diff");
      app->add_option("--max-text-bytes", args->options.max_text_bytes,
                      "each text is cut to this many bytes")
          ->check(CLI::Range(size_t{16}, size_t{1} << 24));
      app->add_option("--max-total-text-bytes", args->options.max_total_text_bytes,
                      "all texts on the page together (later clusters go without)");
      app->add_option("--sample", args->options.sample_size,
                      "removed documents in the review sample");
      app->add_option("--seed", args->options.seed, "chooses the review sample");
      app->footer(
          "Examples:\n"
          "  neardup dedup corpus.jsonl -o out/ && neardup report out/   # out/report.html\n"
          "  neardup report out/ -o review.html --seed 7 --sample 100\n"
          "The texts are read again from the run's inputs (recorded in summary.json); the page "
          "says which are unavailable. Nothing is loaded from the network.");
      return [args] { return RunReportCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
