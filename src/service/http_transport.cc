// HTTP/1.1 transport over Asio and Boost.Beast's request parser; see http_transport.h.
//
// A connection is a Session on its own strand. Its life is a loop: wait until readable (no buffer
// is held while idle), read what is there, parse the head (Beast, header_limit bytes at most),
// check the framing rules, let the application admit it, read the body through the decoder (each
// decoded byte counted against the limit and the global buffer budget), hand it to the
// application, write the reply, and start again with what the client pipelined. One timer per
// connection holds the idle deadline between requests and the whole-request deadline from a
// request's first byte to its reply's last byte. A refused request gets its reply and
// `Connection: close`; the connection then reads and discards at most linger_bytes for a short
// while (so the client reads the reply, not a reset) and closes.
#include "service/http_transport.h"

#include <time.h>

#include <boost/asio.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "common/json_writer.h"

namespace neardup::service {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kInvalidUtf8:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kUnsupported:
      return 501;
    default:
      return 500;
  }
}

std::string ErrorJson(std::string_view code, std::string_view message) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("error").BeginObject().Key("code").String(code).Key("message").String(
      message);
  w.EndObject().EndObject();
  return out;
}

void Reply::Error(int code, std::string_view name, std::string_view message) {
  Json(code, ErrorJson(name, message));
}

void Reply::Error(const Status& s) {
  Error(HttpStatusFor(s.code()), StatusCodeName(s.code()), s.message());
}

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The request head and body as Beast's parser reports them. Body bytes go straight into the
// request's decoder; a decoder error or an exhausted buffer budget stops the parser.
class RequestParser : public http::basic_parser<true> {
 public:
  std::string method;
  std::string target;
  int version = 11;
  std::vector<HeaderField> fields;
  HttpRequest* request = nullptr;       // set once admitted
  std::function<bool(size_t)> reserve;  // takes bytes from the buffer budget; false: exhausted
  Status body_error;
  bool budget_exhausted = false;

 private:
  void on_request_impl(http::verb, beast::string_view method_string, beast::string_view target_,
                       int version_, beast::error_code&) override {
    method.assign(method_string.data(), method_string.size());
    target.assign(target_.data(), target_.size());
    version = version_;
  }
  void on_response_impl(int, beast::string_view, int, beast::error_code& ec) override {
    ec = http::error::bad_method;
  }
  void on_field_impl(http::field, beast::string_view name, beast::string_view value,
                     beast::error_code&) override {
    fields.emplace_back(std::string(name.data(), name.size()),
                        std::string(value.data(), value.size()));
  }
  void on_header_impl(beast::error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, beast::error_code&) override {}
  size_t on_body_impl(beast::string_view body, beast::error_code& ec) override {
    Feed(body, ec);
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, beast::error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, beast::string_view body,
                            beast::error_code& ec) override {
    Feed(body, ec);
    return body.size();
  }
  void on_finish_impl(beast::error_code&) override {}

  void Feed(beast::string_view data, beast::error_code& ec) {
    if (request == nullptr) {
      ec = http::error::body_limit;
      return;
    }
    const size_t before = request->body.body().size();
    body_error = request->body.Append(data.data(), data.size());
    const size_t grown = request->body.body().size() - before;
    if (grown > 0 && !reserve(grown)) budget_exhausted = true;
    if (!body_error.ok() || budget_exhausted) ec = http::error::body_limit;
  }
};

// What a parse error means, for the client.
std::string Describe(const beast::error_code& ec) {
  if (ec == http::error::bad_field) {
    return "malformed header field name (not a token, or whitespace before the colon: RFC 9112 "
           "5.1)";
  }
  if (ec == http::error::bad_value) {
    return "a header field value holds a control character (NUL, CR, LF or another)";
  }
  if (ec == http::error::bad_target) {
    return "the request target holds a byte not allowed there (NUL, space, control)";
  }
  if (ec == http::error::bad_content_length) {
    return "Content-Length: not one number of bytes (RFC 9112 6.3)";
  }
  if (ec == http::error::multiple_content_length) {
    return "Content-Length: given more than once (RFC 9112 6.3)";
  }
  if (ec == http::error::bad_transfer_encoding) {
    return "Transfer-Encoding: with Content-Length, or not ending in chunked (RFC 9112 6.3)";
  }
  if (ec == http::error::bad_line_ending) return "a line ends in a bare CR or LF (RFC 9112 2.2)";
  if (ec == http::error::bad_version) return "malformed request line or HTTP version";
  if (ec == http::error::bad_method) return "malformed method";
  if (ec == http::error::bad_chunk || ec == http::error::bad_chunk_extension) {
    return "malformed chunked framing";
  }
  return ec.message();
}

// The Date header's value, formatted once a second per thread.
const std::string& HttpDate() {
  thread_local time_t cached_at = 0;
  thread_local std::string cached;
  const time_t now = ::time(nullptr);
  if (now != cached_at) {
    char buf[64];
    tm t{};
    ::gmtime_r(&now, &t);
    cached.assign(buf, std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &t));
    cached_at = now;
  }
  return cached;
}

}  // namespace

std::optional<std::string> HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return std::nullopt;
}

int HttpRequest::HeaderCount(std::string_view name) const {
  int n = 0;
  for (const auto& field : headers) n += EqualsIgnoreCase(field.first, name) ? 1 : 0;
  return n;
}

class Session;

struct HttpTransport::Impl {
  HttpTransport* owner;
  HttpApplication* app;
  TransportOptions options;
  TransportCounters& counters;
  std::atomic<int64_t>& in_flight;
  std::atomic<bool> quiescing{false};

  std::mutex sessions_mutex;
  std::unordered_set<Session*> sessions;  // guarded by sessions_mutex

  // One event loop per thread, each connection on one of them (round robin): no lock is shared
  // between threads on the hot path. Declared after what the sessions use: destroyed first, with
  // the handlers they still hold.
  std::vector<std::unique_ptr<asio::io_context>> loops;
  size_t next_loop = 0;  // on loops[0], which accepts
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> accept_retry;
  bool accept_paused = false;  // on loops[0]
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  asio::io_context::executor_type accept_executor() { return loops[0]->get_executor(); }

  Impl(HttpTransport* o, HttpApplication* a, TransportOptions opts)
      : owner(o), app(a), options(opts), counters(o->counters_), in_flight(o->in_flight_) {
    for (int i = 0; i < std::max(1, opts.threads); ++i) {
      loops.push_back(std::make_unique<asio::io_context>(1));
    }
    accept_retry.emplace(accept_executor());
  }

  void Accept();
  void ConnectionClosed();
  // Takes `bytes` from the buffer budget; false (and nothing taken) if that would pass the limit.
  bool Reserve(size_t bytes) {
    uint64_t now = counters.buffered_bytes.load();
    do {
      if (now + bytes > options.max_buffered_bytes) return false;
    } while (!counters.buffered_bytes.compare_exchange_weak(now, now + bytes));
    return true;
  }
  void Release(size_t bytes) { counters.buffered_bytes.fetch_sub(bytes); }
};

// A reply this small is never refused for the buffer budget.
constexpr size_t kSmallReply = 64u << 10;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpTransport::Impl* t, tcp::socket socket)
      : t_(t), socket_(std::move(socket)), timer_(socket_.get_executor()) {}
  ~Session() { Unregister(); }

  void Start() {
    {
      std::lock_guard<std::mutex> lock(t_->sessions_mutex);
      t_->sessions.insert(this);
      registered_ = true;
    }
    beast::error_code ignored;
    socket_.non_blocking(true, ignored);
    socket_.set_option(tcp::no_delay(true), ignored);
    ArmIdle();
    WaitRead();
  }

  // From any thread, with sessions_mutex held: closes the connection if it is between requests
  // (or unconditionally). A session being destroyed is skipped.
  void PostClose(bool only_if_idle) {
    std::shared_ptr<Session> self = weak_from_this().lock();
    if (self == nullptr) return;
    asio::post(socket_.get_executor(), [self, only_if_idle] {
      if (!only_if_idle || self->state_ == State::kIdle) self->Close();
    });
  }

 private:
  enum class State { kIdle, kHead, kContinue, kBody, kHandling, kWriting, kLingering, kClosed };

  void Unregister() {
    if (!registered_) return;
    registered_ = false;
    {
      std::lock_guard<std::mutex> lock(t_->sessions_mutex);
      t_->sessions.erase(this);
    }
    t_->ConnectionClosed();
  }

  // ---- deadlines ----
  void Arm(std::chrono::steady_clock::duration after) {
    const uint64_t generation = ++timer_generation_;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), generation](const beast::error_code& ec) {
      if (ec || generation != self->timer_generation_) return;
      self->OnDeadline();
    });
  }
  void ArmIdle() { Arm(std::chrono::seconds(t_->options.idle_timeout_seconds)); }
  void OnDeadline() {
    if (state_ == State::kClosed) return;
    if (state_ != State::kIdle && state_ != State::kLingering) {
      t_->counters.timeouts_total.fetch_add(1, std::memory_order_relaxed);
    }
    Close();
  }

  // ---- reading ----
  void WaitRead() {
    if (state_ == State::kClosed) return;
    socket_.async_wait(
        tcp::socket::wait_read,
        [self = shared_from_this()](const beast::error_code& ec) { self->OnReadable(ec); });
  }

  void OnReadable(const beast::error_code& ec) {
    if (state_ == State::kClosed) return;
    if (ec) return Close();
    char chunk[16384];
    beast::error_code read_error;
    const size_t n = socket_.read_some(asio::buffer(chunk), read_error);
    if (read_error == asio::error::would_block || read_error == asio::error::try_again) {
      return WaitRead();
    }
    if (read_error || n == 0) return Close();
    if (state_ == State::kLingering) {
      lingered_ += n;
      if (lingered_ > t_->options.linger_bytes) return Close();
      return WaitRead();
    }
    if (state_ == State::kIdle) BeginRequest();
    buffer_.append(chunk, n);
    Process();
  }

  void BeginRequest() {
    state_ = State::kHead;
    request_active_ = true;
    head_method_ = false;
    reported_ = false;
    admitted_ = false;
    held_ = 0;
    t_->in_flight.fetch_add(1);
    request_start_ = Clock::now();
    Arm(std::chrono::seconds(t_->options.request_timeout_seconds));
    parser_ = std::make_unique<RequestParser>();
    parser_->header_limit(static_cast<std::uint32_t>(t_->options.max_head_bytes));
    parser_->body_limit(boost::none);
    parser_->eager(false);
    parser_->reserve = [this](size_t bytes) {
      if (!t_->Reserve(bytes)) return false;
      held_ += bytes;
      return true;
    };
  }

  // Parses what is buffered, as far as it goes.
  void Process() {
    for (;;) {
      switch (state_) {
        case State::kIdle:
          if (buffer_.empty()) return WaitRead();
          BeginRequest();
          break;
        case State::kHead: {
          beast::error_code ec;
          const size_t used = parser_->put(asio::buffer(buffer_), ec);
          if (ec == http::error::need_more) {
            if (buffer_.size() > t_->options.max_head_bytes) return RefuseHead(HeadTooLarge());
            return WaitRead();
          }
          if (ec) {
            if (ec == http::error::header_limit) return RefuseHead(HeadTooLarge());
            return RefuseHead({400, "malformed request: " + Describe(ec)});
          }
          if (!parser_->is_header_done()) {
            if (used == 0) return WaitRead();
            buffer_.erase(0, used);
            break;
          }
          const std::string raw_head = buffer_.substr(0, used);
          buffer_.erase(0, used);
          if (!OnHead(raw_head)) return;
          break;
        }
        case State::kBody: {
          if (parser_->is_done()) return Dispatch();
          if (buffer_.empty()) return WaitRead();
          beast::error_code ec;
          const size_t used = parser_->put(asio::buffer(buffer_), ec);
          buffer_.erase(0, used);
          t_->counters.body_bytes_total.fetch_add(used, std::memory_order_relaxed);
          if (ec == http::error::need_more) return WaitRead();
          if (ec) return RefuseBody(ec);
          if (parser_->is_done()) return Dispatch();
          if (used == 0) return WaitRead();
          break;
        }
        default:
          return;
      }
    }
  }

  HeadRefusal HeadTooLarge() const {
    // No line end yet within the limit: the request line itself is too long.
    const size_t line_end = buffer_.find('\n');
    if (line_end == std::string::npos || line_end > t_->options.max_head_bytes) {
      return {414, "request line longer than " + std::to_string(t_->options.max_head_bytes) +
                       " bytes (the server's connection_memory_bytes)"};
    }
    return {431, "request header fields larger than " + std::to_string(t_->options.max_head_bytes) +
                     " bytes (the server's connection_memory_bytes)"};
  }

  // The head is parsed: framing rules, target, admission. False if the request was refused.
  bool OnHead(std::string_view raw_head) {
    if (std::optional<HeadRefusal> refusal =
            CheckRequestHead(parser_->version, parser_->fields, raw_head)) {
      RefuseHead(*refusal);
      return false;
    }
    Result<RequestTarget> target = ParseRequestTarget(parser_->target);
    if (!target.ok()) {
      t_->counters.malformed_total.fetch_add(1, std::memory_order_relaxed);
      Reply reply;
      reply.Error(target.status());
      reply.close = true;
      Write(std::move(reply));
      return false;
    }
    request_ = std::make_shared<HttpRequest>();
    request_->method = std::move(parser_->method);
    request_->version = parser_->version;
    request_->target = std::move(*target);
    request_->headers = std::move(parser_->fields);
    request_->start = request_start_;
    head_method_ = request_->method == "HEAD";
    admitted_ = true;
    Reply reply;
    if (!t_->app->Admit(request_.get(), &reply)) {
      // A refused request's body is never read: the connection can carry no other request,
      // unless there is no body.
      if (parser_->is_done()) {
        state_ = State::kHandling;  // a complete request: the connection may stay open
      } else {
        reply.close = true;
      }
      Write(std::move(reply));
      return false;
    }
    parser_->request = request_.get();
    parser_->eager(true);
    state_ = State::kBody;
    if (const std::optional<std::string> expect = request_->Header("expect")) {
      if (!EqualsIgnoreCase(*expect, "100-continue")) {
        Reply refused;
        refused.Error(417, "HttpError", "Expect: only 100-continue is supported");
        refused.close = true;
        Write(std::move(refused));
        return false;
      }
      if (request_->version >= 11 && !parser_->is_done() && buffer_.empty()) {
        state_ = State::kContinue;
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                          [self = shared_from_this()](const beast::error_code& ec, size_t) {
                            if (self->state_ != State::kContinue) return;
                            if (ec) return self->Close();
                            self->state_ = State::kBody;
                            self->Process();
                          });
        return false;
      }
    }
    return true;
  }

  void RefuseHead(const HeadRefusal& refusal) {
    t_->counters.malformed_total.fetch_add(1, std::memory_order_relaxed);
    Reply reply;
    reply.Error(refusal.status, "HttpError", refusal.message);
    reply.close = true;
    Write(std::move(reply));
  }

  void RefuseBody(const beast::error_code& ec) {
    Reply reply;
    if (parser_->budget_exhausted) {
      t_->counters.buffer_full_total.fetch_add(1, std::memory_order_relaxed);
      reply.Error(503, "Unavailable",
                  "server busy: request and reply buffers are full (max_buffered_bytes), retry "
                  "later");
    } else if (!parser_->body_error.ok()) {
      reply.Error(parser_->body_error);
    } else {
      reply.Error(400, "HttpError", "malformed request body: " + Describe(ec));
    }
    reply.close = true;
    Write(std::move(reply));
  }

  // ---- handling ----
  void Dispatch() {
    state_ = State::kHandling;
    Status finished = request_->body.Finish();
    if (!finished.ok()) {
      Reply reply;
      reply.Error(finished);
      if (finished.code() == StatusCode::kUnsupported) reply.status = 415;
      return Write(std::move(reply));
    }
    // A reply made on this connection's own thread (inline handlers) is written at once; one
    // made on a worker is handed to the connection's thread.
    t_->app->Handle(request_, [self = shared_from_this()](Reply reply) {
      asio::dispatch(self->socket_.get_executor(), [self, reply = std::move(reply)]() mutable {
        self->OnReply(std::move(reply));
      });
    });
  }

  void OnReply(Reply reply) {
    if (state_ == State::kClosed) return EndRequest(0, RequestOutcome::kAborted);
    if (state_ != State::kHandling) return;
    if (reply.body.size() <= kSmallReply) {
      // Health, metrics, errors and most answers: always sent (their total is bounded by the
      // connections), and counted.
      t_->counters.buffered_bytes.fetch_add(reply.body.size());
    } else if (!t_->Reserve(reply.body.size())) {
      t_->counters.buffer_full_total.fetch_add(1, std::memory_order_relaxed);
      Reply busy;
      busy.Error(503, "Unavailable",
                 "server busy: request and reply buffers are full (max_buffered_bytes), retry "
                 "later");
      return Write(std::move(busy));
    }
    held_ += reply.body.size();
    Write(std::move(reply), /*reserved=*/true);
  }

  // ---- writing ----
  void Write(Reply reply, bool reserved = false) {
    if (!reserved) {  // error replies: small, never refused for the budget, but counted
      t_->counters.buffered_bytes.fetch_add(reply.body.size());
      held_ += reply.body.size();
    }
    const bool keep_alive = parser_ != nullptr && parser_->is_header_done() &&
                            parser_->keep_alive() && state_ != State::kHead;
    close_after_ =
        reply.close || !keep_alive || t_->quiescing.load() || (state_ != State::kHandling);
    if (state_ == State::kHandling && !parser_->is_done()) close_after_ = true;
    status_ = reply.status;
    reply_ = std::move(reply);
    head_out_.clear();
    head_out_ += "HTTP/1.1 " + std::to_string(reply_.status) + " ";
    const beast::string_view reason = http::obsolete_reason(http::int_to_status(reply_.status));
    head_out_.append(reason.data(), reason.size());
    head_out_ += "\r\nDate: " + HttpDate() + "\r\nContent-Type: " + reply_.content_type +
                 "\r\nContent-Length: " + std::to_string(reply_.body.size()) + "\r\n";
    if (reply_.www_authenticate) head_out_ += "WWW-Authenticate: Bearer\r\n";
    if (close_after_) {
      head_out_ += "Connection: close\r\n";
    } else if (request_ != nullptr && request_->version < 11) {
      head_out_ += "Connection: keep-alive\r\n";
    }
    head_out_ += "\r\n";
    state_ = State::kWriting;
    Report(status_, RequestOutcome::kReplied);
    // A reply to HEAD has the head only (its Content-Length is that of the body not sent).
    const std::array<asio::const_buffer, 2> buffers = {
        asio::buffer(head_out_),
        asio::buffer(reply_.body.data(), head_method_ ? 0 : reply_.body.size())};
    asio::async_write(
        socket_, buffers,
        [self = shared_from_this()](const beast::error_code& ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(const beast::error_code& ec) {
    EndRequest(status_, ec ? RequestOutcome::kAborted : RequestOutcome::kReplied);
    reply_ = Reply();
    head_out_.clear();
    head_out_.shrink_to_fit();
    if (state_ == State::kClosed) return;
    if (ec) return Close();
    if (close_after_) return Linger();
    state_ = State::kIdle;
    parser_.reset();
    ArmIdle();
    if (buffer_.empty()) {
      buffer_.shrink_to_fit();
      return WaitRead();
    }
    Process();  // pipelined requests
  }

  // Tells the application how the current request ended (once; a reply counts when it is queued
  // for writing, so a client that reads it then asks /metrics sees it counted).
  void Report(int status, RequestOutcome outcome) {
    if (reported_) return;
    reported_ = true;
    if (!admitted_) outcome = RequestOutcome::kIncomplete;  // refused or lost before routing
    t_->app->Finished(admitted_ ? request_.get() : nullptr, status, outcome);
  }

  // Ends the current request once: reports it if not yet done, releases its buffers.
  void EndRequest(int status, RequestOutcome outcome) {
    if (!request_active_) return;
    request_active_ = false;
    Report(status, outcome);
    t_->Release(held_);
    held_ = 0;
    t_->in_flight.fetch_sub(1);
    request_.reset();
  }

  // After a reply with Connection: close: stop sending, read and discard a little of what the
  // client still sends (so it reads the reply rather than a reset), then close.
  void Linger() {
    state_ = State::kLingering;
    buffer_.clear();
    buffer_.shrink_to_fit();
    parser_.reset();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    Arm(std::chrono::seconds(2));
    WaitRead();
  }

  void Close() {
    if (state_ == State::kClosed) return;
    const State was = state_;
    state_ = State::kClosed;
    if (was == State::kHead || was == State::kBody || was == State::kContinue) {
      EndRequest(0, admitted_ ? RequestOutcome::kAborted : RequestOutcome::kIncomplete);
    }
    // kHandling: OnReply ends the request; kWriting: the write's handler does.
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
    buffer_.clear();
    buffer_.shrink_to_fit();
    parser_.reset();
    Unregister();
  }

  HttpTransport::Impl* t_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  bool registered_ = false;
  State state_ = State::kIdle;
  std::string buffer_;  // received, not yet parsed
  std::unique_ptr<RequestParser> parser_;
  std::shared_ptr<HttpRequest> request_;
  bool request_active_ = false;
  bool head_method_ = false;  // the current request is HEAD
  bool reported_ = false;
  bool admitted_ = false;
  Clock::time_point request_start_;
  size_t held_ = 0;  // buffer budget held by the current request (body and reply)
  Reply reply_;
  std::string head_out_;
  int status_ = 0;
  bool close_after_ = false;
  size_t lingered_ = 0;
};

void HttpTransport::Impl::Accept() {
  if (!acceptor.has_value() || !acceptor->is_open()) return;
  if (counters.open_connections.load() >= options.max_connections) {
    accept_paused = true;  // resumed by ConnectionClosed; meanwhile clients wait in the backlog
    return;
  }
  asio::io_context& loop = *loops[next_loop++ % loops.size()];
  acceptor->async_accept(loop.get_executor(),
                         [this](const beast::error_code& ec, tcp::socket socket) {
                           if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
                           if (ec) {
                             // Out of descriptors (EMFILE) or a transient error: try again shortly.
                             accept_retry->expires_after(std::chrono::milliseconds(50));
                             accept_retry->async_wait([this](const beast::error_code& e) {
                               if (!e) Accept();
                             });
                             return;
                           }
                           counters.connections_total.fetch_add(1, std::memory_order_relaxed);
                           counters.open_connections.fetch_add(1);
                           std::make_shared<Session>(this, std::move(socket))->Start();
                           Accept();
                         });
}

void HttpTransport::Impl::ConnectionClosed() {
  counters.open_connections.fetch_sub(1);
  asio::post(accept_executor(), [this] {
    if (accept_paused && counters.open_connections.load() < options.max_connections) {
      accept_paused = false;
      Accept();
    }
  });
}

HttpTransport::HttpTransport(HttpApplication* app, TransportOptions options)
    : impl_(std::make_unique<Impl>(this, app, options)) {}

HttpTransport::~HttpTransport() { Stop(); }

Status HttpTransport::Start(int listen_fd) {
  Impl* impl = impl_.get();
  beast::error_code ec;
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&address), &length);
  const tcp protocol = address.ss_family == AF_INET6 ? tcp::v6() : tcp::v4();
  impl->acceptor.emplace(impl->accept_executor());
  impl->acceptor->assign(protocol, listen_fd, ec);
  if (ec) return Status::IoError("cannot serve the listening socket: " + ec.message());
  for (auto& loop : impl->loops) impl->work.push_back(asio::make_work_guard(*loop));
  asio::post(impl->accept_executor(), [impl] { impl->Accept(); });
  for (auto& loop : impl->loops) {
    impl->threads.emplace_back([loop = loop.get()] { loop->run(); });
  }
  return Status::Ok();
}

bool HttpTransport::Reserve(size_t bytes) {
  if (impl_->Reserve(bytes)) return true;
  counters_.buffer_full_total.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void HttpTransport::Release(size_t bytes) { impl_->Release(bytes); }

void HttpTransport::Quiesce() {
  Impl* impl = impl_.get();
  impl->quiescing.store(true);
  std::promise<void> closed;
  asio::post(impl->accept_executor(), [impl, &closed] {
    if (impl->acceptor.has_value()) {
      beast::error_code ignored;
      impl->acceptor->close(ignored);
    }
    impl->accept_retry->cancel();
    closed.set_value();
  });
  if (!impl->threads.empty()) closed.get_future().wait();
  std::lock_guard<std::mutex> lock(impl->sessions_mutex);
  for (Session* session : impl->sessions) session->PostClose(/*only_if_idle=*/true);
}

void HttpTransport::Stop() {
  Impl* impl = impl_.get();
  if (impl->threads.empty()) return;
  Quiesce();
  {
    std::lock_guard<std::mutex> lock(impl->sessions_mutex);
    for (Session* session : impl->sessions) session->PostClose(/*only_if_idle=*/false);
  }
  // Let the closes run, then stop the loop.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(impl->sessions_mutex);
      if (impl->sessions.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  impl->work.clear();
  for (auto& loop : impl->loops) loop->stop();
  for (std::thread& t : impl->threads) t.join();
  impl->threads.clear();
}

}  // namespace neardup::service
