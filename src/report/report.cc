// The report of a dedup output folder (neardup/report.h): reads summary.json, streams
// clusters.jsonl once (keeping only the largest clusters and the seeded sample), reads eval.json,
// fetches the texts of the shown documents within the page's budget, computes the word diffs on
// all cores, and hands the model to the page writer (report_page.cc).
#include "neardup/report.h"

#include <simdjson.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "common/parallel.h"
#include "common/utf8.h"
#include "neardup/document_reader.h"
#include "neardup/output_file.h"
#include "report/report_model.h"
#include "report/report_page.h"
#include "report/word_diff.h"

namespace neardup {
namespace {

using report::EvalTable;
using report::MissedPair;
using report::ReportModel;
using report::SampleEntry;
using report::ShownCluster;
using report::ShownDocument;
using report::ShownMember;
using report::SummaryModel;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// ---- JSON field access with defaults ------------------------------------------------------------

bool Field(object o, std::string_view key, element* value) {
  return o.at_key(key).get(*value) == simdjson::SUCCESS;
}

uint64_t UintOf(object o, std::string_view key, uint64_t otherwise = 0) {
  element e;
  if (!Field(o, key, &e)) return otherwise;
  uint64_t u;
  if (e.get_uint64().get(u) == simdjson::SUCCESS) return u;
  double d;
  if (e.get_double().get(d) == simdjson::SUCCESS && d >= 0) return static_cast<uint64_t>(d);
  return otherwise;
}

double DoubleOf(object o, std::string_view key, double otherwise = 0) {
  element e;
  if (!Field(o, key, &e)) return otherwise;
  double d;
  if (e.get_double().get(d) == simdjson::SUCCESS) return d;
  int64_t i;
  if (e.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  uint64_t u;
  if (e.get_uint64().get(u) == simdjson::SUCCESS) return static_cast<double>(u);
  return otherwise;
}

std::string StringOf(object o, std::string_view key, std::string otherwise = "") {
  element e;
  std::string_view s;
  if (Field(o, key, &e) && e.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  return otherwise;
}

bool BoolOf(object o, std::string_view key, bool otherwise = false) {
  element e;
  bool b;
  if (Field(o, key, &e) && e.get_bool().get(b) == simdjson::SUCCESS) return b;
  return otherwise;
}

// A scalar as the page prints it: strings bare, numbers and booleans as JSON writes them.
std::string ScalarText(element e) {
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  return simdjson::minify(e);
}

// A scalar as a table shows it: a fraction with four significant digits, the rest as ScalarText.
std::string RoundedText(element e) {
  double d;
  if (e.type() == simdjson::dom::element_type::DOUBLE &&
      e.get_double().get(d) == simdjson::SUCCESS) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.4g", d);
    return buffer;
  }
  return ScalarText(e);
}

std::map<std::string, uint64_t> CountsOf(object o, std::string_view key) {
  std::map<std::string, uint64_t> counts;
  element e;
  object inner;
  if (!Field(o, key, &e) || e.get_object().get(inner) != simdjson::SUCCESS) return counts;
  for (auto [name, value] : inner) {
    uint64_t u;
    if (value.get_uint64().get(u) == simdjson::SUCCESS) counts[std::string(name)] = u;
  }
  return counts;
}

// ---- sources ------------------------------------------------------------------------------------

Status ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": read error");
  *out = buffer.str();
  return Status::Ok();
}

// Lines of clusters.jsonl, from a file or from memory.
class LineSource {
 public:
  static Result<LineSource> Open(const ReportSources& sources) {
    LineSource source;
    if (sources.directory.empty()) {
      source.memory_ = &sources.clusters_jsonl;
      source.name_ = "clusters.jsonl";
      return source;
    }
    source.name_ = (std::filesystem::path(sources.directory) / "clusters.jsonl").string();
    source.file_ = std::make_unique<std::ifstream>(source.name_, std::ios::binary);
    if (!*source.file_) {
      return Status::NotFound(source.name_ + ": cannot open: " + std::strerror(errno) +
                              " (neardup report reads the folder of `neardup dedup -o DIR`)");
    }
    return source;
  }
  bool Next(std::string* line) {
    ++line_number_;
    if (file_) return static_cast<bool>(std::getline(*file_, *line));
    if (offset_ >= memory_->size()) return false;
    size_t end = memory_->find('\n', offset_);
    if (end == std::string::npos) end = memory_->size();
    line->assign(*memory_, offset_, end - offset_);
    offset_ = end + 1;
    return true;
  }
  bool failed() const { return file_ && file_->bad(); }
  std::string where() const { return name_ + ":" + std::to_string(line_number_); }

 private:
  std::string name_;
  std::unique_ptr<std::ifstream> file_;
  const std::string* memory_ = nullptr;
  size_t offset_ = 0;
  uint64_t line_number_ = 0;
};

// ---- summary.json -------------------------------------------------------------------------------

// summary.json's "stages": each stage's time, peak memory and items.
void ReadStages(object o, SummaryModel* summary) {
  element e;
  array list;
  if (!Field(o, "stages", &e) || e.get_array().get(list) != simdjson::SUCCESS) return;
  for (element item : list) {
    object stage;
    if (item.get_object().get(stage) != simdjson::SUCCESS) continue;
    summary->stages.push_back({StringOf(stage, "stage", "?"), DoubleOf(stage, "seconds"),
                               DoubleOf(stage, "peak_memory_mb"), UintOf(stage, "items")});
  }
}

// The parameters: neardup dedup's "options" object; neardup.dask writes them at the top level
// with the LSH ones in "lsh".
void ReadParameters(object o, SummaryModel* summary) {
  element e;
  object options;
  if (Field(o, "options", &e) && e.get_object().get(options) == simdjson::SUCCESS) {
    for (auto [key, value] : options) {
      summary->parameters.emplace_back(std::string(key), ScalarText(value));
    }
    summary->threshold = DoubleOf(options, "threshold");
    summary->bands = static_cast<int>(UintOf(options, "bands"));
    summary->rows = static_cast<int>(UintOf(options, "rows"));
    summary->verify = DoubleOf(options, "verify", -1);
    return;
  }
  object lsh;
  if (Field(o, "lsh", &e) && e.get_object().get(lsh) == simdjson::SUCCESS) {
    for (auto [key, value] : lsh) {
      summary->parameters.emplace_back("lsh." + std::string(key), ScalarText(value));
    }
    summary->threshold = DoubleOf(lsh, "threshold");
    summary->bands = static_cast<int>(UintOf(lsh, "bands"));
    summary->rows = static_cast<int>(UintOf(lsh, "rows"));
  }
  for (const char* key : {"candidates", "k", "bits", "verify", "keep", "partitions"}) {
    if (Field(o, key, &e)) summary->parameters.emplace_back(key, ScalarText(e));
  }
  summary->verify = DoubleOf(o, "verify", -1);
}

// The array of counts at `key` of `histogram` into *bins (nothing when it is no array).
void ReadBins(object histogram, std::string_view key, std::vector<uint64_t>* bins) {
  element value;
  array values;
  if (!Field(histogram, key, &value) || value.get_array().get(values) != simdjson::SUCCESS) {
    return;
  }
  for (element bin : values) {
    uint64_t count = 0;
    if (bin.get_uint64().get(count) != simdjson::SUCCESS) count = 0;
    bins->push_back(count);
  }
}

// summary.json's "similarity_histogram": accepted and rejected pairs by similarity.
void ReadSimilarityHistogram(object o, SummaryModel* summary) {
  element e;
  object histogram;
  if (!Field(o, "similarity_histogram", &e) || e.get_object().get(histogram) != simdjson::SUCCESS) {
    return;
  }
  ReadBins(histogram, "accepted", &summary->histogram.accepted);
  ReadBins(histogram, "rejected", &summary->histogram.rejected);
  summary->histogram.rejected_pairs = UintOf(histogram, "rejected_pairs");
  summary->histogram.rejected_measured = UintOf(histogram, "rejected_measured");
  summary->histogram.rejected_sample_every = UintOf(histogram, "rejected_sample_every", 1);
  summary->histogram.present =
      !summary->histogram.accepted.empty() &&
      summary->histogram.accepted.size() == summary->histogram.rejected.size();
}

// summary.json's "inputs": each input's path and what was known of it when it was read.
void ReadInputs(object o, SummaryModel* summary) {
  element e;
  array list;
  if (!Field(o, "inputs", &e) || e.get_array().get(list) != simdjson::SUCCESS) return;
  summary->has_inputs = true;
  for (element item : list) {
    object input;
    if (item.get_object().get(input) != simdjson::SUCCESS) continue;
    SummaryModel::Input entry;
    entry.path = StringOf(input, "path");
    entry.absolute = StringOf(input, "absolute");
    entry.in_memory = BoolOf(input, "in_memory");
    element stat_value;
    entry.has_stat = Field(input, "mtime_ns", &stat_value);
    entry.bytes = UintOf(input, "bytes");
    int64_t mtime = 0;
    if (entry.has_stat && stat_value.get_int64().get(mtime) != simdjson::SUCCESS) mtime = 0;
    entry.mtime_ns = mtime;
    summary->inputs.push_back(std::move(entry));
  }
}

// summary.json's "reader": the options the inputs were read with.
void ReadReaderOptions(object o, SummaryModel* summary) {
  element e;
  object reader;
  if (!Field(o, "reader", &e) || e.get_object().get(reader) != simdjson::SUCCESS) return;
  summary->has_reader = true;
  summary->reader.id_field = StringOf(reader, "id_field", "id");
  summary->reader.text_field = StringOf(reader, "text_field", "text");
  summary->reader.text_lines = BoolOf(reader, "lines");
  summary->reader.stdin_is_text = BoolOf(reader, "stdin_is_text");
  summary->reader.allow_invalid_utf8_text = BoolOf(reader, "allow_invalid_utf8_text");
  summary->reader.max_document_bytes =
      UintOf(reader, "max_document_bytes", summary->reader.max_document_bytes);
}

Status ParseSummary(const std::string& text, const std::string& name, SummaryModel* summary) {
  simdjson::dom::parser parser;
  element root;
  object o;
  if (parser.parse(text).get(root) != simdjson::SUCCESS ||
      root.get_object().get(o) != simdjson::SUCCESS) {
    return Status::Corruption(name + ": not a JSON object");
  }
  summary->raw = text;
  summary->documents = UintOf(o, "documents_fingerprinted");
  summary->documents_read = UintOf(o, "documents_read", summary->documents);
  summary->skipped = UintOf(o, "records_skipped");
  summary->skipped_by_reason = CountsOf(o, "skipped_by_reason");
  summary->fallbacks_by_reason = CountsOf(o, "fallbacks_by_reason");
  summary->failures_by_code = CountsOf(o, "fingerprint_failures_by_code");
  summary->duplicate_ids = UintOf(o, "duplicate_ids");
  summary->text_bytes = UintOf(o, "text_bytes");
  summary->candidate_pairs = UintOf(o, "candidate_pairs");
  summary->accepted_pairs = UintOf(o, "accepted_pairs");
  summary->clusters = UintOf(o, "clusters");
  summary->removed = UintOf(o, "documents_removed");
  summary->kept = UintOf(o, "documents_kept");
  summary->total_seconds = DoubleOf(o, "total_seconds");
  ReadStages(o, summary);
  ReadParameters(o, summary);
  ReadSimilarityHistogram(o, summary);
  ReadInputs(o, summary);
  ReadReaderOptions(o, summary);
  return Status::Ok();
}

// ---- clusters.jsonl -----------------------------------------------------------------------------

// One parsed line, only as far as it is needed.
struct ClusterLine {
  uint64_t number = 0;
  uint64_t size = 0;
  object kept;
  array removed;
};

void ReadDocument(object o, ShownDocument* document) {
  document->id = StringOf(o, "id");
  document->location = StringOf(o, "location");
  if (document->location.empty()) {
    element index;
    if (Field(o, "index", &index)) document->location = ScalarText(index);  // Python results
  }
  document->bytes = UintOf(o, "bytes");
}

void ReadMember(object o, ShownMember* member) {
  ReadDocument(o, &member->document);
  member->reason = StringOf(o, "reason");
  member->via = StringOf(o, "via");
  member->distance = static_cast<int>(DoubleOf(o, "distance"));
  member->distance_to_via = static_cast<int>(DoubleOf(o, "distance_to_via"));
  member->similarity = DoubleOf(o, "similarity_to_via", -1);
}

// The location of document `id` in the cluster (kept or removed), empty if it is not there.
std::string LocationInCluster(const ClusterLine& line, std::string_view id) {
  if (StringOf(line.kept, "id") == id) return StringOf(line.kept, "location");
  for (element item : line.removed) {
    object o;
    if (item.get_object().get(o) == simdjson::SUCCESS && StringOf(o, "id") == id) {
      ShownDocument document;
      ReadDocument(o, &document);
      return document.location;
    }
  }
  return "";
}

const char* SizeClass(uint64_t size) {
  if (size <= 2) return "2";
  if (size <= 3) return "3";
  if (size <= 5) return "4-5";
  if (size <= 10) return "6-10";
  if (size <= 100) return "11-100";
  if (size <= 1000) return "101-1,000";
  return "over 1,000";
}

// Better clusters come first on the page: larger, then earlier.
bool Better(uint64_t size_a, uint64_t number_a, uint64_t size_b, uint64_t number_b) {
  return size_a != size_b ? size_a > size_b : number_a < number_b;
}

class ClusterCollector {
 public:
  ClusterCollector(const ReportOptions& options, ReportModel* model)
      : options_(options), model_(model) {}

  Status Add(const ClusterLine& line) {
    ++model_->total_clusters;
    model_->total_removed += line.removed.size();
    ++size_classes_[SizeClass(line.size)];
    for (element item : line.removed) {
      object o;
      if (item.get_object().get(o) != simdjson::SUCCESS) continue;
      ++model_->removed_by_reason[StringOf(o, "reason", "?")];
      if (options_.sample_size > 0) Sample(line, o);
    }
    if (options_.max_clusters == 0) return Status::Ok();
    if (top_.size() >= options_.max_clusters &&
        !Better(line.size, line.number, top_.top().size, top_.top().number)) {
      return Status::Ok();
    }
    ShownCluster cluster;
    cluster.number = line.number;
    cluster.size = line.size;
    ReadDocument(line.kept, &cluster.kept);
    cluster.kept.wants_text = true;
    size_t with_text = 0;
    for (element item : line.removed) {
      object o;
      if (item.get_object().get(o) != simdjson::SUCCESS) continue;
      if (cluster.members.size() >= options_.max_listed_members) {
        ++cluster.unlisted;
        continue;
      }
      ShownMember member;
      ReadMember(o, &member);
      if (member.reason != "exact_duplicate" && with_text < options_.max_members_with_text) {
        member.with_diff = true;
        member.document.wants_text = true;
        member.via_location = LocationInCluster(line, member.via);
        ++with_text;
      }
      cluster.members.push_back(std::move(member));
    }
    // Each diff's base (its via): the kept document, a listed member, or an extra document.
    for (const ShownMember& member : cluster.members) {
      if (member.with_diff) NeedBase(member, &cluster);
    }
    top_.push(std::move(cluster));
    if (top_.size() > options_.max_clusters) top_.pop();
    return Status::Ok();
  }

  void Finish() {
    model_->clusters.clear();
    while (!top_.empty()) {
      model_->clusters.push_back(std::move(const_cast<ShownCluster&>(top_.top())));
      top_.pop();
    }
    std::reverse(model_->clusters.begin(), model_->clusters.end());
    model_->sample.clear();
    while (!sample_.empty()) {
      model_->sample.push_back(std::move(const_cast<SampleEntry&>(sample_.top())));
      sample_.pop();
    }
    std::reverse(model_->sample.begin(), model_->sample.end());
    for (const char* name : {"2", "3", "4-5", "6-10", "11-100", "101-1,000", "over 1,000"}) {
      auto it = size_classes_.find(name);
      if (it != size_classes_.end()) model_->cluster_sizes.emplace_back(name, it->second);
    }
  }

 private:
  void Sample(const ClusterLine& line, object o) {
    std::string_view id;
    element value;
    if (!Field(o, "id", &value) || value.get_string().get(id) != simdjson::SUCCESS) return;
    const uint64_t key = XXH3_64bits_withSeed(id.data(), id.size(), options_.seed);
    if (sample_.size() >= options_.sample_size && key >= sample_.top().key) return;
    SampleEntry entry;
    entry.key = key;
    entry.cluster = line.number;
    entry.cluster_size = line.size;
    ReadDocument(line.kept, &entry.kept);
    ReadMember(o, &entry.member);
    entry.kept.wants_text = true;
    if (entry.member.reason != "exact_duplicate") {
      entry.member.with_diff = true;
      entry.member.document.wants_text = true;
      if (entry.member.via != entry.kept.id) {
        entry.via.id = entry.member.via;
        entry.via.location = LocationInCluster(line, entry.member.via);
        entry.via.wants_text = true;
      }
    }
    sample_.push(std::move(entry));
    if (sample_.size() > options_.sample_size) sample_.pop();
  }

 public:
  // At most max_total_listed_members removed members listed on the page, the largest clusters
  // first; a cluster past that lists only the members shown with a diff. Run once the texts are
  // trimmed to the budget (a cluster without texts needs no member listed).
  static void CapListing(const ReportOptions& options, ReportModel* model) {
    uint64_t listed = 0;
    for (ShownCluster& cluster : model->clusters) {
      size_t keep = static_cast<size_t>(std::min<uint64_t>(
          cluster.members.size(),
          options.max_total_listed_members - std::min(listed, options.max_total_listed_members)));
      for (size_t i = keep; i < cluster.members.size(); ++i) {
        if (cluster.members[i].diff) keep = i + 1;
      }
      if (keep < cluster.members.size()) {
        cluster.unlisted += cluster.members.size() - keep;
        std::vector<ShownMember> cut(std::make_move_iterator(cluster.members.begin() + keep),
                                     std::make_move_iterator(cluster.members.end()));
        cluster.members.resize(keep);
        for (const ShownMember& member : cluster.members) {
          if (member.diff) NeedBase(member, &cluster, &cut);
        }
      }
      listed += cluster.members.size();
    }
  }

  // Makes sure the via of `member` is on the page: the kept document or a listed member (marked as
  // wanting its text), else an entry of cluster->vias (from `cut`, members no longer listed, when
  // it is one of them, for its location).
  static void NeedBase(const ShownMember& member, ShownCluster* cluster,
                       std::vector<ShownMember>* cut = nullptr) {
    if (member.via == cluster->kept.id) return;
    for (ShownMember& other : cluster->members) {
      if (other.document.id == member.via) {
        other.document.wants_text = true;
        return;
      }
    }
    for (const ShownDocument& via : cluster->vias) {
      if (via.id == member.via) return;
    }
    ShownDocument via;
    via.id = member.via;
    via.location = member.via_location;
    if (cut) {
      for (ShownMember& other : *cut) {
        if (other.document.id == member.via) via = other.document;
      }
    }
    via.wants_text = true;
    cluster->vias.push_back(std::move(via));
  }

 private:
  struct WorstOnTop {
    bool operator()(const ShownCluster& a, const ShownCluster& b) const {
      return Better(a.size, a.number, b.size, b.number);
    }
  };
  struct LargestKeyOnTop {
    bool operator()(const SampleEntry& a, const SampleEntry& b) const { return a.key < b.key; }
  };

  const ReportOptions& options_;
  ReportModel* model_;
  std::priority_queue<ShownCluster, std::vector<ShownCluster>, WorstOnTop> top_;
  std::priority_queue<SampleEntry, std::vector<SampleEntry>, LargestKeyOnTop> sample_;
  std::map<std::string, uint64_t> size_classes_;
};

Status ReadClusters(const ReportSources& sources, const ReportOptions& options,
                    ReportModel* model) {
  auto lines = LineSource::Open(sources);
  if (!lines.ok()) return lines.status();
  ClusterCollector collector(options, model);
  simdjson::dom::parser parser;
  std::string text;
  while (lines->Next(&text)) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    element root;
    ClusterLine line;
    element value;
    if (parser.parse(text).get(root) != simdjson::SUCCESS ||
        root.get_object().get(line.kept) != simdjson::SUCCESS) {
      return Status::Corruption(lines->where() + ": not a JSON object");
    }
    object o = line.kept;
    if (!Field(o, "kept", &value) || value.get_object().get(line.kept) != simdjson::SUCCESS ||
        !Field(o, "removed", &value) || value.get_array().get(line.removed) != simdjson::SUCCESS) {
      return Status::Corruption(lines->where() +
                                ": a cluster needs \"kept\" (object) and \"removed\" (array)");
    }
    line.number = UintOf(o, "cluster", model->total_clusters);
    line.size = UintOf(o, "size", line.removed.size() + 1);
    NEARDUP_RETURN_IF_ERROR(collector.Add(line));
  }
  if (lines->failed()) return Status::IoError(lines->where() + ": read error");
  collector.Finish();
  return Status::Ok();
}

// ---- eval.json (neardup eval -o DIR) ------------------------------------------------------------

Status ParseEval(const std::string& text, const std::string& name, const ReportOptions& options,
                 EvalTable* eval) {
  simdjson::dom::parser parser;
  element root, e;
  object o;
  if (parser.parse(text).get(root) != simdjson::SUCCESS ||
      root.get_object().get(o) != simdjson::SUCCESS) {
    return Status::Corruption(name + ": not a JSON object");
  }
  eval->present = true;
  array list;
  if (Field(o, "methods", &e) && e.get_array().get(list) == simdjson::SUCCESS) {
    for (element method : list) eval->methods.push_back(ScalarText(method));
  }
  if (Field(o, "labels", &e) && e.get_array().get(list) == simdjson::SUCCESS) {
    for (element item : list) {
      object label;
      if (item.get_object().get(label) != simdjson::SUCCESS) continue;
      EvalTable::Row row;
      row.label = StringOf(label, "label");
      row.label_class = StringOf(label, "class");
      row.pairs = UintOf(label, "pairs");
      array rates;
      if (Field(label, "rates", &e) && e.get_array().get(rates) == simdjson::SUCCESS) {
        for (element rate : rates) {
          double value = -1;
          if (rate.get_double().get(value) != simdjson::SUCCESS) value = -1;
          row.rates.push_back(value);
        }
      }
      eval->rows.push_back(std::move(row));
    }
  }
  object overall;
  if (Field(o, "overall", &e) && e.get_object().get(overall) == simdjson::SUCCESS) {
    for (auto [key, value] : overall) eval->overall.emplace_back(key, RoundedText(value));
  }
  if (Field(o, "missed", &e) && e.get_array().get(list) == simdjson::SUCCESS) {
    eval->missed_total = list.size();
    for (element item : list) {
      if (eval->missed.size() >= options.max_missed_pairs) break;
      object pair;
      if (item.get_object().get(pair) != simdjson::SUCCESS) continue;
      MissedPair missed;
      missed.kind = StringOf(pair, "kind");
      missed.set = StringOf(pair, "set");
      missed.label = StringOf(pair, "label");
      missed.reference_similarity = DoubleOf(pair, "reference_similarity", -1);
      missed.jaccard = DoubleOf(pair, "jaccard", -1);
      missed.distance = static_cast<int>(DoubleOf(pair, "distance", -1));
      object side;
      if (Field(pair, "a", &e) && e.get_object().get(side) == simdjson::SUCCESS) {
        ReadDocument(side, &missed.a);
      }
      if (Field(pair, "b", &e) && e.get_object().get(side) == simdjson::SUCCESS) {
        ReadDocument(side, &missed.b);
      }
      missed.a.wants_text = missed.b.wants_text = true;
      eval->missed.push_back(std::move(missed));
    }
  }
  eval->missed_total = std::max<uint64_t>(eval->missed_total, UintOf(o, "missed_total"));
  return Status::Ok();
}

// ---- texts --------------------------------------------------------------------------------------

// Splits "path:line" into the recorded input and its line (0 for a plain text file). False when
// the location names no recorded input.
bool SplitLocation(const std::string& location,
                   const std::unordered_map<std::string, size_t>& input_of, size_t* input,
                   uint64_t* line) {
  const size_t colon = location.rfind(':');
  if (colon != std::string::npos && colon + 1 < location.size() &&
      location.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    auto it = input_of.find(location.substr(0, colon));
    if (it != input_of.end()) {
      *input = it->second;
      *line = std::strtoull(location.c_str() + colon + 1, nullptr, 10);
      return true;
    }
  }
  auto it = input_of.find(location);
  if (it == input_of.end()) return false;
  *input = it->second;
  *line = 0;
  return true;
}

// Whether the document read at a location is the one the run recorded there: the same id, or
// the recorded id is "id@file:line" (a shared id renamed) or the location (a missing id).
bool SameDocument(const std::string& read_id, const ReportDocumentRef& wanted) {
  if (read_id == wanted.id || wanted.id == wanted.location) return true;
  return wanted.id.size() > read_id.size() && wanted.id.compare(0, read_id.size(), read_id) == 0 &&
         wanted.id[read_id.size()] == '@';
}

void AddNote(std::string* notes, const std::string& note) {
  if (notes->find(note) != std::string::npos) return;
  if (!notes->empty()) *notes += "; ";
  *notes += note;
}

// Wanted documents (indexes into `wanted`) by recorded input, then by line.
using WantedByLine = std::unordered_map<uint64_t, std::vector<size_t>>;

std::vector<WantedByLine> WantedByInput(const SummaryModel& summary,
                                        const std::vector<ReportDocumentRef>& wanted,
                                        std::string* notes) {
  std::unordered_map<std::string, size_t> input_of;
  for (size_t i = 0; i < summary.inputs.size(); ++i) input_of.emplace(summary.inputs[i].path, i);
  std::vector<WantedByLine> wanted_at(summary.inputs.size());
  for (size_t i = 0; i < wanted.size(); ++i) {
    size_t input;
    uint64_t line;
    if (!SplitLocation(wanted[i].location, input_of, &input, &line)) {
      AddNote(notes, "some locations name no input recorded in summary.json");
      continue;
    }
    wanted_at[input][line].push_back(i);
  }
  return wanted_at;
}

// The recorded inputs that hold wanted documents and can be read again (files that are still
// there; a note when one changed since the run): their absolute paths into *files, and each
// one's recorded input into *input_of_file. A note says why any other is left out.
void ReadableInputs(const SummaryModel& summary, const std::vector<WantedByLine>& wanted_at,
                    std::string* notes, std::vector<std::string>* files,
                    std::unordered_map<std::string, size_t>* input_of_file) {
  for (size_t i = 0; i < summary.inputs.size(); ++i) {
    if (wanted_at[i].empty()) continue;
    const SummaryModel::Input& input = summary.inputs[i];
    if (input.in_memory || input.absolute.empty() || IsStreamInput(input.absolute)) {
      AddNote(notes, input.path == "-" ? "standard input cannot be read again"
                     : input.in_memory ? input.path + " was not a file (in memory)"
                                       : input.path +
                                             " was a stream (a pipe): it cannot be read "
                                             "again");
      continue;
    }
    struct stat info;
    if (::stat(input.absolute.c_str(), &info) != 0) {
      AddNote(notes, input.absolute + ": " + std::strerror(errno) + " (the input is gone)");
      continue;
    }
    const int64_t mtime =
        static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
    if (input.has_stat &&
        (static_cast<uint64_t>(info.st_size) != input.bytes || mtime != input.mtime_ns)) {
      AddNote(notes, input.absolute +
                         " changed since the run (texts whose id no longer matches are left out)");
    }
    files->push_back(input.absolute);
    input_of_file->emplace(input.absolute, i);
  }
}

// The reader's file order is its own (sorted): the recorded input of each of its files
// (SIZE_MAX for none).
std::vector<size_t> RecordedInputOfReaderFiles(
    const std::vector<std::string>& reader_files,
    const std::unordered_map<std::string, size_t>& input_of_file) {
  std::vector<size_t> recorded(reader_files.size(), SIZE_MAX);
  for (size_t f = 0; f < reader_files.size(); ++f) {
    auto it = input_of_file.find(reader_files[f]);
    if (it != input_of_file.end()) {
      recorded[f] = it->second;
      continue;
    }
    for (const auto& [path, index] : input_of_file) {
      if (IsSameFile(path, reader_files[f])) recorded[f] = index;
    }
  }
  return recorded;
}

// The default text source: the inputs summary.json records, read again with the reader options
// recorded there (only the files holding a wanted document; reading stops once all are found).
Status ReadTextsFromInputs(const SummaryModel& summary,
                           const std::vector<ReportDocumentRef>& wanted,
                           std::vector<std::optional<std::string>>* texts, std::string* notes) {
  if (!summary.has_inputs) {
    AddNote(notes,
            "summary.json does not record the run's inputs (written by an older neardup or by "
            "neardup.dask), so no text can be shown");
    return Status::Ok();
  }
  std::vector<WantedByLine> wanted_at = WantedByInput(summary, wanted, notes);
  std::vector<std::string> files;
  std::unordered_map<std::string, size_t> input_of_file;
  ReadableInputs(summary, wanted_at, notes, &files, &input_of_file);
  if (files.empty()) return Status::Ok();
  DocumentReaderOptions reader_options = summary.reader;
  reader_options.strict = false;
  reader_options.on_warning = nullptr;
  reader_options.memory_inputs.clear();
  auto reader = DocumentReader::Open(files, reader_options);
  if (!reader.ok()) {
    AddNote(notes, "the inputs cannot be read again: " + reader.status().ToString());
    return Status::Ok();
  }
  const std::vector<size_t> recorded =
      RecordedInputOfReaderFiles((*reader)->files(), input_of_file);
  size_t remaining = 0;
  for (const auto& by_line : wanted_at) {
    for (const auto& [line, indexes] : by_line) remaining += indexes.size();
  }
  Document doc;
  while (remaining > 0) {
    auto got = (*reader)->Next(&doc);
    if (!got.ok()) {
      AddNote(notes, "reading the inputs again failed: " + got.status().ToString());
      break;
    }
    if (!*got) break;
    if (doc.file_index >= recorded.size() || recorded[doc.file_index] == SIZE_MAX) continue;
    auto& by_line = wanted_at[recorded[doc.file_index]];
    auto it = by_line.find(doc.line);
    if (it == by_line.end()) continue;
    for (size_t index : it->second) {
      --remaining;
      if (SameDocument(doc.id, wanted[index])) {
        (*texts)[index] = doc.text;
      } else {
        AddNote(notes, "some documents at their recorded place have another id now");
      }
    }
    by_line.erase(it);
  }
  return Status::Ok();
}

// `text` cut to at most `limit` bytes, not inside a UTF-8 sequence, with any invalid UTF-8
// (a reader may pass it through) replaced by U+FFFD.
std::string CutText(const std::string& text, size_t limit, bool* cut) {
  *cut = text.size() > limit;
  size_t end = std::min(limit, text.size());
  while (end > 0 && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  std::string_view view(text.data(), end);
  if (utf8::IsValid(view)) return std::string(view);
  std::string out;
  for (size_t i = 0; i < view.size();) {
    const size_t length = utf8::ValidSequenceLength(view, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(view.substr(i, length));
      i += length;
    }
  }
  return out;
}

// Drops the texts and diffs of cluster `c` (over the page's text budget).
void OmitTexts(size_t c, ReportModel* model) {
  ShownCluster& cluster = model->clusters[c];
  model->first_cluster_without_texts = std::min<uint64_t>(model->first_cluster_without_texts, c);
  cluster.texts_omitted = true;
  cluster.kept.wants_text = false;
  cluster.kept.text.reset();
  for (ShownMember& member : cluster.members) {
    member.with_diff = false;
    member.diff.reset();
    member.document.wants_text = false;
    member.document.text.reset();
  }
  cluster.vias.clear();
}

// Chooses the texts to fetch: the sample's and the missed pairs' first, then the clusters',
// largest first, while a generous estimate of their size (a diff holds up to both texts) fits
// in three times the budget (TrimToBudget cuts to the budget once the diffs are known); fetches
// and cuts them.
Status FetchTexts(const ReportOptions& options, ReportModel* model) {
  const size_t cap = options.max_text_bytes;
  uint64_t budget = 3 * options.max_total_text_bytes;
  auto charge = [&](uint64_t bytes) {
    const uint64_t cost = std::min<uint64_t>(bytes, cap);
    if (cost > budget) return false;
    budget -= cost;
    return true;
  };
  for (SampleEntry& entry : model->sample) {
    charge(entry.kept.bytes);
    if (entry.member.with_diff) charge(2 * std::min<uint64_t>(entry.member.document.bytes, cap));
    if (entry.via.wants_text) charge(entry.via.bytes);
  }
  for (MissedPair& pair : model->eval.missed) {
    charge(2 * (std::min<uint64_t>(pair.a.bytes, cap) + std::min<uint64_t>(pair.b.bytes, cap)));
  }
  for (size_t c = 0; c < model->clusters.size(); ++c) {
    ShownCluster& cluster = model->clusters[c];
    uint64_t cost = std::min<uint64_t>(cluster.kept.bytes, cap);
    for (const ShownMember& member : cluster.members) {
      if (member.with_diff) cost += 2 * std::min<uint64_t>(member.document.bytes, cap);
    }
    if (cost > budget || model->first_cluster_without_texts != UINT64_MAX) {
      OmitTexts(c, model);
      continue;
    }
    budget -= cost;
  }

  // Every wanted document once (by location and id).
  std::vector<ShownDocument*> shown;
  auto want = [&shown](ShownDocument* document) {
    if (document->wants_text) shown.push_back(document);
  };
  for (SampleEntry& entry : model->sample) {
    want(&entry.kept);
    want(&entry.member.document);
    want(&entry.via);
  }
  for (MissedPair& pair : model->eval.missed) {
    want(&pair.a);
    want(&pair.b);
  }
  for (ShownCluster& cluster : model->clusters) {
    want(&cluster.kept);
    for (ShownMember& member : cluster.members) want(&member.document);
    for (ShownDocument& via : cluster.vias) want(&via);
  }
  std::vector<ReportDocumentRef> refs;
  std::unordered_map<std::string, size_t> ref_of;
  std::vector<size_t> slot(shown.size());
  for (size_t i = 0; i < shown.size(); ++i) {
    std::string key = shown[i]->location;
    key.push_back('\0');
    key += shown[i]->id;
    auto [it, added] = ref_of.try_emplace(std::move(key), refs.size());
    if (added) refs.push_back({shown[i]->id, shown[i]->location});
    slot[i] = it->second;
  }
  std::vector<std::optional<std::string>> texts(refs.size());
  if (!refs.empty()) {
    if (options.texts) {
      NEARDUP_RETURN_IF_ERROR(options.texts(refs, &texts));
      if (texts.size() != refs.size()) {
        return Status::Internal("report text source returned " + std::to_string(texts.size()) +
                                " texts for " + std::to_string(refs.size()) + " documents");
      }
    } else {
      NEARDUP_RETURN_IF_ERROR(
          ReadTextsFromInputs(model->summary, refs, &texts, &model->texts_note));
    }
  }
  std::vector<bool> missing(refs.size(), false);
  for (size_t i = 0; i < shown.size(); ++i) {
    const std::optional<std::string>& text = texts[slot[i]];
    if (!text) {
      missing[slot[i]] = true;
      continue;
    }
    shown[i]->text = CutText(*text, cap, &shown[i]->cut);
    if (shown[i]->bytes == 0) shown[i]->bytes = text->size();
  }
  model->texts_missing = static_cast<uint64_t>(std::count(missing.begin(), missing.end(), true));
  if (model->texts_missing > 0 && model->texts_note.empty()) {
    AddNote(&model->texts_note, "some documents were not found where the run read them");
  }
  return Status::Ok();
}

// ---- diffs --------------------------------------------------------------------------------------

// The document `id` of a cluster as shown: the kept one, a listed member or an extra via.
const ShownDocument* FindDocument(const ShownCluster& cluster, const std::string& id) {
  if (cluster.kept.id == id) return &cluster.kept;
  for (const ShownMember& member : cluster.members) {
    if (member.document.id == id) return &member.document;
  }
  for (const ShownDocument& via : cluster.vias) {
    if (via.id == id) return &via;
  }
  return nullptr;
}

void ComputeDiffs(const ReportOptions& options, ReportModel* model) {
  struct Job {
    const ShownDocument* base;
    const ShownDocument* other;
    std::optional<report::WordDiffResult>* out;
  };
  std::vector<Job> jobs;
  for (ShownCluster& cluster : model->clusters) {
    for (ShownMember& member : cluster.members) {
      if (!member.with_diff) continue;
      const ShownDocument* base = FindDocument(cluster, member.via);
      if (base) jobs.push_back({base, &member.document, &member.diff});
    }
  }
  for (SampleEntry& entry : model->sample) {
    if (!entry.member.with_diff) continue;
    jobs.push_back({entry.via.wants_text ? &entry.via : &entry.kept, &entry.member.document,
                    &entry.member.diff});
  }
  for (MissedPair& pair : model->eval.missed) jobs.push_back({&pair.a, &pair.b, &pair.diff});
  report::WordDiffOptions diff_options;
  diff_options.max_edits = options.max_diff_edits;
  ParallelFor(
      jobs.size(), 0,
      [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
          if (!jobs[i].base->text || !jobs[i].other->text) continue;
          *jobs[i].out = report::WordDiff(*jobs[i].base->text, *jobs[i].other->text, diff_options);
        }
      },
      1);
}

// The bytes a text takes in the page's data: a JSON string (report_page.cc's JsonWriter) with
// <, > and & written as \u escapes (EscapeScriptJson).
uint64_t EmbeddedBytes(std::string_view text) {
  uint64_t bytes = text.size() + 2;
  for (char c : text) {
    switch (c) {
      case '"':
      case '\\':
      case '\n':
      case '\r':
      case '\t':
        bytes += 1;
        break;
      case '<':
      case '>':
      case '&':
        bytes += 5;
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) bytes += 5;
    }
  }
  return bytes;
}

// The bytes of text a document or a diff puts on the page.
uint64_t TextBytes(const ShownDocument& document) {
  return document.text ? EmbeddedBytes(*document.text) : 0;
}
uint64_t TextBytes(const std::optional<report::WordDiffResult>& diff) {
  uint64_t bytes = 0;
  if (diff) {
    for (const report::DiffSpan& span : diff->spans) bytes += EmbeddedBytes(span.text) + 7;
  }
  return bytes;
}

// Keeps the texts of the clusters, largest first, while all texts on the page (the sample's and
// missed pairs' included) fit in max_total_text_bytes; the later clusters go without.
void TrimToBudget(const ReportOptions& options, ReportModel* model) {
  uint64_t used = 0;
  bool over = false;
  for (const SampleEntry& entry : model->sample) {
    used += TextBytes(entry.kept) + TextBytes(entry.member.diff);
    if (!entry.member.diff) used += TextBytes(entry.member.document);
  }
  for (const MissedPair& pair : model->eval.missed) {
    used += pair.diff ? TextBytes(pair.diff) : TextBytes(pair.a) + TextBytes(pair.b);
  }
  for (size_t c = 0; c < model->clusters.size(); ++c) {
    ShownCluster& cluster = model->clusters[c];
    if (cluster.texts_omitted) continue;
    uint64_t cost = TextBytes(cluster.kept);
    for (const ShownMember& member : cluster.members) {
      cost += member.diff ? TextBytes(member.diff) : TextBytes(member.document);
    }
    if (over || used + cost > options.max_total_text_bytes) {
      over = true;
      OmitTexts(c, model);
      continue;
    }
    used += cost;
  }
}

// The diffs on the page, and of those the ones that stopped at max_edits.
uint64_t CountDiffs(const ReportModel& model, uint64_t* incomplete) {
  uint64_t diffs = 0;
  *incomplete = 0;
  auto count = [&](const std::optional<report::WordDiffResult>& diff) {
    diffs += diff.has_value();
    *incomplete += diff.has_value() && !diff->complete;
  };
  for (const ShownCluster& cluster : model.clusters) {
    for (const ShownMember& member : cluster.members) count(member.diff);
  }
  for (const SampleEntry& entry : model.sample) count(entry.member.diff);
  for (const MissedPair& pair : model.eval.missed) count(pair.diff);
  return diffs;
}

}  // namespace

Result<std::string> RenderReport(const ReportSources& sources, const ReportOptions& options,
                                 ReportStats* stats) {
  if (options.max_text_bytes < 16) {
    return Status::InvalidArgument("max_text_bytes must be at least 16");
  }
  ReportModel model;
  model.options = options;
  std::string summary_text, eval_text;
  std::string summary_name = "summary.json", eval_name = "eval.json";
  if (!sources.directory.empty()) {
    namespace fs = std::filesystem;
    std::error_code error;
    if (!fs::is_directory(sources.directory, error)) {
      return Status::NotFound(sources.directory +
                              ": not a folder (neardup report reads the folder of `neardup dedup "
                              "-o DIR` or `neardup eval -o DIR`)");
    }
    summary_name = (fs::path(sources.directory) / "summary.json").string();
    eval_name = (fs::path(sources.directory) / "eval.json").string();
    NEARDUP_RETURN_IF_ERROR(ReadWholeFile(summary_name, &summary_text));
    if (fs::exists(eval_name, error)) NEARDUP_RETURN_IF_ERROR(ReadWholeFile(eval_name, &eval_text));
    model.source = sources.directory;
  } else {
    summary_text = sources.summary_json;
    eval_text = sources.eval_json;
    model.source = "(in memory)";
  }
  NEARDUP_RETURN_IF_ERROR(ParseSummary(summary_text, summary_name, &model.summary));
  if (!eval_text.empty()) {
    NEARDUP_RETURN_IF_ERROR(ParseEval(eval_text, eval_name, options, &model.eval));
  }
  NEARDUP_RETURN_IF_ERROR(ReadClusters(sources, options, &model));
  NEARDUP_RETURN_IF_ERROR(FetchTexts(options, &model));
  ComputeDiffs(options, &model);
  TrimToBudget(options, &model);
  ClusterCollector::CapListing(options, &model);
  const uint64_t diffs = CountDiffs(model, &model.diffs_incomplete);
  model.title = options.title.empty() ? "neardup report: " + model.source : options.title;
  std::string page = report::RenderPage(model);
  if (stats) {
    stats->clusters = model.total_clusters;
    stats->clusters_embedded = model.clusters.size();
    stats->removed = model.total_removed;
    stats->sample = model.sample.size();
    stats->missed_pairs = model.eval.missed.size();
    stats->eval = model.eval.present;
    stats->diffs = diffs;
    uint64_t wanted = 0, found = 0;
    auto count = [&](const ShownDocument& document) {
      wanted += document.wants_text;
      found += document.wants_text && document.text.has_value();
    };
    for (const ShownCluster& cluster : model.clusters) {
      count(cluster.kept);
      for (const ShownMember& member : cluster.members) count(member.document);
      for (const ShownDocument& via : cluster.vias) count(via);
    }
    for (const SampleEntry& entry : model.sample) {
      count(entry.kept);
      count(entry.member.document);
      count(entry.via);
    }
    for (const MissedPair& pair : model.eval.missed) {
      count(pair.a);
      count(pair.b);
    }
    stats->texts_wanted = wanted;
    stats->texts_found = found;
    stats->texts_note = model.texts_note;
    stats->bytes = page.size();
  }
  return page;
}

Result<ReportStats> WriteReport(const std::string& directory, const std::string& output_path,
                                const ReportOptions& options, bool force) {
  namespace fs = std::filesystem;
  OutputFileOptions file_options;
  file_options.force = force;
  // Never over the folder's own files, nor over one of the run's inputs.
  for (const char* name :
       {"summary.json", "clusters.jsonl", "eval.json", "keep.txt", "remove.txt"}) {
    file_options.inputs.push_back((fs::path(directory) / name).string());
  }
  std::string summary_text;
  if (ReadWholeFile((fs::path(directory) / "summary.json").string(), &summary_text).ok()) {
    SummaryModel summary;
    if (ParseSummary(summary_text, "summary.json", &summary).ok()) {
      for (const SummaryModel::Input& input : summary.inputs) {
        if (!input.absolute.empty()) file_options.inputs.push_back(input.absolute);
      }
    }
  }
  NEARDUP_RETURN_IF_ERROR(CheckOutputPath(output_path, file_options));
  ReportStats stats;
  ReportSources sources;
  sources.directory = directory;
  auto page = RenderReport(sources, options, &stats);
  if (!page.ok()) return page.status();
  NEARDUP_RETURN_IF_ERROR(WriteOutputFile(output_path, *page, file_options));
  return stats;
}

}  // namespace neardup
