// Text forms of fingerprints; see include/neardup/fingerprint.h.
#include "neardup/fingerprint.h"

#include <charconv>

namespace neardup {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

void AppendHex(uint64_t word, std::string* out) {
  for (int shift = 60; shift >= 0; shift -= 4) out->push_back(kHexDigits[(word >> shift) & 0xF]);
}

void AppendBinary(uint64_t word, std::string* out) {
  for (int shift = 63; shift >= 0; --shift) out->push_back(((word >> shift) & 1) ? '1' : '0');
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ParseHexWord(std::string_view digits, uint64_t* word) {
  uint64_t value = 0;
  for (char c : digits) {
    int v = HexValue(c);
    if (v < 0) return false;
    value = (value << 4) | static_cast<uint64_t>(v);
  }
  *word = value;
  return true;
}

bool ParseBinaryWord(std::string_view digits, uint64_t* word) {
  uint64_t value = 0;
  for (char c : digits) {
    if (c != '0' && c != '1') return false;
    value = (value << 1) | static_cast<uint64_t>(c - '0');
  }
  *word = value;
  return true;
}

}  // namespace

std::string ToHex(const Fingerprint& fp) {
  std::string out;
  out.reserve(fp.bits / 4);
  if (fp.bits == 128) AppendHex(fp.hi, &out);
  AppendHex(fp.lo, &out);
  return out;
}

std::string ToBinary(const Fingerprint& fp) {
  std::string out;
  out.reserve(fp.bits);
  if (fp.bits == 128) AppendBinary(fp.hi, &out);
  AppendBinary(fp.lo, &out);
  return out;
}

std::string ToDecimal(const Fingerprint& fp) { return std::to_string(fp.lo); }

Result<Fingerprint> ParseFingerprint(std::string_view text) {
  auto error = [&](const char* why) {
    return Status::InvalidArgument("cannot parse fingerprint \"" + std::string(text.substr(0, 80)) +
                                   "\": " + why);
  };
  if (text.starts_with("d:")) {
    std::string_view digits = text.substr(2);
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
      return error("not an unsigned 64-bit decimal number");
    }
    return Fingerprint::From64(value);
  }
  std::string_view digits = text;
  bool hex_prefixed = false;
  if (digits.starts_with("0x") || digits.starts_with("0X")) {
    digits.remove_prefix(2);
    hex_prefixed = true;
  }
  uint64_t hi = 0, lo = 0;
  if (!hex_prefixed && (digits.size() == 64 || digits.size() == 128)) {
    if (digits.size() == 64) {
      if (!ParseBinaryWord(digits, &lo)) return error("64 characters but not all '0' or '1'");
      return Fingerprint::From64(lo);
    }
    if (!ParseBinaryWord(digits.substr(0, 64), &hi) || !ParseBinaryWord(digits.substr(64), &lo)) {
      return error("128 characters but not all '0' or '1'");
    }
    return Fingerprint::From128(hi, lo);
  }
  if (digits.size() == 16) {
    if (!ParseHexWord(digits, &lo)) return error("16 characters but not all hex digits");
    return Fingerprint::From64(lo);
  }
  if (digits.size() == 32) {
    if (!ParseHexWord(digits.substr(0, 16), &hi) || !ParseHexWord(digits.substr(16), &lo)) {
      return error("32 characters but not all hex digits");
    }
    return Fingerprint::From128(hi, lo);
  }
  return error("expected 16 or 32 hex digits, 64 or 128 binary digits, or d:<decimal>");
}

}  // namespace neardup
