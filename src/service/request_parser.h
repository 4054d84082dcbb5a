// Parsing and validation of the JSON request bodies of the neardup HTTP service (see docs/api.md).
//
// Internal header. Pure functions of their input (no I/O), safe to call from any thread; every
// malformed input yields a Status naming the offending field, never a crash or an exception. A key
// given twice in any object, an empty text and an id given twice in one batch are refused. The
// fuzz target fuzz/request_parser_fuzz.cc drives these functions.
#ifndef NEARDUP_SERVICE_REQUEST_PARSER_H_
#define NEARDUP_SERVICE_REQUEST_PARSER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/fingerprint.h"
#include "neardup/server.h"  // RequestLimits
#include "neardup/status.h"

namespace neardup::service {

// One document of an add or check request: an id plus exactly one of text or fingerprint.
struct DocumentRequest {
  std::string id;
  std::optional<std::string> text;
  std::optional<Fingerprint> fingerprint;
  // The "metadata" value (object or string) exactly as the request wrote it (so numbers such as
  // 1.0e5 come back unchanged), or empty for none/null.
  std::string metadata_json;
};

struct AddRequest {
  std::vector<DocumentRequest> documents;
};

enum class AddMode { kIfUnique, kAlways, kNever };

struct CheckRequest {
  DocumentRequest document;  // the single form
  // The batch form ({"documents": [doc, ...], ...}): checked in order, each against the store and
  // the earlier added documents of the batch.
  bool batch = false;
  std::vector<DocumentRequest> documents;
  int k = 3;
  AddMode add = AddMode::kIfUnique;
  size_t limit = 100;  // duplicates listed at most (the reply says "truncated" past it)
};

struct QueryRequest {
  std::optional<std::string> text;
  std::optional<Fingerprint> fingerprint;
  // The batch form {"fingerprints": [...]}: each searched with the same k and limit (`batch`).
  std::vector<Fingerprint> fingerprints;
  bool batch = false;
  int k = 3;
  size_t limit = 100;
};

// POST /v1/documents: {"documents": [doc, ...]} or a single doc object.
Result<AddRequest> ParseAddRequest(std::string_view body, const RequestLimits& limits);
// POST /v1/check: doc fields plus optional "k", "add" ("if_unique" | "always" | "never") and
// "limit" (1..limits.max_limit, default limits.default_limit), or the batch form
// {"documents": [doc, ...], "k", "add", "limit"} (at most limits.max_batch documents).
Result<CheckRequest> ParseCheckRequest(std::string_view body, const RequestLimits& limits);
// POST /v1/query: {"text" | "fingerprint", "k", "limit"}, or the batch form
// {"fingerprints": [hex, ...], "k", "limit"} (1..limits.max_batch fingerprints).
Result<QueryRequest> ParseQueryRequest(std::string_view body, const RequestLimits& limits);
// GET /v1/query?fingerprint=..&k=..&limit=..: the same from URL parameters (`get` returns the
// parameter's value or nullopt).
Result<QueryRequest> ParseQueryParams(const std::optional<std::string>& fingerprint,
                                      const std::optional<std::string>& text,
                                      const std::optional<std::string>& k,
                                      const std::optional<std::string>& limit,
                                      const RequestLimits& limits);

}  // namespace neardup::service

#endif  // NEARDUP_SERVICE_REQUEST_PARSER_H_
