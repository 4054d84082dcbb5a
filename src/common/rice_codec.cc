// Golomb-Rice coding of ascending 32-bit sequences; see rice_codec.h.
#include "common/rice_codec.h"

#include <bit>
#include <cstring>

namespace neardup {

namespace {

// Appends bits to a byte string, least significant bits first, 32 bits at a time.
class BitWriter {
 public:
  explicit BitWriter(std::string* out) : out_(out) {}
  ~BitWriter() { Flush(); }

  // The low `count` (<= 32) bits of `value`.
  void Put(uint64_t value, int count) {
    buffer_ |= (value & ((uint64_t{1} << count) - 1)) << filled_;
    filled_ += count;
    if (filled_ >= 32) {
      char bytes[4];
      const uint32_t word = static_cast<uint32_t>(buffer_);
      std::memcpy(bytes, &word, 4);  // little-endian, as every supported target
      out_->append(bytes, 4);
      buffer_ >>= 32;
      filled_ -= 32;
    }
  }
  // `count` 1 bits, then a 0 bit.
  void Unary(uint64_t count) {
    while (count >= 31) {
      Put(0x7FFFFFFFu, 31);
      count -= 31;
    }
    Put((uint64_t{1} << count) - 1, static_cast<int>(count) + 1);
  }
  void Flush() {
    while (filled_ > 0) {
      out_->push_back(static_cast<char>(buffer_ & 0xFF));
      buffer_ >>= 8;
      filled_ = filled_ > 8 ? filled_ - 8 : 0;
    }
  }

 private:
  std::string* out_;
  uint64_t buffer_ = 0;
  int filled_ = 0;
};

// Reads bits written by BitWriter from [data, end).
class BitReader {
 public:
  BitReader(const uint8_t* data, const uint8_t* end) : next_(data), end_(end) {}

  bool Get(int count, uint64_t* value) {
    if (count == 0) {
      *value = 0;
      return true;
    }
    if (!Fill(count)) return false;
    *value = buffer_ & ((uint64_t{1} << count) - 1);
    buffer_ = count == 64 ? 0 : buffer_ >> count;
    filled_ -= count;
    return true;
  }
  // The number of 1 bits before the next 0 bit (which is consumed); false past the end or when
  // the run exceeds `limit`.
  bool Unary(uint64_t limit, uint64_t* count) {
    uint64_t ones = 0;
    for (;;) {
      if (filled_ == 0 && !Fill(1)) return false;
      const uint64_t inverted =
          ~buffer_ & (filled_ == 64 ? ~uint64_t{0} : (uint64_t{1} << filled_) - 1);
      if (inverted != 0) {
        const int run = std::countr_zero(inverted);
        ones += static_cast<uint64_t>(run);
        if (ones > limit) return false;
        buffer_ = run + 1 == 64 ? 0 : buffer_ >> (run + 1);
        filled_ -= run + 1;
        *count = ones;
        return true;
      }
      ones += static_cast<uint64_t>(filled_);
      if (ones > limit) return false;
      buffer_ = 0;
      filled_ = 0;
    }
  }
  // Bytes consumed: those loaded, less the whole bytes loaded ahead and not used (the bits left
  // of a partly used byte are its padding).
  size_t Consumed(const uint8_t* start) const {
    return static_cast<size_t>(next_ - start) - static_cast<size_t>(filled_ / 8);
  }

 private:
  bool Fill(int count) {
    while (filled_ < count) {
      if (next_ == end_) return false;
      if (filled_ > 56) break;
      buffer_ |= static_cast<uint64_t>(*next_++) << filled_;
      filled_ += 8;
    }
    return filled_ >= count;
  }
  const uint8_t* next_;
  const uint8_t* end_;
  uint64_t buffer_ = 0;
  int filled_ = 0;
};

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

bool GetVarint(const uint8_t** p, const uint8_t* end, uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p == end) return false;
    const uint8_t byte = *(*p)++;
    result |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return true;
    }
  }
  return false;
}

}  // namespace

int BitsFor(uint64_t max_value) { return max_value == 0 ? 0 : 64 - std::countl_zero(max_value); }

void RiceEncode(std::span<const uint32_t> values, std::string* out,
                std::span<const uint32_t> payload, int payload_bits) {
  const size_t n = values.size();
  PutVarint(n, out);
  if (n == 0) return;
  PutVarint(values[0], out);
  // k = floor(log2(mean gap)), the usual choice for geometric gaps.
  const uint64_t mean = n > 1 ? (static_cast<uint64_t>(values.back()) - values[0]) / (n - 1) : 0;
  const int k = mean <= 1 ? 0 : BitsFor(mean) - 1;
  out->push_back(static_cast<char>(k));
  BitWriter bits(out);
  for (size_t i = 1; i < n; ++i) {
    const uint32_t gap = values[i] - values[i - 1];
    bits.Unary(gap >> k);
    bits.Put(gap, k);
  }
  if (payload_bits > 0) {
    for (size_t i = 0; i < n; ++i) bits.Put(payload[i], payload_bits);
  }
}

bool RiceDecode(std::string_view bytes, std::vector<uint32_t>* values, size_t* used,
                std::vector<uint32_t>* payload, int payload_bits) {
  const uint8_t* start = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t* end = start + bytes.size();
  const uint8_t* p = start;
  uint64_t n = 0;
  if (!GetVarint(&p, end, &n)) return false;
  if (n == 0) {
    if (used) *used = static_cast<size_t>(p - start);
    return true;
  }
  uint64_t value = 0;
  if (!GetVarint(&p, end, &value) || value > 0xFFFFFFFFu) return false;
  // Every further value takes at least one bit: more values than bits is damage.
  if (p == end || n - 1 > static_cast<uint64_t>(end - p - 1) * 8) return false;
  const int k = *p++;
  if (k > 31 || payload_bits < 0 || payload_bits > 32) return false;
  BitReader bits(p, end);
  values->push_back(static_cast<uint32_t>(value));
  for (uint64_t i = 1; i < n; ++i) {
    uint64_t high = 0, low = 0;
    if (!bits.Unary(uint64_t{0xFFFFFFFF} >> k, &high) || !bits.Get(k, &low)) return false;
    value += (high << k) | low;
    if (value > 0xFFFFFFFFu) return false;
    values->push_back(static_cast<uint32_t>(value));
  }
  if (payload != nullptr && payload_bits == 0) payload->resize(payload->size() + n, 0);
  if (payload_bits > 0) {
    if (payload == nullptr) return false;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t x = 0;
      if (!bits.Get(payload_bits, &x)) return false;
      payload->push_back(static_cast<uint32_t>(x));
    }
  }
  if (used) *used = static_cast<size_t>(p - start) + bits.Consumed(p);
  return true;
}

}  // namespace neardup
