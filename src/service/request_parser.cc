// JSON request parsing for the HTTP service with simdjson (DOM API, error codes, no exceptions);
// see request_parser.h.
#include "service/request_parser.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <unordered_map>

namespace neardup::service {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// The JSON path of `element` for error messages ("documents[2].metadata.a"), from its parts.
std::string PathString(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty() && part[0] != '[') out += '.';
    out += part;
  }
  return out.empty() ? "body" : out;
}

// InvalidArgument naming the first object (depth first) that holds a key twice: RFC 8259 leaves
// duplicate names undefined, so a request holding one is refused rather than guessed at.
Status CheckDuplicateKeys(element value, std::vector<std::string>* path) {
  object obj;
  simdjson::dom::array array;
  if (value.get_object().get(obj) == simdjson::SUCCESS) {
    std::vector<std::string_view> keys;
    for (auto [key, child] : obj) keys.push_back(key);
    std::sort(keys.begin(), keys.end());
    for (size_t i = 1; i < keys.size(); ++i) {
      if (keys[i] == keys[i - 1]) {
        return Status::InvalidArgument(PathString(*path) + ": duplicate key \"" +
                                       std::string(keys[i]) + "\"");
      }
    }
    for (auto [key, child] : obj) {
      path->emplace_back(key.empty() ? std::string("\"\"") : std::string(key));
      NEARDUP_RETURN_IF_ERROR(CheckDuplicateKeys(child, path));
      path->pop_back();
    }
  } else if (value.get_array().get(array) == simdjson::SUCCESS) {
    size_t index = 0;
    for (element child : array) {
      path->push_back("[" + std::to_string(index++) + "]");
      NEARDUP_RETURN_IF_ERROR(CheckDuplicateKeys(child, path));
      path->pop_back();
    }
  }
  return Status::Ok();
}

Result<element> ParseJson(simdjson::dom::parser& parser, std::string_view body) {
  element root;
  simdjson::error_code error = parser.parse(body.data(), body.size(), true).get(root);
  if (error == simdjson::UTF8_ERROR) return Status::InvalidUtf8("body: invalid UTF-8 in JSON");
  if (error != simdjson::SUCCESS) {
    return Status::InvalidArgument(std::string("body: invalid JSON: ") +
                                   simdjson::error_message(error));
  }
  std::vector<std::string> path;
  NEARDUP_RETURN_IF_ERROR(CheckDuplicateKeys(root, &path));
  return root;
}

std::string_view TrimJsonSpace(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// The verbatim text of the "metadata" member of `obj` (empty if absent or null).
simdjson::error_code RawMetadataOf(simdjson::ondemand::object obj, std::string* out) {
  out->clear();
  for (auto field : obj) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return error;
    if (key != "metadata") continue;
    simdjson::ondemand::value value;
    if (auto error = field.value().get(value)) return error;
    simdjson::ondemand::json_type type;
    if (auto error = value.type().get(type)) return error;
    std::string_view raw;
    if (type == simdjson::ondemand::json_type::object) {
      simdjson::ondemand::object metadata;
      if (auto error = value.get_object().get(metadata)) return error;
      if (auto error = metadata.raw_json().get(raw)) return error;
    } else if (type == simdjson::ondemand::json_type::string) {
      raw = value.raw_json_token();
    } else {
      continue;  // null (other types were refused by the DOM pass)
    }
    out->assign(TrimJsonSpace(raw));
  }
  return simdjson::SUCCESS;
}

// Replaces each document's metadata with its verbatim text in the body (so "1.0e5" stays
// "1.0e5"), for a body the DOM pass already validated. `batch`: documents are in "documents".
Status KeepMetadataVerbatim(std::string_view body, bool batch,
                            std::vector<DocumentRequest*> documents) {
  thread_local simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  auto fail = [](simdjson::error_code error) {
    return Status::InvalidArgument(std::string("body: invalid JSON: ") +
                                   simdjson::error_message(error));
  };
  if (auto error = parser.iterate(padded).get(doc)) return fail(error);
  if (auto error = doc.get_object().get(root)) return fail(error);
  if (!batch) {
    if (auto error = RawMetadataOf(root, &documents[0]->metadata_json)) return fail(error);
    return Status::Ok();
  }
  for (auto field : root) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return fail(error);
    if (key != "documents") continue;
    simdjson::ondemand::array array;
    if (auto error = field.value().get_array().get(array)) return fail(error);
    size_t index = 0;
    for (auto item : array) {
      simdjson::ondemand::object obj;
      if (auto error = item.get_object().get(obj)) return fail(error);
      if (index >= documents.size()) return Status::Internal("body: document count changed");
      if (auto error = RawMetadataOf(obj, &documents[index++]->metadata_json)) return fail(error);
    }
  }
  return Status::Ok();
}

Status ParseK(element value, const std::string& field, const RequestLimits& limits, int* k) {
  int64_t v;
  if (value.get_int64().get(v) != simdjson::SUCCESS) {
    return Status::InvalidArgument(field + ": must be an integer");
  }
  if (v < 0 || v > limits.MaxQueryK()) {
    return Status::InvalidArgument(field + ": " + std::to_string(v) + " is outside [0, " +
                                   std::to_string(limits.MaxQueryK()) + "]");
  }
  *k = static_cast<int>(v);
  return Status::Ok();
}

Status ParseLimit(element value, const std::string& field, const RequestLimits& limits,
                  size_t* limit) {
  int64_t v;
  if (value.get_int64().get(v) != simdjson::SUCCESS) {
    return Status::InvalidArgument(field + ": must be an integer");
  }
  if (v < 1 || static_cast<uint64_t>(v) > limits.max_limit) {
    return Status::InvalidArgument(field + ": " + std::to_string(v) + " is outside [1, " +
                                   std::to_string(limits.max_limit) + "]");
  }
  *limit = static_cast<size_t>(v);
  return Status::Ok();
}

Status ParseFingerprintField(std::string_view text, const std::string& field,
                             const RequestLimits& limits, Fingerprint* fp) {
  Result<Fingerprint> parsed = ParseFingerprint(text);
  if (!parsed.ok()) return parsed.status().WithContext(field);
  if (parsed->bits != limits.bits.value_or(64)) {
    return Status::InvalidArgument(field + ": " + std::to_string(parsed->bits) +
                                   "-bit fingerprint, the store holds " +
                                   std::to_string(limits.bits.value_or(64)) + "-bit");
  }
  *fp = *parsed;
  return Status::Ok();
}

// The "fingerprints" array of a batch query: 1..max_batch hex fingerprints of the store's width.
Status ParseFingerprintList(element value, const std::string& field, const RequestLimits& limits,
                            std::vector<Fingerprint>* out) {
  simdjson::dom::array array;
  if (value.get_array().get(array) != simdjson::SUCCESS) {
    return Status::InvalidArgument(field + ": must be an array of fingerprints");
  }
  if (array.size() == 0) return Status::InvalidArgument(field + ": must not be empty");
  if (array.size() > limits.max_batch) {
    return Status::ResourceExhausted(field + ": " + std::to_string(array.size()) +
                                     " fingerprints exceeds the batch limit of " +
                                     std::to_string(limits.max_batch));
  }
  out->reserve(array.size());
  size_t index = 0;
  for (element item : array) {
    const std::string name = field + "[" + std::to_string(index++) + "]";
    std::string_view s;
    if (item.get_string().get(s) != simdjson::SUCCESS) {
      return Status::InvalidArgument(name + ": must be a string");
    }
    Fingerprint fp;
    NEARDUP_RETURN_IF_ERROR(ParseFingerprintField(s, name, limits, &fp));
    out->push_back(fp);
  }
  return Status::Ok();
}

Status ParseText(element value, const std::string& field, const RequestLimits& limits,
                 std::optional<std::string>* text) {
  std::string_view s;
  if (value.get_string().get(s) != simdjson::SUCCESS) {
    return Status::InvalidArgument(field + ": must be a string");
  }
  if (s.empty()) return Status::InvalidArgument(field + ": must not be empty");
  if (s.size() > limits.max_text_bytes) {
    return Status::ResourceExhausted(field + ": " + std::to_string(s.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(limits.max_text_bytes));
  }
  text->emplace(s);
  return Status::Ok();
}

// Parses the document fields of `obj`; other keys must be in `extra` (handled by `on_extra`).
template <typename ExtraFn>
Status ParseDocument(object obj, const std::string& prefix, const RequestLimits& limits,
                     std::initializer_list<std::string_view> extra, DocumentRequest* doc,
                     ExtraFn&& on_extra) {
  bool has_id = false;
  for (auto [key, value] : obj) {
    const std::string field = prefix + std::string(key);
    if (key == "id") {
      std::string_view id;
      if (value.get_string().get(id) != simdjson::SUCCESS) {
        return Status::InvalidArgument(field + ": must be a string");
      }
      if (id.empty()) return Status::InvalidArgument(field + ": must not be empty");
      if (id.size() > limits.max_id_bytes) {
        return Status::InvalidArgument(field + ": " + std::to_string(id.size()) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(limits.max_id_bytes));
      }
      doc->id.assign(id);
      has_id = true;
    } else if (key == "text") {
      NEARDUP_RETURN_IF_ERROR(ParseText(value, field, limits, &doc->text));
    } else if (key == "fingerprint") {
      std::string_view s;
      if (value.get_string().get(s) != simdjson::SUCCESS) {
        return Status::InvalidArgument(field + ": must be a string");
      }
      Fingerprint fp;
      NEARDUP_RETURN_IF_ERROR(ParseFingerprintField(s, field, limits, &fp));
      doc->fingerprint = fp;
    } else if (key == "metadata") {
      const element_type type = value.type();
      if (type == element_type::NULL_VALUE) {
        doc->metadata_json.clear();
      } else if (type == element_type::OBJECT || type == element_type::STRING) {
        // A placeholder: KeepMetadataVerbatim puts the verbatim text here.
        doc->metadata_json = simdjson::minify(value);
      } else {
        return Status::InvalidArgument(field + ": must be an object, a string or null");
      }
    } else if (std::find(extra.begin(), extra.end(), key) != extra.end()) {
      NEARDUP_RETURN_IF_ERROR(on_extra(key, value, field));
    } else {
      return Status::InvalidArgument(field + ": unknown field");
    }
  }
  if (!has_id) return Status::InvalidArgument(prefix + "id: missing");
  if (doc->text.has_value() == doc->fingerprint.has_value()) {
    return Status::InvalidArgument(prefix + "text/fingerprint: give exactly one of them");
  }
  return Status::Ok();
}

Result<object> RootObject(simdjson::dom::parser& parser, std::string_view body) {
  Result<element> root = ParseJson(parser, body);
  if (!root.ok()) return root.status();
  object obj;
  if (root->get_object().get(obj) != simdjson::SUCCESS) {
    return Status::InvalidArgument("body: must be a JSON object");
  }
  return obj;
}

// After the DOM pass: verbatim metadata, its size limit, and ids unique within a batch.
Status FinishDocuments(std::string_view body, bool batch, const RequestLimits& limits,
                       std::vector<DocumentRequest*> documents) {
  bool any_metadata = false;
  for (const DocumentRequest* doc : documents) any_metadata |= !doc->metadata_json.empty();
  if (any_metadata) NEARDUP_RETURN_IF_ERROR(KeepMetadataVerbatim(body, batch, documents));
  std::unordered_map<std::string_view, size_t> first_index;
  for (size_t i = 0; i < documents.size(); ++i) {
    const std::string prefix = batch ? "documents[" + std::to_string(i) + "]." : "";
    const DocumentRequest& doc = *documents[i];
    if (doc.metadata_json.size() > limits.max_metadata_bytes) {
      return Status::InvalidArgument(
          prefix + "metadata: " + std::to_string(doc.metadata_json.size()) +
          " bytes exceeds the limit of " + std::to_string(limits.max_metadata_bytes));
    }
    auto [it, inserted] = first_index.emplace(doc.id, i);
    if (!inserted) {
      return Status::InvalidArgument(prefix + "id: \"" + doc.id + "\" repeats documents[" +
                                     std::to_string(it->second) +
                                     "].id (a batch may hold each id once)");
    }
  }
  return Status::Ok();
}

simdjson::dom::parser& ThreadParser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

// The "documents" array of a batch request: an array of at most max_batch objects, each one
// document (no per-document options), checked together by FinishDocuments.
Status ParseDocumentBatch(element documents, std::string_view body, const RequestLimits& limits,
                          std::vector<DocumentRequest>* out) {
  simdjson::dom::array array;
  if (documents.get_array().get(array) != simdjson::SUCCESS) {
    return Status::InvalidArgument("documents: must be an array");
  }
  if (array.size() > limits.max_batch) {
    return Status::ResourceExhausted("documents: " + std::to_string(array.size()) +
                                     " documents exceeds the batch limit of " +
                                     std::to_string(limits.max_batch));
  }
  if (array.size() == 0) return Status::InvalidArgument("documents: must not be empty");
  auto no_extra = [](std::string_view, element, const std::string&) { return Status::Ok(); };
  size_t index = 0;
  for (element item : array) {
    const std::string prefix = "documents[" + std::to_string(index++) + "].";
    object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) {
      return Status::InvalidArgument(prefix.substr(0, prefix.size() - 1) + ": must be an object");
    }
    DocumentRequest doc;
    NEARDUP_RETURN_IF_ERROR(ParseDocument(obj, prefix, limits, {}, &doc, no_extra));
    out->push_back(std::move(doc));
  }
  std::vector<DocumentRequest*> parsed;
  for (DocumentRequest& doc : *out) parsed.push_back(&doc);
  return FinishDocuments(body, true, limits, std::move(parsed));
}

}  // namespace

Result<AddRequest> ParseAddRequest(std::string_view body, const RequestLimits& limits) {
  Result<object> root = RootObject(ThreadParser(), body);
  if (!root.ok()) return root.status();
  AddRequest request;
  auto no_extra = [](std::string_view, element, const std::string&) { return Status::Ok(); };
  simdjson::dom::element documents;
  if (root->at_key("documents").get(documents) != simdjson::SUCCESS) {
    DocumentRequest doc;
    NEARDUP_RETURN_IF_ERROR(ParseDocument(*root, "", limits, {}, &doc, no_extra));
    request.documents.push_back(std::move(doc));
    NEARDUP_RETURN_IF_ERROR(FinishDocuments(body, false, limits, {&request.documents[0]}));
    return request;
  }
  for (auto [key, value] : *root) {
    if (key != "documents") {
      return Status::InvalidArgument(std::string(key) + ": unknown field");
    }
  }
  NEARDUP_RETURN_IF_ERROR(ParseDocumentBatch(documents, body, limits, &request.documents));
  return request;
}

namespace {

// The "k", "add" and "limit" fields of a check request.
Status ParseCheckOption(std::string_view key, element value, const std::string& field,
                        const RequestLimits& limits, CheckRequest* request) {
  if (key == "k") return ParseK(value, field, limits, &request->k);
  if (key == "limit") return ParseLimit(value, field, limits, &request->limit);
  std::string_view mode;
  if (value.get_string().get(mode) != simdjson::SUCCESS) {
    return Status::InvalidArgument(field + ": must be a string");
  }
  if (mode == "if_unique") {
    request->add = AddMode::kIfUnique;
  } else if (mode == "always") {
    request->add = AddMode::kAlways;
  } else if (mode == "never") {
    request->add = AddMode::kNever;
  } else {
    return Status::InvalidArgument(field + ": must be \"if_unique\", \"always\" or \"never\"");
  }
  return Status::Ok();
}

}  // namespace

Result<CheckRequest> ParseCheckRequest(std::string_view body, const RequestLimits& limits) {
  Result<object> root = RootObject(ThreadParser(), body);
  if (!root.ok()) return root.status();
  CheckRequest request;
  request.k = std::min(limits.default_k, limits.MaxQueryK());
  request.limit = std::min(limits.default_limit, limits.max_limit);
  simdjson::dom::element documents;
  if (root->at_key("documents").get(documents) != simdjson::SUCCESS) {
    NEARDUP_RETURN_IF_ERROR(
        ParseDocument(*root, "", limits, {"k", "add", "limit"}, &request.document,
                      [&](std::string_view key, element value, const std::string& field) -> Status {
                        return ParseCheckOption(key, value, field, limits, &request);
                      }));
    NEARDUP_RETURN_IF_ERROR(FinishDocuments(body, false, limits, {&request.document}));
    return request;
  }
  request.batch = true;
  for (auto [key, value] : *root) {
    const std::string field(key);
    if (key == "documents") continue;
    if (key != "k" && key != "add" && key != "limit") {
      return Status::InvalidArgument(field + ": unknown field");
    }
    NEARDUP_RETURN_IF_ERROR(ParseCheckOption(key, value, field, limits, &request));
  }
  NEARDUP_RETURN_IF_ERROR(ParseDocumentBatch(documents, body, limits, &request.documents));
  return request;
}

Result<QueryRequest> ParseQueryRequest(std::string_view body, const RequestLimits& limits) {
  Result<object> root = RootObject(ThreadParser(), body);
  if (!root.ok()) return root.status();
  QueryRequest request;
  request.k = std::min(limits.default_k, limits.MaxQueryK());
  request.limit = std::min(limits.default_limit, limits.max_limit);
  for (auto [key, value] : *root) {
    const std::string field(key);
    if (key == "text") {
      NEARDUP_RETURN_IF_ERROR(ParseText(value, field, limits, &request.text));
    } else if (key == "fingerprint") {
      std::string_view s;
      if (value.get_string().get(s) != simdjson::SUCCESS) {
        return Status::InvalidArgument(field + ": must be a string");
      }
      Fingerprint fp;
      NEARDUP_RETURN_IF_ERROR(ParseFingerprintField(s, field, limits, &fp));
      request.fingerprint = fp;
    } else if (key == "fingerprints") {
      NEARDUP_RETURN_IF_ERROR(ParseFingerprintList(value, field, limits, &request.fingerprints));
      request.batch = true;
    } else if (key == "k") {
      NEARDUP_RETURN_IF_ERROR(ParseK(value, field, limits, &request.k));
    } else if (key == "limit") {
      NEARDUP_RETURN_IF_ERROR(ParseLimit(value, field, limits, &request.limit));
    } else {
      return Status::InvalidArgument(field + ": unknown field");
    }
  }
  const int given =
      int{request.text.has_value()} + int{request.fingerprint.has_value()} + int{request.batch};
  if (given != 1) {
    return Status::InvalidArgument("text/fingerprint/fingerprints: give exactly one of them");
  }
  return request;
}

Result<QueryRequest> ParseQueryParams(const std::optional<std::string>& fingerprint,
                                      const std::optional<std::string>& text,
                                      const std::optional<std::string>& k,
                                      const std::optional<std::string>& limit,
                                      const RequestLimits& limits) {
  QueryRequest request;
  request.k = std::min(limits.default_k, limits.MaxQueryK());
  request.limit = std::min(limits.default_limit, limits.max_limit);
  auto parse_int = [](const std::string& s, int64_t* v) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && ptr == s.data() + s.size();
  };
  if (fingerprint.has_value()) {
    Fingerprint fp;
    NEARDUP_RETURN_IF_ERROR(ParseFingerprintField(*fingerprint, "fingerprint", limits, &fp));
    request.fingerprint = fp;
  }
  if (text.has_value()) {
    if (text->empty()) return Status::InvalidArgument("text: must not be empty");
    if (text->size() > limits.max_text_bytes) {
      return Status::ResourceExhausted("text: exceeds the limit of " +
                                       std::to_string(limits.max_text_bytes) + " bytes");
    }
    request.text = *text;
  }
  if (k.has_value()) {
    int64_t v;
    if (!parse_int(*k, &v)) return Status::InvalidArgument("k: must be an integer");
    if (v < 0 || v > limits.MaxQueryK()) {
      return Status::InvalidArgument("k: " + std::to_string(v) + " is outside [0, " +
                                     std::to_string(limits.MaxQueryK()) + "]");
    }
    request.k = static_cast<int>(v);
  }
  if (limit.has_value()) {
    int64_t v;
    if (!parse_int(*limit, &v)) return Status::InvalidArgument("limit: must be an integer");
    if (v < 1 || static_cast<uint64_t>(v) > limits.max_limit) {
      return Status::InvalidArgument("limit: " + std::to_string(v) + " is outside [1, " +
                                     std::to_string(limits.max_limit) + "]");
    }
    request.limit = static_cast<size_t>(v);
  }
  if (request.text.has_value() == request.fingerprint.has_value()) {
    return Status::InvalidArgument("text/fingerprint: give exactly one of them");
  }
  return request;
}

}  // namespace neardup::service
