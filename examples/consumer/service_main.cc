// A minimal program built against an installed neardup::service (find_package): opens a store in
// a scratch directory, starts the HTTP service on a free loopback port, asks it for /healthz over
// a plain socket and stops it. Exits non-zero if anything fails.
#include <arpa/inet.h>
#include <neardup/server.h>
#include <neardup/store.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

int main() {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("neardup_service_consumer_" + std::to_string(getpid()));
  neardup::StoreOptions store_options;
  store_options.rule = neardup::StoreRule::kSimHash;  // this server takes bare fingerprints
  auto store = neardup::DocumentStore::Open(dir.string(), store_options);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  neardup::service::ServerOptions options;
  options.port = 0;
  options.threads = 1;
  options.workers = 1;
  auto server = neardup::service::Server::Create(store->get(), nullptr, options);
  if (!server.ok() || !(*server)->Bind().ok()) return 1;
  std::thread runner([&] { (void)(*server)->Run(); });

  std::string reply;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>((*server)->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    (void)!::write(fd, request.data(), request.size());
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) reply.append(buffer, n);
  }
  ::close(fd);
  (*server)->Stop();
  runner.join();
  const bool closed = (*store)->Close().ok();
  std::filesystem::remove_all(dir);
  std::printf("service: /healthz answered \"%s\"\n", reply.substr(0, reply.find('\r')).c_str());
  return closed && reply.rfind("HTTP/1.1 200", 0) == 0 ? 0 : 1;
}
