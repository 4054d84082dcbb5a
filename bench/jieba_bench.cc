// Throughput of the jieba-exact segmenter and TF-IDF keyword extractor on one core over the Chinese
// documents of the shared corpus, against Python jieba 0.42.1 on the same text (the baseline,
// measured in the same run by /usr/bin/python3). Times are thread CPU times, best of N passes.
//
// Usage: jieba_bench [--no-python] [--profile-tags] [--repeat N] [--corpus DIR] [--dump FILE]
// (DIR defaults to ../shared/corpus next to the source tree). --dump writes every document's
// tokens (with and without HMM) and extract_tags(topK=20) with exact (hex) weights to FILE, so
// that two builds can be compared byte for byte.
#include <benchmark/benchmark.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common/json_writer.h"
#include "neardup/jieba.h"

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<std::string> ZhCorpus(const std::filesystem::path& corpus) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(corpus, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("zh_") && name.ends_with(".jsonl")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  simdjson::dom::parser parser;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      std::string_view text;
      if (!line.empty() && !parser.parse(line)["text"].get(text)) texts.emplace_back(text);
    }
  }
  return texts;
}

// CPU time of this thread: the machine may be shared, and throughput is per core.
double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Best thread CPU time of `repeat` passes of fn over every text.
template <class Fn>
double BestSeconds(int repeat, const std::vector<std::string>& texts, Fn fn) {
  double best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    const double start = ThreadCpuSeconds();
    for (const std::string& text : texts) fn(text);
    best = std::min(best, ThreadCpuSeconds() - start);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  bool run_python = true;
  bool profile_tags = false;
  std::string dump_path;
  int repeat = 3;
  std::filesystem::path corpus =
      std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "shared" /
      "corpus";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-python") {
      run_python = false;
    } else if (arg == "--profile-tags") {  // only extract_tags passes, for a profiler
      profile_tags = true;
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--corpus" && i + 1 < argc) {
      corpus = argv[++i];
    } else if (arg == "--dump" && i + 1 < argc) {
      dump_path = argv[++i];
    } else {
      std::cerr << "usage: jieba_bench [--no-python] [--profile-tags] [--repeat N] [--corpus DIR] "
                   "[--dump FILE]\n";
      return 2;
    }
  }
  if (!std::filesystem::is_directory(corpus)) {
    std::printf("jieba_bench: skipped: the corpus %s is not there (needs ../shared)\n",
                corpus.string().c_str());
    return 0;
  }

  const std::vector<std::string> texts = ZhCorpus(corpus);
  if (texts.empty()) {
    std::cerr << "no zh_*.jsonl documents in " << corpus << "\n";
    return 1;
  }
  size_t bytes = 0;
  for (const std::string& text : texts) bytes += text.size();
  const double megabytes = static_cast<double>(bytes) / 1e6;
  std::printf("corpus: %zu zh documents, %.2f MB\n", texts.size(), megabytes);

  auto start = Clock::now();
  auto segmenter = neardup::JiebaSegmenter::Create({});
  if (!segmenter.ok()) {
    std::cerr << segmenter.status().ToString() << "\n";
    return 1;
  }
  const double dict_seconds = SecondsSince(start);
  start = Clock::now();
  auto extractor = neardup::KeywordExtractor::Create(*segmenter);
  if (!extractor.ok()) {
    std::cerr << extractor.status().ToString() << "\n";
    return 1;
  }
  std::printf("load: dictionary + HMM %.3f s, IDF table %.3f s\n", dict_seconds,
              SecondsSince(start));

  if (!dump_path.empty()) {
    std::FILE* out = std::fopen(dump_path.c_str(), "w");
    if (out == nullptr) {
      std::perror(dump_path.c_str());
      return 1;
    }
    std::vector<std::string_view> tokens;
    for (const std::string& text : texts) {
      for (const bool hmm : {true, false}) {
        tokens.clear();
        (*segmenter)->Cut(text, &tokens, hmm);
        for (std::string_view token : tokens) {
          std::fprintf(out, "%.*s|", static_cast<int>(token.size()), token.data());
        }
        std::fputc('\n', out);
      }
      for (const neardup::Keyword& tag : (*extractor)->ExtractTags(text, 20)) {
        std::fprintf(out, "%s %a|", tag.word.c_str(), tag.weight);
      }
      std::fputc('\n', out);
    }
    std::fclose(out);
    return 0;
  }
  if (profile_tags) {
    const double seconds = BestSeconds(repeat, texts, [&](const std::string& text) {
      auto tags = (*extractor)->ExtractTags(text, 20);
      benchmark::DoNotOptimize(tags.data());
    });
    std::printf("C++ cut + extract_tags 20: %8.2f MB/s\n", megabytes / seconds);
    return 0;
  }
  std::vector<std::string_view> tokens;
  size_t token_count = 0;
  const double cut_seconds = BestSeconds(repeat, texts, [&](const std::string& text) {
    tokens.clear();
    (*segmenter)->Cut(text, &tokens);
    token_count += tokens.size();
  });
  const double cut_no_hmm_seconds = BestSeconds(repeat, texts, [&](const std::string& text) {
    tokens.clear();
    (*segmenter)->Cut(text, &tokens, /*hmm=*/false);
    benchmark::DoNotOptimize(tokens.data());
  });
  const double tags_seconds = BestSeconds(repeat, texts, [&](const std::string& text) {
    auto tags = (*extractor)->ExtractTags(text, 20);
    benchmark::DoNotOptimize(tags.data());
  });
  const double cpp_cut = megabytes / cut_seconds;
  const double cpp_tags = megabytes / tags_seconds;
  std::printf("C++ cut (HMM)            : %8.2f MB/s  (%.3f s, %zu tokens per pass)\n", cpp_cut,
              cut_seconds, token_count / static_cast<size_t>(repeat));
  std::printf("C++ cut (no HMM)         : %8.2f MB/s\n", megabytes / cut_no_hmm_seconds);
  std::printf("C++ cut + extract_tags 20: %8.2f MB/s\n", cpp_tags);

  if (!run_python) return 0;
  // The baseline: Python jieba on the same texts, one process, after its dictionary is loaded.
  const std::string input =
      std::filesystem::temp_directory_path() / ("jieba_bench." + std::to_string(getpid()));
  {
    std::string lines;
    for (const std::string& text : texts) {
      lines += "{\"text\":";
      neardup::AppendJsonString(text, &lines);
      lines += "}\n";
    }
    std::ofstream(input, std::ios::binary) << lines;
  }
  const std::string script =
      "import json,sys,time,logging,jieba,jieba.analyse\n"
      "jieba.setLogLevel(logging.WARNING); jieba.initialize()\n"
      "texts=[json.loads(l)['text'] for l in open(sys.argv[1],encoding='utf-8')]\n"
      "t=time.thread_time()\n"
      "for x in texts: jieba.lcut(x)\n"
      "a=time.thread_time()-t; t=time.thread_time()\n"
      "for x in texts: jieba.analyse.extract_tags(x, topK=20, withWeight=True)\n"
      "b=time.thread_time()-t\n"
      "print(a, b)\n";
  const std::string script_path = input + ".py";
  std::ofstream(script_path) << script;
  const std::string command = "/usr/bin/python3 " + script_path + " " + input;
  std::FILE* pipe = popen(command.c_str(), "r");
  double py_cut_seconds = 0;
  double py_tags_seconds = 0;
  const bool ok =
      pipe != nullptr && std::fscanf(pipe, "%lf %lf", &py_cut_seconds, &py_tags_seconds) == 2;
  if (pipe != nullptr) pclose(pipe);
  std::filesystem::remove(input);
  std::filesystem::remove(script_path);
  if (!ok) {
    std::cerr << "python baseline failed: " << command << "\n";
    return 1;
  }
  const double py_cut = megabytes / py_cut_seconds;
  const double py_tags = megabytes / py_tags_seconds;
  std::printf("Python jieba.lcut        : %8.2f MB/s  -> C++ is %.1fx faster\n", py_cut,
              cpp_cut / py_cut);
  std::printf("Python extract_tags 20   : %8.2f MB/s  -> C++ is %.1fx faster\n", py_tags,
              cpp_tags / py_tags);
  return 0;
}
