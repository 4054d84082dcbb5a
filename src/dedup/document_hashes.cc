// SqueezedHash; see dedup/document_hashes.h.
#include "dedup/document_hashes.h"

#include <xxhash.h>

#include <array>
#include <string>

namespace neardup {

namespace {

// What each byte is to SqueezedHash: kept, removed (ASCII whitespace), or the lead byte of
// U+00A0 (C2 A0) or U+3000 (E3 80 80), removed with its sequence.
enum ByteKind : uint8_t { kKeep = 0, kRemove = 1, kLead = 2 };
constexpr std::array<uint8_t, 256> kKind = [] {
  std::array<uint8_t, 256> table{};
  for (unsigned char c : {' ', '\t', '\n', '\r', '\f', '\v'}) table[c] = kRemove;
  table[0xC2] = kLead;
  table[0xE3] = kLead;
  return table;
}();

// The per-thread buffer the squeezed text is built in (reached through a call that is not
// inlined, so the thread-local address is computed once per document).
[[gnu::noinline]] std::string& SqueezeBuffer() {
  thread_local std::string buffer;
  return buffer;
}

}  // namespace

uint64_t SqueezedHash(std::string_view text) {
  std::string& squeezed = SqueezeBuffer();
  if (squeezed.capacity() > (size_t{64} << 20) && squeezed.capacity() > 8 * text.size()) {
    std::string().swap(squeezed);  // a huge earlier text: give its memory back
  }
  squeezed.resize(text.size());
  char* out = squeezed.data();
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t length = 0;
  for (size_t i = 0; i < size; ++i) {
    const unsigned char c = bytes[i];
    const uint8_t kind = kKind[c];
    if (kind == kLead) [[unlikely]] {
      if (c == 0xC2 && i + 1 < size && bytes[i + 1] == 0xA0) {
        i += 1;
        continue;
      }
      if (c == 0xE3 && i + 2 < size && bytes[i + 1] == 0x80 && bytes[i + 2] == 0x80) {
        i += 2;
        continue;
      }
    }
    out[length] = static_cast<char>(c);  // written always, counted only when kept (no branch)
    length += kind != kRemove;
  }
  return XXH3_64bits(out, length);
}

}  // namespace neardup
