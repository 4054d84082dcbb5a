// Fingerprinting throughput benchmark: the default pipeline per language (en, ru, zh, ja), today's
// fast path against the reference path it replaced (plain ICU/OpenCC over the whole text, ICU word
// break, one string per shingle, full sort; FingerprintOptions with fast_paths off), both timed in
// the same run and checked to give identical fingerprints; Chinese jieba-keyword SimHash against
// Python jieba's extract_tags; thread scaling, with the work split (CPU seconds per thread) of the
// library's ParallelFor against the fixed chunks it used before. Prints a table of MB/s and ratios.
//
// MB/s is given twice: by wall clock, and per second of CPU time the process used (CLOCK_PROCESS_
// CPUTIME_ID), which stays meaningful on a machine shared with other work. Each timed row is the
// median of several passes.
//
// --doubling instead times one mixed-script document (every corpus file's texts interleaved: en,
// ru, zh, ja and the many scripts of the UDHR) of 1, 2, 4, ... 64 MB, and a dedup run over it and a
// near copy (every stage: read, fingerprint, MinHash, LSH, verification, clusters), in CPU
// seconds, with the ratio to the size before: linear cost gives 2.0 per doubling.
//
// Usage: fingerprint_bench [--megabytes N] [--corpus DIR] [--lang en,ru,zh,ja] (see --help)
//        fingerprint_bench --doubling [--max-megabytes 64] [--corpus DIR]
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/json_writer.h"
#include "common/parallel.h"
#include "dedup/shingle_hashes.h"
#include "neardup/dedup.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/jieba.h"
#include "neardup/minhash_lsh.h"

#ifndef NEARDUP_SHARED_DIR
#define NEARDUP_SHARED_DIR "/work/shared"
#endif

namespace neardup {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Wall-clock and CPU seconds of one measurement.
struct Timing {
  double wall = 0;
  double cpu = 0;
};

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

// Passes per timed row: the row reports the median (by CPU time) of this many.
constexpr int kPasses = 5;

// The pass of median CPU time (its wall time with it).
Timing Median(std::vector<Timing> passes) {
  std::sort(passes.begin(), passes.end(),
            [](const Timing& a, const Timing& b) { return a.cpu < b.cpu; });
  return passes[passes.size() / 2];
}

// Fingerprints every text `repeats` times on `threads` threads; returns the median pass's times.
// *checksum receives a position-dependent hash of all fingerprints.
Timing TimeFingerprints(const Fingerprinter& fingerprinter, const TextSet& set, int threads,
                        int repeats, uint64_t* checksum) {
  std::vector<Timing> passes;
  for (int r = 0; r < repeats; ++r) {
    std::vector<uint64_t> values(set.texts.size());
    auto start = Clock::now();
    double cpu_start = CpuSeconds();
    ParallelFor(set.texts.size(), threads, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        auto fp = fingerprinter.Compute(set.texts[i]);
        values[i] = fp.ok() ? fp->lo : 0;
      }
    });
    double wall = Seconds(start);
    double cpu = CpuSeconds() - cpu_start;
    passes.push_back({wall, cpu});
    uint64_t sum = 0;
    for (uint64_t v : values) sum = (sum ^ v) * 0x100000001b3ull;
    *checksum = sum;
  }
  return Median(passes);
}

// dedup's per-document pass on one thread: the fingerprint and, from the same normalised text,
// the shingles -> MinHash signature -> band keys and the narrowed set verification reads.
Timing TimeDedupPass(const Fingerprinter& fingerprinter, const TextSet& set, int repeats) {
  const MinHashLsh lsh = *MinHashLsh::Create(MinHashLshOptions());
  std::vector<uint32_t> keys(lsh.parameters().bands), narrow;
  std::vector<uint64_t> units, shingles;
  std::vector<Timing> passes;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    double cpu_start = CpuSeconds();
    for (const std::string& text : set.texts) {
      auto details = fingerprinter.ComputeDetails(text, false, true);
      if (!details.ok()) continue;
      ShingleHashesInOrder(details->normalized_text, &units, &shingles);
      lsh.BandKeysOf(shingles, keys);
      NarrowedSet(shingles, &narrow);
    }
    passes.push_back(Timing{Seconds(start), CpuSeconds() - cpu_start});
  }
  return Median(passes);
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The work split of a multi-threaded run, independent of what else the machine runs: the CPU
// seconds each thread spent fingerprinting. On idle cores the run takes as long as its busiest
// thread, so total / busiest is the speed-up the split allows.
struct Split {
  double total = 0;
  double busiest = 0;
};

// The split before this change, kept only as the bench's baseline: fixed chunks of n / (8 x
// threads) + 1 items claimed in order (the heavy Japanese documents at the end all fell into the
// last chunk or two).
void FixedChunks(size_t n, int threads, const std::function<void(size_t, size_t)>& fn) {
  const size_t chunk = n / (static_cast<size_t>(threads) * 8) + 1;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t begin; (begin = next.fetch_add(chunk)) < n;) fn(begin, std::min(n, begin + chunk));
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

// Fingerprints every text once on `threads` threads, split by the library's ParallelFor or by
// FixedChunks, and returns how the CPU time fell on the threads.
Split MeasureSplit(const Fingerprinter& fingerprinter, const TextSet& set, int threads,
                   bool fixed_chunks) {
  std::mutex mutex;
  std::map<std::thread::id, double> per_thread;
  auto chunk = [&](size_t begin, size_t end) {
    const double start = ThreadCpuSeconds();
    for (size_t i = begin; i < end; ++i) (void)fingerprinter.Compute(set.texts[i]);
    const double spent = ThreadCpuSeconds() - start;
    std::lock_guard<std::mutex> lock(mutex);
    per_thread[std::this_thread::get_id()] += spent;
  };
  if (fixed_chunks) {
    FixedChunks(set.texts.size(), threads, chunk);
  } else {
    ParallelFor(set.texts.size(), threads, chunk);
  }
  Split split;
  for (const auto& [id, seconds] : per_thread) {
    split.total += seconds;
    split.busiest = std::max(split.busiest, seconds);
  }
  return split;
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
// dictionary is loaded before the clock starts). Returns wall and CPU seconds (negative on
// failure).
Timing TimePythonJieba(const TextSet& set) {
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
              "cpu = time.process_time()\n"
              "for t in texts: jieba.analyse.extract_tags(t, topK=20)\n"
              "print(time.perf_counter() - start, time.process_time() - cpu)\n";
  }
  std::string command = "/usr/bin/python3 " + script_path + " " + input_path;
  FILE* pipe = popen(command.c_str(), "r");
  Timing timing{-1, -1};
  if (pipe != nullptr) {
    if (std::fscanf(pipe, "%lf %lf", &timing.wall, &timing.cpu) != 2) timing = {-1, -1};
    pclose(pipe);
  }
  std::remove(input_path.c_str());
  std::remove(script_path.c_str());
  return timing;
}

// One table row: MB/s by wall clock, MB/s per CPU-second (per core), and the CPU-time ratio
// against `baseline_cpu_mbps` when given.
void Row(const std::string& name, size_t bytes, Timing t, int threads, double baseline_cpu_mbps = 0,
         const char* note = "") {
  double wall_mbps = bytes / 1e6 / t.wall;
  double cpu_mbps = bytes / 1e6 / t.cpu;
  std::printf("%-50s %3d %9.2f %11.2f", name.c_str(), threads, wall_mbps, cpu_mbps);
  if (baseline_cpu_mbps > 0) {
    std::printf(" %9.2fx", cpu_mbps / baseline_cpu_mbps);
  } else {
    std::printf(" %10s", "");
  }
  std::printf("  %s\n", note);
}

// The first `bytes` bytes of `text`, cut back to a UTF-8 character boundary.
std::string_view Prefix(std::string_view text, size_t bytes) {
  bytes = std::min(bytes, text.size());
  while (bytes > 0 && bytes < text.size() &&
         (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80)
    --bytes;
  return std::string_view(text).substr(0, bytes);
}

// One mixed-script text of at least `bytes` bytes, the same mix in every megabyte: each starts
// with the same sampler of every script (the first 256 bytes of each document of
// multi_udhr.jsonl, when the corpus has it: about 400 languages) and goes on with the documents of
// every corpus file taken in turn (one of each file, then the next of each; a file that runs out
// starts again). The tokenizer chooses its route per document by the scripts it holds, so with a
// mix that changed with size a larger document could take a costlier route and blur the ratio.
std::string MixedScriptText(const std::string& dir, size_t bytes) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  std::string sampler;
  if (auto udhr = DocumentReader::Open({dir + "/multi_udhr.jsonl"}, {}); udhr.ok()) {
    Document doc;
    for (auto got = (*udhr)->Next(&doc); got.ok() && *got; got = (*udhr)->Next(&doc)) {
      sampler.append(Prefix(doc.text, 256));
      sampler += '\n';
    }
  }
  std::vector<std::unique_ptr<DocumentReader>> readers(files.size());
  std::string text;
  size_t next_sampler = 0;
  for (bool any = true; any && text.size() < bytes;) {
    any = false;
    for (size_t i = 0; i < files.size() && text.size() < bytes; ++i) {
      if (text.size() >= next_sampler) {
        text += sampler;
        next_sampler += 1000000;
      }
      Document doc;
      for (int attempt = 0; attempt < 2; ++attempt) {
        if (!readers[i]) {
          auto reader = DocumentReader::Open({files[i]}, {});
          if (!reader.ok()) break;
          readers[i] = std::move(*reader);
        }
        auto got = readers[i]->Next(&doc);
        if (got.ok() && *got) {
          any = true;
          text += doc.text;
          text += '\n';
          break;
        }
        readers[i].reset();  // this file ran out: start it again
      }
    }
  }
  return text;
}

// --doubling: fingerprint and dedup CPU seconds of one document as it doubles in size.
int Doubling(const std::string& dir, double max_megabytes) {
  const size_t max_bytes = static_cast<size_t>(max_megabytes * 1e6);
  const std::string text = MixedScriptText(dir, max_bytes);
  if (text.empty()) {
    std::fprintf(stderr, "fingerprint_bench: no documents in %s\n", dir.c_str());
    return 1;
  }
  auto fingerprinter = MakeOrDie(FingerprintOptions());
  (void)fingerprinter->Compute("预热 warm-up");  // dictionaries loaded outside the clock
  std::printf(
      "one mixed-script document of %s doubling in size, 1 thread, CPU seconds (the median of 3 "
      "passes); ratio = to the size before (linear: 2.00, aim <= 2.2)\n",
      dir.c_str());
  std::printf("%8s %14s %7s %22s %7s\n", "MB", "fingerprint s", "ratio", "dedup (doc + copy) s",
              "ratio");
  double last_fingerprint = 0, last_dedup = 0, worst = 0;
  for (double megabytes = 1; megabytes <= max_megabytes * 1.0001; megabytes *= 2) {
    const std::string_view document = Prefix(text, static_cast<size_t>(megabytes * 1e6));
    std::vector<Timing> fingerprint_passes, dedup_passes;
    // The near copy: the document with one sentence changed in its middle.
    std::string copy(document);
    copy.insert(copy.size() / 2, " one sentence that only the copy has. ");
    std::string jsonl;
    for (const std::string_view doc : {document, std::string_view(copy)}) {
      jsonl += jsonl.empty() ? "{\"id\":\"a\",\"text\":" : "{\"id\":\"b\",\"text\":";
      AppendJsonString(doc, &jsonl);
      jsonl += "}\n";
    }
    auto bytes = std::make_shared<const std::string>(std::move(jsonl));
    for (int pass = 0; pass < 3; ++pass) {
      double start = CpuSeconds();
      (void)fingerprinter->Compute(document);
      fingerprint_passes.push_back({0, CpuSeconds() - start});
      DedupOptions options;
      options.threads = 1;
      options.reader.max_document_bytes = size_t{1} << 30;
      options.reader.memory_inputs["pair.jsonl"] = bytes;
      start = CpuSeconds();
      auto report = RunDedup({"pair.jsonl"}, options);
      dedup_passes.push_back({0, CpuSeconds() - start});
      if (!report.ok() || report->clusters.size() != 1) {
        std::fprintf(stderr, "fingerprint_bench: the dedup run did not find the copy: %s\n",
                     report.ok() ? "no cluster" : report.status().ToString().c_str());
        return 1;
      }
    }
    const double fingerprint = Median(fingerprint_passes).cpu;
    const double dedup = Median(dedup_passes).cpu;
    auto ratio = [](double now, double before) { return before > 0 ? now / before : 0.0; };
    std::printf(
        "%8.0f %14.3f %7s %22.3f %7s\n", megabytes, fingerprint,
        last_fingerprint > 0
            ? (std::to_string(ratio(fingerprint, last_fingerprint)).substr(0, 4) + "x").c_str()
            : "",
        dedup,
        last_dedup > 0 ? (std::to_string(ratio(dedup, last_dedup)).substr(0, 4) + "x").c_str()
                       : "");
    if (megabytes >= 4) {  // below, fixed costs blur the ratio
      worst = std::max({worst, ratio(fingerprint, last_fingerprint), ratio(dedup, last_dedup)});
    }
    last_fingerprint = fingerprint;
    last_dedup = dedup;
  }
  std::printf("worst ratio per doubling from 4 MB on: %.2fx (%s)\n", worst,
              worst <= 2.2 ? "linear within the aim" : "ABOVE the aim of 2.2x");
  return 0;
}

FingerprintOptions ReferenceOptions(FingerprintOptions options) {
  options.normalize.fast_paths = false;
  options.features.fast_paths = false;
  return options;
}

void PrintUsage(FILE* out) {
  std::fprintf(
      out,
      "Usage: fingerprint_bench [options]\n"
      "Times the default fingerprinting pipeline per language (fast path against the\n"
      "reference path, same run), the jieba keyword path against Python jieba, and thread\n"
      "scaling. Each timed row is the median of %d passes.\n"
      "\n"
      "Options:\n"
      "  --megabytes N     text per language, in MB (default 2)\n"
      "  --corpus DIR      the corpus folder (default %s/corpus)\n"
      "  --lang LIST       languages to run, comma-separated, of en,ru,zh,ja (default\n"
      "                    all; the Python and keyword rows need zh)\n"
      "  --doubling        instead: one mixed-script document of 1, 2, 4, ... MB, fingerprint\n"
      "                    and dedup CPU seconds and the ratio per doubling (aim <= 2.2x)\n"
      "  --max-megabytes N the largest document of --doubling (default 64)\n"
      "  -h, --help        print this help and exit\n",
      kPasses, NEARDUP_SHARED_DIR);
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "fingerprint_bench: %s\n\n", message.c_str());
  PrintUsage(stderr);
  return 2;
}

int Main(int argc, char** argv) {
  double megabytes = 2.0;
  std::string dir = std::string(NEARDUP_SHARED_DIR) + "/corpus";
  std::vector<std::string> wanted = {"en", "ru", "zh", "ja"};
  bool doubling = false;
  double max_megabytes = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) {
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        *out = arg.substr(eq + 1);
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    const std::string name = arg.substr(0, arg.find('='));
    std::string text;
    if (arg == "-h" || arg == "--help") {
      PrintUsage(stdout);
      return 0;
    } else if (name == "--megabytes") {
      if (!value(&text)) return UsageError("--megabytes needs a value");
      char* end = nullptr;
      megabytes = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(megabytes > 0) || megabytes > 1e5) {
        return UsageError("--megabytes: not a positive number of MB: '" + text + "'");
      }
    } else if (arg == "--doubling") {
      doubling = true;
    } else if (name == "--max-megabytes") {
      if (!value(&text)) return UsageError("--max-megabytes needs a value");
      char* end = nullptr;
      max_megabytes = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(max_megabytes >= 1) || max_megabytes > 4096) {
        return UsageError("--max-megabytes: not a number of MB in [1, 4096]: '" + text + "'");
      }
    } else if (name == "--corpus") {
      if (!value(&dir)) return UsageError("--corpus needs a folder");
    } else if (name == "--lang") {
      if (!value(&text)) return UsageError("--lang needs a list such as en,ja");
      wanted.clear();
      std::stringstream list(text);
      for (std::string lang; std::getline(list, lang, ',');) {
        if (lang != "en" && lang != "ru" && lang != "zh" && lang != "ja") {
          return UsageError("--lang: unknown language '" + lang + "' (en, ru, zh, ja)");
        }
        if (std::find(wanted.begin(), wanted.end(), lang) == wanted.end()) wanted.push_back(lang);
      }
      if (wanted.empty()) return UsageError("--lang: no language given");
    } else {
      return UsageError("unknown argument '" + arg + "'");
    }
  }
  const size_t max_bytes = static_cast<size_t>(megabytes * 1e6);
  if (!std::filesystem::is_directory(dir)) {
    return UsageError("the corpus folder " + dir +
                      " is not there (pass --corpus DIR; the default needs ../shared)");
  }
  if (doubling) return Doubling(dir, max_megabytes);
  struct Language {
    std::string name;
    TextSet set;
  };
  const std::map<std::string, std::vector<std::string>> files = {
      {"en", {"en_speeches.jsonl", "en_manpages.jsonl"}},
      {"ru", {"ru_manpages.jsonl"}},
      {"zh", {"zh_lohelp.jsonl", "zh_manpages.jsonl", "zh_debian_docs.jsonl"}},
      {"ja", {"ja_manpages.jsonl"}}};
  std::vector<Language> languages;
  for (const std::string lang : {"en", "ru", "zh", "ja"}) {
    if (std::find(wanted.begin(), wanted.end(), lang) == wanted.end()) continue;
    languages.push_back({lang, Load(dir, files.at(lang), max_bytes)});
    if (languages.back().set.texts.empty()) {
      std::fprintf(stderr, "fingerprint_bench: no %s documents in %s\n", lang.c_str(), dir.c_str());
      return 1;
    }
  }
  const TextSet* zh_set = nullptr;
  const TextSet* en_set = nullptr;
  for (const Language& language : languages) {
    if (language.name == "zh") zh_set = &language.set;
    if (language.name == "en") en_set = &language.set;
  }
  const int nproc = DefaultThreadCount();
  std::printf("corpus:");
  for (const Language& language : languages) {
    std::printf(" %s %zu docs %.2f MB;", language.name.c_str(), language.set.texts.size(),
                language.set.bytes / 1e6);
  }
  std::printf(" nproc %d\n", nproc);
  std::printf(
      "MB/s: by wall clock, and per CPU-second of this process (= per core; the machine may "
      "be shared); each row but Python's is the median pass (by CPU time) of %d\n",
      kPasses);
  std::printf("%-50s %3s %9s %11s %10s\n", "what", "thr", "wall MB/s", "CPU MB/s", "ratio");

  uint64_t checksum = 0;
  if (zh_set != nullptr) {
    const TextSet& zh = *zh_set;
    Timing python = TimePythonJieba(zh);
    double python_mbps = python.cpu > 0 ? zh.bytes / 1e6 / python.cpu : 0;  // per CPU-second
    if (python.cpu > 0) {
      Row("zh python3 jieba.analyse.extract_tags(topK=20)", zh.bytes, python, 1);
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
      std::vector<Timing> passes;
      uint64_t sum = 0;
      for (int pass = 0; pass < kPasses; ++pass) {
        auto start = Clock::now();
        double cpu_start = CpuSeconds();
        sum = 0;
        for (const std::string& text : zh.texts) {
          std::vector<WeightedFeature> features;
          for (Keyword& k : (*keywords)->ExtractTags(text, 20)) {
            features.push_back({std::move(k.word), k.weight});
          }
          auto fp = SimHashFeatures(features, 64, FeatureHash::kXxh3);
          sum ^= fp.ok() ? fp->lo : 0;
        }
        passes.push_back({Seconds(start), CpuSeconds() - cpu_start});
      }
      Row("zh extract_tags(topK=20) -> SimHash64 (C++)", zh.bytes, Median(passes), 1, python_mbps,
          "vs Python");
      checksum ^= sum;
    }
    auto compat = MakeOrDie(YanyiwuSimhashOptions(20));
    Timing compat_time = TimeFingerprints(*compat, zh, 1, kPasses, &checksum);
    Row("zh yanyiwu profile (top 20, Jenkins) Fingerprinter", zh.bytes, compat_time, 1, python_mbps,
        "vs Python");
  }

  // The default pipeline, reference path against fast path, per language.
  auto defaults = MakeOrDie(FingerprintOptions());
  auto reference = MakeOrDie(ReferenceOptions(FingerprintOptions()));
  (void)defaults->Compute("预热 warm-up");  // load jieba outside the clock
  (void)reference->Compute("预热 warm-up");
  bool all_identical = true;
  for (const Language& language : languages) {
    uint64_t ref_sum = 0, fast_sum = 0;
    Timing ref = TimeFingerprints(*reference, language.set, 1, kPasses, &ref_sum);
    Timing fast = TimeFingerprints(*defaults, language.set, 1, kPasses, &fast_sum);
    double ref_cpu_mbps = language.set.bytes / 1e6 / ref.cpu;
    Row(std::string(language.name) + " default options, reference path (before)",
        language.set.bytes, ref, 1);
    Row(std::string(language.name) + " default options, fast path", language.set.bytes, fast, 1,
        ref_cpu_mbps,
        ref_sum == fast_sum ? "vs reference; fingerprints identical"
                            : "vs reference; FINGERPRINTS DIFFER");
    all_identical = all_identical && ref_sum == fast_sum;
    checksum ^= fast_sum;
  }
  if (en_set != nullptr) {
    FingerprintOptions wide;
    wide.bits = 128;
    auto wide_fingerprinter = MakeOrDie(wide);
    Timing en_128 = TimeFingerprints(*wide_fingerprinter, *en_set, 1, kPasses, &checksum);
    Row("en default options, 128 bits", en_set->bytes, en_128, 1);
  }

  // Thread scaling on all languages together.
  TextSet all;
  std::string names;
  for (const Language& language : languages) {
    names += (names.empty() ? "" : "+") + language.name;
    all.texts.insert(all.texts.end(), language.set.texts.begin(), language.set.texts.end());
    all.bytes += language.set.bytes;
  }
  Timing one = TimeFingerprints(*defaults, all, 1, kPasses, &checksum);
  Row(names + " default options, 1 thread", all.bytes, one, 1);
  Row(names + " + MinHash signature (dedup's pass)", all.bytes,
      TimeDedupPass(*defaults, all, kPasses), 1, all.bytes / 1e6 / one.cpu,
      "vs fingerprint alone (same normalised text)");
  Timing many = TimeFingerprints(*defaults, all, nproc, kPasses, &checksum);
  double one_wall_mbps = all.bytes / 1e6 / one.wall;
  double many_wall_mbps = all.bytes / 1e6 / many.wall;
  // Busy cores = CPU seconds / wall seconds: on a quiet machine the speed-up follows it; on a
  // shared one it shows whether the work split kept every thread busy.
  char note[160];
  std::snprintf(note, sizeof(note),
                "wall-clock speed-up over 1 thread: %.2fx; busy cores %.2f (1 thread: %.2f)",
                many_wall_mbps / one_wall_mbps, many.cpu / many.wall, one.cpu / one.wall);
  Row(names + " default options, nproc threads", all.bytes, many, nproc, 0, note);
  if (nproc > 1) {
    for (bool fixed : {true, false}) {
      Split best{0, 1e30};
      for (int r = 0; r < 3; ++r) {  // the best of three: the least disturbed by other work
        Split split = MeasureSplit(*defaults, all, nproc, fixed);
        if (split.busiest / split.total < best.busiest / best.total) best = split;
      }
      std::printf(
          "work split, %-38s: busiest thread %.3f of %.3f CPU-s -> speed-up on idle "
          "cores %.2fx (ideal %d)\n",
          fixed ? "fixed chunks (before)" : "ParallelFor (guided, now)", best.busiest, best.total,
          best.total / best.busiest, nproc);
    }
  }
  std::printf("checksum %016llx (%s, %.3g MB each); fast path %s the reference path\n",
              static_cast<unsigned long long>(checksum), names.c_str(), megabytes,
              all_identical ? "gives the same fingerprints as" : "DIFFERS from");
  return all_identical ? 0 : 1;
}

}  // namespace
}  // namespace neardup

int main(int argc, char** argv) { return neardup::Main(argc, argv); }
