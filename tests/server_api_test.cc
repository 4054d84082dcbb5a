// API tests of `neardup serve` against the real binary on a free loopback port, over HTTP with
// httplib::Client: every endpoint, 4xx errors with JSON bodies, auth, limits, garbage input, and
// graceful SIGTERM shutdown with the data still there afterwards.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "neardup/store.h"
#include "server_process.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

using testing::ServerProcess;

class ServerApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_server_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

void ExpectJsonError(const httplib::Result& res, int status, const std::string& needle) {
  ASSERT_TRUE(res) << "no response";
  EXPECT_EQ(res->status, status) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  EXPECT_NE(res->body.find("\"error\""), std::string::npos) << res->body;
  EXPECT_NE(res->body.find(needle), std::string::npos) << res->body;
}

TEST_F(ServerApiTest, EndpointsWorkAndDataSurvivesSigterm) {
  {
    ServerProcess server(dir_, {});
    auto client = server.Client();
    auto health = client->Get("/healthz");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);

    auto added = client->Post(
        "/v1/documents",
        R"({"documents":[{"id":"https://x.example/1","fingerprint":"00000000000000ff","metadata":{"title":"one"}},)"
        R"({"id":"https://x.example/2","fingerprint":"ffff000000000000","metadata":"two"},)"
        R"({"id":"t1","text":"It was the best of times, it was the worst of times, it was the age of wisdom"}]})",
        "application/json");
    ASSERT_TRUE(added);
    EXPECT_EQ(added->status, 200) << added->body;
    EXPECT_NE(added->body.find(R"("added":3)"), std::string::npos) << added->body;

    // Single-document form.
    auto single = client->Post("/v1/documents", R"({"id":"solo","fingerprint":"0f0f0f0f0f0f0f0f"})",
                               "application/json");
    ASSERT_TRUE(single);
    EXPECT_EQ(single->status, 200) << single->body;

    auto query = client->Get("/v1/query?fingerprint=00000000000000fe&k=2");
    ASSERT_TRUE(query);
    EXPECT_EQ(query->status, 200);
    EXPECT_NE(query->body.find(R"("id":"https://x.example/1")"), std::string::npos) << query->body;
    EXPECT_NE(query->body.find(R"("distance":1)"), std::string::npos);
    EXPECT_NE(query->body.find(R"("metadata":{"title":"one"})"), std::string::npos) << query->body;

    auto post_query = client->Post("/v1/query", R"({"fingerprint":"ffff000000000001","k":1})",
                                   "application/json");
    ASSERT_TRUE(post_query);
    EXPECT_NE(post_query->body.find(R"("metadata":"two")"), std::string::npos) << post_query->body;

    // Check-and-add with text: a near-identical text is reported and not added.
    auto check = client->Post(
        "/v1/check",
        R"({"id":"t2","text":"It was the best of times, it was the worst of times, it was the age of wisdom!","k":3})",
        "application/json");
    ASSERT_TRUE(check);
    EXPECT_EQ(check->status, 200) << check->body;
    EXPECT_NE(check->body.find(R"("duplicate":true)"), std::string::npos) << check->body;
    EXPECT_NE(check->body.find(R"("added":false)"), std::string::npos);
    EXPECT_NE(check->body.find(R"("id":"t1")"), std::string::npos);
    auto fresh = client->Post("/v1/check", R"({"id":"u1","fingerprint":"1234123412341234"})",
                              "application/json");
    ASSERT_TRUE(fresh);
    EXPECT_NE(fresh->body.find(R"("added":true)"), std::string::npos) << fresh->body;
    auto never =
        client->Post("/v1/check", R"({"id":"u2","fingerprint":"1234123412341235","add":"never"})",
                     "application/json");
    ASSERT_TRUE(never);
    EXPECT_NE(never->body.find(R"("added":false)"), std::string::npos) << never->body;
    EXPECT_NE(never->body.find(R"("id":"u1")"), std::string::npos) << never->body;
    auto always =
        client->Post("/v1/check", R"({"id":"u3","fingerprint":"1234123412341235","add":"always"})",
                     "application/json");
    ASSERT_TRUE(always);
    EXPECT_NE(always->body.find(R"("added":true)"), std::string::npos) << always->body;

    // Get by path (URL-encoded) and by parameter; delete.
    auto got = client->Get("/v1/documents/https%3A%2F%2Fx.example%2F2");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->status, 200) << got->body;
    EXPECT_NE(got->body.find(R"("fingerprint":"ffff000000000000")"), std::string::npos);
    auto got2 = client->Get("/v1/documents?id=solo");
    ASSERT_TRUE(got2);
    EXPECT_EQ(got2->status, 200);
    auto deleted = client->Delete("/v1/documents?id=solo");
    ASSERT_TRUE(deleted);
    EXPECT_EQ(deleted->status, 200) << deleted->body;
    ExpectJsonError(client->Delete("/v1/documents?id=solo"), 404, "NotFound");
    ExpectJsonError(client->Get("/v1/documents/solo"), 404, "NotFound");

    auto stats = client->Get("/v1/stats");
    ASSERT_TRUE(stats);
    EXPECT_NE(stats->body.find(R"("documents":5)"), std::string::npos) << stats->body;
    auto metrics = client->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("neardup_documents 5"), std::string::npos) << metrics->body;
    EXPECT_NE(metrics->body.find("neardup_http_request_duration_seconds_bucket{endpoint=\"query\""),
              std::string::npos);
    EXPECT_EQ(server.Terminate(), 0);
  }
  // Everything acknowledged is in the store after the graceful shutdown.
  auto store = DocumentStore::Open(dir_, {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Stats().documents, 5u);
  EXPECT_EQ((*store)->Get("https://x.example/1")->metadata, R"({"title":"one"})");
  EXPECT_EQ((*store)->Get("solo").status().code(), StatusCode::kNotFound);
}

TEST_F(ServerApiTest, BadRequestsGetJson4xx) {
  ServerProcess server(dir_, {"--max-batch", "3", "--max-body-bytes", "20000"});
  auto client = server.Client();
  const char* json = "application/json";
  ExpectJsonError(client->Post("/v1/query", "{\"fingerprint\":", json), 400, "invalid JSON");
  ExpectJsonError(client->Post("/v1/query", "[1,2]", json), 400, "must be a JSON object");
  ExpectJsonError(client->Post("/v1/query", "{\"text\":\"\xff\xfe\"}", json), 400, "UTF-8");
  ExpectJsonError(client->Post("/v1/query", R"({"fingerprint":"00ff","k":1})", json), 400,
                  "fingerprint");
  ExpectJsonError(client->Post("/v1/query", R"({"fingerprint":"00000000000000ff","k":65})", json),
                  400, "k: 65");
  ExpectJsonError(client->Post("/v1/query", R"({"fingerprint":"00000000000000ff","kk":1})", json),
                  400, "kk: unknown field");
  ExpectJsonError(client->Get("/v1/query?fingerprint=00000000000000ff&k=-1"), 400, "k: -1");
  ExpectJsonError(client->Get("/v1/query?fingerprint=zz"), 400, "fingerprint");
  ExpectJsonError(client->Post("/v1/documents", R"({"documents":[{"id":"a"}]})", json), 400,
                  "exactly one");
  ExpectJsonError(
      client->Post("/v1/documents", R"({"documents":[{"id":"","fingerprint":"00000000000000ff"}]})",
                   json),
      400, "documents[0].id");
  ExpectJsonError(
      client->Post("/v1/documents",
                   R"({"documents":[{"id":"a","fingerprint":"00000000000000ff","metadata":[1]}]})",
                   json),
      400, "documents[0].metadata");
  std::string batch = R"({"documents":[)";
  for (int i = 0; i < 4; ++i) {
    batch += std::string(i ? "," : "") + R"({"id":"b)" + std::to_string(i) +
             R"(","fingerprint":"00000000000000ff"})";
  }
  batch += "]}";
  ExpectJsonError(client->Post("/v1/documents", batch, json), 413, "batch limit");
  ExpectJsonError(client->Post("/v1/documents", std::string(30000, ' ') + "{}", json), 413,
                  "max_body_bytes");
  ExpectJsonError(
      client->Post("/v1/check", R"({"id":"a","fingerprint":"00000000000000ff","add":"maybe"})",
                   json),
      400, "add");
  ExpectJsonError(client->Get("/v1/nothing"), 404, "no such endpoint");
  // Nothing above was stored.
  auto stats = client->Get("/v1/stats");
  ASSERT_TRUE(stats);
  EXPECT_NE(stats->body.find(R"("documents":0)"), std::string::npos) << stats->body;
}

TEST_F(ServerApiTest, BearerTokenGuardsWrites) {
  ServerProcess server(dir_, {"--token", "s3cret"});
  auto client = server.Client();
  const std::string body = R"({"id":"a","fingerprint":"00000000000000ff"})";
  ExpectJsonError(client->Post("/v1/documents", body, "application/json"), 401, "token");
  httplib::Headers wrong = {{"Authorization", "Bearer nope"}};
  ExpectJsonError(client->Post("/v1/documents", wrong, body, "application/json"), 401, "token");
  httplib::Headers right = {{"Authorization", "Bearer s3cret"}};
  auto ok = client->Post("/v1/documents", right, body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  ExpectJsonError(client->Delete("/v1/documents/a"), 401, "token");
  auto read = client->Get("/v1/documents/a");  // reads are open unless --auth-reads
  ASSERT_TRUE(read);
  EXPECT_EQ(read->status, 200);
}

TEST_F(ServerApiTest, GarbageAndConcurrentClientsDoNotHurtTheServer) {
  ServerProcess server(dir_, {});
  std::atomic<int> server_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto client = server.Client();
      std::mt19937 rng(t);
      const char* paths[] = {"/v1/documents", "/v1/check", "/v1/query"};
      for (int i = 0; i < 150; ++i) {
        std::string body;
        if (i % 3 == 0) {
          // Random bytes.
          body.resize(rng() % 200);
          for (char& c : body) c = static_cast<char>(rng());
        } else if (i % 3 == 1) {
          // Valid check-and-add of a random fingerprint.
          char hex[17];
          std::snprintf(hex, sizeof(hex), "%016llx",
                        static_cast<unsigned long long>((uint64_t(rng()) << 32) | rng()));
          body = std::string(R"({"id":"t)") + std::to_string(t) + "-" + std::to_string(i) +
                 R"(","fingerprint":")" + hex + R"(","k":3})";
        } else {
          // Truncated valid JSON.
          std::string valid =
              R"({"documents":[{"id":"x","text":"some text here","metadata":{"a":[1,2,{"b":null}]}}]})";
          body = valid.substr(0, rng() % valid.size());
        }
        auto res =
            client->Post(i % 3 == 1 ? "/v1/check" : paths[rng() % 3], body, "application/json");
        if (!res || res->status >= 500) server_errors.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(server_errors.load(), 0);
  auto health = server.Client()->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(server.Terminate(), 0);
}

TEST_F(ServerApiTest, TokenFileWithCrlfSchemeCaseAndRepeatedHeaders) {
  const std::string token_file = dir_ + ".token";
  {
    std::ofstream out(token_file, std::ios::binary);
    out << "s3cret\r\n";
  }
  ServerProcess server(dir_, {"--token-file", token_file});
  fs::remove(token_file);
  auto client = server.Client();
  const std::string body = R"({"id":"a","fingerprint":"00000000000000ff"})";
  for (const char* scheme : {"Bearer", "bearer", "BEARER"}) {
    httplib::Headers auth = {{"Authorization", std::string(scheme) + " s3cret"}};
    auto ok = client->Post("/v1/documents", auth, body, "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << scheme << ": " << ok->body;
  }
  // The token with the '\r' the file held is not the token: a bare CR in a field value is
  // malformed framing (RFC 9112 2.2), refused with 400 before auth is even looked at.
  httplib::Headers with_cr = {{"Authorization", "Bearer s3cret\r"}};
  auto cr = client->Post("/v1/documents", with_cr, body, "application/json");
  ASSERT_TRUE(cr);
  EXPECT_EQ(cr->status, 400);
  // ... and with the CR as a trailing space instead, the token still does not match.
  httplib::Headers with_space = {{"Authorization", "Bearer s3cret x"}};
  auto space = client->Post("/v1/documents", with_space, body, "application/json");
  ASSERT_TRUE(space);
  EXPECT_EQ(space->status, 401);
  // Two Authorization headers (even if one is right) are refused.
  testing::RawConnection raw(server.port());
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(
      raw.Send("POST /v1/documents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n"
               "Authorization: Bearer other\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body));
  const std::string response = raw.ReadResponse();
  EXPECT_EQ(testing::StatusOf(response), 400) << response;
  EXPECT_NE(response.find("Authorization: given more than once"), std::string::npos) << response;
}

TEST_F(ServerApiTest, MetadataVerbatimAndBatchesWithARepeatedIdRefused) {
  ServerProcess server(dir_, {});
  auto client = server.Client();
  auto added = client->Post(
      "/v1/documents",
      R"({"documents":[{"id":"a","fingerprint":"00000000000000ff","metadata":{"n": 1.0e5,"s":"\u00e9"}}]})",
      "application/json");
  ASSERT_TRUE(added);
  EXPECT_EQ(added->status, 200) << added->body;
  auto got = client->Get("/v1/documents/a");
  ASSERT_TRUE(got);
  EXPECT_NE(got->body.find(R"("metadata":{"n": 1.0e5,"s":"\u00e9"})"), std::string::npos)
      << got->body;
  ExpectJsonError(client->Post("/v1/documents",
                               R"({"documents":[{"id":"b","fingerprint":"00000000000000ff"},)"
                               R"({"id":"b","fingerprint":"00000000000000fe"}]})",
                               "application/json"),
                  400, "documents[1].id");
  ExpectJsonError(client->Post("/v1/documents", R"({"id":"c","text":""})", "application/json"), 400,
                  "text: must not be empty");
  ExpectJsonError(client->Post("/v1/query", R"({"fingerprint":"00000000000000ff","k":1,"k":2})",
                               "application/json"),
                  400, "duplicate key");
  auto stats = client->Get("/v1/stats");
  ASSERT_TRUE(stats);
  EXPECT_NE(stats->body.find(R"("documents":1)"), std::string::npos) << stats->body;
}

// The batch form of a fingerprint query answers each fingerprint as its own query would, in order.
TEST_F(ServerApiTest, ABatchOfFingerprintQueriesAnswersEachAsItsOwnQuery) {
  ServerProcess server(dir_, {"--max-batch", "3"});
  auto client = server.Client();
  auto added = client->Post(
      "/v1/documents",
      R"({"documents":[{"id":"a","fingerprint":"00000000000000ff","metadata":{"n":1}},)"
      R"({"id":"b","fingerprint":"00000000000000fc"},{"id":"c","fingerprint":"ffff000000000000"}]})",
      "application/json");
  ASSERT_TRUE(added);
  ASSERT_EQ(added->status, 200) << added->body;
  const std::vector<std::string> queries = {"00000000000000fe", "0f0f0f0f0f0f0f0f",
                                            "ffff000000000001"};
  auto batch = client->Post("/v1/query",
                            R"({"k":2,"fingerprints":[")" + queries[0] + R"(",")" + queries[1] +
                                R"(",")" + queries[2] + R"("]})",
                            "application/json");
  ASSERT_TRUE(batch);
  ASSERT_EQ(batch->status, 200) << batch->body;
  EXPECT_EQ(batch->body.rfind(R"({"k":2,"results":[)", 0), 0u) << batch->body;
  // Each element is {"fingerprint", "results", "truncated"}, the same results as the single query.
  size_t at = 0;
  for (const std::string& q : queries) {
    auto single = client->Get("/v1/query?k=2&fingerprint=" + q);
    ASSERT_TRUE(single);
    ASSERT_EQ(single->status, 200) << single->body;
    const size_t from = single->body.find(R"("results":)");
    ASSERT_NE(from, std::string::npos);
    const std::string element =
        R"({"fingerprint":")" + q + "\"," + single->body.substr(from, single->body.size() - from);
    const size_t found = batch->body.find(element.substr(0, element.size() - 1), at);
    ASSERT_NE(found, std::string::npos) << element << " in " << batch->body;
    at = found + 1;  // in query order
  }
  EXPECT_NE(batch->body.find(R"("results":[],"truncated":false)"), std::string::npos)
      << batch->body;  // 0f0f... matches nothing
  // limit applies per fingerprint: 00..fe has two documents within 2.
  auto limited = client->Post(
      "/v1/query", R"({"k":2,"limit":1,"fingerprints":["00000000000000fe"]})", "application/json");
  ASSERT_TRUE(limited);
  EXPECT_NE(limited->body.find(R"("truncated":true)"), std::string::npos) << limited->body;
  EXPECT_EQ(limited->body.find(R"("id":"b")"), std::string::npos) << limited->body;
  // Errors name the element; the batch is bounded by --max-batch.
  ExpectJsonError(client->Post("/v1/query", R"({"fingerprints":[]})", "application/json"), 400,
                  "fingerprints: must not be empty");
  ExpectJsonError(
      client->Post("/v1/query", R"({"fingerprints":["00000000000000fe",7]})", "application/json"),
      400, "fingerprints[1]: must be a string");
  ExpectJsonError(client->Post("/v1/query", R"({"fingerprints":["00000000000000fe","00ff"]})",
                               "application/json"),
                  400, "fingerprints[1]");
  ExpectJsonError(
      client->Post("/v1/query", R"({"fingerprints":"00000000000000fe"})", "application/json"), 400,
      "fingerprints: must be an array");
  ExpectJsonError(
      client->Post("/v1/query",
                   R"({"fingerprint":"00000000000000fe","fingerprints":["00000000000000fe"]})",
                   "application/json"),
      400, "give exactly one");
  ExpectJsonError(client->Post("/v1/query",
                               R"({"fingerprints":["00000000000000fe","00000000000000fe",)"
                               R"("00000000000000fe","00000000000000fe"]})",
                               "application/json"),
                  413, "exceeds the batch limit of 3");
}

TEST_F(ServerApiTest, EveryResponseIsCountedInMetrics) {
  ServerProcess server(dir_, {"--max-query-body-bytes", "1000", "--token", "t"});
  auto client = server.Client();
  ASSERT_TRUE(client->Get("/nothing"));                                          // 404
  ASSERT_TRUE(client->Put("/v1/stats", "", "application/json"));                 // 405
  ASSERT_TRUE(client->Post("/v1/query", std::string(2000, ' '), "text/plain"));  // 413
  ASSERT_TRUE(client->Post("/v1/query", "{", "application/json"));               // 400
  ASSERT_TRUE(client->Post("/v1/documents", "{}", "application/json"));          // 401
  // Oversized headers are refused by the HTTP layer before routing: counted as incomplete.
  testing::RawConnection raw(server.port());
  ASSERT_TRUE(raw.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 << 10, 'a') +
                       "\r\n\r\n"));
  const std::string refused = raw.ReadResponse();
  EXPECT_EQ(testing::StatusOf(refused) / 100, 4) << refused;
  EXPECT_TRUE(raw.ClosedByPeer());
  // The connection's end is recorded by the server's polling thread: poll a bounded number of
  // times for it.
  std::string m;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto metrics = client->Get("/metrics");
    ASSERT_TRUE(metrics);
    m = metrics->body;
    if (testing::MetricValue(m, "neardup_http_incomplete_requests_total") >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(m.find(R"(neardup_http_requests_total{endpoint="none",code="4xx"} 2)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(R"(neardup_http_requests_total{endpoint="query",code="4xx"} 2)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(R"(neardup_http_requests_total{endpoint="add",code="4xx"} 1)"),
            std::string::npos)
      << m;
  EXPECT_GE(testing::MetricValue(m, "neardup_http_incomplete_requests_total"), 1) << m;
}

TEST_F(ServerApiTest, ASecondServerOnTheSamePortFailsWithAddressInUse) {
  ServerProcess first(dir_, {});
  const std::string command = std::string(NEARDUP_BINARY) + " serve " + dir_ + "_second --port " +
                              std::to_string(first.port()) + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[256];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) output += buf;
  const int status = ::pclose(pipe);
  fs::remove_all(dir_ + "_second");
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(output.find("address in use"), std::string::npos) << output;
  EXPECT_EQ(output.find("listening"), std::string::npos) << output;
  // The first server still answers.
  auto health = first.Client()->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace neardup
