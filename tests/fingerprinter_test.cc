// Tests of the Fingerprinter on real corpus text: identical text, one-word edits, unrelated
// documents (64 and 128 bits), empty/short texts, invalid UTF-8, caller features, concurrency.
#include "neardup/fingerprinter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "neardup/document_reader.h"

#include "shared_data.h"

namespace neardup {
namespace {

// How many corpus documents the property tests use (NEARDUP_LARGE_TESTS scales it up).
// Sanitizer builds run several times slower: they use a smaller (still meaningful) sample.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kDefaultSample = 80;
#else
constexpr size_t kDefaultSample = 120;
#endif
size_t SampleSize() {
  return std::getenv("NEARDUP_LARGE_TESTS") != nullptr ? 1000 : kDefaultSample;
}

// Up to `limit` documents of at least `min_bytes` from one corpus file.
std::vector<std::string> CorpusTexts(const std::string& file, size_t min_bytes, size_t limit) {
  std::vector<std::string> texts;
  auto reader = DocumentReader::Open({std::string(NEARDUP_SHARED_DIR) + "/corpus/" + file}, {});
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return texts;
  Document doc;
  while (texts.size() < limit) {
    auto got = (*reader)->Next(&doc);
    if (!got.ok() || !*got) break;
    if (doc.text.size() >= min_bytes && doc.text.size() <= 20000) texts.push_back(doc.text);
  }
  return texts;
}

// Replaces the word (ASCII letters) nearest the middle of `text` with "zebra".
std::string EditEnglishWord(const std::string& text) {
  size_t middle = text.size() / 2;
  size_t begin = text.find(' ', middle);
  if (begin == std::string::npos) return text + " zebra";
  ++begin;
  size_t end = text.find_first_of(" \n", begin);
  if (end == std::string::npos) end = text.size();
  return text.substr(0, begin) + "zebra" + text.substr(end);
}

// Replaces the CJK character nearest the middle of `text` with "鲸".
std::string EditChineseCharacter(const std::string& text) {
  for (size_t i = text.size() / 2; i + 3 <= text.size(); ++i) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0xE4 && b <= 0xE9) return text.substr(0, i) + "鲸" + text.substr(i + 3);
  }
  return text + "鲸";
}

struct DistanceStats {
  double mean = 0;
  int median = 0;
  int max = 0;
};

DistanceStats Stats(std::vector<int> distances) {
  DistanceStats stats;
  if (distances.empty()) return stats;
  std::sort(distances.begin(), distances.end());
  for (int d : distances) stats.mean += d;
  stats.mean /= static_cast<double>(distances.size());
  stats.median = distances[distances.size() / 2];
  stats.max = distances.back();
  return stats;
}

std::unique_ptr<Fingerprinter> Make(int bits = 64) {
  FingerprintOptions options;
  options.bits = bits;
  auto fingerprinter = Fingerprinter::Create(options);
  EXPECT_TRUE(fingerprinter.ok()) << fingerprinter.status().ToString();
  return std::move(*fingerprinter);
}

Fingerprint Fp(const Fingerprinter& fingerprinter, std::string_view text) {
  auto fp = fingerprinter.Compute(text);
  EXPECT_TRUE(fp.ok()) << fp.status().ToString();
  return fp.ok() ? *fp : Fingerprint();
}

class FingerprinterCorpusTest : public ::testing::TestWithParam<int> {};

TEST_P(FingerprinterCorpusTest, OneWordEditMovesFewBits) {
  NEARDUP_SKIP_WITHOUT_SHARED_CORPUS();
  const int bits = GetParam();
  auto fingerprinter = Make(bits);
  struct Source {
    const char* file;
    bool chinese;
  };
  for (Source source : {Source{"en_speeches.jsonl", false}, Source{"en_manpages.jsonl", false},
                        Source{"zh_manpages.jsonl", true}, Source{"zh_lohelp.jsonl", true}}) {
    std::vector<int> distances;
    for (const std::string& text : CorpusTexts(source.file, 3000, SampleSize() / 2)) {
      std::string edited = source.chinese ? EditChineseCharacter(text) : EditEnglishWord(text);
      ASSERT_NE(edited, text);
      Fingerprint a = Fp(*fingerprinter, text);
      EXPECT_EQ(a, Fp(*fingerprinter, text));  // deterministic: identical text, distance 0
      distances.push_back(HammingDistance(a, Fp(*fingerprinter, edited)));
    }
    ASSERT_GE(distances.size(), 20u) << source.file;
    DistanceStats stats = Stats(distances);
    std::printf("%s %d-bit one-word edit: mean %.2f median %d max %d over %zu docs\n", source.file,
                bits, stats.mean, stats.median, stats.max, distances.size());
    EXPECT_LE(stats.median, bits == 64 ? 4 : 8) << source.file;
    EXPECT_LE(stats.mean, bits == 64 ? 5.0 : 10.0) << source.file;
  }
}

TEST_P(FingerprinterCorpusTest, UnrelatedDocumentsAreHalfTheBitsApart) {
  NEARDUP_SKIP_WITHOUT_SHARED_CORPUS();
  const int bits = GetParam();
  auto fingerprinter = Make(bits);
  auto pair_distances = [&](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<int> distances;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (a[i] == b[i]) continue;  // natural exact duplicates
      distances.push_back(HammingDistance(Fp(*fingerprinter, a[i]), Fp(*fingerprinter, b[i])));
    }
    return distances;
  };
  auto halves = [](std::vector<std::string> texts) {
    std::vector<std::string> second(texts.begin() + static_cast<ptrdiff_t>(texts.size() / 2),
                                    texts.end());
    texts.resize(texts.size() / 2);
    return std::make_pair(texts, second);
  };
  struct Case {
    std::string name;
    std::vector<int> distances;
  };
  std::vector<Case> cases;
  for (const char* file : {"en_movie_reviews.jsonl", "zh_poetry.jsonl", "zh_fortunes.jsonl"}) {
    auto [first, second] = halves(CorpusTexts(file, 200, SampleSize()));
    cases.push_back({file, pair_distances(first, second)});
  }
  // Different languages and sources.
  cases.push_back({"ru_manpages x ja_manpages",
                   pair_distances(CorpusTexts("ru_manpages.jsonl", 200, SampleSize() / 2),
                                  CorpusTexts("ja_manpages.jsonl", 200, SampleSize() / 2))});
  cases.push_back({"en_kjv x zh_lohelp",
                   pair_distances(CorpusTexts("en_kjv.jsonl", 200, SampleSize() / 2),
                                  CorpusTexts("zh_lohelp.jsonl", 200, SampleSize() / 2))});
  for (const Case& c : cases) {
    ASSERT_GE(c.distances.size(), 40u) << c.name;
    DistanceStats stats = Stats(c.distances);
    std::printf("%s %d-bit unrelated pairs: mean %.2f median %d over %zu pairs\n", c.name.c_str(),
                bits, stats.mean, stats.median, c.distances.size());
    EXPECT_GE(stats.mean, bits * 28.0 / 64) << c.name;
    EXPECT_LE(stats.mean, bits * 36.0 / 64) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, FingerprinterCorpusTest, ::testing::Values(64, 128));

TEST(FingerprinterTest, NormalisationMakesVariantsIdentical) {
  auto fingerprinter = Make();
  EXPECT_EQ(Fp(*fingerprinter, "The Quick  Brown Fox\njumps"),
            Fp(*fingerprinter, "ｔｈｅ ＱＵＩＣＫ brown fox jumps"));
  EXPECT_EQ(Fp(*fingerprinter, "我们在學習漢語和電腦"), Fp(*fingerprinter, "我们在学习汉语和电脑"));
}

TEST(FingerprinterTest, EmptyAndShortTexts) {
  auto fingerprinter = Make();
  // A text without any feature has no fingerprint (it would be all zeros, shared by every such
  // text): refused as "no features", on every path.
  for (const char* text : {"", "   \n ", "\n\t", "<b></b>", "<script>x</script>"}) {
    auto none = fingerprinter->ComputeDetails(text);
    ASSERT_FALSE(none.ok()) << text;
    EXPECT_TRUE(Fingerprinter::IsNoFeatures(none.status())) << none.status().ToString();
    EXPECT_FALSE(fingerprinter->Compute(text).ok()) << text;
    std::string buffer;
    EXPECT_FALSE(fingerprinter->Compute(text, &buffer).ok()) << text;
  }
  // Punctuation-only texts fall back to hashing the text: they differ from each other.
  auto bang = fingerprinter->ComputeDetails("!!!");
  auto query = fingerprinter->ComputeDetails("???");
  ASSERT_TRUE(bang.ok() && query.ok());
  EXPECT_EQ(bang->feature_count, 1u);
  EXPECT_TRUE(bang->whole_text_fallback);
  EXPECT_NE(bang->fingerprint, query->fingerprint);
  // Different one-word texts differ.
  EXPECT_NE(Fp(*fingerprinter, "apple"), Fp(*fingerprinter, "orange"));
  EXPECT_NE(Fp(*fingerprinter, "苹果"), Fp(*fingerprinter, "橙子"));
}

TEST(FingerprinterTest, InvalidUtf8) {
  auto fingerprinter = Make();
  auto fp = fingerprinter->Compute(std::string_view("ok \xff bad", 8));
  ASSERT_FALSE(fp.ok());
  EXPECT_EQ(fp.status().code(), StatusCode::kInvalidUtf8);
  EXPECT_NE(fp.status().message().find("byte 3"), std::string::npos);
  FingerprintOptions options;
  options.normalize.replace_invalid_utf8 = true;
  auto replacing = Fingerprinter::Create(options);
  ASSERT_TRUE(replacing.ok());
  auto details = (*replacing)->ComputeDetails(std::string_view("ok \xff bad words", 14));
  ASSERT_TRUE(details.ok());
  EXPECT_GT(details->feature_count, 0u);
}

TEST(FingerprinterTest, OptionsAreValidated) {
  FingerprintOptions options;
  options.bits = 96;
  EXPECT_EQ(Fingerprinter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.bits = 64;
  options.max_text_bytes = 10;
  auto small = Fingerprinter::Create(options);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)->Compute("this text is longer than ten bytes").status().code(),
            StatusCode::kResourceExhausted);
}

TEST(FingerprinterTest, CallerFeaturesAndExplain) {
  auto fingerprinter = Make();
  auto details = fingerprinter->ComputeDetails("alpha beta gamma delta", true, true);
  ASSERT_TRUE(details.ok());
  EXPECT_EQ(details->normalized_text, "alpha beta gamma delta");
  EXPECT_EQ(details->feature_count, details->features.size());
  auto again = fingerprinter->ComputeFromFeatures(details->features);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, details->fingerprint);
  std::vector<WeightedFeature> bad = {{"x", std::nan("")}};
  EXPECT_FALSE(fingerprinter->ComputeFromFeatures(bad).ok());
}

// Compute(text, &normalized) gives Compute's fingerprint and ComputeDetails' normalised text on
// every path (fused fast path, reference path, yanyiwu profile), replacing what the buffer held.
TEST(FingerprinterTest, ComputeIntoCallersBuffer) {
  FingerprintOptions reference;
  reference.features.fast_paths = false;
  reference.normalize.fast_paths = false;
  const std::vector<FingerprintOptions> option_sets = {FingerprintOptions(), reference,
                                                       YanyiwuSimhashOptions(5)};
  const std::vector<std::string> texts = {"The Quick  Brown Fox\njumps over the <b>lazy</b> dog",
                                          "我们在學習漢語和電腦，然後去吃飯。", "!!!",
                                          std::string(5000, 'a') + " tail words here"};
  for (size_t o = 0; o < option_sets.size(); ++o) {
    auto fingerprinter = Fingerprinter::Create(option_sets[o]);
    ASSERT_TRUE(fingerprinter.ok()) << o;
    std::string buffer = "left over from an earlier, much longer text that must not survive";
    for (const std::string& text : texts) {
      auto details = (*fingerprinter)->ComputeDetails(text, false, true);
      if (!details.ok() && Fingerprinter::IsNoFeatures(details.status())) {
        // "!!!" has no feature under the yanyiwu profile (no whole-text fallback there): refused
        // the same way by every entry point.
        EXPECT_EQ(o, 2u) << text;
        EXPECT_FALSE((*fingerprinter)->Compute(text, &buffer).ok()) << o;
        EXPECT_FALSE((*fingerprinter)->Compute(text).ok()) << o;
        continue;
      }
      ASSERT_TRUE(details.ok()) << o;
      auto fingerprint = (*fingerprinter)->Compute(text, &buffer);
      ASSERT_TRUE(fingerprint.ok()) << o;
      EXPECT_EQ(*fingerprint, details->fingerprint) << "options " << o << ": " << text;
      EXPECT_EQ(*fingerprint, *(*fingerprinter)->Compute(text)) << "options " << o;
      EXPECT_EQ(buffer, details->normalized_text) << "options " << o << ": " << text;
    }
    // Errors are the same as Compute's.
    auto bad = (*fingerprinter)->Compute(std::string_view("ok \xff bad", 8), &buffer);
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidUtf8) << o;
  }
}

TEST(FingerprinterTest, ConcurrentComputeMatchesSerial) {
  NEARDUP_SKIP_WITHOUT_SHARED_CORPUS();
  auto fingerprinter = Make();
  std::vector<std::string> texts = CorpusTexts("zh_fortunes.jsonl", 50, 200);
  std::vector<std::string> english = CorpusTexts("en_spamassassin.jsonl", 50, 200);
  texts.insert(texts.end(), english.begin(), english.end());
  // A mail that is markup only has no features: refused the same way serially and in parallel
  // (an all-zero Fingerprint() stands for the refusal here).
  std::vector<Fingerprint> serial;
  for (const auto& text : texts) {
    auto fp = fingerprinter->Compute(text);
    if (!fp.ok()) {
      EXPECT_TRUE(Fingerprinter::IsNoFeatures(fp.status())) << fp.status().ToString();
    }
    serial.push_back(fp.ok() ? *fp : Fingerprint());
  }
  std::vector<Fingerprint> parallel(texts.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < texts.size(); i += 4) {
        auto fp = fingerprinter->Compute(texts[i]);
        parallel[i] = fp.ok() ? *fp : Fingerprint();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(parallel, serial);
}

// The canonical text form a store records: every fingerprint-changing option survives the round
// trip (paths with spaces and '=' included), and bad text is an error naming the key.
TEST(FingerprintOptionsTextTest, RoundTripsAndNamesBadKeys) {
  FingerprintOptions options = YanyiwuSimhashOptions(7);
  options.features.idf_path = "/tmp/my idf=1%.txt";
  options.features.jieba_dir = "jieba dir";
  const std::string text = FingerprintOptionsToString(options);
  EXPECT_EQ(text.find("/tmp/my idf"), std::string::npos) << "spaces are escaped: " << text;
  Result<FingerprintOptions> parsed = ParseFingerprintOptions(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(FingerprintOptionsToString(*parsed), text);
  EXPECT_EQ(parsed->profile, HashProfile::kYanyiwuSimhash);
  EXPECT_EQ(parsed->features.top_k, 7u);
  EXPECT_EQ(parsed->features.idf_path, options.features.idf_path);
  EXPECT_EQ(parsed->features.jieba_dir, options.features.jieba_dir);
  EXPECT_EQ(parsed->hash, FeatureHash::kJenkinsLookup3);
  EXPECT_FALSE(parsed->normalize.nfkc);

  EXPECT_EQ(FingerprintOptionsToString(*ParseFingerprintOptions("")),
            FingerprintOptionsToString(FingerprintOptions()));
  Result<FingerprintOptions> unknown = ParseFingerprintOptions("bits=64 colour=red");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("colour"), std::string::npos);
  Result<FingerprintOptions> bad = ParseFingerprintOptions("tokenizer=words");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tokenizer"), std::string::npos);
  EXPECT_FALSE(ParseFingerprintOptions("shingle=two").ok());
  EXPECT_FALSE(ParseFingerprintOptions("idf=%4").ok());
}

}  // namespace
}  // namespace neardup
