// libFuzzer target for the request-side HTTP pieces that are ours (src/service/http_input.h): any
// bytes as a gzip/deflate/identity body, fed in arbitrary pieces, must give a body or a Status
// (never more than the limit held in memory), and any bytes as an Authorization value or a token
// file must be accepted or refused without a crash or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "service/http_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace neardup::service;
  if (size < 2) return 0;
  static const char* kEncodings[] = {"", "gzip", "deflate", "identity", "x-gzip", "br"};
  const char* encoding = kEncodings[data[0] % 6];
  const size_t limit = size_t(1) << (8 + data[1] % 12);  // 256 B .. 512 KiB
  const size_t piece = 1 + data[1] / 12;
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);
  BodyDecoder decoder;
  if (decoder.Init(encoding, limit).ok()) {
    bool ok = true;
    for (size_t i = 0; ok && i < input.size(); i += piece) {
      ok = decoder.Append(input.data() + i, std::min(piece, input.size() - i)).ok();
    }
    if (ok) (void)decoder.Finish();
    if (decoder.body().size() > limit) __builtin_trap();
  }
  static const TokenChecker checker("s3cret-token");
  (void)checker.Matches(input);
  bool stripped = false;
  (void)TokenFromFileContents(input, &stripped);
  return 0;
}
