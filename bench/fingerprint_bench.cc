// Fingerprinting throughput benchmark: Chinese jieba-keyword SimHash against Python jieba's
// extract_tags on the same text (timed in the same run), English and Japanese with the default
// features, and thread scaling. Prints a table of MB/s and ratios.
//
// Usage: fingerprint_bench [MB per language, default 2] [corpus dir, default the shared corpus]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/json_writer.h"
#include "common/parallel.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/jieba.h"

#ifndef NEARDUP_SHARED_DIR
#define NEARDUP_SHARED_DIR "/work/shared"
#endif

namespace neardup {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct TextSet {
  std::vector<std::string> texts;
  size_t bytes = 0;
};

TextSet Load(const std::string& dir, const std::vector<std::string>& files, size_t max_bytes) {
  TextSet set;
  for (const std::string& file : files) {
    auto reader = DocumentReader::Open({dir + "/" + file}, {});
    if (!reader.ok()) {
      std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
      std::exit(1);
    }
    Document doc;
    while (set.bytes < max_bytes) {
      auto got = (*reader)->Next(&doc);
      if (!got.ok() || !*got) break;
      set.bytes += doc.text.size();
      set.texts.push_back(std::move(doc.text));
    }
  }
  return set;
}

// Runs fn over every text `repeats` times on `threads` threads; returns seconds of the best run.
double TimeFingerprints(const Fingerprinter& fingerprinter, const TextSet& set, int threads,
                        int repeats, uint64_t* checksum) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    std::vector<uint64_t> values(set.texts.size());
    auto start = Clock::now();
    ParallelFor(set.texts.size(), threads, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        auto fp = fingerprinter.Compute(set.texts[i]);
        values[i] = fp.ok() ? fp->lo : 0;
      }
    });
    best = std::min(best, Seconds(start));
    uint64_t sum = 0;
    for (uint64_t v : values) sum ^= v;
    *checksum = sum;
  }
  return best;
}

std::unique_ptr<Fingerprinter> MakeOrDie(const FingerprintOptions& options) {
  auto fingerprinter = Fingerprinter::Create(options);
  if (!fingerprinter.ok()) {
    std::fprintf(stderr, "%s\n", fingerprinter.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*fingerprinter);
}

// Times Python jieba.analyse.extract_tags(text, topK=20) over the texts in a subprocess (the
// dictionary is loaded before the clock starts). Returns seconds, or a negative value on failure.
double TimePythonJieba(const TextSet& set) {
  std::string input_path = "/tmp/neardup_fingerprint_bench_" + std::to_string(getpid()) + ".jsonl";
  std::string script_path = input_path + ".py";
  {
    std::ofstream out(input_path, std::ios::binary);
    for (const std::string& text : set.texts) {
      std::string line;
      AppendJsonString(text, &line);
      out << line << "\n";
    }
    std::ofstream script(script_path);
    script << "import json, sys, time, logging\n"
              "import jieba, jieba.analyse\n"
              "jieba.setLogLevel(logging.WARNING)\n"
              "texts = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8')]\n"
              "jieba.initialize()\n"
              "jieba.analyse.extract_tags('预热', topK=20)\n"
              "start = time.perf_counter()\n"
              "for t in texts: jieba.analyse.extract_tags(t, topK=20)\n"
              "print(time.perf_counter() - start)\n";
  }
  std::string command = "/usr/bin/python3 " + script_path + " " + input_path;
  FILE* pipe = popen(command.c_str(), "r");
  double seconds = -1;
  if (pipe != nullptr) {
    if (std::fscanf(pipe, "%lf", &seconds) != 1) seconds = -1;
    pclose(pipe);
  }
  std::remove(input_path.c_str());
  std::remove(script_path.c_str());
  return seconds;
}

void Row(const char* name, size_t bytes, double seconds, int threads, double baseline_mbps) {
  double mbps = bytes / 1e6 / seconds;
  std::printf("%-52s %3d %9.2f %12.2f", name, threads, mbps, mbps / threads);
  if (baseline_mbps > 0) std::printf(" %10.2fx", mbps / baseline_mbps);
  std::printf("\n");
}

int Main(int argc, char** argv) {
  double megabytes = argc > 1 ? std::atof(argv[1]) : 2.0;
  std::string dir = argc > 2 ? argv[2] : std::string(NEARDUP_SHARED_DIR) + "/corpus";
  size_t max_bytes = static_cast<size_t>(megabytes * 1e6);
  if (!std::filesystem::is_directory(dir)) {
    std::printf("fingerprint_bench: skipped: the corpus %s is not there (needs ../shared)\n",
                dir.c_str());
    return 0;
  }
  TextSet zh =
      Load(dir, {"zh_lohelp.jsonl", "zh_manpages.jsonl", "zh_debian_docs.jsonl"}, max_bytes);
  TextSet en = Load(dir, {"en_speeches.jsonl", "en_manpages.jsonl"}, max_bytes);
  TextSet ja = Load(dir, {"ja_manpages.jsonl"}, max_bytes);
  const int nproc = DefaultThreadCount();
  std::printf("corpus: zh %zu docs %.2f MB, en %zu docs %.2f MB, ja %zu docs %.2f MB; nproc %d\n",
              zh.texts.size(), zh.bytes / 1e6, en.texts.size(), en.bytes / 1e6, ja.texts.size(),
              ja.bytes / 1e6, nproc);
  std::printf("%-52s %3s %9s %12s %11s\n", "what", "thr", "MB/s", "MB/s/core", "ratio");

  uint64_t checksum = 0;
  double python_seconds = TimePythonJieba(zh);
  double python_mbps = python_seconds > 0 ? zh.bytes / 1e6 / python_seconds : 0;
  if (python_seconds > 0) {
    Row("zh python3 jieba.analyse.extract_tags(topK=20)", zh.bytes, python_seconds, 1, 0);
  } else {
    std::printf("zh python3 jieba: could not run /usr/bin/python3 with jieba\n");
  }

  // jieba-exact keywords (extract_tags) into a 64-bit SimHash, as the compatibility profile.
  auto keywords = KeywordExtractor::Default();
  if (!keywords.ok()) {
    std::fprintf(stderr, "%s\n", keywords.status().ToString().c_str());
    return 1;
  }
  {
    auto start = Clock::now();
    uint64_t sum = 0;
    for (const std::string& text : zh.texts) {
      std::vector<WeightedFeature> features;
      for (Keyword& k : (*keywords)->ExtractTags(text, 20)) {
        features.push_back({std::move(k.word), k.weight});
      }
      auto fp = SimHashFeatures(features, 64, FeatureHash::kXxh3);
      sum ^= fp.ok() ? fp->lo : 0;
    }
    Row("zh extract_tags(topK=20) -> SimHash64 (C++)", zh.bytes, Seconds(start), 1, python_mbps);
    checksum ^= sum;
  }
  auto compat = MakeOrDie(YanyiwuSimhashOptions(20));
  double compat_seconds = TimeFingerprints(*compat, zh, 1, 2, &checksum);
  Row("zh yanyiwu profile (top 20, Jenkins) Fingerprinter", zh.bytes, compat_seconds, 1,
      python_mbps);

  auto defaults = MakeOrDie(FingerprintOptions());
  double zh_default = TimeFingerprints(*defaults, zh, 1, 2, &checksum);
  Row("zh default options (NFKC+t2s, jieba 2-shingles)", zh.bytes, zh_default, 1, python_mbps);
  double en_default = TimeFingerprints(*defaults, en, 1, 2, &checksum);
  Row("en default options (NFKC, ICU words 2-shingles)", en.bytes, en_default, 1, 0);
  double ja_default = TimeFingerprints(*defaults, ja, 1, 2, &checksum);
  Row("ja default options (NFKC, ICU words 2-shingles)", ja.bytes, ja_default, 1, 0);
  FingerprintOptions wide;
  wide.bits = 128;
  auto wide_fingerprinter = MakeOrDie(wide);
  double en_128 = TimeFingerprints(*wide_fingerprinter, en, 1, 2, &checksum);
  Row("en default options, 128 bits", en.bytes, en_128, 1, en.bytes / 1e6 / en_default);

  // Thread scaling on all three languages together.
  TextSet all;
  for (const TextSet* set : {&zh, &en, &ja}) {
    all.texts.insert(all.texts.end(), set->texts.begin(), set->texts.end());
    all.bytes += set->bytes;
  }
  double one = TimeFingerprints(*defaults, all, 1, 1, &checksum);
  Row("zh+en+ja default options, 1 thread", all.bytes, one, 1, 0);
  double many = TimeFingerprints(*defaults, all, nproc, 1, &checksum);
  Row("zh+en+ja default options, nproc threads (vs 1)", all.bytes, many, nproc,
      all.bytes / 1e6 / one);
  std::printf("checksum %016llx\n", static_cast<unsigned long long>(checksum));
  return 0;
}

}  // namespace
}  // namespace neardup

int main(int argc, char** argv) { return neardup::Main(argc, argv); }
