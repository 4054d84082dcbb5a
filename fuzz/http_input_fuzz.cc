// libFuzzer target for the request-side HTTP pieces that are ours (src/service/http_input.h): any
// bytes as a gzip/deflate/identity body, fed in arbitrary pieces, must give a body or a Status
// (never more than the limit held in memory), and any bytes as a request target, a request head's
// fields, an Authorization value or a token file must be accepted or refused without a crash or
// sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
  // The same bytes as a request target and as a head (one "name: value" field per line): each
  // is decoded or refused, never a crash, and a decoded target holds no NUL.
  if (neardup::Result<RequestTarget> target = ParseRequestTarget(input); target.ok()) {
    if (target->path.find('\0') != std::string::npos) __builtin_trap();
  }
  std::vector<HeaderField> fields;
  for (size_t at = 0; at < input.size();) {
    const size_t end = std::min(input.find('\n', at), input.size());
    const std::string_view line = input.substr(at, end - at);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      fields.emplace_back(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
    }
    at = end + 1;
  }
  (void)CheckRequestHead(10 + data[0] % 2, fields, input);
  static const TokenChecker checker("s3cret-token");
  (void)checker.Matches(input);
  bool stripped = false;
  (void)TokenFromFileContents(input, &stripped);
  return 0;
}
