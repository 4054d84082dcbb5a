// Writes dedup results: clusters.jsonl, keep.txt, remove.txt, summary.json and the kept input.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/json_writer.h"
#include "neardup/dedup.h"
#include "neardup/output_file.h"

namespace neardup {

namespace {

std::string Location(const DedupReport& report, const DedupDocument& doc) {
  std::string location =
      doc.file_index < report.input_files.size() ? report.input_files[doc.file_index] : "?";
  if (doc.line > 0) {
    // Two appends rather than `":" + ...`: GCC 12 reports a false -Wrestrict on that form.
    location += ':';
    location += std::to_string(doc.line);
  }
  return location;
}

const char* KeepName(KeepPolicy keep) {
  switch (keep) {
    case KeepPolicy::kFirst:
      return "first";
    case KeepPolicy::kLongest:
      return "longest";
    case KeepPolicy::kField:
      return "field";
  }
  return "?";
}

// Appends the JSON line of one cluster to `out`.
void AppendClusterLine(const DedupReport& report, const DedupCluster& cluster, std::string* out) {
  const DedupDocument& kept = report.documents[cluster.kept];
  JsonWriter json(out);
  json.BeginObject().Key("cluster").Uint(cluster.cluster_id);
  json.Key("size").Uint(cluster.removed.size() + 1);
  json.Key("kept").BeginObject();
  json.Key("id").String(kept.id).Key("location").String(Location(report, kept));
  json.Key("bytes").Uint(kept.text_bytes).Key("fingerprint").String(ToHex(kept.fingerprint));
  json.EndObject();
  json.Key("removed").BeginArray();
  for (const ClusterMember& member : cluster.removed) {
    const DedupDocument& doc = report.documents[member.document];
    json.BeginObject();
    json.Key("id").String(doc.id).Key("location").String(Location(report, doc));
    json.Key("bytes").Uint(doc.text_bytes);
    json.Key("distance").Int(member.distance_to_kept);
    json.Key("reason").String(member.reason);
    json.Key("via").String(report.documents[member.via].id);
    json.Key("via_reason").String(DuplicateReasonName(member.via_reason));
    json.Key("distance_to_via").Int(member.distance_to_via);
    if (member.similarity_to_via) {
      json.Key("similarity_to_via").Double(*member.similarity_to_via);
    }
    json.EndObject();
  }
  json.EndArray().EndObject();
  out->push_back('\n');
}

// Creates `path` and writes what produce(std::string* buffer, flush) appends to the buffer;
// produce calls flush() now and then, which writes the buffer out once it holds 1 MiB, so a
// large result (ten million ids) is never held whole in memory.
template <typename Produce>
Status WriteInPieces(const std::string& path, const OutputFileOptions& options, Produce produce) {
  auto file = OutputFile::Create(path, options);
  if (!file.ok()) return file.status();
  std::string buffer;
  Status status;
  auto write = [&](size_t at_least) {
    if (!status.ok() || buffer.size() < at_least) return;
    status = (*file)->Write(buffer);
    buffer.clear();
  };
  produce(&buffer, [&] { write(size_t{1} << 20); });
  write(0);
  NEARDUP_RETURN_IF_ERROR(status);
  return (*file)->Commit();
}

Status WriteClusters(const std::string& path, const DedupReport& report,
                     const OutputFileOptions& options) {
  return WriteInPieces(path, options, [&](std::string* out, const auto& flush) {
    for (const DedupCluster& cluster : report.clusters) {
      AppendClusterLine(report, cluster, out);
      flush();
    }
  });
}

// keep.txt (removed = false) or remove.txt (true): one id a line, in input order.
Status WriteIds(const std::string& path, const DedupReport& report, bool removed,
                const OutputFileOptions& options) {
  return WriteInPieces(path, options, [&](std::string* out, const auto& flush) {
    for (size_t i = 0; i < report.documents.size(); ++i) {
      if (static_cast<bool>(report.removed[i]) != removed) continue;
      AppendIdLine(report.documents[i].id, out);
      flush();
    }
  });
}

// The inputs as the locations name them, with what the report needs to read them again and to
// tell whether they changed since: absolute path, size and modification time.
void AppendInputs(const DedupReport& report, const DedupOptions* options, JsonWriter* json) {
  json->Key("inputs").BeginArray();
  for (const std::string& path : report.input_files) {
    json->BeginObject().Key("path").String(path);
    struct stat info;
    if (options && options->reader.memory_inputs.count(path) > 0) {
      json->Key("in_memory").Bool(true);
    } else if (!IsStreamInput(path) && ::stat(path.c_str(), &info) == 0) {  // not a pipe
      std::error_code error;
      std::filesystem::path absolute = std::filesystem::absolute(path, error);
      json->Key("absolute").String(error ? path : absolute.lexically_normal().string());
      json->Key("bytes").Uint(static_cast<uint64_t>(info.st_size));
      json->Key("mtime_ns")
          .Int(static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec);
    }
    json->EndObject();
  }
  json->EndArray();
  if (!options) return;
  const DocumentReaderOptions& reader = options->reader;
  json->Key("reader").BeginObject();
  json->Key("id_field").String(reader.id_field).Key("text_field").String(reader.text_field);
  json->Key("lines").Bool(reader.text_lines).Key("stdin_is_text").Bool(reader.stdin_is_text);
  json->Key("allow_invalid_utf8_text").Bool(reader.allow_invalid_utf8_text);
  json->Key("max_document_bytes").Uint(reader.max_document_bytes);
  json->EndObject();
}

void AppendHistogram(const SimilarityHistogram& histogram, JsonWriter* json) {
  if (histogram.accepted.empty()) return;
  json->Key("similarity_histogram").BeginObject();
  json->Key("bins").Int(SimilarityHistogram::kBins);
  json->Key("accepted").BeginArray();
  for (uint64_t count : histogram.accepted) json->Uint(count);
  json->EndArray();
  json->Key("rejected").BeginArray();
  for (uint64_t count : histogram.rejected) json->Uint(count);
  json->EndArray();
  json->Key("rejected_pairs").Uint(histogram.rejected_pairs);
  json->Key("rejected_measured").Uint(histogram.rejected_measured);
  json->Key("rejected_sample_every").Uint(histogram.rejected_sample_every);
  json->EndObject();
}

// summary.json's parts, in the order they appear.

// What was read: documents, skipped records and fallbacks by reason, failures by code.
void AppendReadCounts(const DedupReport& report, JsonWriter* json) {
  uint64_t skipped_total = 0;
  for (const auto& [reason, count] : report.skipped) skipped_total += count;
  uint64_t failed_total = 0;
  for (const auto& [reason, count] : report.failed) failed_total += count;
  json->Key("documents_read").Uint(report.documents.size() + failed_total);
  json->Key("documents_fingerprinted").Uint(report.documents.size());
  json->Key("records_skipped").Uint(skipped_total);
  json->Key("skipped_by_reason").BeginObject();
  for (const auto& [reason, count] : report.skipped) json->Key(reason).Uint(count);
  json->EndObject();
  json->Key("fallbacks_by_reason").BeginObject();
  for (const auto& [reason, count] : report.fallbacks) json->Key(reason).Uint(count);
  json->EndObject();
  json->Key("duplicate_ids").Uint(report.duplicate_ids);
  json->Key("fingerprint_failures_by_code").BeginObject();
  for (const auto& [code, count] : report.failed) json->Key(code).Uint(count);
  json->EndObject();
  json->Key("text_bytes").Uint(report.text_bytes);
}

// The candidate pairs by source and the LSH buckets they came from.
void AppendCandidateCounts(const DedupReport& report, JsonWriter* json) {
  json->Key("candidate_pairs").Uint(report.candidate_pairs);
  json->Key("lsh_candidate_pairs").Uint(report.lsh_candidate_pairs);
  json->Key("simhash_candidate_pairs").Uint(report.simhash_candidate_pairs);
  json->Key("simhash_only_candidate_pairs").Uint(report.simhash_only_candidate_pairs);
  json->Key("simhash_only_accepted_pairs").Uint(report.simhash_only_accepted_pairs);
  json->Key("lsh_buckets").BeginObject();
  json->Key("records").Uint(report.lsh_stats.records);
  json->Key("buckets").Uint(report.lsh_stats.buckets);
  json->Key("oversized").Uint(report.lsh_stats.oversized_buckets);
  json->Key("largest").Uint(report.lsh_stats.largest_bucket);
  json->Key("pairs_before_dedup").Uint(report.lsh_stats.bucket_pairs);
  json->EndObject();
}

// The pair rule (neardup/pair_rule.h): accepted pairs by reason, and what the rule was.
void AppendPairRule(const DedupReport& report, JsonWriter* json) {
  json->Key("accepted_pairs_by_reason").BeginObject();
  for (DuplicateReason reason :
       {DuplicateReason::kExact, DuplicateReason::kWhitespace, DuplicateReason::kNearDuplicate,
        DuplicateReason::kContained, DuplicateReason::kEdited}) {
    const char* name = DuplicateReasonName(reason);
    auto it = report.pairs_by_reason.find(name);
    json->Key(name).Uint(it == report.pairs_by_reason.end() ? 0 : it->second);
  }
  json->EndObject();
  json->Key("pair_rule").BeginObject();
  json->Key("jaccard_threshold").Double(report.rule.jaccard_threshold);
  json->Key("containment_threshold").Double(report.rule.containment_threshold);
  json->Key("containment_min_shingles").Double(report.rule.containment_min_shingles);
  json->Key("containment_min_ratio").Double(report.rule.containment_min_ratio);
  json->Key("edited_threshold").Double(report.rule.edited_threshold);
  json->Key("edited_min_jaccard").Double(report.rule.edited_min_jaccard);
  json->Key("lowest_accepted_jaccard").Double(LowestAcceptedJaccard(report.rule));
  json->Key("boilerplate").Bool(report.boilerplate);
  if (report.boilerplate) {
    json->Key("boilerplate_min_documents").Uint(report.boilerplate_documents);
    json->Key("frequency_sketch_mb")
        .Double(static_cast<double>(report.boilerplate_sketch_bytes) / 1e6);
    json->Key("frequency_counted_every").Uint(report.boilerplate_counted_every);
  }
  json->EndObject();
}

// Clusters and the documents they keep and remove.
void AppendClusterCounts(const DedupReport& report, JsonWriter* json) {
  json->Key("clusters").Uint(report.clusters.size());
  uint64_t removed = report.removed_count();
  json->Key("documents_in_clusters").Uint(removed + report.clusters.size());
  json->Key("documents_removed").Uint(removed);
  json->Key("documents_kept").Uint(report.documents.size() - removed);
}

// Each stage's time, items and rates, and the run's total.
void AppendStages(const DedupReport& report, JsonWriter* json) {
  json->Key("stages").BeginArray();
  for (const StageTiming& stage : report.stages) {
    json->BeginObject().Key("stage").String(stage.stage).Key("seconds").Double(stage.seconds);
    json->Key("items").Uint(stage.items);
    if (stage.peak_memory_bytes > 0) {
      json->Key("peak_memory_mb").Double(static_cast<double>(stage.peak_memory_bytes) / 1e6);
    }
    if (stage.seconds > 0) {
      json->Key("items_per_second").Double(static_cast<double>(stage.items) / stage.seconds);
      if (stage.bytes > 0) {
        json->Key("mb_per_second").Double(static_cast<double>(stage.bytes) / 1e6 / stage.seconds);
      }
    }
    json->EndObject();
  }
  json->EndArray();
  json->Key("total_seconds").Double(report.total_seconds);
  if (report.total_seconds > 0) {
    json->Key("documents_per_second")
        .Double(static_cast<double>(report.documents.size()) / report.total_seconds);
  }
}

// The options the run used (the resolved LSH shape, k and verify threshold from the report).
void AppendOptions(const DedupReport& report, const DedupOptions& options, JsonWriter* json) {
  json->Key("options").BeginObject();
  json->Key("bits").Int(options.fingerprint.bits);
  json->Key("candidates")
      .String(options.candidates == DedupOptions::Candidates::kLsh       ? "lsh"
              : options.candidates == DedupOptions::Candidates::kSimHash ? "simhash"
                                                                         : "lsh+simhash");
  json->Key("threshold").Double(options.lsh.threshold);
  json->Key("bands").Int(report.lsh ? report.lsh->bands : 0);
  json->Key("rows").Int(report.lsh ? report.lsh->rows : 0);
  json->Key("bucket_window").Uint(options.lsh.bucket_window);
  json->Key("k").Int(report.k.value_or(-1));
  json->Key("top_k").Uint(options.fingerprint.features.top_k);
  json->Key("shingle_size").Int(options.fingerprint.features.shingle_size);
  json->Key("keep").String(KeepName(options.keep));
  if (options.keep == KeepPolicy::kField) json->Key("keep_field").String(options.keep_field);
  json->Key("verify").Double(report.verify_threshold);
  json->Key("containment").Double(options.containment_threshold);
  json->Key("containment_min_shingles").Double(options.containment_min_shingles);
  json->Key("containment_min_ratio").Double(options.containment_min_ratio);
  json->Key("edited").Double(options.edited_threshold);
  json->Key("edited_min_jaccard").Double(options.edited_min_jaccard);
  json->Key("boilerplate").Bool(options.boilerplate);
  json->Key("boilerplate_min_documents").Uint(options.boilerplate_options.min_documents);
  json->Key("boilerplate_sketch_mb").Uint(options.boilerplate_sketch_bytes >> 20);
  json->EndObject();
}

}  // namespace

std::string DedupClusterLines(const DedupReport& report) {
  std::string out;
  for (const DedupCluster& cluster : report.clusters) AppendClusterLine(report, cluster, &out);
  return out;
}

void AppendIdLine(std::string_view id, std::string* out) {
  bool quote = !id.empty() && id.front() == '"';
  for (char c : id) quote = quote || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  if (quote) {
    AppendJsonString(id, out);
  } else {
    out->append(id);
  }
  out->push_back('\n');
}

std::string DedupSummaryJson(const DedupReport& report, const DedupOptions* options) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  AppendReadCounts(report, &json);
  AppendCandidateCounts(report, &json);
  json.Key("accepted_pairs").Uint(report.pairs.size());
  AppendHistogram(report.similarity_histogram, &json);
  AppendPairRule(report, &json);
  // Intermediate data in temporary files (DedupOptions::spill); verification reads the inputs a
  // second time (standard input from its spooled copy).
  json.Key("spill").BeginObject();
  json.Key("enabled").Bool(report.spilled);
  json.Key("peak_mb").Double(static_cast<double>(report.spill_peak_bytes) / 1e6);
  json.EndObject();
  AppendClusterCounts(report, &json);
  AppendStages(report, &json);
  if (options) AppendOptions(report, *options, &json);
  AppendInputs(report, options, &json);
  json.EndObject();
  out.push_back('\n');
  return out;
}

Status WriteDedupOutputs(const DedupReport& report, const DedupOutputOptions& output) {
  OutputFileOptions file_options;
  file_options.force = output.force;
  file_options.inputs = report.input_files;
  // Every output is checked before anything is written, so a refused run writes nothing.
  std::vector<std::string> paths;
  if (!output.directory.empty()) {
    for (const char* name : {"clusters.jsonl", "keep.txt", "remove.txt", "summary.json"}) {
      paths.push_back((std::filesystem::path(output.directory) / name).string());
    }
  }
  if (!output.write_kept_path.empty()) paths.push_back(output.write_kept_path);
  NEARDUP_RETURN_IF_ERROR(CheckOutputPaths(paths, file_options));
  if (!output.write_kept_path.empty() && output.inputs) {
    for (const std::string& input : *output.inputs) {
      if (IsStreamInput(input)) {
        return Status::Unsupported(
            "write_kept_path: the kept records cannot be copied from " +
            (input == "-" ? std::string("standard input") : input + " (a pipe or other stream)") +
            ": it cannot be read twice");
      }
    }
  }
  if (output.directory.empty()) {
    // Standard output: the clusters only (one JSON object a line).
    if (output.clusters_to_stdout) {
      NEARDUP_RETURN_IF_ERROR(WriteClusters("-", report, file_options));
    }
  } else {
    std::error_code error;
    std::filesystem::create_directories(output.directory, error);
    if (error) {
      return Status::IoError(output.directory + ": cannot create directory: " + error.message());
    }
    NEARDUP_RETURN_IF_ERROR(WriteClusters(paths[0], report, file_options));
    NEARDUP_RETURN_IF_ERROR(WriteIds(paths[1], report, false, file_options));
    NEARDUP_RETURN_IF_ERROR(WriteIds(paths[2], report, true, file_options));
    NEARDUP_RETURN_IF_ERROR(
        WriteOutputFile(paths[3], DedupSummaryJson(report, output.options), file_options));
  }

  if (output.write_kept_path.empty()) return Status::Ok();
  if (!output.inputs || !output.options) {
    return Status::InvalidArgument("write_kept_path needs the inputs and options");
  }
  DocumentReaderOptions reader_options = output.options->reader;
  reader_options.keep_raw_line = true;
  reader_options.strict = false;
  reader_options.on_warning = nullptr;
  auto reader = DocumentReader::Open(*output.inputs, reader_options);
  if (!reader.ok()) return reader.status();
  auto file = OutputFile::Create(output.write_kept_path, file_options);
  if (!file.ok()) return file.status();
  Document doc;
  size_t next_doc = 0;
  std::string line;
  while (next_doc < report.documents.size()) {
    auto got = (*reader)->Next(&doc);
    if (!got.ok()) return got.status();
    if (!*got) break;
    const DedupDocument& record = report.documents[next_doc];
    if (doc.file_index != record.file_index || doc.line != record.line) continue;
    bool removed = report.removed[next_doc];
    ++next_doc;
    if (removed) continue;
    line.clear();
    if (doc.from_jsonl) {
      line = doc.raw_line;
    } else {
      JsonWriter json(&line);
      json.BeginObject().Key("id").String(doc.id).Key("text").String(doc.text).EndObject();
    }
    line.push_back('\n');
    NEARDUP_RETURN_IF_ERROR((*file)->Write(line));
  }
  return (*file)->Commit();
}

}  // namespace neardup
