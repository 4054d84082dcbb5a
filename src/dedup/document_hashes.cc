// SqueezedHash; see dedup/document_hashes.h.
#include "dedup/document_hashes.h"

#include <xxhash.h>

#include <string>

namespace neardup {

uint64_t SqueezedHash(std::string_view text) {
  std::string squeezed;
  squeezed.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') continue;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0xA0) {
      ++i;
      continue;
    }
    if (c == 0xE3 && text.compare(i, 3, "\xE3\x80\x80") == 0) {
      i += 2;
      continue;
    }
    squeezed.push_back(static_cast<char>(c));
  }
  return XXH3_64bits(squeezed.data(), squeezed.size());
}

}  // namespace neardup
