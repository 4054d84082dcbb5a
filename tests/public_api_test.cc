// The public API's conventions: misuse is an error Status (never a silent default), library
// errors name options and never command-line flags, the service library refuses bad options at
// Server::Create, and the fingerprint options a store records read back unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "neardup/brute_force_index.h"
#include "neardup/dedup.h"
#include "neardup/features.h"
#include "neardup/fingerprinter.h"
#include "neardup/minhash_lsh.h"
#include "neardup/output_file.h"
#include "neardup/permuted_index.h"
#include "neardup/server.h"
#include "neardup/simhash.h"
#include "neardup/store.h"
#include "simhash_store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

// A library message must not tell a library user about flags of the command-line tool.
void ExpectNoFlagNames(const Status& status) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message().find("--"), std::string::npos) << status.message();
  EXPECT_EQ(status.message().rfind("-k ", 0), std::string::npos) << status.message();
}

TEST(PublicApiTest, LibraryErrorsNameOptionsNotFlags) {
  Result<LshParameters> threshold = ChooseLshParameters(1.5);
  ExpectNoFlagNames(threshold.status());
  EXPECT_NE(threshold.status().message().find("threshold"), std::string::npos);

  MinHashLshOptions lsh;
  lsh.parameters = LshParameters{3, 0};  // rows missing
  ExpectNoFlagNames(ResolveLshParameters(lsh).status());

  KeepPolicy policy;
  std::string field;
  Status keep = ParseKeepPolicy("newest", &policy, &field);
  ExpectNoFlagNames(keep);
  EXPECT_NE(keep.message().find("newest"), std::string::npos);

  const fs::path existing =
      fs::temp_directory_path() / ("neardup_public_api_" + std::to_string(::getpid()));
  std::ofstream(existing) << "x";
  Status refused = CheckOutputPath(existing.string(), OutputFileOptions());
  EXPECT_EQ(refused.code(), StatusCode::kAlreadyExists);
  ExpectNoFlagNames(refused);
  EXPECT_NE(refused.message().find("force"), std::string::npos) << refused.message();
  fs::remove(existing);

  DedupOptions options;
  options.k = 99;  // beyond the 64-bit limit: an error, not a silent clamp
  Result<DedupReport> report = RunDedup({"/nonexistent.jsonl"}, options);
  ExpectNoFlagNames(report.status());
  EXPECT_NE(report.status().message().find("k (the SimHash join radius)"), std::string::npos)
      << report.status().message();
}

TEST(PublicApiTest, ServerCreateRefusesMisuse) {
  service::ServerOptions options;
  EXPECT_EQ(service::Server::Create(nullptr, nullptr, options).status().code(),
            StatusCode::kInvalidArgument);

  const fs::path dir =
      fs::temp_directory_path() / ("neardup_public_api_store_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto store = DocumentStore::Open(dir.string(), testing_store::SimHashStoreOptions());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  options.port = 70000;
  EXPECT_EQ(service::Server::Create(store->get(), nullptr, options).status().code(),
            StatusCode::kInvalidArgument);
  options.port = 0;
  options.limits.max_query_k = 65;  // more than the 64 bits of the default width
  EXPECT_EQ(service::Server::Create(store->get(), nullptr, options).status().code(),
            StatusCode::kInvalidArgument);
  options.limits.max_query_k = 64;
  auto server = service::Server::Create(store->get(), nullptr, options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->Bind().ok());
  EXPECT_GT((*server)->port(), 0);
  server->reset();
  EXPECT_TRUE((*store)->Close().ok());
  fs::remove_all(dir);
}

// Every width other than 64 or 128 and every radius out of range is refused where the object is
// made or the call is made, never replaced by a default.
TEST(PublicApiTest, WidthsAndRadiiAreCheckedNotClamped) {
  for (int bits : {0, 32, 63, 65, 127, 256}) {
    SCOPED_TRACE("bits=" + std::to_string(bits));
    EXPECT_EQ(BruteForceIndex::Create(bits).status().code(), StatusCode::kInvalidArgument);
    PermutedIndexOptions index;
    index.bits = bits;
    EXPECT_EQ(PermutedIndex::Create(index).status().code(), StatusCode::kInvalidArgument);
    FingerprintOptions fingerprint;
    fingerprint.bits = bits;
    Result<std::unique_ptr<Fingerprinter>> fingerprinter = Fingerprinter::Create(fingerprint);
    EXPECT_EQ(fingerprinter.status().code(), StatusCode::kInvalidArgument);
    if (!fingerprinter.ok()) ExpectNoFlagNames(fingerprinter.status());
    EXPECT_EQ(SimHashFeatures({}, bits).status().code(), StatusCode::kInvalidArgument);
    PlanRequest plan;
    plan.bits = bits;
    EXPECT_EQ(PlanIndex(plan).status().code(), StatusCode::kInvalidArgument);
  }
  for (int bits : {64, 128}) {
    auto brute = BruteForceIndex::Create(bits);
    ASSERT_TRUE(brute.ok()) << brute.status().ToString();
    EXPECT_EQ((*brute)->bits(), bits);
    EXPECT_EQ((*brute)->Search(Fingerprint{0, 0, bits}, bits + 1).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ((*brute)->Search(Fingerprint{0, 0, bits}, -1).status().code(),
              StatusCode::kInvalidArgument);
    const Fingerprint other_width{0, 0, bits == 64 ? 128 : 64};
    EXPECT_EQ((*brute)->Add(1, other_width).code(), StatusCode::kInvalidArgument);

    PermutedIndexOptions options;
    options.bits = bits;
    options.expected_size = 1000;
    auto index = PermutedIndex::Create(options);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    EXPECT_EQ((*index)->Search(Fingerprint{0, 0, bits}, options.indexed_k + 1).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ((*index)->Search(Fingerprint{0, 0, bits}, -1).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ((*index)->Add(1, other_width).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*index)->SelfJoin(options.indexed_k + 1).status().code(),
              StatusCode::kInvalidArgument);
  }
  PermutedIndexOptions negative;
  negative.indexed_k = -1;
  EXPECT_EQ(PermutedIndex::Create(negative).status().code(), StatusCode::kInvalidArgument);
  PermutedIndexOptions empty;
  empty.expected_size = 0;
  EXPECT_EQ(PermutedIndex::Create(empty).status().code(), StatusCode::kInvalidArgument);

  DedupOptions dedup;
  dedup.k = -1;
  EXPECT_EQ(RunDedup({"/nonexistent.jsonl"}, dedup).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunDedup({}, DedupOptions()).status().code(), StatusCode::kInvalidArgument);

  FeatureOptions features;
  features.shingle_size = 0;
  EXPECT_EQ(FeatureExtractor::Create(features).status().code(), StatusCode::kInvalidArgument);
  features = FeatureOptions();
  features.char_ngram_size = 0;
  features.tokenizer = Tokenizer::kCharNgram;
  EXPECT_EQ(FeatureExtractor::Create(features).status().code(), StatusCode::kInvalidArgument);
}

TEST(PublicApiTest, StoreRefusesBadWidthsAndRadii) {
  const fs::path dir =
      fs::temp_directory_path() / ("neardup_public_api_widths_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  StoreOptions options;
  options.rule = StoreRule::kSimHash;  // bare fingerprints
  options.bits = 96;
  Result<std::unique_ptr<DocumentStore>> refused = DocumentStore::Open(dir.string(), options);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  ExpectNoFlagNames(refused.status());
  options.bits = 64;
  options.indexed_k = 99;
  EXPECT_EQ(DocumentStore::Open(dir.string(), options).status().code(),
            StatusCode::kInvalidArgument);
  options.indexed_k = 3;
  auto store = DocumentStore::Open(dir.string(), options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Search(Fingerprint::From64(1), 65).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Search(Fingerprint::From64(1), -1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Search(Fingerprint::From128(1, 1), 3).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->CheckAndAdd({"a", Fingerprint::From64(1), ""}, -1, true).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Add({"", Fingerprint::From64(1), ""}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*store)->Close().ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace neardup
