// The public API's conventions: misuse is an error Status (never a silent default), library
// errors name options and never command-line flags, the service library refuses bad options at
// Server::Create, and the fingerprint options a store records read back unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "neardup/dedup.h"
#include "neardup/minhash_lsh.h"
#include "neardup/output_file.h"
#include "neardup/server.h"
#include "neardup/store.h"

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
  lsh.bands = 3;  // rows missing
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
  options.max_distance = 99;  // beyond the 64-bit limit: an error, not a silent clamp
  Result<DedupReport> report = RunDedup({"/nonexistent.jsonl"}, options);
  ExpectNoFlagNames(report.status());
  EXPECT_NE(report.status().message().find("max_distance"), std::string::npos)
      << report.status().message();
}

TEST(PublicApiTest, ServerCreateRefusesMisuse) {
  service::ServerOptions options;
  EXPECT_EQ(service::Server::Create(nullptr, nullptr, options).status().code(),
            StatusCode::kInvalidArgument);

  const fs::path dir =
      fs::temp_directory_path() / ("neardup_public_api_store_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto store = DocumentStore::Open(dir.string(), StoreOptions());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  options.port = 70000;
  EXPECT_EQ(service::Server::Create(store->get(), nullptr, options).status().code(),
            StatusCode::kInvalidArgument);
  options.port = 0;
  options.limits.max_k = 65;  // more than the 64 bits of the default width
  EXPECT_EQ(service::Server::Create(store->get(), nullptr, options).status().code(),
            StatusCode::kInvalidArgument);
  options.limits.max_k = 64;
  auto server = service::Server::Create(store->get(), nullptr, options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->Bind().ok());
  EXPECT_GT((*server)->port(), 0);
  server->reset();
  EXPECT_TRUE((*store)->Close().ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace neardup
