// Issue 24's attacks on `neardup serve`, each sent on a raw socket to the real binary: request
// smuggling (ambiguous Content-Length / Transfer-Encoding framing followed by a smuggled DELETE),
// NUL bytes in a header value or the target, a missing or repeated Host, transfer codings,
// malformed Content-Length values (one clean reply, never two header blocks), repeated query
// parameters, invalid UTF-8 in ids, a request line trickled from its first byte (the deadline runs
// from there), and the memory amplifications: /v1/check without a limit, a reply larger than
// max_response_bytes, slow readers holding replies (the buffer budget answers 503), and gzip
// bodies to read endpoints (max_query_body_bytes, applied while inflating). The same requests
// are in fuzz/corpus/http_server/ as seeds.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <thread>

#include "server_process.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing::RawConnection;
using testing::ServerProcess;
using testing::StatusOf;
using Clock = std::chrono::steady_clock;

class ServerHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_hostile_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// Everything the server sends on a connection until it closes it (or `timeout_ms` passes; then
// "<open>" is appended).
std::string ReadUntilClosed(RawConnection& c) {
  std::string data;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(c.fd(), buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return data;
    if (n < 0) return data + "<open>";
    data.append(buf, static_cast<size_t>(n));
  }
}

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Sends `request` on a new connection; returns all the server sent before closing it.
std::string Exchange(int port, const std::string& request, int timeout_ms = 5000) {
  RawConnection c(port, timeout_ms);
  EXPECT_TRUE(c.ok());
  c.Send(request);
  return ReadUntilClosed(c);
}

int GetStatus(const ServerProcess& server, const std::string& path) {
  auto res = server.Client()->Get(path);
  return res ? res->status : 0;
}

void AddText(const ServerProcess& server, const std::string& id, const std::string& text,
             const std::string& metadata = "") {
  std::string body = R"({"id":")" + id + R"(","text":")" + text + "\"";
  if (!metadata.empty()) body += R"(,"metadata":")" + metadata + "\"";
  body += "}";
  auto res = server.Client()->Post("/v1/documents", body, "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
}

const std::string kSmuggled = "DELETE /v1/documents?id=victim HTTP/1.1\r\nHost: x\r\n\r\n";

// (a), (b), (c) of the issue, and their mirror images: the server must answer 400 and close, so
// that the smuggled DELETE never runs, whichever length a proxy in front would have used.
TEST_F(ServerHostileTest, AmbiguousFramingIsRefusedAndNothingIsSmuggled) {
  ServerProcess server(dir_, {});
  AddText(server, "victim", "the victim document stays");
  const std::string n = std::to_string(kSmuggled.size());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"two Content-Length values",
       "POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: " + n +
           "\r\n\r\n" + kSmuggled},
      {"two Content-Length values, the longer first",
       "POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: " + n +
           "\r\nContent-Length: 0\r\n\r\n" + kSmuggled},
      {"space before the colon",
       "POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length : " + n + "\r\n\r\n" + kSmuggled},
      {"Content-Length with chunked", "POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                          std::to_string(kSmuggled.size() + 5) +
                                          "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
                                          kSmuggled},
      {"chunked with Content-Length",
       "POST /v1/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n"
       "\r\n0\r\n\r\n" +
           kSmuggled},
      {"chunked not last",
       "POST /v1/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, "
       "identity\r\n\r\n0\r\n\r\n" +
           kSmuggled},
      {"folded Content-Length",
       "POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nX-A: b\r\n " + n + "\r\n\r\n" +
           kSmuggled},
  };
  for (const auto& [name, request] : cases) {
    const std::string reply = Exchange(server.port(), request);
    EXPECT_EQ(StatusOf(reply), 400) << name << ": " << reply.substr(0, 300);
    EXPECT_EQ(Count(reply, "HTTP/1.1 "), 1) << name << ": one reply, then the connection closes";
    EXPECT_NE(RawConnection::Lower(reply).find("connection: close"), std::string::npos) << name;
    EXPECT_EQ(reply.find("<open>"), std::string::npos) << name << ": left open";
    ASSERT_EQ(GetStatus(server, "/v1/documents/victim"), 200) << name << ": DELETE was smuggled";
  }
}

TEST_F(ServerHostileTest, NulBytesInAHeaderValueOrTheTargetAreRefused) {
  ServerProcess server(dir_, {"--token", "t", "--auth-reads"});
  using namespace std::string_literals;
  const std::string nul_auth =
      "GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\0junk\r\n\r\n"s;
  const std::string nul_target = "GET /healthz\0/x HTTP/1.1\r\nHost: x\r\n\r\n"s;
  const std::string nul_name = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A\0: b\r\n\r\n"s;
  for (const std::string& request : {nul_auth, nul_target, nul_name}) {
    const std::string reply = Exchange(server.port(), request);
    EXPECT_EQ(StatusOf(reply), 400) << reply.substr(0, 300);
    EXPECT_EQ(Count(reply, "HTTP/1.1 "), 1);
  }
  // The real token still works.
  RawConnection ok(server.port());
  ok.Send("GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n");
  EXPECT_EQ(StatusOf(ok.ReadResponse()), 200);
}

TEST_F(ServerHostileTest, Http11NeedsExactlyOneHost) {
  ServerProcess server(dir_, {"--no-text"});
  EXPECT_EQ(StatusOf(Exchange(server.port(), "GET /healthz HTTP/1.1\r\n\r\n")), 400);
  EXPECT_EQ(
      StatusOf(Exchange(server.port(), "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")),
      400);
  // HTTP/1.0 needs none, and its connection closes after the reply.
  EXPECT_EQ(StatusOf(Exchange(server.port(), "GET /healthz HTTP/1.0\r\n\r\n")), 200);
}

// A reply to HEAD carries no body (else the client would read the body as the next reply), and an
// absolute-form target is served by its path.
TEST_F(ServerHostileTest, HeadGetsNoBodyAndAbsoluteFormIsServed) {
  ServerProcess server(dir_, {"--no-text"});
  RawConnection c(server.port());
  c.Send(
      "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET http://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string head;
  char byte;
  while (head.find("\r\n\r\n") == std::string::npos && ::recv(c.fd(), &byte, 1, 0) == 1) {
    head += byte;
  }
  EXPECT_EQ(StatusOf(head), 405) << head;
  const std::string next = c.ReadResponse();  // the very next bytes are the GET's reply
  EXPECT_EQ(StatusOf(next), 200) << next;
}

TEST_F(ServerHostileTest, TransferCodingsAreAnsweredAtOnce) {
  ServerProcess server(dir_, {"--no-text"});
  const auto start = Clock::now();
  const std::string gzip_chunked = Exchange(
      server.port(),
      "POST /v1/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(StatusOf(gzip_chunked), 501) << gzip_chunked;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3)) << "no answer for the request deadline";
  const std::string chunked_twice = Exchange(
      server.port(),
      "POST /v1/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(StatusOf(chunked_twice), 400) << chunked_twice;
  // TE (what the client accepts in replies) is no framing at all: served as usual.
  RawConnection te(server.port());
  te.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nTE: identity\r\n\r\n");
  EXPECT_EQ(StatusOf(te.ReadResponse()), 200);
  // A well-formed chunked body still works, on a connection that stays open.
  RawConnection chunked(server.port());
  const std::string body = R"({"fingerprint":"0000000000000000"})";
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", body.size());
  chunked.Send("POST /v1/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
               std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_EQ(StatusOf(chunked.ReadResponse()), 200);
  chunked.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(StatusOf(chunked.ReadResponse()), 200);
}

TEST_F(ServerHostileTest, MalformedContentLengthGetsOneCleanReply) {
  ServerProcess server(dir_, {"--no-text"});
  const std::string body = R"({"fingerprint":"0000000000000000","k":3})";
  for (const char* value : {"-1", "+44", "0x2c", "44, 44", "4 4", "", "99999999999999999999999"}) {
    const std::string reply =
        Exchange(server.port(), "POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                    std::string(value) + "\r\n\r\n" + body);
    EXPECT_EQ(StatusOf(reply), 400) << value << ": " << reply;
    EXPECT_EQ(Count(reply, "HTTP/1.1 "), 1) << value << ": " << reply;
    // The body is exactly what Content-Length says, and JSON.
    const size_t end = reply.find("\r\n\r\n");
    ASSERT_NE(end, std::string::npos);
    const size_t at = RawConnection::Lower(reply).find("content-length: ");
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(std::stoul(reply.substr(at + 16)), reply.size() - end - 4) << value;
    EXPECT_EQ(reply[end + 4], '{') << value;
  }
}

TEST_F(ServerHostileTest, RepeatedParametersAndInvalidUtf8IdsAreRefused) {
  ServerProcess server(dir_, {"--no-text"});
  auto client = server.Client();
  auto repeated = client->Get("/v1/query?fingerprint=0000000000000000&k=3&k=4");
  ASSERT_TRUE(repeated);
  EXPECT_EQ(repeated->status, 400) << repeated->body;
  EXPECT_NE(repeated->body.find("k: given more than once"), std::string::npos) << repeated->body;
  for (const char* path : {"/v1/documents?id=%ff%fe", "/v1/documents/%C3%28", "/v1/documents/%",
                           "/v1/documents?id=a%00b"}) {
    auto res = client->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 400) << path << ": " << res->body;
  }
  // Valid escapes still work: a missing document is 404.
  auto valid = client->Get("/v1/documents/%E4%B8%AD%20x");
  ASSERT_TRUE(valid);
  EXPECT_EQ(valid->status, 404) << valid->body;
}

// The request deadline runs from the first byte of a request, however slowly the request line and
// headers come: a connection trickling one byte every 300 ms is closed after --request-timeout.
TEST_F(ServerHostileTest, HeadersTrickledFromTheFirstByteAreCutAtTheDeadline) {
  ServerProcess server(dir_, {"--no-text", "--request-timeout", "2", "--idle-timeout", "30"});
  RawConnection c(server.port(), 500);
  ASSERT_TRUE(c.ok());
  const std::string request =
      "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + std::string(100, 'a') + "\r\n\r\n";
  const auto start = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < request.size() && !closed; ++i) {
    if (!c.Send(request.substr(i, 1))) closed = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    char byte;
    const ssize_t n = ::recv(c.fd(), &byte, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) closed = true;
    if (Clock::now() - start > std::chrono::seconds(10)) break;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("trickled head: closed=%d after %.1f s (deadline 2 s)\n", closed, seconds);
  EXPECT_TRUE(closed);
  EXPECT_LT(seconds, 4.5);
}

// Texts with no feature (whitespace, markup or control characters only) used to share the
// all-zero fingerprint, so the second was never admitted. They are refused, 400 "no features".
TEST_F(ServerHostileTest, TextsWithoutFeaturesAreRefused) {
  ServerProcess server(dir_, {});
  auto client = server.Client();
  for (const char* text : {" ", "\\n\\t", "<b></b>", "<script>x</script>"}) {
    const std::string body = std::string(R"({"id":"x","text":")") + text + "\"}";
    for (const char* path : {"/v1/documents", "/v1/check"}) {
      auto res = client->Post(path, body, "application/json");
      ASSERT_TRUE(res);
      EXPECT_EQ(res->status, 400) << path << " " << text << ": " << res->body;
      EXPECT_NE(res->body.find("no features"), std::string::npos) << res->body;
    }
  }
  auto stats = client->Get("/v1/stats");
  ASSERT_TRUE(stats);
  EXPECT_NE(stats->body.find(R"("documents":0)"), std::string::npos) << stats->body;
}

// /v1/check lists at most `limit` duplicates (default 100) and says when it cut the list.
TEST_F(ServerHostileTest, CheckHasALimitAndSaysTruncated) {
  ServerProcess server(dir_, {});
  for (int i = 0; i < 12; ++i) AddText(server, "copy" + std::to_string(i), "the very same text");
  auto client = server.Client();
  auto limited = client->Post(
      "/v1/check", R"({"id":"probe","text":"the very same text","add":"never","limit":5})",
      "application/json");
  ASSERT_TRUE(limited);
  ASSERT_EQ(limited->status, 200) << limited->body;
  EXPECT_EQ(Count(limited->body, R"("id":"copy)"), 5) << limited->body;
  EXPECT_NE(limited->body.find(R"("truncated":true)"), std::string::npos) << limited->body;
  auto all =
      client->Post("/v1/check", R"({"id":"probe","text":"the very same text","add":"never"})",
                   "application/json");
  ASSERT_TRUE(all);
  EXPECT_EQ(Count(all->body, R"("id":"copy)"), 12) << all->body;
  EXPECT_NE(all->body.find(R"("truncated":false)"), std::string::npos) << all->body;
  auto too_many = client->Post(
      "/v1/check", R"({"id":"probe","text":"the very same text","add":"never","limit":10001})",
      "application/json");
  ASSERT_TRUE(too_many);
  EXPECT_EQ(too_many->status, 400) << too_many->body;
}

// A reply never holds more than --max-response-bytes: longer result lists are cut and marked.
TEST_F(ServerHostileTest, RepliesAreCutAtMaxResponseBytes) {
  ServerProcess server(dir_, {"--max-response-bytes", "4096"});
  const std::string metadata(500, 'm');
  for (int i = 0; i < 20; ++i) {
    AddText(server, "doc" + std::to_string(i), "one text for all of them", metadata);
  }
  auto client = server.Client();
  auto query = client->Post("/v1/query", R"({"text":"one text for all of them","limit":100})",
                            "application/json");
  ASSERT_TRUE(query);
  ASSERT_EQ(query->status, 200) << query->body;
  EXPECT_LE(query->body.size(), 4096u + 200u);
  EXPECT_GE(Count(query->body, R"("id":"doc)"), 5);
  EXPECT_LT(Count(query->body, R"("id":"doc)"), 20);
  EXPECT_NE(query->body.find(R"("truncated":true)"), std::string::npos);
  auto check =
      client->Post("/v1/check", R"({"id":"p","text":"one text for all of them","add":"never"})",
                   "application/json");
  ASSERT_TRUE(check);
  EXPECT_LE(check->body.size(), 4096u + 300u);
  EXPECT_NE(check->body.find(R"("truncated":true)"), std::string::npos);
}

// Twenty unauthenticated clients ask for 8 MB replies (more than the kernel's socket buffers take)
// and never read them. The replies held for them, and the searches' working memory, stay within
// --max-buffered-bytes (later ones get 503), RSS stays bounded, and /healthz (a small reply) keeps
// answering.
TEST_F(ServerHostileTest, SlowReadersCannotHoldMoreThanTheBufferBudget) {
  ServerProcess server(dir_, {"--max-response-bytes", "8388608", "--max-buffered-bytes", "33554432",
                              "--token", "t"});
  const std::string metadata(4000, 'm');
  {
    std::string batch = R"({"documents":[)";
    for (int i = 0; i < 2000; ++i) {
      if (i > 0) batch += ",";
      batch += R"({"id":"d)" + std::to_string(i) +
               R"(","text":"a slow reader's favourite text","metadata":")" + metadata + "\"}";
    }
    batch += "]}";
    httplib::Headers auth = {{"Authorization", "Bearer t"}};
    auto res = server.Client()->Post("/v1/documents", auth, batch, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body.substr(0, 300);
  }
  const long rss_before = server.MemoryKb("VmRSS");
  const std::string query =
      "GET /v1/query?text=a+slow+reader%27s+favourite+text&k=3&limit=2000 HTTP/1.1\r\nHost: x"
      "\r\n\r\n";
  std::vector<std::unique_ptr<RawConnection>> readers;
  for (int i = 0; i < 20; ++i) {
    readers.push_back(std::make_unique<RawConnection>(server.port(), 2000));
    int small = 4096;  // a small receive window, never read: the server keeps the reply
    ::setsockopt(readers.back()->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    ASSERT_TRUE(readers.back()->Send(query));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const long rss_during = server.MemoryKb("VmRSS");
  RawConnection probe(server.port(), 5000);
  probe.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(StatusOf(probe.ReadResponse()), 200);
  auto metrics = server.Client()->Get("/metrics");
  ASSERT_TRUE(metrics);
  const double buffered = testing::MetricValue(metrics->body, "neardup_http_buffered_bytes");
  const double refused = testing::MetricValue(metrics->body, "neardup_http_buffer_full_total");
  std::printf(
      "slow readers: RSS %ld kB before, %ld kB with 20 unread 8 MB replies; %.0f bytes "
      "buffered, %.0f refused with 503\n",
      rss_before, rss_during, buffered, refused);
  EXPECT_GT(buffered, 0);
  EXPECT_LE(buffered, 33554432 + 20 * 65536);
  EXPECT_GE(refused, 10);
  EXPECT_LT(rss_during - rss_before, 96 * 1024);
}

std::string Gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Reads need small bodies: a gzip body to /v1/query (no token needed) is refused once its
// inflated bytes pass --max-query-body-bytes (1 MiB by default), not after 64 MiB.
TEST_F(ServerHostileTest, ReadBodiesAreLimitedWhileInflating) {
  ServerProcess server(dir_, {"--no-text", "--token", "t"});
  const std::string bomb = Gzip(std::string(size_t(64) << 20, ' '));
  const long hwm_before = server.MemoryKb("VmHWM");
  std::vector<std::thread> senders;
  std::atomic<int> refused{0};
  for (int i = 0; i < 8; ++i) {
    senders.emplace_back([&] {
      RawConnection c(server.port());
      c.Send("POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: " +
             std::to_string(bomb.size()) + "\r\n\r\n");
      c.Send(bomb);
      const std::string reply = c.ReadResponse();
      if (StatusOf(reply) == 413 && reply.find("max_query_body_bytes") != std::string::npos) {
        refused.fetch_add(1);
      }
    });
  }
  for (std::thread& t : senders) t.join();
  const long hwm_after = server.MemoryKb("VmHWM");
  std::printf("8 gzip bodies inflating to 64 MiB each to /v1/query: peak RSS %ld -> %ld kB\n",
              hwm_before, hwm_after);
  EXPECT_EQ(refused.load(), 8);
  EXPECT_LT(hwm_after - hwm_before, 48 * 1024);
}

}  // namespace
}  // namespace neardup
