// A minimal program built against an installed neardup: parses two fingerprints, prints their
// distance, and exits non-zero if the library answers wrongly.
#include <neardup/fingerprint.h>

#include <cstdio>

int main() {
  auto a = neardup::ParseFingerprint("f773be40a3f0a3e5");
  auto b = neardup::ParseFingerprint("f773be40a3f0a3e4");
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "parse failed: %s\n",
                 a.ok() ? b.status().ToString().c_str() : a.status().ToString().c_str());
    return 1;
  }
  int distance = neardup::HammingDistance(*a, *b);
  std::printf("distance(%s, %s) = %d\n", neardup::ToHex(*a).c_str(), neardup::ToHex(*b).c_str(),
              distance);
  return distance == 1 ? 0 : 1;
}
