// libFuzzer target for the HTTP service's request parser: any bytes given as a request body (or
// as URL parameters) must yield a request or a Status, never a crash, hang or sanitizer report.
//
// Build and run (see docs/api.md, "Fuzzing"):
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DNEARDUP_BUILD_FUZZ=ON
//   ninja -C build-fuzz request_parser_fuzz
//   build-fuzz/request_parser_fuzz -max_total_time=30 fuzz/corpus/request_parser
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "service/request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace neardup::service;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  RequestLimits limits;
  limits.max_batch = 64;
  limits.max_text_bytes = 4096;
  // The first byte picks the fingerprint width, so 128-bit parsing is covered too.
  limits.bits = (size > 0 && (data[0] & 1)) ? 128 : 64;
  limits.max_query_k = limits.bits;
  (void)ParseAddRequest(body, limits);
  (void)ParseCheckRequest(body, limits);
  (void)ParseQueryRequest(body, limits);
  // URL parameters: split the input at the first three NUL bytes.
  std::string_view parts[4];
  std::string_view rest = body;
  for (int i = 0; i < 3; ++i) {
    size_t nul = rest.find('\0');
    parts[i] = rest.substr(0, nul);
    rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  }
  parts[3] = rest;
  (void)ParseQueryParams(std::string(parts[0]), std::nullopt, std::string(parts[1]),
                         std::string(parts[2]), limits);
  return 0;
}
