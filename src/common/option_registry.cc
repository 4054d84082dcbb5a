// The option registry (neardup/options.h): the table of every option, the checks of a given value,
// the reader and store options they fill, and the one reader and writer of the fingerprint-options
// string a store records (FingerprintOptionsToString / ParseFingerprintOptions,
// neardup/fingerprinter.h). The fingerprint and dedup options are filled in
// src/fingerprint/fingerprint_options.cc and src/dedup/dedup_options.cc.
#include "neardup/options.h"

#include <charconv>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>
#include "common/option_fields.h"
#include "neardup/index_planner.h"

namespace neardup {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxStoreIndexedK = 15;  // DocumentStore's limit (StoreOptions::indexed_k)
constexpr uint32_t kF = kFingerprintScope, kR = kReaderScope, kD = kDedupScope, kS = kStoreScope,
                   kV = kServerScope, kC = kCommandScope;
using T = OptionType;

// key, flag, negated, type, scope, default, min, max, choices, help, aliases, short flag, recorded
// The fingerprint options come first, in the order of the fingerprint-options string.
const OptionSpec kOptions[] = {
    {"profile", "profile", false, T::kChoice, kF, "neardup", 0, 0, "neardup|yanyiwu",
     "neardup (the options below) | yanyiwu (reproduce yanyiwu/simhash: jieba keywords, Jenkins "
     "hash; default --top-k 5)",
     "", nullptr, true},
    {"bits", "bits", false, T::kInt, kF, "64", 64, 128, "64|128", "fingerprint width: 64 or 128",
     "", nullptr, true},
    {"hash", "hash", false, T::kChoice, kF, "xxh3", 0, 0, "xxh3|jenkins",
     "feature hash: xxh3 | jenkins", "", nullptr, true},
    {"tokenizer", "tokenizer", false, T::kChoice, kF, "auto", 0, 0, "auto|jieba|icu|char",
     "auto (jieba for Chinese, ICU words otherwise) | jieba | icu | char", "", nullptr, true},
    {"shingle", "shingle", false, T::kInt, kF, "2", 1, 16, nullptr,
     "words per feature (word tokenizers)", "", nullptr, true},
    {"ngram", "ngram", false, T::kInt, kF, "4", 1, 32, nullptr,
     "characters per feature for --tokenizer char", "", nullptr, true},
    {"weighting", "weighting", false, T::kChoice, kF, "tf", 0, 0, "tf|tfidf|uniform",
     "tf | tfidf | uniform", "", nullptr, true},
    {"sublinear_tf", nullptr, false, T::kBool, kF, nullptr, 0, 0, nullptr,
     "1 + ln(tf) instead of tf", "", nullptr, true},
    {"top_k", "top_k", false, T::kInt, kF, "0", 0, 1e9, nullptr,
     "keep only the K heaviest features (0 = all; keywords: 20, yanyiwu: 5)", "", nullptr, true},
    {"drop_single_char_words", nullptr, false, T::kBool, kF, nullptr, 0, 0, nullptr,
     "drop single-character words", "", nullptr, true},
    {"drop_stop_words", nullptr, false, T::kBool, kF, nullptr, 0, 0, nullptr,
     "drop jieba's stop words", "", nullptr, true},
    {"jieba_hmm", nullptr, false, T::kBool, kF, nullptr, 0, 0, nullptr,
     "HMM for unknown Chinese words", "", nullptr, true},
    {"idf", "idf", false, T::kPath, kF, nullptr, 0, 0, nullptr,
     "IDF table (\"word idf\" lines, e.g. from `neardup idf`)", "", nullptr, true},
    {"jieba_dir", "jieba_dir", false, T::kPath, kF, nullptr, 0, 0, nullptr,
     "directory of jieba's dict.txt, finalseg/, analyse/", "", nullptr, true},
    {"strip_markup", "keep_markup", true, T::kBool, kF, nullptr, 0, 0, nullptr,
     "do not strip HTML/XML markup or decode entities (stripped by default)", "no_strip_markup",
     nullptr, true},
    {"nfkc", "no_nfkc", true, T::kBool, kF, nullptr, 0, 0, nullptr,
     "skip Unicode NFKC normalisation", "", nullptr, true},
    {"case_fold", "no_casefold", true, T::kBool, kF, nullptr, 0, 0, nullptr,
     "skip Unicode case folding", "no_case_fold", nullptr, true},
    {"t2s", "no_t2s", true, T::kBool, kF, nullptr, 0, 0, nullptr,
     "skip Traditional -> Simplified Chinese (OpenCC)", "", nullptr, true},
    {"fold_whitespace", "no_whitespace_folding", true, T::kBool, kF, nullptr, 0, 0, nullptr,
     "keep whitespace as it is", "", nullptr, true},
    {"opencc_config", nullptr, false, T::kPath, kF, nullptr, 0, 0, nullptr,
     "OpenCC configuration file", "", nullptr, true},
    {"replace_invalid_utf8", "replace_invalid_utf8", false, T::kBool, kF, nullptr, 0, 0, nullptr,
     "replace invalid UTF-8 with U+FFFD instead of rejecting the document", "", nullptr, false},

    {"id_field", "id_field", false, T::kString, kR, "id", 0, 0, nullptr,
     "JSONL field holding the document id; a dotted path reads nested objects (meta.id)", "",
     nullptr, false},
    {"text_field", "text_field", false, T::kString, kR, "text", 0, 0, nullptr,
     "JSONL field holding the text; a dotted path reads nested objects (content.text)", "", nullptr,
     false},
    {"lines", "lines", false, T::kBool, kR, nullptr, 0, 0, nullptr,
     "every input is plain text with one document per line (id: file:line)", "", nullptr, false},
    {"stdin_text", "stdin_text", false, T::kBool, kR, nullptr, 0, 0, nullptr,
     "standard input is one plain-text document, not JSONL", "", nullptr, false},
    {"strict", "strict", false, T::kBool, kR, nullptr, 0, 0, nullptr,
     "stop (exit 1) at the first malformed record, missing id or shared id instead of warning "
     "and going on",
     "", nullptr, false},
    {"threads", "threads", false, T::kInt, kR, "0", 0, 65536, nullptr,
     "worker threads (0 = all cores)", "", "-j", false},

    {"threshold", "threshold", false, T::kDouble, kD, "0.5", 0, 1, nullptr,
     "shingle Jaccard similarity of a duplicate pair; sets the LSH bands/rows and the "
     "verification threshold (see neardup plan --threshold)",
     "", nullptr, false},
    {"bands", "bands", false, T::kInt, kD, "auto", 1, 1024, nullptr,
     "LSH bands (with --rows; default: chosen from --threshold)", "", nullptr, false},
    {"rows", "rows", false, T::kInt, kD, "auto", 1, 64, nullptr, "LSH rows per band (with --bands)",
     "", nullptr, false},
    {"bucket_window", "bucket_window", false, T::kInt, kD, "64", 1, 4294967295.0, nullptr,
     "an LSH bucket pairs each document with the next N in input order", "", nullptr, false},
    {"candidates", "candidates", false, T::kChoice, kD, "lsh", 0, 0, "lsh|lsh+simhash|simhash",
     "candidate stages: lsh (MinHash LSH) | lsh+simhash (also fingerprints within -k) | simhash "
     "(fingerprints within -k only)",
     "", nullptr, false},
    {"k", "k", false, T::kInt, kD, "3", 0, 16, nullptr,
     "largest Hamming distance of a SimHash-join candidate pair (at most bits/8)", "max_distance",
     "-k", false},
    {"keep", "keep", false, T::kString, kD, "first", 0, 0, nullptr,
     "which document of a cluster to keep: first (first in input order) | longest (longest "
     "normalised text) | field:NAME (highest numeric field)",
     "", nullptr, false},
    {"verify_threshold", "verify_threshold", false, T::kDouble, kD, "threshold", 0, 1, nullptr,
     "drop candidate pairs whose shingle Jaccard is below this (default: --threshold; 0 = no "
     "verification)",
     "verify", nullptr, false},
    {"containment_threshold", "containment", false, T::kDouble, kD, "0.9", 0, 1, nullptr,
     "a pair whose smaller document lies at least this much inside the larger is a duplicate "
     "(reason \"contained\"), given the size guard below; 0 = off",
     "", nullptr, false},
    {"containment_min_shingles", "containment_min_shingles", false, T::kDouble, kD, "30", 0, 1e9,
     nullptr,
     "size guard of --containment: the smaller document has at least this many shingles ...", "",
     nullptr, false},
    {"containment_min_ratio", "containment_min_ratio", false, T::kDouble, kD, "0.6", 0, 1, nullptr,
     "... and at least this fraction of the larger one's (a quote does not swallow an article)", "",
     nullptr, false},
    {"edited_threshold", "edited", false, T::kDouble, kD, "0.8", 0, 1, nullptr,
     "a pair whose words / Han characters (counted: multiset Jaccard) reach this Jaccard is a "
     "duplicate (reason "
     "\"edited\": a lightly edited copy) when its shingle Jaccard reaches --edited-min-jaccard; "
     "0 = off",
     "", nullptr, false},
    {"edited_min_jaccard", "edited_min_jaccard", false, T::kDouble, kD, "0.45", 0, 1, nullptr,
     "... the shingle Jaccard an edited pair needs at least (> 0; the LSH stage is planned down "
     "to it)",
     "", nullptr, false},
    {"boilerplate", "boilerplate", false, T::kBool, kD, nullptr, 0, 0, nullptr,
     "weigh down shingles found in many documents of the inputs (counted in the first pass: "
     "templates, footers); off by default because the answer then depends on the corpus "
     "(docs/quality.md)",
     "!no_boilerplate", nullptr, false},
    {"boilerplate_min_documents", "boilerplate_min_documents", false, T::kInt, kD, "20", 2,
     4294967295.0, nullptr,
     "a shingle in at least this many documents (or more, when the frequency sketch cannot "
     "resolve so few: summary.json) is boilerplate",
     "", nullptr, false},
    {"boilerplate_sketch_mb", "boilerplate_sketch_mb", false, T::kInt, kD, "512", 1, 65536, nullptr,
     "largest size in MiB of the boilerplate weights' frequency sketch (a quarter of the input's "
     "size when that is less); a loaded sketch raises the boilerplate bar above "
     "--boilerplate-min-documents, and above four times this much input one document in s is "
     "counted (summary.json)",
     "", nullptr, false},
    {"temp_dir", "temp_dir", false, T::kPath, kD, nullptr, 0, 0, nullptr,
     "directory for the run's temporary files (band keys, candidate pairs, shingles; unlinked at "
     "once, so never left behind; default: $TMPDIR or /tmp)",
     "", nullptr, false},
    {"in_memory", "in_memory", false, T::kBool, kD, nullptr, 0, 0, nullptr,
     "keep band keys, candidate pairs and shingles in memory instead of temporary files (same "
     "result, more memory)",
     "", nullptr, false},

    // indexed_k's range is the planner's (bits/4, `neardup plan`); a store takes at most
    // kMaxStoreIndexedK (ApplyTo(StoreOptions*)).
    {"indexed_k", "indexed_k", false, T::kInt, kS, "3", 0, 32, nullptr,
     "largest k the index tables serve exactly (larger k scans); a store takes at most 15, "
     "records it at creation and refuses another",
     "~max_k", nullptr, false},
    {"memory_budget", "memory_budget", false, T::kString, kS, "128/fp", 0, 0, nullptr,
     "memory budget of the index: bytes (640M, 1.5G, 64e9) or bytes per fingerprint (128/fp); "
     "0 = unlimited",
     "", nullptr, false},
    {"expected_size", "expected_size", false, T::kDouble, kS, "1e7", 1, 1e15, nullptr,
     "documents (fingerprints) the index design is planned for", "~expected_documents", nullptr,
     false},
    {"memtable_limit", "memtable_limit", false, T::kInt, kS, "65536", 1, 1e9, nullptr,
     "documents held in memory before a segment is written", "", nullptr, false},
    {"rule", "rule", false, T::kChoice, kS, "dedup", 0, 0, "dedup|simhash",
     "duplicate rule of a new store: dedup (the rule of `neardup dedup`: exact, whitespace-only, "
     "or MinHash LSH candidates verified by the pair rule; --threshold, --bands, --rows and "
     "--bucket-window as in dedup) | simhash (fingerprints within -k only; stores bare "
     "fingerprints)",
     "", nullptr, false},
    {"wal_flush_bytes", "wal_flush_bytes", false, T::kInt, kS, "67108864", 0, 9.2e18, nullptr,
     "flush the memtable to a segment when the log reaches this many bytes (bounds the log, so "
     "the replay at the next open; 0 = no bound)",
     "", nullptr, false},
    {"sync", "sync", false, T::kChoice, kS, "every", 0, 0, "every|group|none",
     "when a write is acknowledged: every (after its batch is fsync'ed; concurrent writes share "
     "one fsync) | group (the same, but a batch first waits --group-commit-ms for more writers: "
     "fewer fsyncs) | none (no fsync before Flush/Close: not power-loss safe)",
     "", nullptr, false},
    {"group_commit_ms", "group_commit_ms", false, T::kInt, kS, "2", 0, 1000, nullptr,
     "milliseconds a write batch waits for more writers before its fsync (--sync group only)", "",
     nullptr, false},
    {"verify_checksums", "no_verify", true, T::kBool, kS, nullptr, 0, 0, nullptr,
     "skip the whole-file segment checksums at open (headers are still checked)", "", nullptr,
     false},

    // The HTTP service (service::ServerOptions, set by service::ApplyServerOptions): `neardup
    // serve`'s flags. The defaults are ServerOptions{}'s (tests/options_test.cc checks it).
    {"host", "host", false, T::kString, kV, "127.0.0.1", 0, 0, nullptr,
     "address to bind (loopback unless told otherwise)", "", nullptr, false},
    {"port", "port", false, T::kInt, kV, "8080", 0, 65535, nullptr, "port (0 = any free port)", "",
     nullptr, false},
    {"poll_threads", "poll_threads", false, T::kInt, kV, "0", 0, 65536, nullptr,
     "polling threads (0 = nproc): read requests, answer /healthz and /metrics; connections are "
     "multiplexed, so this does not bound the number of clients",
     "", nullptr, false},
    {"workers", "workers", false, T::kInt, kV, "0", 0, 65536, nullptr,
     "threads running text, write and scan handlers (0 = max(32, 8 x nproc)); a write holds one "
     "through its fsync, and concurrent writes share one fsync",
     "", nullptr, false},
    {"token_file", "token_file", false, T::kPath, kV, nullptr, 0, 0, nullptr,
     "read the bearer token required for writes from the first line of a file (preferred; a "
     "CRLF line end is stripped with a warning)",
     "", nullptr, false},
    {"token", "token", false, T::kString, kV, nullptr, 0, 0, nullptr,
     "bearer token on the command line (visible in `ps`: prefer --token-file or $NEARDUP_TOKEN, "
     "which is used when neither option is given)",
     "", nullptr, false},
    {"auth_reads", "auth_reads", false, T::kBool, kV, nullptr, 0, 0, nullptr,
     "require the token for reads too", "", nullptr, false},
    {"max_body_bytes", "max_body_bytes", false, T::kInt, kV, "67108864", 1, 9.2e18, nullptr,
     "request body limit of writes, counted after chunked framing and gzip/deflate decoding", "",
     nullptr, false},
    {"max_query_body_bytes", "max_query_body_bytes", false, T::kInt, kV, "1048576", 1, 9.2e18,
     nullptr, "request body limit of reads (query, get, stats), counted while inflating", "",
     nullptr, false},
    {"max_response_bytes", "max_response_bytes", false, T::kInt, kV, "16777216", 1, 9.2e18, nullptr,
     "bytes of one reply: longer result lists are cut (\"truncated\": true)", "", nullptr, false},
    {"max_buffered_bytes", "max_buffered_bytes", false, T::kInt, kV, "268435456", 1, 9.2e18,
     nullptr,
     "bytes held across all connections for request bodies and unsent replies; past it requests "
     "get 503",
     "", nullptr, false},
    {"malloc_arenas", "malloc_arenas", false, T::kInt, kV, "2", 0, 1024, nullptr,
     "glibc malloc arenas (M_ARENA_MAX; 0 = glibc's default of 8 per core): fewer return the "
     "memory of a burst to the system",
     "", nullptr, false},
    {"max_batch", "max_batch", false, T::kInt, kV, "10000", 1, 1e9, nullptr,
     "documents per add request", "", nullptr, false},
    {"request_timeout_seconds", "request_timeout", false, T::kInt, kV, "30", 1, 3600, nullptr,
     "whole-request deadline in seconds: request line, headers, body and reply", "timeout", nullptr,
     false},
    {"idle_timeout_seconds", "idle_timeout", false, T::kInt, kV, "60", 1, 3600, nullptr,
     "close a keep-alive connection without traffic for this many seconds", "", nullptr, false},
    {"max_connections", "max_connections", false, T::kInt, kV, "0", 0, 16777216, nullptr,
     "open connections (0 = the open-file limit minus 64)", "", nullptr, false},
    {"shutdown_timeout_seconds", "shutdown_timeout", false, T::kInt, kV, "5", 0, 3600, nullptr,
     "on SIGTERM/SIGINT, seconds to let in-flight requests finish before closing every "
     "connection",
     "", nullptr, false},

    // Options of one command, read by that command only (no API struct, no Python keyword).
    {"no_text", "no_text", false, T::kBool, kC, nullptr, 0, 0, nullptr,
     "do not load the text fingerprinter (a simhash-rule store then takes fingerprints "
     "only)",
     "", nullptr, false},
    {"list", "list", false, T::kBool, kC, nullptr, 0, 0, nullptr,
     "print every candidate design and the Pareto frontier", "", nullptr, false},
};

// Whether the '|'-separated `list` holds `name` (with `prefix` before it: '~' for an old name).
bool Contains(const char* list, std::string_view name, char prefix = 0) {
  if (list == nullptr) return false;
  std::string_view rest(list);
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    std::string_view entry = rest.substr(0, bar);
    if (prefix == 0 && entry == name) return true;
    if (prefix != 0 && entry.size() == name.size() + 1 && entry[0] == prefix &&
        entry.substr(1) == name) {
      return true;
    }
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return false;
}

std::string Quoted(std::string_view text) {
  std::string out(1, '"');  // appends, not "\"" + ...: GCC 12 reports a false -Wrestrict
  out += text;
  out += '"';
  return out;
}

// ---- the fields of FingerprintOptions by key ---------------------------------------------------

struct Names {
  const char* name;
  int value;
};
constexpr Names kProfiles[] = {{"neardup", static_cast<int>(HashProfile::kNeardup)},
                               {"yanyiwu", static_cast<int>(HashProfile::kYanyiwuSimhash)}};
constexpr Names kHashes[] = {{"xxh3", static_cast<int>(FeatureHash::kXxh3)},
                             {"jenkins", static_cast<int>(FeatureHash::kJenkinsLookup3)}};
constexpr Names kTokenizers[] = {{"auto", static_cast<int>(Tokenizer::kAuto)},
                                 {"jieba", static_cast<int>(Tokenizer::kJieba)},
                                 {"icu", static_cast<int>(Tokenizer::kIcuWord)},
                                 {"char", static_cast<int>(Tokenizer::kCharNgram)}};
constexpr Names kWeightings[] = {{"tf", static_cast<int>(Weighting::kTermFrequency)},
                                 {"tfidf", static_cast<int>(Weighting::kTfIdf)},
                                 {"uniform", static_cast<int>(Weighting::kUniform)}};

template <size_t N>
std::string NameOf(const Names (&names)[N], int value) {
  for (const Names& n : names) {
    if (n.value == value) return n.name;
  }
  return std::to_string(value);
}
template <typename Enum, size_t N>
Status SetEnum(const Names (&names)[N], std::string_view text, Enum* out) {
  for (const Names& n : names) {
    if (text == n.name) {
      *out = static_cast<Enum>(n.value);
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown value " + Quoted(text));
}

std::string Escape(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (c <= 0x20 || c == '%' || c == '=' || c == 0x7f) {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

Result<std::string> Unescape(std::string_view value) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%') {
      out += value[i];
      continue;
    }
    unsigned byte = 0;
    if (i + 2 >= value.size()) return Status::InvalidArgument("truncated %-escape");
    auto [end, error] = std::from_chars(value.data() + i + 1, value.data() + i + 3, byte, 16);
    if (error != std::errc() || end != value.data() + i + 3) {
      return Status::InvalidArgument("bad %-escape");
    }
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

// The value of a recorded fingerprint option as the string writes it (before escaping).
std::string FieldText(std::string_view key, const FingerprintOptions& o) {
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  const FeatureOptions& f = o.features;
  const NormalizeOptions& n = o.normalize;
  if (key == "profile") return NameOf(kProfiles, static_cast<int>(o.profile));
  if (key == "bits") return std::to_string(o.bits);
  if (key == "hash") return NameOf(kHashes, static_cast<int>(o.hash));
  if (key == "tokenizer") return NameOf(kTokenizers, static_cast<int>(f.tokenizer));
  if (key == "shingle") return std::to_string(f.shingle_size);
  if (key == "ngram") return std::to_string(f.char_ngram_size);
  if (key == "weighting") return NameOf(kWeightings, static_cast<int>(f.weighting));
  if (key == "sublinear_tf") return flag(f.sublinear_tf);
  if (key == "top_k") return std::to_string(f.top_k);
  if (key == "drop_single_char_words") return flag(f.drop_single_char_words);
  if (key == "drop_stop_words") return flag(f.drop_stop_words);
  if (key == "jieba_hmm") return flag(f.jieba_hmm);
  if (key == "idf") return f.idf_path;
  if (key == "jieba_dir") return f.jieba_dir;
  if (key == "strip_markup") return flag(n.strip_markup);
  if (key == "nfkc") return flag(n.nfkc);
  if (key == "case_fold") return flag(n.case_fold);
  if (key == "t2s") return flag(n.traditional_to_simplified);
  if (key == "fold_whitespace") return flag(n.fold_whitespace);
  if (key == "opencc_config") return n.opencc_config;
  if (key == "replace_invalid_utf8") return flag(n.replace_invalid_utf8);
  return "";
}

// Sets the fingerprint field `key` from a checked value.
void SetField(std::string_view key, const OptionValue& value, FingerprintOptions* o) {
  FeatureOptions& f = o->features;
  NormalizeOptions& n = o->normalize;
  auto text = [&] { return std::get<std::string>(value); };
  auto integer = [&] { return std::get<int64_t>(value); };
  auto boolean = [&] { return std::get<bool>(value); };
  if (key == "profile") {
    (void)SetEnum(kProfiles, text(), &o->profile);  // checked against the choices already
  } else if (key == "bits") {
    o->bits = static_cast<int>(integer());
  } else if (key == "hash") {
    (void)SetEnum(kHashes, text(), &o->hash);
  } else if (key == "tokenizer") {
    (void)SetEnum(kTokenizers, text(), &f.tokenizer);
  } else if (key == "shingle") {
    f.shingle_size = static_cast<int>(integer());
  } else if (key == "ngram") {
    f.char_ngram_size = static_cast<int>(integer());
  } else if (key == "weighting") {
    (void)SetEnum(kWeightings, text(), &f.weighting);
  } else if (key == "sublinear_tf") {
    f.sublinear_tf = boolean();
  } else if (key == "top_k") {
    f.top_k = static_cast<size_t>(integer());
  } else if (key == "drop_single_char_words") {
    f.drop_single_char_words = boolean();
  } else if (key == "drop_stop_words") {
    f.drop_stop_words = boolean();
  } else if (key == "jieba_hmm") {
    f.jieba_hmm = boolean();
  } else if (key == "idf") {
    f.idf_path = text();
  } else if (key == "jieba_dir") {
    f.jieba_dir = text();
  } else if (key == "strip_markup") {
    n.strip_markup = boolean();
  } else if (key == "nfkc") {
    n.nfkc = boolean();
  } else if (key == "case_fold") {
    n.case_fold = boolean();
  } else if (key == "t2s") {
    n.traditional_to_simplified = boolean();
  } else if (key == "fold_whitespace") {
    n.fold_whitespace = boolean();
  } else if (key == "opencc_config") {
    n.opencc_config = text();
  } else if (key == "replace_invalid_utf8") {
    n.replace_invalid_utf8 = boolean();
  }
}

// ---- checking a value --------------------------------------------------------------------------

// The value of `spec` in its type, or InvalidArgument (without the option's name).
Result<OptionValue> Checked(const OptionSpec& spec, const OptionValue& given) {
  switch (spec.type) {
    case T::kBool:
      if (!std::holds_alternative<bool>(given)) return Status::InvalidArgument("expected a switch");
      return given;
    case T::kInt: {
      if (!std::holds_alternative<int64_t>(given)) {
        return Status::InvalidArgument("expected a whole number");
      }
      const int64_t v = std::get<int64_t>(given);
      if (spec.choices != nullptr) {
        if (!Contains(spec.choices, std::to_string(v))) {
          std::string list(spec.choices);
          for (char& c : list) c = c == '|' ? ',' : c;
          return Status::InvalidArgument("must be one of " + list + ", got " + std::to_string(v));
        }
      } else if (static_cast<double>(v) < spec.min || static_cast<double>(v) > spec.max) {
        // Every thread count (the CLI's -j, serve's --poll-threads/--workers, Python threads=)
        // is refused in the same words.
        if (std::string_view(spec.key) == "threads" || std::string_view(spec.key) == "workers" ||
            std::string_view(spec.key) == "poll_threads") {
          return Status::InvalidArgument("must be 0 (all cores) to 65536, got " +
                                         std::to_string(v));
        }
        char range[64];
        std::snprintf(range, sizeof(range), "[%.0f, %.0f]", spec.min, spec.max);
        return Status::InvalidArgument("must be in " + std::string(range) + ", got " +
                                       std::to_string(v));
      }
      return given;
    }
    case T::kDouble: {
      double v = 0;
      if (std::holds_alternative<double>(given)) {
        v = std::get<double>(given);
      } else if (std::holds_alternative<int64_t>(given)) {
        v = static_cast<double>(std::get<int64_t>(given));
      } else {
        return Status::InvalidArgument("expected a number");
      }
      if (!(v >= spec.min && v <= spec.max)) {
        char text[96];
        std::snprintf(text, sizeof(text), "must be in [%g, %g], got %g", spec.min, spec.max, v);
        return Status::InvalidArgument(text);
      }
      return OptionValue(v);
    }
    case T::kString:
    case T::kPath:
      if (!std::holds_alternative<std::string>(given)) {
        return Status::InvalidArgument("expected a string");
      }
      if (std::get<std::string>(given).find('\0') != std::string::npos) {
        return Status::InvalidArgument("contains a NUL byte");
      }
      if (std::string_view(spec.key) == "memory_budget") {
        // The one parser of a budget, at once: a bad one is a usage error of every command.
        Result<MemoryBudget> budget = ParseMemoryBudget(std::get<std::string>(given));
        if (!budget.ok()) return budget.status();
      }
      return given;
    case T::kChoice:
      if (!std::holds_alternative<std::string>(given)) {
        return Status::InvalidArgument("expected a string");
      }
      if (!Contains(spec.choices, std::get<std::string>(given))) {
        std::string list(spec.choices);
        for (char& c : list) c = c == '|' ? ',' : c;
        return Status::InvalidArgument("expected one of " + list + ", got " +
                                       Quoted(std::get<std::string>(given)));
      }
      return given;
  }
  return Status::Internal("unknown option type");
}

// The text form of a value (the command line's, the MANIFEST string's).
// GCC 12 at -O2 with the sanitizers warns that moving a variant holding a bool may read the
// string alternative uninitialised (a false positive of its variant visitor): silenced here only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
Result<OptionValue> FromText(const OptionSpec& spec, std::string_view text) {
  switch (spec.type) {
    case T::kBool:
      if (text == "1" || text == "true") return OptionValue(true);
      if (text == "0" || text == "false") return OptionValue(false);
      return Status::InvalidArgument("expected 0 or 1, got " + Quoted(text));
    case T::kInt: {
      int64_t v = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (error != std::errc() || end != text.data() + text.size()) {
        return Status::InvalidArgument("expected a whole number, got " + Quoted(text));
      }
      return OptionValue(v);
    }
    case T::kDouble: {
      const std::string copy(text);
      char* end = nullptr;
      const double v = std::strtod(copy.c_str(), &end);
      if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(v)) {
        return Status::InvalidArgument("expected a number, got " + Quoted(text));
      }
      return OptionValue(v);
    }
    default:
      return OptionValue(std::string(text));
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

const OptionSpec* FindByKey(std::string_view key) {
  for (const OptionSpec& spec : kOptions) {
    if (key == spec.key) return &spec;
  }
  return nullptr;
}

// The option a user names: its flag or an alias, or the key of a negated switch in the positive
// sense (boilerplate=False for --no-boilerplate); never another key that is no flag.
const OptionSpec* FindByFlag(std::string_view name) {
  for (const OptionSpec& spec : kOptions) {
    if (spec.flag == nullptr) continue;
    if (name == spec.flag || Contains(spec.aliases, name) || Contains(spec.aliases, name, '~') ||
        (spec.negated && name == spec.key)) {
      return &spec;
    }
  }
  return nullptr;
}

}  // namespace

std::string FingerprintFieldText(std::string_view key, const FingerprintOptions& options) {
  return FieldText(key, options);
}
void SetFingerprintField(std::string_view key, const OptionValue& value,
                         FingerprintOptions* options) {
  SetField(key, value, options);
}
HashProfile ProfileNamed(std::string_view name) {
  HashProfile profile = HashProfile::kNeardup;
  (void)SetEnum(kProfiles, name, &profile);  // a checked choice
  return profile;
}
std::string EscapeOptionValue(std::string_view value) { return Escape(value); }

std::span<const OptionSpec> AllOptions() { return kOptions; }

const OptionSpec* FindOption(std::string_view name) {
  const OptionSpec* spec = FindByFlag(name);
  return spec != nullptr ? spec : FindByKey(name);
}

const OptionSpec* FindFlag(std::string_view name) { return FindByFlag(name); }

std::map<std::string, OptionValue> FingerprintOptionsInForce(const FingerprintOptions& options) {
  std::map<std::string, OptionValue> out;
  for (const OptionSpec& spec : kOptions) {
    if (spec.flag == nullptr || !(spec.scope & kFingerprintScope)) continue;
    Result<OptionValue> value = FromText(spec, FieldText(spec.key, options));
    if (!value.ok()) continue;  // every field's text reads back; never taken
    if (spec.negated) *value = !std::get<bool>(*value);
    out[spec.flag] = std::move(*value);
  }
  return out;
}

std::string OptionDisplayName(const OptionSpec& spec, OptionNaming naming) {
  std::string name = spec.flag != nullptr ? spec.flag : spec.key;
  if (naming == OptionNaming::kFlag) {
    for (char& c : name) c = c == '_' ? '-' : c;
    return (name.size() == 1 ? "-" : "--") + name;
  }
  return name;
}

std::string OptionValues::NameOf(std::string_view key) const {
  auto spelled = spelled_.find(std::string(key));
  if (spelled != spelled_.end()) return spelled->second;
  const OptionSpec* spec = FindByKey(key);
  return spec != nullptr ? OptionDisplayName(*spec, naming_) : std::string(key);
}

// `name` (a flag or alias of `spec`) as `naming` shows it.
static std::string SpelledName(std::string_view name, OptionNaming naming) {
  std::string out(name);
  if (naming == OptionNaming::kFlag) {
    for (char& c : out) c = c == '_' ? '-' : c;
    out = (out.size() == 1 ? "-" : "--") + out;
  }
  return out;
}

Status OptionValues::Set(std::string_view name, const OptionValue& value) {
  const OptionSpec* spec = FindByFlag(name);
  if (spec == nullptr) {
    return Status::InvalidArgument("unknown option " + Quoted(name));
  }
  const std::string spelled = SpelledName(name, naming_);
  Result<OptionValue> checked = Checked(*spec, value);
  if (!checked.ok()) {
    // "k must be in [0, 16], got 40", "tokenizer: expected one of ...".
    const std::string& why = checked.status().message();
    return Status::InvalidArgument(spelled + (why.rfind("must", 0) == 0 ? " " : ": ") + why);
  }
  if (Contains(spec->aliases, name, '~')) {
    deprecated_.push_back(spelled + " is an old name: use " + OptionDisplayName(*spec, naming_));
  }
  OptionValue stored = std::move(*checked);
  if (spec->negated && name != spec->key) stored = !std::get<bool>(stored);
  values_[spec->key] = std::move(stored);
  spelled_[spec->key] = spelled;
  return Status::Ok();
}

Status OptionValues::SetText(std::string_view name, std::string_view text) {
  const OptionSpec* spec = FindByFlag(name);
  if (spec == nullptr) return Status::InvalidArgument("unknown option " + Quoted(name));
  Result<OptionValue> value = FromText(*spec, text);
  if (!value.ok()) return value.status().WithContext(SpelledName(name, naming_));
  return Set(name, *value);
}

const OptionValue* OptionValues::Find(std::string_view key) const {
  auto it = values_.find(std::string(key));
  return it == values_.end() ? nullptr : &it->second;
}

Status OptionValues::ApplyTo(DocumentReaderOptions* options) const {
  for (const auto& [key, value] : values_) {
    if (key == "id_field") options->id_field = std::get<std::string>(value);
    if (key == "text_field") options->text_field = std::get<std::string>(value);
    if (key == "lines") options->text_lines = std::get<bool>(value);
    if (key == "stdin_text") options->stdin_is_text = std::get<bool>(value);
    if (key == "strict") options->strict = std::get<bool>(value);
    if (key == "replace_invalid_utf8") options->allow_invalid_utf8_text = std::get<bool>(value);
  }
  return Status::Ok();
}

Status OptionValues::ApplyTo(StoreOptions* options) const {
  // The rule of a new store: `rule`, and for the dedup rule dedup's LSH options. Left unset when
  // none is given, so that an existing store is opened with its own (a given one must agree).
  const bool lsh_given = Has("threshold") || Has("bands") || Has("rows") || Has("bucket_window");
  const bool containment_given = Has("containment_threshold") || Has("containment_min_shingles") ||
                                 Has("containment_min_ratio") || Has("edited_threshold") ||
                                 Has("edited_min_jaccard");
  const OptionValue* rule = Find("rule");
  const bool simhash = rule != nullptr && std::get<std::string>(*rule) == "simhash";
  if (simhash && containment_given) {
    return Status::InvalidArgument(
        NameOf("containment_threshold") + ", " + NameOf("containment_min_shingles") + ", " +
        NameOf("containment_min_ratio") + ", " + NameOf("edited_threshold") + " and " +
        NameOf("edited_min_jaccard") + " set the dedup rule, not " + NameOf("rule") + " simhash");
  }
  // The `contained` and `edited` reasons of the dedup rule (recorded by a new store, checked
  // against an existing one's).
  if (const OptionValue* v = Find("containment_threshold"))
    options->containment_threshold = std::get<double>(*v);
  if (const OptionValue* v = Find("containment_min_shingles"))
    options->containment_min_shingles = std::get<double>(*v);
  if (const OptionValue* v = Find("containment_min_ratio"))
    options->containment_min_ratio = std::get<double>(*v);
  if (const OptionValue* v = Find("edited_threshold"))
    options->edited_threshold = std::get<double>(*v);
  if (const OptionValue* v = Find("edited_min_jaccard"))
    options->edited_min_jaccard = std::get<double>(*v);
  if (rule != nullptr || lsh_given) {
    options->rule = simhash ? StoreRule::kSimHash : StoreRule::kDedup;
  }
  if (simhash && lsh_given) {
    return Status::InvalidArgument(NameOf("threshold") + ", " + NameOf("bands") + ", " +
                                   NameOf("rows") + " and " + NameOf("bucket_window") +
                                   " set the dedup rule, not " + NameOf("rule") + " simhash");
  }
  if (!simhash && lsh_given) {
    MinHashLshOptions lsh;
    if (const OptionValue* v = Find("threshold")) lsh.threshold = std::get<double>(*v);
    const OptionValue* bands = Find("bands");
    const OptionValue* rows = Find("rows");
    if (bands != nullptr || rows != nullptr) {
      lsh.parameters = LshParameters{bands ? static_cast<int>(std::get<int64_t>(*bands)) : 0,
                                     rows ? static_cast<int>(std::get<int64_t>(*rows)) : 0};
    }
    if (const OptionValue* v = Find("bucket_window")) {
      lsh.bucket_window = static_cast<uint32_t>(std::get<int64_t>(*v));
    }
    NEARDUP_RETURN_IF_ERROR(Renamed(ResolveLshParameters(lsh).status()));
    options->lsh = lsh;
  }
  for (const auto& [key, value] : values_) {
    if (key == "bits") options->bits = static_cast<int>(std::get<int64_t>(value));
    if (key == "indexed_k") {
      const int64_t k = std::get<int64_t>(value);
      if (k > kMaxStoreIndexedK) {
        return Status::InvalidArgument(NameOf(key) + " must be in [0, " +
                                       std::to_string(kMaxStoreIndexedK) + "] for a store, got " +
                                       std::to_string(k));
      }
      options->indexed_k = static_cast<int>(k);
    }
    if (key == "sync") {
      const std::string& mode = std::get<std::string>(value);
      options->sync_mode = mode == "every"   ? SyncMode::kEveryWrite
                           : mode == "group" ? SyncMode::kGroupCommit
                                             : SyncMode::kNone;
    }
    if (key == "group_commit_ms") {
      options->group_commit_interval_ms = static_cast<int>(std::get<int64_t>(value));
    }
    if (key == "verify_checksums") options->verify_checksums_on_open = std::get<bool>(value);
    if (key == "expected_size") options->expected_size = std::get<double>(value);
    if (key == "memtable_limit") {
      options->memtable_limit = static_cast<size_t>(std::get<int64_t>(value));
    }
    if (key == "wal_flush_bytes") {
      options->wal_flush_bytes = static_cast<uint64_t>(std::get<int64_t>(value));
    }
    if (key == "memory_budget") {
      Result<MemoryBudget> budget = ParseMemoryBudget(std::get<std::string>(value));
      if (!budget.ok()) return budget.status().WithContext(NameOf("memory_budget"));
      options->memory_budget = *budget;
    }
  }
  // The window of group commit means nothing to another sync mode (the caller's default one,
  // `serve`'s group or `index add`'s every, or the one given): never silently ignored.
  if (Has("group_commit_ms") && options->sync_mode != SyncMode::kGroupCommit) {
    const OptionValue* sync = Find("sync");
    return Status::InvalidArgument(
        NameOf("group_commit_ms") + " is the window of " + NameOf("sync") + " group, not of " +
        NameOf("sync") + " " +
        (sync != nullptr ? std::get<std::string>(*sync)
                         : std::string(options->sync_mode == SyncMode::kNone ? "none" : "every")));
  }
  return Status::Ok();
}

Status OptionValues::Renamed(const Status& status) const {
  if (status.ok()) return status;
  // The library's wording of an option -> the option (by key) as this set names it.
  struct Phrase {
    const char* wording;
    const char* key;
    const char* rest;  // what follows the option's name in the wording
  };
  static const Phrase kPhrases[] = {
      {"k (the SimHash join radius) must be in", "k", " must be in"},
      {"verify_threshold must", "verify_threshold", " must"},
      {"threshold must be in (0, 1)", "threshold", " must be in (0, 1)"},
      {"shingle_size must be in", "shingle", " must be in"},
      {"char_ngram_size must be in", "ngram", " must be in"},
      {"bits must be 64 or 128", "bits", " must be 64 or 128"},
      {"edited_threshold must be in", "edited_threshold", " must be in"},
      {"edited_min_jaccard must be in", "edited_min_jaccard", " must be in"},
  };
  std::string message = status.message();
  for (const Phrase& phrase : kPhrases) {
    const size_t at = message.find(phrase.wording);
    if (at == std::string::npos) continue;
    message = message.substr(0, at) + NameOf(phrase.key) + phrase.rest +
              message.substr(at + std::string_view(phrase.wording).size());
    return Status(status.code(), message);
  }
  if (message.rfind("keep policy: ", 0) == 0) {
    return Status(status.code(), NameOf("keep") + ": " + message.substr(13));
  }
  if (message.rfind("keep_field: the field keep policy needs a field name", 0) == 0) {
    return Status(status.code(), NameOf("keep") + ": field:NAME needs a field name");
  }
  if (message.rfind("bands and rows must", 0) == 0) {
    return Status(status.code(), NameOf("bands") + " and " + NameOf("rows") + message.substr(14));
  }
  return status;
}

Result<std::map<std::string, std::string>> ParseOptionString(std::string_view text) {
  std::map<std::string, std::string> values;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view pair = text.substr(pos, end - pos);
    pos = end + 1;
    if (pair.empty()) continue;
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos) {
      return Status::InvalidArgument(Quoted(pair) + " is not key=value");
    }
    const std::string key(pair.substr(0, equals));
    Result<std::string> value = Unescape(pair.substr(equals + 1));
    if (!value.ok()) return value.status().WithContext(key);
    values[key] = std::move(*value);
  }
  return values;
}

std::string FingerprintOptionsToString(const FingerprintOptions& options) {
  std::string out;
  for (const OptionSpec& spec : kOptions) {
    if (!spec.recorded) continue;
    if (!out.empty()) out += ' ';
    out += spec.key;
    out += '=';
    out += Escape(FieldText(spec.key, options));
  }
  return out;
}

Result<FingerprintOptions> ParseFingerprintOptions(std::string_view text) {
  Result<std::map<std::string, std::string>> pairs = ParseOptionString(text);
  if (!pairs.ok()) return pairs.status().WithContext("fingerprint options");
  FingerprintOptions options;
  for (const auto& [key, value_text] : *pairs) {
    const OptionSpec* spec = FindByKey(key);
    if (spec == nullptr || !spec->recorded) {
      return Status::InvalidArgument("fingerprint options: unknown option " + Quoted(key));
    }
    // The string holds every field as is (a profile's fixed ones too): set each, no profile rule.
    Result<OptionValue> value = FromText(*spec, value_text);
    if (value.ok()) value = Checked(*spec, *value);
    if (!value.ok()) return value.status().WithContext("fingerprint options: " + key);
    SetField(key, *value, &options);
  }
  return options;
}

}  // namespace neardup
