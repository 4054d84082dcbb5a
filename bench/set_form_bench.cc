// The verification form of a shingle set in the store (issue 19): measures the designs side by
// side on the documents of ../shared (devpairs + corpus, 27,961 documents) and the labelled pairs
// of devpairs, and prints a Markdown table:
//   * the exact narrowed 32-bit set, raw (4 bytes a value);
//   * the same, delta + LEB128 varint (each gap minus one);
//   * the same, Elias-Fano (the store's form, src/common/set_codec.h);
// and, for the exact forms, the cost of verifying the labelled pairs from each form (decoding both
// sets, then the early-exit Jaccard test), timed back to back in one run;
//   * bottom-k sketches (k = 64, 128, 256 smallest values): smaller for long documents, but their
//     Jaccard is an estimate: the share of labelled pairs whose accept/reject decision at the
//     threshold differs from the exact one is measured and printed.
// Skips, saying so, without ../shared.
//
//   build/set_form_bench [--shared DIR] [--threshold 0.5]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/set_codec.h"
#include "dedup/shingle_hashes.h"
#include "neardup/document_reader.h"
#include "neardup/shingles.h"

// Needs the internal headers: built with neardup_internal (bench/ CMake).

namespace {

using Set = std::vector<uint32_t>;

// Jaccard estimated from two bottom-k sketches: the k smallest of the union, and how many of them
// are in both.
double BottomKJaccard(const Set& a, const Set& b, size_t k) {
  size_t i = 0, j = 0, seen = 0, both = 0;
  while (seen < k && (i < a.size() || j < b.size())) {
    if (j >= b.size() || (i < a.size() && a[i] < b[j])) {
      ++i;
    } else if (i >= a.size() || b[j] < a[i]) {
      ++j;
    } else {
      ++both;
      ++i;
      ++j;
    }
    ++seen;
  }
  return seen == 0 ? 1.0 : static_cast<double>(both) / static_cast<double>(seen);
}

// Delta + LEB128 varint: the count, the first value, each gap minus one.
void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void VarintEncode(const Set& set, std::string* out) {
  PutVarint(set.size(), out);
  uint64_t previous = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    PutVarint(i == 0 ? set[0] : set[i] - previous - 1, out);
    previous = set[i];
  }
}
void VarintDecode(const std::string& bytes, Set* set) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t pos = 0;
  auto get = [&] {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const uint8_t byte = p[pos++];
      v |= uint64_t(byte & 0x7f) << shift;
      if (byte < 0x80) return v;
    }
  };
  const uint64_t n = get();
  set->resize(n);
  uint64_t value = 0;
  for (uint64_t i = 0; i < n; ++i) {
    value = i == 0 ? get() : value + get() + 1;
    (*set)[i] = static_cast<uint32_t>(value);
  }
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string shared = NEARDUP_SHARED_DIR;
  double threshold = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--shared") == 0) shared = argv[i + 1];
    if (std::strcmp(argv[i], "--threshold") == 0) threshold = std::atof(argv[i + 1]);
  }
  namespace fs = std::filesystem;
  if (!fs::exists(shared + "/devpairs/pairs.tsv")) {
    std::printf("set_form_bench: %s/devpairs not found: skipped (needs ../shared)\n",
                shared.c_str());
    return 0;
  }
  std::vector<std::string> inputs = {shared + "/devpairs/docs.jsonl"};
  for (const auto& entry : fs::directory_iterator(shared + "/corpus")) {
    if (entry.path().extension() == ".jsonl") inputs.push_back(entry.path().string());
  }
  auto reader = neardup::DocumentReader::Open(inputs, {});
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
    return 1;
  }
  auto similarity = neardup::ShingleSimilarity::Create(true);
  if (!similarity.ok()) return 1;
  std::unordered_map<std::string, size_t> index;
  std::vector<Set> sets;
  std::vector<uint64_t> wide;
  neardup::Document doc;
  while (true) {
    auto got = (*reader)->Next(&doc);
    if (!got.ok() || !*got) break;
    if (!(*similarity)->Shingles(doc.text, &wide).ok()) continue;
    Set narrow;
    neardup::ShingleSimilarity::Narrow(wide, &narrow);
    index[doc.id] = sets.size();
    sets.push_back(std::move(narrow));
  }
  const double n = static_cast<double>(sets.size());
  size_t values = 0, varint_bytes = 0, ef_bytes = 0;
  std::vector<std::string> varint(sets.size()), ef(sets.size());
  std::vector<size_t> sizes;
  for (size_t i = 0; i < sets.size(); ++i) {
    values += sets[i].size();
    VarintEncode(sets[i], &varint[i]);
    varint_bytes += varint[i].size();
    neardup::EncodeShingleSet(sets[i], &ef[i]);
    ef_bytes += ef[i].size();
    sizes.push_back(ef[i].size());
    Set decoded;
    if (!neardup::DecodeShingleSet(ef[i], &decoded) || decoded != sets[i]) {
      std::fprintf(stderr, "set_form_bench: the store's codec does not round-trip set %zu\n", i);
      return 1;
    }
  }
  std::sort(sizes.begin(), sizes.end());
  // The labelled pairs: exact decisions against the bottom-k estimates.
  std::ifstream pairs(shared + "/devpairs/pairs.tsv");
  std::string line;
  std::getline(pairs, line);
  std::vector<std::pair<size_t, size_t>> labelled;
  while (std::getline(pairs, line)) {
    std::istringstream fields(line);
    std::string set, a, b;
    std::getline(fields, set, '\t');
    std::getline(fields, a, '\t');
    std::getline(fields, b, '\t');
    auto ia = index.find(a), ib = index.find(b);
    if (ia != index.end() && ib != index.end()) labelled.push_back({ia->second, ib->second});
  }
  // Verification of every labelled pair from each exact form, back to back (5 rounds each).
  double raw_s = 0, varint_s = 0, ef_s = 0;
  size_t accepted[3] = {0, 0, 0};
  for (int round = 0; round < 5; ++round) {
    double similarity;
    auto start = std::chrono::steady_clock::now();
    for (const auto& [a, b] : labelled) {
      accepted[0] += neardup::ReachesJaccard(sets[a], sets[b], threshold, &similarity);
    }
    raw_s += Seconds(start);
    Set da, db;
    start = std::chrono::steady_clock::now();
    for (const auto& [a, b] : labelled) {
      VarintDecode(varint[a], &da);
      VarintDecode(varint[b], &db);
      accepted[1] += neardup::ReachesJaccard(da, db, threshold, &similarity);
    }
    varint_s += Seconds(start);
    start = std::chrono::steady_clock::now();
    for (const auto& [a, b] : labelled) {
      neardup::DecodeShingleSet(ef[a], &da);
      neardup::DecodeShingleSet(ef[b], &db);
      accepted[2] += neardup::ReachesJaccard(da, db, threshold, &similarity);
    }
    ef_s += Seconds(start);
  }
  if (accepted[0] != accepted[1] || accepted[0] != accepted[2]) {
    std::fprintf(stderr, "set_form_bench: the exact forms disagree\n");
    return 1;
  }
  const double per_pair = 1e6 / (5.0 * static_cast<double>(labelled.size()));
  std::printf("%zu documents, %zu shingles (%.0f a document), %zu labelled pairs, threshold %g\n\n",
              sets.size(), values, static_cast<double>(values) / n, labelled.size(), threshold);
  std::printf(
      "| form | bytes a document (mean) | exact | decisions differing from exact "
      "(labelled pairs) | verifying a pair (same run) |\n|---|---|---|---|---|\n");
  std::printf("| narrowed 32-bit set, raw | %.0f | yes | 0 | %.2f us (1.00) |\n",
              4.0 * static_cast<double>(values) / n, raw_s * per_pair);
  std::printf("| narrowed 32-bit set, delta + varint | %.0f | yes | 0 | %.2f us (%.2f) |\n",
              static_cast<double>(varint_bytes) / n, varint_s * per_pair, varint_s / raw_s);
  std::printf(
      "| narrowed 32-bit set, Elias-Fano (the store's) | %.0f (median %zu, p99 %zu) | yes | "
      "0 | %.2f us (%.2f) |\n",
      static_cast<double>(ef_bytes) / n, sizes[sizes.size() / 2], sizes[sizes.size() * 99 / 100],
      ef_s * per_pair, ef_s / raw_s);
  for (size_t k : {64, 128, 256}) {
    size_t bytes = 0, differ = 0, differ_accept = 0;
    for (const Set& set : sets) bytes += 4 * std::min(k, set.size()) + 2;
    for (const auto& [a, b] : labelled) {
      double exact = 0;
      const bool accept = neardup::ReachesJaccard(sets[a], sets[b], threshold, &exact);
      const bool estimate = BottomKJaccard(sets[a], sets[b], k) >= threshold;
      if (accept != estimate) {
        ++differ;
        differ_accept += accept ? 1 : 0;
      }
    }
    std::printf(
        "| bottom-%zu sketch of the set | %.0f | no | %zu (%.2f%%; %zu duplicates lost) | "
        "- |\n",
        k, static_cast<double>(bytes) / n, differ,
        100.0 * static_cast<double>(differ) / static_cast<double>(labelled.size()), differ_accept);
  }
  return 0;
}
