// `neardup dedup INPUT...`: clusters near-duplicate documents and writes what to keep and remove.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "cli/dedup_flags.h"
#include "neardup/dedup.h"

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
  DedupFlags flags;
};

int RunDedupCommand(const DedupCommandArgs& args) {
  DedupOptions options;
  Status status = args.flags.ToOptions(&options);
  if (!status.ok()) {
    std::fprintf(stderr, "neardup dedup: %s\n", status.message().c_str());
    return kExitUsage;
  }
  if (!args.write_kept.empty() &&
      std::find(args.inputs.begin(), args.inputs.end(), "-") != args.inputs.end()) {
    std::fprintf(stderr, "neardup dedup: --write-kept cannot re-read standard input\n");
    return kExitUsage;
  }
  options.measure_stage_memory = true;  // a process of its own: per-stage peak memory
  auto warnings = std::make_shared<uint64_t>(0);
  const bool quiet = args.quiet;
  const bool show_progress = !quiet && isatty(fileno(stderr));
  // On a terminal a warning first clears the progress line; elsewhere it is a plain line.
  const char* clear_line = show_progress ? "\r\033[K" : "";
  options.reader.on_warning = [warnings, quiet, clear_line](const std::string& message) {
    ++*warnings;
    if (quiet) return;
    if (*warnings <= 20) {
      std::fprintf(stderr, "%swarning: %s\n", clear_line, message.c_str());
    } else if (*warnings == 21) {
      std::fprintf(stderr, "%swarning: more skipped records; see summary.json\n", clear_line);
    }
  };
  ProgressBar bar;
  DedupProgress progress;
  if (show_progress) {
    progress = [&bar](const std::string& stage, uint64_t done, uint64_t total, uint64_t docs) {
      bar.Update(stage, done, total, docs);
    };
  }
  auto report = RunDedup(args.inputs, options, progress);
  bar.Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "neardup dedup: %s\n", report.status().ToString().c_str());
    return kExitFailure;
  }
  DedupOutputOptions output;
  output.directory = args.output_dir;
  output.write_kept_path = args.write_kept;
  output.inputs = &args.inputs;
  output.options = &options;
  auto write_start = std::chrono::steady_clock::now();
  status = WriteDedupOutputs(*report, output);
  if (!status.ok()) {
    std::fprintf(stderr, "neardup dedup: %s\n", status.ToString().c_str());
    return kExitFailure;
  }
  double write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  if (!quiet) {
    uint64_t skipped = 0;
    for (const auto& [reason, count] : report->skipped) skipped += count;
    std::string rule = "verify " + (report->verify_threshold > 0
                                        ? std::to_string(report->verify_threshold).substr(0, 4)
                                        : std::string("off"));
    if (report->lsh.bands > 0) {
      rule += ", LSH " + std::to_string(report->lsh.bands) + "x" + std::to_string(report->lsh.rows);
    }
    if (report->max_distance >= 0) rule += ", SimHash k = " + std::to_string(report->max_distance);
    std::fprintf(stderr,
                 "neardup dedup: %zu documents (%llu skipped), %s, %zu clusters, %llu "
                 "removed, %.2f s (+%.2f s writing)%s%s\n",
                 report->documents.size(), static_cast<unsigned long long>(skipped), rule.c_str(),
                 report->clusters.size(), static_cast<unsigned long long>(report->removed_count()),
                 report->total_seconds, write_seconds, args.output_dir.empty() ? "" : " -> ",
                 args.output_dir.c_str());
  }
  return kExitOk;
}

CommandRegistrar registrar(
    "dedup", "cluster near-duplicate documents and list which to keep and remove",
    [](CLI::App* app) -> RunFunction {
      auto args = std::make_shared<DedupCommandArgs>();
      app->add_option("inputs", args->inputs,
                      "JSONL files (.jsonl/.ndjson/.json, optionally .gz/.zst), text files, "
                      "directories, or - for standard input")
          ->required();
      app->add_option("-o,--output", args->output_dir,
                      "directory for clusters.jsonl, keep.txt, remove.txt, summary.json "
                      "(default: all to standard output)");
      app->add_option("--write-kept", args->write_kept,
                      "also write the input without removed documents (JSONL) to this file");
      app->add_flag("-q,--quiet", args->quiet, "no progress bar, warnings or summary line");
      args->flags.Declare(app, /*with_keep=*/true);
      return [args] { return RunDedupCommand(*args); };
    });

}  // namespace
}  // namespace neardup::cli
