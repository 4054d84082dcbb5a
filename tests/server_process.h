// Test helpers shared by the server tests: a `neardup serve` child process on a free loopback port
// (with its resident memory read from /proc), and raw loopback sockets for requests that an HTTP
// client library would not send (trickled headers, chunked bodies, gzip bombs).
#ifndef NEARDUP_TESTS_SERVER_PROCESS_H_
#define NEARDUP_TESTS_SERVER_PROCESS_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace neardup::testing {

// A `neardup serve DIR --port 0 ...` child process.
class ServerProcess {
 public:
  ServerProcess(const std::string& dir, std::vector<std::string> extra) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<std::string> args = {NEARDUP_BINARY,   "serve", dir, "--port", "0",
                                       "--poll-threads", "4"};
      args.insert(args.end(), extra.begin(), extra.end());
      // The HTTP tests store bare fingerprints: a simhash-rule store unless a test asks for
      // another rule (the dedup rule's tests pass --rule dedup).
      if (std::find(extra.begin(), extra.end(), "--rule") == extra.end()) {
        args.push_back("--rule");
        args.push_back("simhash");
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    // Read the "listening on http://127.0.0.1:PORT ..." line.
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(out[0]);
    const auto start = line.find("127.0.0.1:");
    if (start != std::string::npos) port_ = std::atoi(line.c_str() + start + 10);
    EXPECT_GT(port_, 0) << "server said: " << line;
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Sends SIGTERM and waits at most `max_wait` for the exit; returns the exit status, or -1 if
  // the process was still running then (it is killed).
  int Terminate(std::chrono::seconds max_wait = std::chrono::seconds(60)) {
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // A /proc/PID/status field in kB ("VmRSS", "VmHWM"), or -1.
  long MemoryKb(const std::string& field) const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
    }
    return -1;
  }
  std::unique_ptr<httplib::Client> Client() const {
    auto client = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client->set_read_timeout(10, 0);
    client->set_connection_timeout(10, 0);
    return client;
  }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
};

// A raw TCP connection to 127.0.0.1:port with a receive timeout.
class RawConnection {
 public:
  explicit RawConnection(int port, int receive_timeout_ms = 10000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    timeval tv{receive_timeout_ms / 1000, (receive_timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool ok() const { return fd_ >= 0; }
  // Sends all of `data`; false once the peer has closed or reset the connection.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads one HTTP response (headers plus Content-Length body). Empty on EOF, reset or timeout.
  std::string ReadResponse() {
    std::string data;
    char buf[4096];
    size_t header_end = std::string::npos;
    size_t want = 0;
    for (;;) {
      if (header_end == std::string::npos) {
        header_end = data.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          const size_t at = Lower(data.substr(0, header_end)).find("content-length:");
          want = header_end + 4 + (at == std::string::npos ? 0 : std::atol(data.c_str() + at + 15));
        }
      }
      if (header_end != std::string::npos && data.size() >= want) return data.substr(0, want);
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return header_end == std::string::npos ? std::string() : data;
      data.append(buf, static_cast<size_t>(n));
    }
  }
  // True if the server closed the connection (EOF or reset) within the receive timeout.
  bool ClosedByPeer() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
  int fd() const { return fd_; }

  static std::string Lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

 private:
  int fd_ = -1;
};

// The status code of a raw HTTP response ("HTTP/1.1 413 ..."), or 0.
inline int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.c_str() + 9);
}

// The value of a counter line "name value" in Prometheus text, or -1.
inline double MetricValue(const std::string& metrics, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = metrics.find(key);
  if (at == std::string::npos) return -1;
  return std::atof(metrics.c_str() + at + key.size());
}

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_SERVER_PROCESS_H_
