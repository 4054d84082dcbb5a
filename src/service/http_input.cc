// Body decoding with limits (zlib for gzip/deflate) and bearer-token checks; see http_input.h.
#include "service/http_input.h"

#include <xxhash.h>
#include <zlib.h>

#include <cstring>
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

Status TooLarge(size_t max_bytes) {
  return Status::ResourceExhausted("body: larger than the limit of " + std::to_string(max_bytes) +
                                   " bytes (the server's max_body_bytes)");
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

Status BodyDecoder::Init(std::string_view content_encoding, size_t max_bytes) {
  max_bytes_ = max_bytes;
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
  if (received_ > max_bytes_) return error_ = TooLarge(max_bytes_);
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
    if (body_.size() + produced > max_bytes_) return error_ = TooLarge(max_bytes_);
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
      if (body_.size() + produced > max_bytes_) return error_ = TooLarge(max_bytes_);
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

}  // namespace neardup::service
