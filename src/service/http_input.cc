// Body decoding with limits (zlib for gzip/deflate) and bearer-token checks; see http_input.h.
#include "service/http_input.h"

#include <simdjson.h>
#include <xxhash.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

namespace neardup::service {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status TooLarge(size_t max_bytes, std::string_view limit_name) {
  return Status::ResourceExhausted("body: larger than the limit of " + std::to_string(max_bytes) +
                                   " bytes (the server's " + std::string(limit_name) + ")");
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in` (and '+' as a space if `plus_is_space`); `what` names it in errors.
Result<std::string> Decode(std::string_view in, bool plus_is_space, std::string_view what) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) {
        return Status::InvalidArgument(std::string(what) + ": incomplete percent-escape");
      }
      const int h = HexValue(in[i + 1]), l = HexValue(in[i + 2]);
      if (h < 0 || l < 0) {
        return Status::InvalidArgument(std::string(what) + ": bad percent-escape \"" +
                                       std::string(in.substr(i, 3)) + "\"");
      }
      out += static_cast<char>(h * 16 + l);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  if (out.find('\0') != std::string::npos) {
    return Status::InvalidArgument(std::string(what) + ": holds a NUL byte");
  }
  if (!simdjson::validate_utf8(out.data(), out.size())) {
    return Status::InvalidUtf8(std::string(what) + ": not valid UTF-8 once percent-decoded");
  }
  return out;
}

}  // namespace

struct BodyDecoder::Inflater {
  z_stream stream{};
  bool initialized = false;
  bool finished = false;
  ~Inflater() {
    if (initialized) inflateEnd(&stream);
  }
};

BodyDecoder::BodyDecoder() = default;
BodyDecoder::~BodyDecoder() = default;

Status BodyDecoder::Init(std::string_view content_encoding, size_t max_bytes,
                         std::string_view limit_name) {
  max_bytes_ = max_bytes;
  limit_name_ = limit_name;
  const std::string_view encoding = Trim(content_encoding);
  if (encoding.empty() || EqualsIgnoreCase(encoding, "identity")) return Status::Ok();
  int window_bits;
  if (EqualsIgnoreCase(encoding, "gzip") || EqualsIgnoreCase(encoding, "x-gzip")) {
    window_bits = 16 + MAX_WBITS;  // gzip header and trailer
  } else if (EqualsIgnoreCase(encoding, "deflate")) {
    window_bits = MAX_WBITS;  // zlib-wrapped deflate, as HTTP defines it
  } else {
    error_ = Status::Unsupported("Content-Encoding: \"" + std::string(encoding) +
                                 "\" is not supported (identity, gzip or deflate)");
    return error_;
  }
  inflater_ = std::make_unique<Inflater>();
  if (inflateInit2(&inflater_->stream, window_bits) != Z_OK) {
    error_ = Status::Internal("zlib: inflateInit2 failed");
    return error_;
  }
  inflater_->initialized = true;
  return Status::Ok();
}

Status BodyDecoder::Append(const char* data, size_t size) {
  if (!error_.ok()) return error_;
  received_ += size;
  if (received_ > max_bytes_) return error_ = TooLarge(max_bytes_, limit_name_);
  if (inflater_ == nullptr) {
    body_.append(data, size);
    return Status::Ok();
  }
  z_stream& z = inflater_->stream;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z.avail_in = static_cast<uInt>(size);
  char out[16384];
  while (z.avail_in > 0) {
    if (inflater_->finished) {
      return error_ = Status::InvalidArgument("body: data after the end of the compressed stream");
    }
    z.next_out = reinterpret_cast<Bytef*>(out);
    z.avail_out = sizeof(out);
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = sizeof(out) - z.avail_out;
    if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && produced > 0)) {
      return error_ = Status::InvalidArgument(std::string("body: damaged compressed stream: ") +
                                              (z.msg != nullptr ? z.msg : "zlib error"));
    }
    if (body_.size() + produced > max_bytes_) return error_ = TooLarge(max_bytes_, limit_name_);
    body_.append(out, produced);
    if (rc == Z_STREAM_END) inflater_->finished = true;
    if (produced == 0 && rc != Z_STREAM_END) break;  // needs more input
  }
  return Status::Ok();
}

Status BodyDecoder::Finish() {
  if (!error_.ok()) return error_;
  if (inflater_ != nullptr && !inflater_->finished) {
    // Drain what zlib still holds (output was full on the last call).
    z_stream& z = inflater_->stream;
    char out[16384];
    for (;;) {
      z.next_in = nullptr;
      z.avail_in = 0;
      z.next_out = reinterpret_cast<Bytef*>(out);
      z.avail_out = sizeof(out);
      const int rc = inflate(&z, Z_SYNC_FLUSH);
      const size_t produced = sizeof(out) - z.avail_out;
      if (body_.size() + produced > max_bytes_) return error_ = TooLarge(max_bytes_, limit_name_);
      body_.append(out, produced);
      if (rc == Z_STREAM_END) {
        inflater_->finished = true;
        break;
      }
      if (rc != Z_OK || produced == 0) break;
    }
    if (!inflater_->finished) {
      return error_ = Status::InvalidArgument("body: truncated compressed stream");
    }
  }
  return Status::Ok();
}

namespace {

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The comma-separated elements of a list-valued field, trimmed, empty ones dropped.
std::vector<std::string_view> ListElements(std::string_view value) {
  std::vector<std::string_view> out;
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view element = Trim(value.substr(0, comma));
    if (!element.empty()) out.push_back(element);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

std::optional<HeadRefusal> CheckRequestHead(int version, const std::vector<HeaderField>& fields,
                                            std::string_view raw_head) {
  auto refuse = [](int status, std::string message) {
    return std::optional<HeadRefusal>(HeadRefusal{status, std::move(message)});
  };
  // A line break followed by a space or tab continues the previous field line (obs-fold).
  for (size_t at = raw_head.find('\n'); at != std::string_view::npos;
       at = raw_head.find('\n', at + 1)) {
    if (at + 1 < raw_head.size() && (raw_head[at + 1] == ' ' || raw_head[at + 1] == '\t')) {
      return refuse(400, "a header field is folded over two lines (obs-fold, RFC 9112 5.2)");
    }
  }
  int content_lengths = 0, transfer_encodings = 0, hosts = 0;
  std::vector<std::string_view> codings;
  for (const auto& [name, value] : fields) {
    if (EqualsIgnoreCase(name, "content-length")) {
      ++content_lengths;
      if (!IsDigits(value)) {
        return refuse(400, "Content-Length: \"" + value + "\" is not a number of bytes");
      }
    } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
      ++transfer_encodings;
      for (std::string_view coding : ListElements(value)) codings.push_back(coding);
    } else if (EqualsIgnoreCase(name, "host")) {
      ++hosts;
    }
  }
  if (content_lengths > 1) {
    return refuse(400, "Content-Length: given more than once (RFC 9112 6.3)");
  }
  if (transfer_encodings > 0) {
    if (version < 11) return refuse(400, "Transfer-Encoding: not allowed in HTTP/1.0");
    if (content_lengths > 0) {
      return refuse(400, "Content-Length and Transfer-Encoding together (RFC 9112 6.3)");
    }
    if (codings.empty() || !EqualsIgnoreCase(codings.back(), "chunked")) {
      return refuse(400, "Transfer-Encoding: the last coding must be chunked (RFC 9112 6.3)");
    }
    for (size_t i = 0; i + 1 < codings.size(); ++i) {
      if (EqualsIgnoreCase(codings[i], "chunked")) {
        return refuse(400, "Transfer-Encoding: chunked given more than once (RFC 9112 6.1)");
      }
    }
    if (codings.size() > 1) {
      return refuse(501, "Transfer-Encoding: \"" + std::string(codings.front()) +
                             "\" is not implemented (only chunked)");
    }
  }
  if (version >= 11 && hosts != 1) {
    return refuse(
        400, hosts == 0 ? "Host: missing (required in HTTP/1.1)" : "Host: given more than once");
  }
  if (hosts > 1) return refuse(400, "Host: given more than once");
  return std::nullopt;
}

std::optional<std::string> RequestTarget::Param(std::string_view name) const {
  for (const auto& [key, value] : params) {
    if (key == name) return value;
  }
  return std::nullopt;
}

Result<RequestTarget> ParseRequestTarget(std::string_view target) {
  // Absolute form (RFC 9112 3.2.2, which a server must accept): the path after the authority.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() &&
        EqualsIgnoreCase(target.substr(0, scheme.size()), scheme)) {
      const size_t path = target.find_first_of("/?", scheme.size());
      target = path == std::string_view::npos ? std::string_view("/") : target.substr(path);
      if (target.front() == '?') return Status::InvalidArgument("request target: no path");
      break;
    }
  }
  if (target.empty() || target.front() != '/') {
    return Status::InvalidArgument("request target: must start with \"/\" (origin form)");
  }
  const size_t question = target.find('?');
  RequestTarget out;
  Result<std::string> path = Decode(target.substr(0, question), false, "path");
  if (!path.ok()) return path.status();
  out.path = std::move(*path);
  if (question == std::string_view::npos) return out;
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    Result<std::string> name = Decode(pair.substr(0, eq), true, "query parameter name");
    if (!name.ok()) return name.status();
    const std::string what = "query parameter " + *name;
    Result<std::string> value =
        Decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true, what);
    if (!value.ok()) return value.status();
    if (out.Param(*name).has_value()) {
      return Status::InvalidArgument(what + ": given more than once");
    }
    out.params.emplace_back(std::move(*name), std::move(*value));
  }
  return out;
}

namespace {

void Digest(uint64_t seed, std::string_view data, unsigned char out[16]) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(data.data(), data.size(), seed);
  std::memcpy(out, &h.low64, 8);
  std::memcpy(out + 8, &h.high64, 8);
}

}  // namespace

TokenChecker::TokenChecker(std::string_view token) {
  std::random_device random;
  seed_ = (uint64_t(random()) << 32) ^ random();
  Digest(seed_, token, expected_);
}

bool TokenChecker::Matches(std::string_view value) const {
  value = Trim(value);
  const size_t space = value.find_first_of(" \t");
  if (space == std::string_view::npos) return false;
  if (!EqualsIgnoreCase(value.substr(0, space), "bearer")) return false;
  const std::string_view token = Trim(value.substr(space + 1));
  unsigned char got[16];
  Digest(seed_, token, got);
  unsigned char diff = 0;
  for (int i = 0; i < 16; ++i) diff |= static_cast<unsigned char>(got[i] ^ expected_[i]);
  return diff == 0;
}

Result<std::string> TokenFromFileContents(std::string_view contents, bool* stripped_cr) {
  *stripped_cr = false;
  std::string_view line = contents.substr(0, contents.find('\n'));
  if (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);
    *stripped_cr = true;
  }
  if (line.empty()) return Status::InvalidArgument("token: the first line is empty");
  for (unsigned char c : line) {
    if (c <= 0x20 || c == 0x7f) {
      return Status::InvalidArgument(
          "token: contains whitespace or a control character (only printable characters)");
    }
  }
  return std::string(line);
}

Result<std::string> ReadTokenFile(const std::string& path, bool* stripped_cr) {
  std::ifstream in(path, std::ios::binary);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) {
    return Status::InvalidArgument(path + ": cannot read the token file");
  }
  Result<std::string> token = TokenFromFileContents(contents, stripped_cr);
  if (!token.ok()) return Status::InvalidArgument(path + ": " + token.status().message());
  return token;
}

}  // namespace neardup::service
