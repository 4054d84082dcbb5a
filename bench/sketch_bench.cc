// The text pass of a check on one thread: Fingerprinter::Compute alone, then DocumentSketcher::
// Sketch (fingerprint + hashes + shingles + narrowed set + MinHash band keys, what a dedup-rule
// store needs of a text), over the documents of each JSONL file given (at most 20,000 each),
// timed back to back in one run. A text check costs at least this, so it bounds the server's
// check throughput at (cores / this time) before HTTP, JSON and the store.
//
//   build/sketch_bench FILE.jsonl...
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "neardup/document_reader.h"
#include "neardup/sketch.h"

int main(int argc, char** argv) {
  auto sketcher = neardup::DocumentSketcher::Create(neardup::FingerprintOptions{},
                                                    neardup::MinHashLshOptions{});
  if (!sketcher.ok()) {
    std::fprintf(stderr, "%s\n", sketcher.status().ToString().c_str());
    return 1;
  }
  for (int f = 1; f < argc; ++f) {
    auto reader = neardup::DocumentReader::Open({argv[f]}, {});
    if (!reader.ok()) {
      std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
      return 1;
    }
    std::vector<std::string> texts;
    neardup::Document doc;
    size_t bytes = 0;
    while (texts.size() < 20000) {
      auto got = (*reader)->Next(&doc);
      if (!got.ok() || !*got) break;
      bytes += doc.text.size();
      texts.push_back(std::move(doc.text));
    }
    if (texts.empty()) continue;
    neardup::Fingerprint fp;
    neardup::DocumentSketch sketch;
    (void)(*sketcher)->Sketch(texts[0], &fp, &sketch);  // warm (dictionaries)
    double fingerprint_s = 0, sketch_s = 0;
    for (int round = 0; round < 3; ++round) {
      auto start = std::chrono::steady_clock::now();
      for (const std::string& text : texts) {
        (void)(*sketcher)->fingerprinter().Compute(text);
      }
      fingerprint_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      start = std::chrono::steady_clock::now();
      for (const std::string& text : texts) (void)(*sketcher)->Sketch(text, &fp, &sketch);
      sketch_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    const double n = 3.0 * static_cast<double>(texts.size());
    std::printf(
        "%s: %zu documents, %.0f bytes each: fingerprint %.1f us, fingerprint + sketch %.1f us "
        "a document on one thread (%.0f sketched documents/s a core; sketch/fingerprint %.2f)\n",
        argv[f], texts.size(), static_cast<double>(bytes) / static_cast<double>(texts.size()),
        1e6 * fingerprint_s / n, 1e6 * sketch_s / n, n / sketch_s, sketch_s / fingerprint_s);
  }
  return 0;
}
