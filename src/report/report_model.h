// What a report shows, gathered from a dedup output folder before the page is written: the run's
// summary (the parsed fields the page uses), the clusters chosen for the page, the review sample,
// an eval run's tables and missed pairs, with the texts and word diffs attached.
//
// Internal header of the report (src/report/): report.cc fills a ReportModel, report_page.cc
// turns it into HTML.
#ifndef NEARDUP_REPORT_REPORT_MODEL_H_
#define NEARDUP_REPORT_REPORT_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "neardup/document_reader.h"
#include "neardup/report.h"
#include "report/word_diff.h"

namespace neardup::report {

// A document as the page shows it.
struct ShownDocument {
  std::string id;
  std::string location;
  uint64_t bytes = 0;               // text bytes as recorded by the run
  bool wants_text = false;          // the page shows this document's text
  std::optional<std::string> text;  // cut to max_text_bytes; empty when unavailable
  bool cut = false;                 // the text was cut
};

// A removed member of a cluster.
struct ShownMember {
  ShownDocument document;
  std::string reason;  // exact_duplicate, near_duplicate, contained, edited, chained
  std::string via;     // id of the member it was linked through
  std::string via_location;
  int distance = 0;                    // fingerprint distance to the kept document
  int distance_to_via = 0;             // fingerprint distance to via
  double similarity = -1;              // verified similarity to via (-1: not recorded)
  bool with_diff = false;              // a diff against via is shown
  std::optional<WordDiffResult> diff;  // against via (found by id in the cluster)
};

struct ShownCluster {
  uint64_t number = 0;  // "cluster" in clusters.jsonl
  uint64_t size = 0;
  ShownDocument kept;
  std::vector<ShownMember> members;  // the listed removed members (canonical order)
  std::vector<ShownDocument> vias;   // via documents of shown diffs that are not listed
  uint64_t unlisted = 0;             // removed members not listed
  bool texts_omitted = false;        // over the page's text budget: no texts
};

// One removed document of the review sample, with its cluster's kept document and its via.
struct SampleEntry {
  uint64_t key = 0;  // the seeded hash that chose it (smallest first)
  uint64_t cluster = 0;
  uint64_t cluster_size = 0;
  ShownDocument kept;
  ShownMember member;
  ShownDocument via;  // the document it was matched to (the kept one when direct)
};

// An eval run's labelled pair the run got wrong.
struct MissedPair {
  std::string kind;  // "missed" (a positive not flagged) or "false_positive"
  std::string set;
  std::string label;
  double reference_similarity = -1;
  double jaccard = -1;  // as dedup's verification computes it (-1: not recorded)
  int distance = -1;
  ShownDocument a, b;
  std::optional<WordDiffResult> diff;
};

struct EvalTable {
  bool present = false;
  std::vector<std::string> methods;  // column names
  struct Row {
    std::string label;
    std::string label_class;
    uint64_t pairs = 0;
    std::vector<double> rates;  // per method: recall (positives), FP rate (negatives), flagged
  };
  std::vector<Row> rows;
  std::vector<std::pair<std::string, std::string>> overall;  // name, value (dedup method)
  uint64_t missed_total = 0;  // missed pairs in eval.json (the page shows up to a bound)
  std::vector<MissedPair> missed;
};

struct StageRow {
  std::string stage;
  double seconds = 0;
  double peak_memory_mb = 0;  // 0: not measured
  uint64_t items = 0;
};

struct SummaryModel {
  std::string raw;  // summary.json as read
  uint64_t documents_read = 0;
  uint64_t documents = 0;  // fingerprinted
  uint64_t skipped = 0;
  std::map<std::string, uint64_t> skipped_by_reason;
  std::map<std::string, uint64_t> fallbacks_by_reason;
  std::map<std::string, uint64_t> failures_by_code;
  uint64_t duplicate_ids = 0;
  uint64_t text_bytes = 0;
  uint64_t candidate_pairs = 0;
  uint64_t accepted_pairs = 0;
  uint64_t clusters = 0;
  uint64_t removed = 0;
  uint64_t kept = 0;
  double total_seconds = 0;
  std::vector<StageRow> stages;
  std::vector<std::pair<std::string, std::string>> parameters;  // name, value as written
  double threshold = 0;                                         // LSH threshold (0: unknown)
  int bands = 0, rows = 0;
  double verify = -1;  // verification threshold (0: off, -1: unknown)
  struct Histogram {
    bool present = false;
    std::vector<uint64_t> accepted, rejected;
    uint64_t rejected_pairs = 0, rejected_measured = 0, rejected_sample_every = 1;
  } histogram;
  struct Input {
    std::string path;  // as the locations name it
    std::string absolute;
    bool in_memory = false;
    bool has_stat = false;
    uint64_t bytes = 0;
    int64_t mtime_ns = 0;
  };
  std::vector<Input> inputs;
  bool has_inputs = false;  // summary.json records its inputs
  bool has_reader = false;  // summary.json records the reader options (else the defaults)
  DocumentReaderOptions reader;
};

struct ReportModel {
  std::string title;
  std::string source;  // the folder, or "(in memory)"
  SummaryModel summary;
  uint64_t total_clusters = 0;  // lines of clusters.jsonl
  uint64_t total_removed = 0;
  std::map<std::string, uint64_t> removed_by_reason;
  std::vector<std::pair<std::string, uint64_t>> cluster_sizes;  // size class, clusters
  std::vector<ShownCluster> clusters;                           // largest first
  std::vector<SampleEntry> sample;                              // by key
  EvalTable eval;
  std::string texts_note;      // why texts are unavailable (empty: all found)
  uint64_t texts_missing = 0;  // wanted texts not found
  uint64_t first_cluster_without_texts = UINT64_MAX;  // index into clusters
  uint64_t diffs_incomplete = 0;                      // diffs that hit max_edits
  ReportOptions options;
};

}  // namespace neardup::report

#endif  // NEARDUP_REPORT_REPORT_MODEL_H_
