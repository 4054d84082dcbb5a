// Test helper: corpora with planted near-duplicates of known kinds, made from the repository's
// sample corpus (sample/, so the tests that use them run without ../shared), and the duplicate
// components of a set of pairs: what the tests comparing streamed checks with `neardup dedup`
// (tests/store_dedup_rule_test.cc, tests/server_dedup_rule_test.cc) are built on.
#ifndef NEARDUP_TESTS_PLANTED_CORPUS_H_
#define NEARDUP_TESTS_PLANTED_CORPUS_H_

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"

namespace neardup::testing_corpus {

// Texts of the repository's sample corpus (spam mails and poems), without those that leave no
// feature (markup-only mails: the store refuses them and dedup skips them, so neither links them).
inline std::vector<std::string> SampleTexts(size_t limit) {
  std::vector<std::string> texts;
  auto fingerprinter = Fingerprinter::Create(FingerprintOptions{});
  EXPECT_TRUE(fingerprinter.ok()) << fingerprinter.status().ToString();
  if (!fingerprinter.ok()) return texts;
  for (const char* name : {"en_spamassassin.jsonl", "zh_poetry.jsonl"}) {
    auto reader = DocumentReader::Open({std::string(NEARDUP_SOURCE_DIR) + "/sample/" + name}, {});
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return texts;
    Document doc;
    while (texts.size() < limit) {
      auto got = (*reader)->Next(&doc);
      if (!got.ok() || !*got) break;
      const Result<Fingerprint> fingerprint = (*fingerprinter)->Compute(doc.text);
      if (!fingerprint.ok() && Fingerprinter::IsNoFeatures(fingerprint.status())) continue;
      texts.push_back(doc.text);
    }
    limit += texts.size();  // as many of each file
  }
  return texts;
}

// Deterministic edits of a text: a near-duplicate by word substitution (about `rate` of the
// words), a whitespace-only variant, and a boilerplate-wrapped copy.
inline std::string SubstituteWords(const std::string& text, double rate, std::mt19937_64& rng) {
  std::string out;
  std::uniform_real_distribution<double> coin(0, 1);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(start, end - start);
    if (!word.empty() && coin(rng) < rate) word = "w" + std::to_string(rng() % 100000);
    out += word;
    if (end < text.size()) out += ' ';
    start = end + 1;
  }
  return out;
}
inline std::string Respace(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == ' ') out += "  ";
  }
  return out + "\n\n";
}

struct Corpus {
  std::vector<std::string> ids, texts;
};

// Originals from the sample with planted copies of every kind, in an interleaved order, plus a
// template copied more often than the bucket window (a hot bucket).
inline Corpus PlantedCorpus(size_t originals, size_t hot_copies) {
  std::mt19937_64 rng(42);
  Corpus corpus;
  const std::vector<std::string> base = SampleTexts(originals / 2);
  for (size_t i = 0; i < base.size(); ++i) {
    corpus.ids.push_back("o" + std::to_string(i));
    corpus.texts.push_back(base[i]);
    if (i % 3 == 0) {
      const size_t j = rng() % (i + 1);  // a copy of an earlier original
      corpus.ids.push_back("s" + std::to_string(i));
      corpus.texts.push_back(SubstituteWords(base[j], 0.04, rng));
    }
    if (i % 7 == 0) {
      corpus.ids.push_back("w" + std::to_string(i));
      corpus.texts.push_back(Respace(base[i]));
    }
    if (i % 11 == 0) {
      corpus.ids.push_back("e" + std::to_string(i));
      corpus.texts.push_back(base[rng() % (i + 1)]);
    }
    if (i % 5 == 0 && i / 5 < hot_copies) {
      corpus.ids.push_back("h" + std::to_string(i));
      corpus.texts.push_back(i % 2 == 0 ? base[0] : SubstituteWords(base[0], 0.02, rng));
    }
  }
  for (size_t i = 0; corpus.ids.size() < originals + hot_copies && i < hot_copies; ++i) {
    corpus.ids.push_back("t" + std::to_string(i));
    corpus.texts.push_back(base[1] + (i % 3 == 0 ? " " : ""));
  }
  return corpus;
}

// Connected components (of 2+ ids) of a set of pairs.
inline std::set<std::set<std::string>> Components(
    const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::map<std::string, std::string> parent;
  std::function<std::string(const std::string&)> find = [&](const std::string& x) {
    auto it = parent.find(x);
    if (it == parent.end()) {
      parent[x] = x;
      return x;
    }
    if (it->second == x) return x;
    std::string root = find(it->second);
    parent[x] = root;
    return root;
  };
  for (const auto& [a, b] : pairs) {
    std::string ra = find(a), rb = find(b);
    if (ra != rb) parent[ra] = rb;
  }
  std::map<std::string, std::set<std::string>> groups;
  for (const auto& [x, p] : parent) groups[find(x)].insert(x);
  std::set<std::set<std::string>> out;
  for (auto& [root, group] : groups) {
    if (group.size() > 1) out.insert(group);
  }
  return out;
}

}  // namespace neardup::testing_corpus

#endif  // NEARDUP_TESTS_PLANTED_CORPUS_H_
