// libFuzzer target for the whole HTTP layer: each input is sent as raw bytes over a loopback
// connection to an in-process neardup server (Beast's parser and our framing rules for request
// lines, headers and chunked framing; our routing, auth, body limits, gzip/deflate decoding,
// request parsing and store calls), then the connection is half-closed and the reply read. The
// server must never crash, hang or trip a sanitizer. Inputs that start with "@" get a valid request
// line and headers prefixed, so the fuzzer spends its time in bodies and encodings too. The seeds
// in fuzz/corpus/http_server hold issue 24's raw-socket attacks (smuggling framings, NUL bytes,
// Host, transfer codings, malformed Content-Length, repeated parameters, invalid UTF-8 ids).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "neardup/fingerprinter.h"
#include "neardup/server.h"
#include "neardup/sketch.h"
#include "neardup/store.h"

// The fuzzed server has no text fingerprinter or sketcher (text requests get 501), so the text
// stages are not linked into this target; the server code still references these members.
neardup::Result<neardup::Fingerprint> neardup::Fingerprinter::Compute(std::string_view) const {
  return Status::Unsupported("no text fingerprinter in the fuzz target");
}
neardup::Status neardup::DocumentSketcher::Sketch(std::string_view, Fingerprint*,
                                                  DocumentSketch*) const {
  return Status::Unsupported("no text sketcher in the fuzz target");
}
const neardup::Fingerprinter& neardup::DocumentSketcher::fingerprinter() const { std::abort(); }

namespace {

struct Instance {
  std::unique_ptr<neardup::DocumentStore> store;
  std::unique_ptr<neardup::service::Server> server;
  std::thread thread;
  int port = -1;
};

Instance* Start() {
  auto* instance = new Instance();
  static std::string made;
  for (const char* parent : {"/dev/shm", "/tmp"}) {
    std::string path = std::string(parent) + "/neardup_http_fuzz_XXXXXX";
    if (::mkdtemp(path.data()) != nullptr) {
      made = path;
      break;
    }
  }
  if (made.empty()) std::abort();
  std::atexit([] { std::filesystem::remove_all(made); });
  const char* dir = made.c_str();
  if (dir == nullptr) std::abort();
  neardup::StoreOptions store_options;
  store_options.rule = neardup::StoreRule::kSimHash;  // bare fingerprints
  store_options.sync_mode = neardup::SyncMode::kNone;
  store_options.memtable_limit = 1000;
  auto store = neardup::DocumentStore::Open(std::string(dir) + "/store", store_options);
  if (!store.ok()) std::abort();
  instance->store = std::move(*store);
  neardup::service::ServerOptions options;
  options.port = 0;
  options.threads = 2;
  options.token = "fuzz-token";
  options.max_body_bytes = 1 << 16;
  options.request_timeout_seconds = 2;
  options.idle_timeout_seconds = 2;
  options.limits.max_batch = 16;
  options.limits.max_query_k = 64;
  auto server = neardup::service::Server::Create(instance->store.get(), nullptr, options);
  if (!server.ok()) std::abort();
  instance->server = std::move(*server);
  if (!instance->server->Bind().ok()) std::abort();
  instance->port = instance->server->port();
  instance->thread = std::thread([instance] { (void)instance->server->Run(); });
  return instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Instance* instance = Start();
  std::string request(reinterpret_cast<const char*>(data), size);
  if (!request.empty() && request[0] == '@') {
    // "@" + one selector byte + body: a well-formed head around a fuzzed body.
    static const char* kHeads[] = {
        "POST /v1/documents HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer fuzz-token\r\n"
        "Transfer-Encoding: chunked\r\n\r\n",
        "POST /v1/check HTTP/1.1\r\nHost: f\r\nAuthorization: bearer fuzz-token\r\n"
        "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /v1/query HTTP/1.1\r\nHost: f\r\nContent-Encoding: deflate\r\n"
        "Transfer-Encoding: chunked\r\n\r\n",
        "POST /v1/query HTTP/1.1\r\nHost: f\r\nTransfer-Encoding: chunked\r\n\r\n",
    };
    const size_t selector = request.size() > 1 ? static_cast<uint8_t>(request[1]) % 4 : 0;
    request = kHeads[selector] + request.substr(std::min<size_t>(2, request.size()));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(instance->port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    // Read the reply: up to 2 s for its first byte, then until 20 ms pass without more (the
    // server may keep a half-closed keep-alive connection open until its idle timeout).
    char buf[4096];
    bool got_data = false;
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, got_data ? 20 : 2000) <= 0) break;
      if (::recv(fd, buf, sizeof(buf), 0) <= 0) break;
      got_data = true;
    }
  }
  ::close(fd);
  return 0;
}
