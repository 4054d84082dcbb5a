// Jenkins lookup3 hashlittle2 (see jenkins_lookup3.h), processing 12-byte blocks read in
// little-endian order, which gives lookup3.c's results for any alignment.
#include "fingerprint/jenkins_lookup3.h"

#include <cstring>

namespace neardup {
namespace {

inline uint32_t Rotate(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

inline uint32_t LoadLittle32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// lookup3's mix(): reversibly mixes three 32-bit values.
inline void Mix(uint32_t& a, uint32_t& b, uint32_t& c) {
  a -= c;
  a ^= Rotate(c, 4);
  c += b;
  b -= a;
  b ^= Rotate(a, 6);
  a += c;
  c -= b;
  c ^= Rotate(b, 8);
  b += a;
  a -= c;
  a ^= Rotate(c, 16);
  c += b;
  b -= a;
  b ^= Rotate(a, 19);
  a += c;
  c -= b;
  c ^= Rotate(b, 4);
  b += a;
}

// lookup3's final(): final mixing of three 32-bit values into c.
inline void Final(uint32_t& a, uint32_t& b, uint32_t& c) {
  c ^= b;
  c -= Rotate(b, 14);
  a ^= c;
  a -= Rotate(c, 11);
  b ^= a;
  b -= Rotate(a, 25);
  c ^= b;
  c -= Rotate(b, 16);
  a ^= c;
  a -= Rotate(c, 4);
  b ^= a;
  b -= Rotate(a, 14);
  c ^= b;
  c -= Rotate(b, 24);
}

}  // namespace

void JenkinsHashLittle2(std::string_view bytes, uint32_t* primary_seed, uint32_t* secondary_seed) {
  const auto* key = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t length = bytes.size();
  uint32_t a = 0xdeadbeef + static_cast<uint32_t>(length) + *primary_seed;
  uint32_t b = a;
  uint32_t c = a + *secondary_seed;

  while (length > 12) {
    a += LoadLittle32(key);
    b += LoadLittle32(key + 4);
    c += LoadLittle32(key + 8);
    Mix(a, b, c);
    length -= 12;
    key += 12;
  }
  if (length == 0) {  // only for empty input (the loop leaves 1..12 bytes): no final()
    *primary_seed = c;
    *secondary_seed = b;
    return;
  }
  // The last 1..12 bytes, zero-padded, as lookup3.c's byte-at-a-time tail switch does.
  unsigned char tail[12] = {0};
  std::memcpy(tail, key, length);
  a += LoadLittle32(tail);
  b += LoadLittle32(tail + 4);
  c += LoadLittle32(tail + 8);
  Final(a, b, c);
  *primary_seed = c;
  *secondary_seed = b;
}

uint64_t JenkinsLookup3Hash64(std::string_view bytes) {
  uint32_t c = 0;
  uint32_t b = 0;
  JenkinsHashLittle2(bytes, &c, &b);
  return (static_cast<uint64_t>(c) << 32) | b;
}

}  // namespace neardup
