// Report: turns the output folder of a dedup run (`neardup dedup -o DIR`, `neardup eval -o DIR`,
// neardup.dask's `output=`) into one self-contained HTML page that opens from disk with no network:
// the run's summary and stage costs, the LSH S-curve beside the histogram of verified
// similarities, a cluster browser with word-level diffs of each removed document against the one
// it was matched to, a seeded random sample of removed documents for review and, for an eval run,
// the per-label table with the missed pairs. The library behind `neardup report` and the Python
// `DedupResult.report()`.
//
// What is embedded is bounded whatever the corpus size: the largest `max_clusters` clusters, each
// with at most `max_members_with_text` removed members shown with their text, every text cut to
// `max_text_bytes`, and all texts together to `max_total_text_bytes`; the page says what was left
// out. Texts are read again from the run's inputs (recorded in summary.json) with the one
// document reader (neardup/document_reader.h), only the files that hold a shown document; when
// the inputs are gone or changed, the page still renders and says which texts are unavailable.
// Everything taken from the corpus or the output folder is escaped; the page's own script and
// style carry a per-page nonce that its Content-Security-Policy requires.
//
// Thread safety: plain functions; concurrent calls share nothing.
#ifndef NEARDUP_REPORT_H_
#define NEARDUP_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "neardup/export.h"
#include "neardup/status.h"

namespace neardup {

// A document the report shows, as clusters.jsonl names it.
struct ReportDocumentRef {
  std::string id;
  std::string location;  // "file:line", "file" (a plain text file), or what the writer recorded
};

// Fills (*texts)[i] with the full text of wanted[i], or leaves it empty (std::nullopt) when that
// document cannot be found; `texts` arrives sized like `wanted`. An error aborts the report.
using ReportTextSource = std::function<Status(const std::vector<ReportDocumentRef>& wanted,
                                              std::vector<std::optional<std::string>>* texts)>;

struct ReportOptions {
  size_t max_clusters = 1000;               // clusters embedded, the largest first
  size_t max_members_with_text = 10;        // removed members of a cluster shown with text and diff
  size_t max_listed_members = 100;          // removed members of a cluster listed at all
  size_t max_total_listed_members = 10000;  // removed members listed on the whole page
  size_t max_text_bytes = 4000;             // each text cut to this (at a character boundary)
  size_t max_total_text_bytes = 12000000;   // all embedded text; later clusters go without
  size_t sample_size = 50;                  // removed documents in the review sample
  uint64_t seed = 1;                        // chooses the sample (the same seed, the same sample)
  size_t max_missed_pairs = 300;            // eval runs: missed pairs shown with their texts
  size_t max_diff_edits = 2000;             // word diff search bound (see the page's note)
  // Where texts come from; null: the inputs recorded in summary.json, read again with the reader
  // options recorded there.
  ReportTextSource texts;
  std::string title;  // empty: "neardup report: <folder>"
};

// In-memory sources (for bindings whose result was never written to a folder).
struct ReportSources {
  std::string directory;       // a folder holding summary.json and clusters.jsonl (eval.json)
  std::string summary_json;    // used when directory is empty
  std::string clusters_jsonl;  // used when directory is empty
  std::string eval_json;       // used when directory is empty (empty: not an eval run)
};

struct ReportStats {
  uint64_t clusters = 0;           // clusters in clusters.jsonl
  uint64_t clusters_embedded = 0;  // of which on the page
  uint64_t removed = 0;            // removed documents in clusters.jsonl
  uint64_t sample = 0;             // removed documents in the review sample
  uint64_t missed_pairs = 0;       // eval runs: missed pairs on the page
  uint64_t texts_wanted = 0;       // documents whose text the page shows
  uint64_t texts_found = 0;        // of which were found in the inputs
  uint64_t diffs = 0;              // word diffs computed
  uint64_t bytes = 0;              // size of the page
  bool eval = false;               // the folder came from an eval run
  std::string texts_note;          // why some texts are missing (empty when none is)
};

// Renders the report of `sources` as one HTML page. Errors: a missing or malformed summary.json
// or clusters.jsonl (naming the file and line), an error of options.texts.
NEARDUP_EXPORT Result<std::string> RenderReport(const ReportSources& sources,
                                                const ReportOptions& options,
                                                ReportStats* stats = nullptr);

// Renders the report of the folder `directory` into `output_path` through neardup/output_file.h
// (never over one of the run's inputs or its own sources; an existing file only with `force`).
NEARDUP_EXPORT Result<ReportStats> WriteReport(const std::string& directory,
                                               const std::string& output_path,
                                               const ReportOptions& options, bool force = false);

}  // namespace neardup

#endif  // NEARDUP_REPORT_H_
