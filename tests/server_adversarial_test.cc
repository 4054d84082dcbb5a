// Adversarial tests of `neardup serve`: each attack a hostile client on the network could make is
// run against the real binary on 127.0.0.1 (gzip bombs, chunked and oversized bodies, slowloris
// headers and bodies, thousands of idle keep-alive connections next to busy clients, SIGTERM with
// slow clients connected). Each asserts that the server refuses or cuts off the attacker, keeps
// answering /healthz (each probe within the client's 5 s read budget) and keeps its memory
// bounded. Every loop is bounded in iterations; a test never waits for an unbounded time.
//
// NEARDUP_IDLE_CONNECTIONS and NEARDUP_CONCURRENT_CLIENTS scale the connection test up
// (bench/serve_connections.sh runs it with 10,000 and 1,000).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "neardup/store.h"
#include "server_process.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing::RawConnection;
using testing::ServerProcess;
using testing::StatusOf;
using Clock = std::chrono::steady_clock;

class ServerAdversarialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("neardup_adversarial_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// `zeros` zero bytes compressed as one gzip stream, built piece by piece.
std::string GzipOfZeros(size_t zeros) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 1, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY), Z_OK);  // fast
  const std::string piece(1 << 20, '\0');
  std::string out;
  char buf[1 << 16];
  size_t left = zeros;
  do {
    const size_t n = std::min(left, piece.size());
    left -= n;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
    z.avail_in = static_cast<uInt>(n);
    int rc;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof(buf);
      rc = deflate(&z, left == 0 ? Z_FINISH : Z_NO_FLUSH);
      out.append(buf, sizeof(buf) - z.avail_out);
    } while (z.avail_out == 0 || (left == 0 && rc != Z_STREAM_END));
  } while (left > 0);
  deflateEnd(&z);
  return out;
}

std::string Metrics(const ServerProcess& server) {
  auto res = server.Client()->Get("/metrics");
  return res ? res->body : std::string();
}

// One /healthz over a fresh connection; true if it answered 200 within `budget_ms`.
bool HealthzAnswers(int port, int budget_ms = 5000) {
  RawConnection c(port, budget_ms);
  if (!c.ok() || !c.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) return false;
  return StatusOf(c.ReadResponse()) == 200;
}

TEST_F(ServerAdversarialTest, GzipBombIsRefusedFromHeadersOrCutOffAtTheLimit) {
  ServerProcess server(dir_, {"--no-text", "--token", "t", "--max-body-bytes", "1048576"});
  const long hwm_before = server.MemoryKb("VmHWM");
  // 256 MiB inflated from ~1.1 MB sent: inflating it whole would take 256 times the limit.
  const std::string bomb = GzipOfZeros(size_t(256) << 20);
  ASSERT_LT(bomb.size(), 2u << 20);
  const std::string headers =
      "POST /v1/documents HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
      "Content-Length: " +
      std::to_string(bomb.size()) + "\r\n";
  {
    // Wrong token: 401 from the headers; the body is never read.
    RawConnection c(server.port());
    ASSERT_TRUE(c.Send(headers + "Authorization: Bearer wrong\r\n\r\n"));
    c.Send(bomb);  // may fail: the server stops reading
    const std::string response = c.ReadResponse();
    EXPECT_EQ(StatusOf(response), 401) << response.substr(0, 300);
  }
  EXPECT_EQ(testing::MetricValue(Metrics(server), "neardup_http_body_bytes_total"), 0);
  {
    // Right token: inflated as it arrives and refused at 1 MiB of decoded bytes.
    RawConnection c(server.port());
    ASSERT_TRUE(c.Send(headers + "Authorization: Bearer t\r\n\r\n"));
    c.Send(bomb);
    const std::string response = c.ReadResponse();
    EXPECT_EQ(StatusOf(response), 413) << response.substr(0, 300);
  }
  const long hwm_after = server.MemoryKb("VmHWM");
  std::printf(
      "gzip bomb (%zu bytes inflating to 256 MiB): server peak RSS %ld kB before, %ld kB "
      "after\n",
      bomb.size(), hwm_before, hwm_after);
  EXPECT_LT(hwm_after - hwm_before, 64 * 1024) << "the bomb was inflated";
  EXPECT_TRUE(HealthzAnswers(server.port()));
}

TEST_F(ServerAdversarialTest, ChunkedAndOversizedBodiesStopAtTheLimit) {
  ServerProcess server(dir_, {"--no-text", "--max-body-bytes", "1048576"});
  const long hwm_before = server.MemoryKb("VmHWM");
  auto chunked = [](size_t total, size_t chunk) {
    std::string out;
    const std::string data(chunk, ' ');
    char size_line[32];
    std::snprintf(size_line, sizeof(size_line), "%zx\r\n", chunk);
    for (size_t sent = 0; sent < total; sent += chunk) out += size_line + data + "\r\n";
    return out + "0\r\n\r\n";
  };
  const std::string head =
      "POST /v1/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  {
    // 4 MiB in 64 KiB chunks, limit 1 MiB: 413.
    RawConnection c(server.port());
    ASSERT_TRUE(c.Send(head));
    c.Send(chunked(4u << 20, 64u << 10));
    const std::string response = c.ReadResponse();
    EXPECT_EQ(StatusOf(response), 413) << response.substr(0, 300);
  }
  {
    // Content-Length far over the limit: 413 before any body byte is sent.
    RawConnection c(server.port());
    ASSERT_TRUE(
        c.Send("POST /v1/documents HTTP/1.1\r\nHost: x\r\nContent-Length: "
               "1000000000000000000\r\n\r\n"));
    const std::string response = c.ReadResponse();
    EXPECT_EQ(StatusOf(response), 413) << response.substr(0, 300);
  }
  const double read_before = testing::MetricValue(Metrics(server), "neardup_http_body_bytes_total");
  {
    // 256 MiB chunked: the server stops reading (413 or a dropped connection), it does not read
    // the whole body.
    RawConnection c(server.port());
    ASSERT_TRUE(c.Send(head));
    const std::string block = chunked(8u << 20, 64u << 10);
    const std::string body = block.substr(0, block.size() - 5);  // without the final chunk
    for (int i = 0; i < 32 && c.Send(body); ++i) {
    }
    c.Send("0\r\n\r\n");
    const std::string response = c.ReadResponse();
    EXPECT_TRUE(response.empty() || StatusOf(response) == 413) << response.substr(0, 300);
  }
  const double read_after = testing::MetricValue(Metrics(server), "neardup_http_body_bytes_total");
  std::printf("256 MiB chunked body, 1 MiB limit: server read %.0f body bytes\n",
              read_after - read_before);
  EXPECT_LT(read_after - read_before, 8.0 * (1 << 20));  // limit + 4 MiB discard budget + buffers
  const long hwm_after = server.MemoryKb("VmHWM");
  EXPECT_LT(hwm_after - hwm_before, 64 * 1024);
  EXPECT_TRUE(HealthzAnswers(server.port()));
}

TEST_F(ServerAdversarialTest, SlowlorisHeadersAndBodiesAreCutAtTheRequestDeadline) {
  ServerProcess server(dir_, {"--no-text", "--request-timeout", "2"});
  constexpr int kSlowClients = 50;
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < kSlowClients; ++i) {
    slow.push_back(std::make_unique<RawConnection>(server.port(), 1000));
    ASSERT_TRUE(slow.back()->ok());
    if (i % 2 == 0) {
      slow.back()->Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ");  // headers, trickled
    } else {
      slow.back()->Send("POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n");
    }
  }
  // Trickle one byte (headers) or 1 KiB (bodies) per connection every 250 ms, for at most 8 s
  // (the bodies would need 250 s), while /healthz is probed.
  std::vector<bool> closed(kSlowClients, false);
  std::atomic<int> healthz_ok{0}, healthz_failed{0};
  std::atomic<bool> done{false};
  std::thread prober([&] {
    for (int i = 0; i < 40 && !done.load(); ++i) {
      (HealthzAnswers(server.port()) ? healthz_ok : healthz_failed).fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const std::string kib(1024, 'x');
  for (int round = 0; round < 32; ++round) {
    int open = 0;
    for (int i = 0; i < kSlowClients; ++i) {
      if (closed[i]) continue;
      if (!slow[i]->Send(i % 2 == 0 ? std::string_view("a") : std::string_view(kib))) {
        closed[i] = true;
      } else {
        ++open;
      }
    }
    if (open == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  done.store(true);
  prober.join();
  int cut = 0;
  for (int i = 0; i < kSlowClients; ++i) {
    if (closed[i] || slow[i]->ClosedByPeer()) ++cut;
  }
  std::printf(
      "slowloris: %d of %d slow connections closed by the server; /healthz %d ok, %d failed\n", cut,
      kSlowClients, healthz_ok.load(), healthz_failed.load());
  EXPECT_EQ(cut, kSlowClients);
  EXPECT_EQ(healthz_failed.load(), 0);
  EXPECT_GT(healthz_ok.load(), 0);
  EXPECT_GE(testing::MetricValue(Metrics(server), "neardup_http_timeouts_total"), kSlowClients);
}

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && std::atoi(value) > 0 ? std::atoi(value) : fallback;
}

TEST_F(ServerAdversarialTest, IdleKeepAliveConnectionsCostASocketNotAWorker) {
  const int idle = EnvInt("NEARDUP_IDLE_CONNECTIONS", 1000);
  const int concurrent = EnvInt("NEARDUP_CONCURRENT_CLIENTS", 200);
  const int per_client = 20;
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < rlim_t(idle + concurrent + 100)) {
    GTEST_SKIP() << "open-file limit " << limit.rlim_cur << " is too low for " << idle
                 << " idle and " << concurrent << " concurrent connections";
  }
  ServerProcess server(dir_, {"--no-text", "--idle-timeout", "300"});
  const long rss_before = server.MemoryKb("VmRSS");
  // Idle keep-alive connections: each made one request and then stays open, silent.
  std::vector<std::unique_ptr<RawConnection>> idle_connections;
  for (int i = 0; i < idle; ++i) {
    auto c = std::make_unique<RawConnection>(server.port());
    ASSERT_TRUE(c->ok()) << "connection " << i;
    ASSERT_TRUE(c->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_EQ(StatusOf(c->ReadResponse()), 200) << "idle connection " << i;
    idle_connections.push_back(std::move(c));
  }
  const long rss_idle = server.MemoryKb("VmRSS");
  // Busy clients, each on its own keep-alive connection: queries and adds.
  std::atomic<int> ok{0}, failed{0};
  std::atomic<bool> busy_done{false};
  std::vector<double> healthz_ms;
  std::thread prober([&] {
    RawConnection c(server.port());
    for (int i = 0; i < 2000 && !busy_done.load(); ++i) {
      const auto start = Clock::now();
      if (!c.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") ||
          StatusOf(c.ReadResponse()) != 200) {
        healthz_ms.push_back(1e9);
        break;
      }
      healthz_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<std::thread> clients;
  for (int t = 0; t < concurrent; ++t) {
    clients.emplace_back([&, t] {
      RawConnection c(server.port(), 30000);
      std::mt19937_64 rng(t);
      for (int i = 0; i < per_client; ++i) {
        char fp[17];
        std::snprintf(fp, sizeof(fp), "%016llx", static_cast<unsigned long long>(rng()));
        std::string request;
        if (i % 5 == 0) {
          const std::string body = std::string(R"({"id":"c)") + std::to_string(t) + "-" +
                                   std::to_string(i) + R"(","fingerprint":")" + fp + "\"}";
          request = "POST /v1/documents HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
        } else {
          request =
              std::string("GET /v1/query?k=3&fingerprint=") + fp + " HTTP/1.1\r\nHost: x\r\n\r\n";
        }
        if (c.Send(request) && StatusOf(c.ReadResponse()) == 200) {
          ok.fetch_add(1);
        } else {
          failed.fetch_add(1);
          return;
        }
      }
    });
  }
  for (auto& th : clients) th.join();
  busy_done.store(true);
  prober.join();
  // The idle connections are still served.
  int idle_alive = 0;
  const int sample = std::min(idle, 100);
  for (int i = 0; i < sample; ++i) {
    RawConnection& c = *idle_connections[size_t(i) * idle_connections.size() / sample];
    if (c.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") && StatusOf(c.ReadResponse()) == 200) {
      ++idle_alive;
    }
  }
  std::vector<double> sorted = healthz_ms;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double p) {
    return sorted.empty() ? -1.0 : sorted[std::min(sorted.size() - 1, size_t(p * sorted.size()))];
  };
  std::printf(
      "%d idle keep-alive + %d concurrent clients x %d requests: %d ok, %d failed; /healthz "
      "during load: %zu probes, p50 %.2f ms, p99 %.2f ms, max %.2f ms; idle still served %d/%d; "
      "server RSS %ld kB before, %ld kB with the idle connections\n",
      idle, concurrent, per_client, ok.load(), failed.load(), sorted.size(), pct(0.5), pct(0.99),
      sorted.empty() ? -1.0 : sorted.back(), idle_alive, sample, rss_before, rss_idle);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(ok.load(), concurrent * per_client);
  EXPECT_EQ(idle_alive, sample);
  ASSERT_FALSE(sorted.empty());
  EXPECT_LT(sorted.back(), 1e9) << "a /healthz probe failed during the load";
  // Memory per idle connection stays small (no buffer is held between requests).
  EXPECT_LT(rss_idle - rss_before, long(idle) * 64 + 64 * 1024);
}

TEST_F(ServerAdversarialTest, SigtermDrainsWithADeadlineDespiteSlowAndIdleClients) {
  ServerProcess server(dir_, {"--no-text", "--shutdown-timeout", "1", "--request-timeout", "120",
                              "--idle-timeout", "120"});
  auto client = server.Client();
  auto added = client->Post("/v1/documents", R"({"id":"kept","fingerprint":"00000000000000ff"})",
                            "application/json");
  ASSERT_TRUE(added);
  ASSERT_EQ(added->status, 200);
  RawConnection idle(server.port());
  ASSERT_TRUE(idle.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_EQ(StatusOf(idle.ReadResponse()), 200);
  RawConnection slow_headers(server.port());
  ASSERT_TRUE(slow_headers.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a"));
  RawConnection slow_body(server.port());
  ASSERT_TRUE(
      slow_body.Send("POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = Clock::now();
  // 30 s is a hang detector, far above the 1 s shutdown timeout.
  const int status = server.Terminate(std::chrono::seconds(30));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("SIGTERM with an idle, a slow-header and a slow-body client: exit %d after %.2f s\n",
              status, seconds);
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(idle.ClosedByPeer());
  EXPECT_TRUE(slow_body.ClosedByPeer());
  auto store = DocumentStore::Open(dir_, {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->Get("kept").ok());
}

}  // namespace
}  // namespace neardup
