// `neardup dedup INPUT...`: clusters near-duplicate documents and writes what to keep and remove.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include <filesystem>
#include <map>

#include "cli/command.h"
#include "cli/dedup_flags.h"
#include "cli/report.h"
#include "neardup/dedup.h"
#include "neardup/output_file.h"

namespace neardup::cli {
namespace {

// A one-line progress display on stderr (only used when stderr is a terminal).
class ProgressBar {
 public:
  ProgressBar() : start_(std::chrono::steady_clock::now()) {}
  void Update(const std::string& stage, uint64_t done, uint64_t total, uint64_t documents) {
    auto now = std::chrono::steady_clock::now();
    if (stage == last_stage_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
    if (stage != last_stage_) stage_start_ = now;
    last_stage_ = stage;
    last_draw_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    char line[256];
    int n = std::snprintf(line, sizeof(line), "\r%-12s %10llu docs  %8.0f docs/s", stage.c_str(),
                          static_cast<unsigned long long>(documents),
                          elapsed > 0 ? documents / elapsed : 0.0);
    if (total > 0 && done <= total && n > 0) {
      double fraction = static_cast<double>(done) / static_cast<double>(total);
      double stage_elapsed = std::chrono::duration<double>(now - stage_start_).count();
      double eta = fraction > 0 ? stage_elapsed * (1 - fraction) / fraction : 0;
      std::snprintf(line + n, sizeof(line) - n, "  %5.1f%%  ETA %5.0fs   ", 100 * fraction, eta);
    } else if (n > 0) {
      std::snprintf(line + n, sizeof(line) - n, "%24s", "");
    }
    std::fputs(line, stderr);
    drawn_ = true;
  }
  void Finish() {
    if (drawn_) std::fputs("\r\033[K", stderr);
  }

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  std::chrono::steady_clock::time_point stage_start_{};
  std::string last_stage_;
  bool drawn_ = false;
};

struct DedupCommandArgs {
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string write_kept;
  bool quiet = false;
  bool json = false;
  bool force = false;
  DedupFlags flags;
};

// Refuses, before the (possibly long) run, what could not be written after it: --write-kept of an
// input that cannot be re-read, --write-kept - without -o, and unwritable output paths. kExitOk,
// or the exit code (the error printed).
int CheckDedupOutputs(const DedupCommandArgs& args) {
  for (const std::string& input : args.inputs) {
    if (!args.write_kept.empty() && IsStreamInput(input)) {
      PrintError("--write-kept cannot re-read " +
                 (input == "-" ? std::string("standard input") : input + " (a pipe or stream)") +
                 ": give the input as a file");
      return kExitUsage;
    }
  }
  if (args.write_kept == "-" && args.output_dir.empty()) {
    PrintError("--write-kept - needs -o DIR: without it standard output holds the clusters");
    return kExitUsage;
  }
  auto expanded = DocumentReader::Open(args.inputs, DocumentReaderOptions{});
  if (!expanded.ok()) {
    PrintError(expanded.status());
    return kExitFailure;
  }
  OutputFileOptions check;
  check.force = args.force;
  check.inputs = (*expanded)->files();
  std::vector<std::string> paths;
  if (!args.output_dir.empty()) {
    for (const char* name : {"clusters.jsonl", "keep.txt", "remove.txt", "summary.json"}) {
      paths.push_back((std::filesystem::path(args.output_dir) / name).string());
    }
  }
  if (!args.write_kept.empty()) paths.push_back(args.write_kept);
  if (Status status = CheckOutputPaths(paths, check); !status.ok()) {
    PrintError(status);
    return kExitFailure;
  }
  return kExitOk;
}

// RunDedup with warnings on stderr and, on a terminal (not --quiet), a progress line.
Result<DedupReport> RunWithProgress(const DedupCommandArgs& args, DedupOptions* options) {
  options->measure_stage_memory = true;  // a process of its own: per-stage peak memory
  const bool show_progress = !args.quiet && isatty(fileno(stderr));
  WarningPrinter warnings;
  // On a terminal a warning first clears the progress line; elsewhere it is a plain line.
  warnings.set_clear_line(show_progress ? "\r\033[K" : "");
  options->reader.on_warning = warnings.Callback();
  ProgressBar bar;
  DedupProgress progress;
  if (show_progress) {
    progress = [&bar](const std::string& stage, uint64_t done, uint64_t total, uint64_t docs) {
      bar.Update(stage, done, total, docs);
    };
  }
  auto report = RunDedup(args.inputs, *options, progress);
  bar.Finish();
  return report;
}

// The closing line on stderr: documents, skipped, the rule, clusters, removed, time.
void PrintDedupLine(const DedupCommandArgs& args, const DedupReport& report, uint64_t skipped_total,
                    double write_seconds) {
  std::string rule = "verify " + (report.verify_threshold > 0
                                      ? std::to_string(report.verify_threshold).substr(0, 4)
                                      : std::string("off"));
  if (report.lsh) {
    rule += ", LSH " + std::to_string(report.lsh->bands) + "x" + std::to_string(report.lsh->rows);
  }
  if (report.k) rule += ", SimHash k = " + std::to_string(*report.k);
  std::fprintf(stderr,
               "neardup: dedup: %s (%s skipped), %s, %s, %s removed, %.2f s "
               "(+%.2f s writing)%s%s\n",
               Count(report.documents.size(), "document").c_str(),
               std::to_string(skipped_total).c_str(), rule.c_str(),
               Count(report.clusters.size(), "cluster").c_str(),
               std::to_string(report.removed_count()).c_str(), report.total_seconds, write_seconds,
               args.output_dir.empty() ? "" : " -> ", args.output_dir.c_str());
}

int RunDedupCommand(const DedupCommandArgs& args) {
  DedupOptions options;
  Status status = args.flags.ToOptions(&options);
  if (!status.ok()) {
    PrintError(status);
    return kExitUsage;
  }
  if (int code = CheckDedupOutputs(args); code != kExitOk) return code;
  auto report = RunWithProgress(args, &options);
  if (!report.ok()) {
    PrintError(report.status());
    return kExitFailure;
  }
  std::map<std::string, uint64_t> skipped = report->skipped;
  for (const auto& [code, count] : report->failed) skipped["cannot_fingerprint"] += count;
  WarningPrinter::PrintTotals(skipped, report->fallbacks);
  if (report->documents.empty()) {
    PrintError(NothingRead(skipped));
    return kExitFailure;
  }
  if (report->duplicate_ids > 0) {
    PrintWarning(Count(report->duplicate_ids, "document") +
                 " share their id with another document; they are listed as id@file:line "
                 "(--strict refuses shared ids)");
  }
  DedupOutputOptions output;
  output.directory = args.output_dir;
  output.write_kept_path = args.write_kept;
  output.force = args.force;
  output.inputs = &args.inputs;
  output.options = &options;
  auto write_start = std::chrono::steady_clock::now();
  status = WriteDedupOutputs(*report, output);
  if (!status.ok()) {
    PrintError(status);
    return kExitFailure;
  }
  uint64_t skipped_total = 0;
  for (const auto& [reason, count] : skipped) skipped_total += count;
  if (!args.write_kept.empty() && skipped_total > 0) {
    PrintWarning(Count(skipped_total, "skipped record") + " (malformed or empty) " +
                 (skipped_total == 1 ? "is" : "are") + " not in " + args.write_kept);
  }
  double write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  if (args.json) {
    // The summary as one JSON object: on stdout when the results went to a directory, else on
    // stderr (stdout holds the clusters).
    std::string summary = DedupSummaryJson(*report, &options);
    std::fputs(summary.c_str(), args.output_dir.empty() ? stderr : stdout);
  } else if (!args.quiet) {
    PrintDedupLine(args, *report, skipped_total, write_seconds);
  }
  return kExitOk;
}

CommandRegistrar registrar(
    "dedup", "cluster near-duplicate documents and list which to keep and remove",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<DedupCommandArgs>();
      app->add_option("inputs", args->inputs,
                      "JSONL files (.jsonl/.ndjson/.json), plain text files, directories, or - "
                      "for standard input; gzip, zstd and xz are read directly")
          ->required();
      app->add_option("-o,--output", args->output_dir,
                      "directory for clusters.jsonl, keep.txt, remove.txt, summary.json "
                      "(default: clusters JSONL to standard output, summary to stderr)");
      app->add_option("--write-kept", args->write_kept,
                      "also write the input without removed documents (JSONL) to this file");
      app->add_flag("-f,--force", args->force,
                    "replace existing output files (never an input file)");
      app->add_flag("--json", args->json, "print the summary as one JSON object");
      app->add_flag("-q,--quiet", args->quiet,
                    "no progress bar or summary line (warnings are still printed)");
      args->flags.Declare(app, /*with_keep=*/true);
      app->footer(
          "Examples:\n"
          "  neardup dedup corpus.jsonl -o out/                 # out/keep.txt, remove.txt, ...\n"
          "  neardup dedup data/ --text-field content.body | jq .kept.id\n"
          "  neardup dedup a.jsonl.gz b.jsonl -o out --write-kept clean.jsonl --keep longest\n"
          "Shared ids are listed as id@file:line; outputs are never written over an input.");
      return [args] { return RunDedupCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
