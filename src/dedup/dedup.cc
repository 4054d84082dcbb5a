// RunDedup, BuildClusters and the keep policies; see neardup/dedup.h.
#include "neardup/dedup.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <mutex>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "common/parallel.h"
#include "dedup/document_hashes.h"
#include "dedup/pair_runs.h"
#include "dedup/spill_file.h"
#include "neardup/clusters.h"
#include "neardup/permuted_index.h"
#include "neardup/shingles.h"

namespace neardup {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// True if document x should be kept over document y under `keep` (x < y in canonical order
// breaks ties).
bool Better(const DedupDocument& x, uint32_t xi, const DedupDocument& y, uint32_t yi,
            KeepPolicy keep) {
  switch (keep) {
    case KeepPolicy::kLongest:
      if (x.normalized_bytes != y.normalized_bytes) return x.normalized_bytes > y.normalized_bytes;
      break;
    case KeepPolicy::kField:
      if (x.score.has_value() != y.score.has_value()) return x.score.has_value();
      if (x.score && *x.score != *y.score) return *x.score > *y.score;
      break;
    case KeepPolicy::kFirst:
      break;
  }
  return xi < yi;
}

bool IsExactDuplicate(const DedupDocument& x, const DedupDocument& y) {
  return x.content_hash == y.content_hash && x.text_bytes == y.text_bytes;
}

// Renames every document whose id is shared with another one to "id@file:line" (its location),
// so keep.txt and remove.txt never name one id twice. Returns how many documents were renamed;
// with `strict` the first shared id is an error instead.
Result<uint64_t> QualifyDuplicateIds(DedupReport* report, bool strict) {
  std::unordered_map<std::string_view, uint32_t> first_with_id;
  std::vector<uint32_t> shared;
  auto& documents = report->documents;
  for (uint32_t i = 0; i < documents.size(); ++i) {
    auto [it, inserted] = first_with_id.try_emplace(documents[i].id, i);
    if (inserted) continue;
    if (strict) {
      const DedupDocument& first = documents[it->second];
      return Status::InvalidArgument(
          "id \"" + documents[i].id + "\" is used twice: " + report->input_files[first.file_index] +
          ":" + std::to_string(first.line) + " and " +
          report->input_files[documents[i].file_index] + ":" + std::to_string(documents[i].line));
    }
    if (it->second != UINT32_MAX) {
      shared.push_back(it->second);
      it->second = UINT32_MAX;  // its first holder is listed once
    }
    shared.push_back(i);
  }
  for (uint32_t i : shared) {
    DedupDocument& doc = documents[i];
    std::string qualified = doc.id + "@" + report->input_files[doc.file_index];
    if (doc.line > 0) {
      qualified += ':';  // two appends: GCC 12 reports a false -Wrestrict on ":" + ...
      qualified += std::to_string(doc.line);
    }
    doc.id = std::move(qualified);
  }
  return static_cast<uint64_t>(shared.size());
}

// Peak resident memory of the process (Linux VmHWM) in bytes, 0 when unknown.
uint64_t PeakMemoryBytes() {
  FILE* file = std::fopen("/proc/self/status", "r");
  if (!file) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof(line), file)) {
    if (std::sscanf(line, "VmHWM: %" SCNu64 " kB", &kb) == 1) break;
  }
  std::fclose(file);
  return kb * 1024;
}

// Starts a new peak-memory measurement (Linux >= 4.0: "5" resets VmHWM to the current size).
void ResetPeakMemory() {
  FILE* file = std::fopen("/proc/self/clear_refs", "w");
  if (!file) return;
  std::fputs("5", file);
  std::fclose(file);
}

// True when `fingerprint` normalises text exactly as `shingles` does (invalid UTF-8 aside: the
// Fingerprinter rejects it, so such a document never reaches the shingles).
bool SameNormalization(const FingerprintOptions& fingerprint, const NormalizeOptions& shingles) {
  const NormalizeOptions& f = fingerprint.normalize;
  return fingerprint.profile != HashProfile::kYanyiwuSimhash &&
         f.strip_markup == shingles.strip_markup && f.nfkc == shingles.nfkc &&
         f.case_fold == shingles.case_fold &&
         f.traditional_to_simplified == shingles.traditional_to_simplified &&
         f.fold_whitespace == shingles.fold_whitespace &&
         f.opencc_config == shingles.opencc_config &&
         (f.replace_invalid_utf8 == shingles.replace_invalid_utf8 || !f.replace_invalid_utf8);
}

}  // namespace

uint64_t DedupReport::removed_count() const {
  return static_cast<uint64_t>(std::count(removed.begin(), removed.end(), true));
}

Status ParseKeepPolicy(const std::string& text, KeepPolicy* policy, std::string* field) {
  field->clear();
  if (text == "first") {
    *policy = KeepPolicy::kFirst;
  } else if (text == "longest") {
    *policy = KeepPolicy::kLongest;
  } else if (text.rfind("field:", 0) == 0 && text.size() > 6) {
    *policy = KeepPolicy::kField;
    *field = text.substr(6);
  } else {
    return Status::InvalidArgument("keep policy: expected first, longest or field:NAME, got \"" +
                                   text + "\"");
  }
  return Status::Ok();
}

void BuildClusters(const std::vector<DedupDocument>& documents,
                   const std::vector<DuplicatePair>& pairs, KeepPolicy keep,
                   std::vector<DedupCluster>* clusters, std::vector<bool>* removed) {
  const size_t n = documents.size();
  clusters->clear();
  removed->assign(n, false);
  // Connected components (neardup/clusters.h): each group sorted, its first member the root.
  std::vector<NeighborPair> links;
  links.reserve(pairs.size());
  for (const DuplicatePair& pair : pairs) links.push_back({pair.a, pair.b, pair.distance});
  const std::vector<std::vector<uint64_t>> groups = GroupComponents(ConnectedComponents({}, links));
  std::vector<NeighborPair>().swap(links);
  if (groups.empty()) return;
  // Adjacency of accepted pairs, for the breadth-first "via" links.
  std::unordered_map<uint32_t, std::vector<const DuplicatePair*>> adjacency;
  for (const DuplicatePair& pair : pairs) {
    adjacency[pair.a].push_back(&pair);
    adjacency[pair.b].push_back(&pair);
  }
  struct Pending {
    uint32_t kept;
    const std::vector<uint64_t>* members;
  };
  std::vector<Pending> pending;
  for (const std::vector<uint64_t>& list : groups) {
    uint32_t kept = static_cast<uint32_t>(list[0]);
    for (uint64_t member : list) {
      const uint32_t candidate = static_cast<uint32_t>(member);
      if (Better(documents[candidate], candidate, documents[kept], kept, keep)) kept = candidate;
    }
    pending.push_back({kept, &list});
  }
  std::sort(pending.begin(), pending.end(),
            [](const Pending& x, const Pending& y) { return x.kept < y.kept; });
  for (const Pending& entry : pending) {
    DedupCluster cluster;
    cluster.cluster_id = clusters->size();
    cluster.kept = entry.kept;
    std::unordered_map<uint32_t, ClusterMember> linked;
    std::deque<uint32_t> queue{entry.kept};
    std::unordered_map<uint32_t, bool> seen{{entry.kept, true}};
    while (!queue.empty()) {
      uint32_t current = queue.front();
      queue.pop_front();
      // Neighbours in canonical order so "via" is deterministic.
      std::vector<const DuplicatePair*> edges = adjacency[current];
      std::sort(edges.begin(), edges.end(), [&](const DuplicatePair* x, const DuplicatePair* y) {
        uint32_t ox = x->a == current ? x->b : x->a;
        uint32_t oy = y->a == current ? y->b : y->a;
        return ox < oy;
      });
      for (const DuplicatePair* edge : edges) {
        uint32_t other = edge->a == current ? edge->b : edge->a;
        if (seen[other]) continue;
        seen[other] = true;
        queue.push_back(other);
        ClusterMember member;
        member.document = other;
        member.via = current;
        member.distance_to_via = edge->distance;
        member.similarity_to_via = edge->similarity;
        member.distance_to_kept =
            HammingDistance(documents[other].fingerprint, documents[entry.kept].fingerprint);
        if (IsExactDuplicate(documents[other], documents[entry.kept])) {
          member.reason = "exact_duplicate";
        } else if (current == entry.kept) {
          member.reason = "near_duplicate";
        } else {
          member.reason = "chained";
        }
        linked[other] = std::move(member);
      }
    }
    for (uint64_t member : *entry.members) {
      const uint32_t doc = static_cast<uint32_t>(member);
      if (doc == entry.kept) continue;
      cluster.removed.push_back(std::move(linked[doc]));
      (*removed)[doc] = true;
    }
    clusters->push_back(std::move(cluster));
  }
}

double ResolveVerifyThreshold(const DedupOptions& options) {
  return options.verify_threshold == DedupOptions::kVerifyAtThreshold ? options.lsh.threshold
                                                                      : options.verify_threshold;
}

namespace {

bool UsesLsh(const DedupOptions& options) {
  return options.candidates != DedupOptions::Candidates::kSimHash;
}
bool UsesSimHash(const DedupOptions& options) {
  return options.candidates != DedupOptions::Candidates::kLsh;
}

// InvalidArgument naming the option, or OK.
Status CheckOptions(const DedupOptions& options) {
  const int max_k = options.fingerprint.bits / 8;
  if (options.max_distance < 0 || options.max_distance > max_k) {
    return Status::InvalidArgument("max_distance must be in [0, " + std::to_string(max_k) +
                                   "] for " + std::to_string(options.fingerprint.bits) +
                                   "-bit fingerprints");
  }
  const double verify = ResolveVerifyThreshold(options);
  if (verify < 0 || verify > 1)
    return Status::InvalidArgument("verify_threshold must be in [0, 1]");
  if (options.keep == KeepPolicy::kField && options.keep_field.empty()) {
    return Status::InvalidArgument("keep_field: the field keep policy needs a field name");
  }
  auto lsh = ResolveLshParameters(options.lsh);
  if (!lsh.ok()) return lsh.status();
  return Status::Ok();
}

}  // namespace

Result<PairJudgement> JudgePair(std::string_view a, std::string_view b,
                                const DedupOptions& options) {
  NEARDUP_RETURN_IF_ERROR(CheckOptions(options));
  PairJudgement judgement;
  judgement.verify_threshold = ResolveVerifyThreshold(options);
  judgement.max_distance = UsesSimHash(options) ? options.max_distance : -1;
  judgement.exact = a == b;
  judgement.whitespace_only = SqueezedHash(a) == SqueezedHash(b);
  auto fingerprinter = Fingerprinter::Create(options.fingerprint);
  if (!fingerprinter.ok()) return fingerprinter.status().WithContext("fingerprint options");
  auto fa = (*fingerprinter)->Compute(a);
  if (!fa.ok()) return fa.status().WithContext("A");
  auto fb = (*fingerprinter)->Compute(b);
  if (!fb.ok()) return fb.status().WithContext("B");
  judgement.distance = HammingDistance(*fa, *fb);
  judgement.within_k = UsesSimHash(options) && judgement.distance <= options.max_distance;
  auto similarity =
      ShingleSimilarity::Create(options.fingerprint.normalize.traditional_to_simplified);
  if (!similarity.ok()) return similarity.status();
  std::vector<uint64_t> sa, sb;
  NEARDUP_RETURN_IF_ERROR((*similarity)->Shingles(a, &sa));
  NEARDUP_RETURN_IF_ERROR((*similarity)->Shingles(b, &sb));
  auto lsh = MinHashLsh::Create(options.lsh);
  if (!lsh.ok()) return lsh.status();
  judgement.lsh = lsh->parameters();
  std::vector<uint32_t> ka(judgement.lsh.bands), kb(judgement.lsh.bands);
  if (lsh->BandKeysOf(sa, ka) && lsh->BandKeysOf(sb, kb)) {
    judgement.shared_bands = MinHashLsh::SharedBands(ka, kb);
  }
  judgement.lsh_candidate = UsesLsh(options) && judgement.shared_bands > 0;
  std::vector<uint32_t> na, nb;
  ShingleSimilarity::Narrow(sa, &na);
  ShingleSimilarity::Narrow(sb, &nb);
  judgement.jaccard = judgement.exact ? 1.0 : ShingleSimilarity::Jaccard32(na, nb);
  judgement.verified =
      judgement.verify_threshold <= 0 || judgement.jaccard >= judgement.verify_threshold;
  judgement.duplicate = judgement.exact || judgement.whitespace_only ||
                        ((judgement.lsh_candidate || judgement.within_k) && judgement.verified);
  return judgement;
}

Result<DedupReport> RunDedup(const std::vector<std::string>& inputs, const DedupOptions& options,
                             const DedupProgress& progress) {
  const auto run_start = Clock::now();
  NEARDUP_RETURN_IF_ERROR(CheckOptions(options));
  const int threads = options.threads > 0 ? options.threads : DefaultThreadCount();
  auto fingerprinter = Fingerprinter::Create(options.fingerprint);
  if (!fingerprinter.ok()) return fingerprinter.status().WithContext("fingerprint options");
  auto similarity =
      ShingleSimilarity::Create(options.fingerprint.normalize.traditional_to_simplified);
  if (!similarity.ok()) return similarity.status();
  auto lsh = MinHashLsh::Create(options.lsh);
  if (!lsh.ok()) return lsh.status();
  const bool use_lsh = UsesLsh(options);
  const bool use_simhash = UsesSimHash(options);
  const int bands = lsh->parameters().bands;

  DocumentReaderOptions reader_options = options.reader;
  if (options.keep == KeepPolicy::kField) reader_options.score_field = options.keep_field;
  const double verify_threshold = ResolveVerifyThreshold(options);
  const bool verify = verify_threshold > 0;
  if (verify) reader_options.spool_stdin = true;
  auto opened = DocumentReader::Open(inputs, reader_options);
  if (!opened.ok()) return opened.status();
  DocumentReader& reader = **opened;

  DedupReport report;
  report.input_files = reader.files();
  report.lsh = use_lsh ? lsh->parameters() : LshParameters{};
  report.max_distance = use_simhash ? options.max_distance : -1;
  report.verify_threshold = verify ? verify_threshold : 0;

  // Peak memory per stage (when asked): the peak since the previous stage ended.
  auto stage_memory = [&options](std::vector<StageTiming>* stages, size_t from) {
    if (!options.measure_stage_memory) return;
    const uint64_t peak = PeakMemoryBytes();
    for (size_t i = from; i < stages->size(); ++i) (*stages)[i].peak_memory_bytes = peak;
    ResetPeakMemory();
  };
  if (options.measure_stage_memory) ResetPeakMemory();

  // Intermediate data (band keys, candidate pair runs, shingle sets of the documents to verify):
  // unlinked temporary files when spilling, else memory.
  const bool spill = options.spill;
  std::vector<SpillFile> band_files;
  if (spill && use_lsh) {
    band_files.reserve(bands);
    for (int b = 0; b < bands; ++b) {
      auto file = SpillFile::Create(options.temp_directory);
      if (!file.ok()) return file.status();
      band_files.push_back(std::move(*file));
    }
  }
  uint64_t spill_bytes = 0, spill_peak_bytes = 0;
  auto note_spill = [&](int64_t delta) {
    spill_bytes = static_cast<uint64_t>(static_cast<int64_t>(spill_bytes) + delta);
    spill_peak_bytes = std::max(spill_peak_bytes, spill_bytes);
  };

  // ---- Stage 1: read, fingerprint and band keys, in batches. ----
  auto stage_start = Clock::now();
  double read_seconds = 0, lsh_seconds = 0;
  std::vector<Document> batch(options.batch_size);
  std::vector<Result<Fingerprint>> results;
  std::vector<uint64_t> normalized_bytes;
  BandKeyTable keys(use_lsh && !spill ? bands : 0);
  std::vector<bool> has_keys;  // per document, when spilling
  std::vector<uint32_t> batch_keys, band_column;
  std::vector<uint8_t> batch_has_keys;
  // When the fingerprint is computed from the same normalised text the shingles need (the
  // default options), the shingles are cut from the Fingerprinter's normalised text instead of
  // normalising every document twice.
  const bool share_normalization =
      use_lsh && SameNormalization(options.fingerprint, (*similarity)->normalize_options());
  std::vector<std::string> normalized;
  // --keep longest compares the normalised texts (markup stripped, ...).
  const bool need_normalized = share_normalization || options.keep == KeepPolicy::kLongest;
  bool done = false;
  bool reserved = false;
  while (!done) {
    auto read_start = Clock::now();
    size_t count = 0;
    while (count < batch.size()) {
      auto got = reader.Next(&batch[count]);
      if (!got.ok()) return got.status();
      if (!*got) {
        done = true;
        break;
      }
      ++count;
    }
    read_seconds += SecondsSince(read_start);
    results.assign(count, Result<Fingerprint>(Status::Internal("not computed")));
    normalized_bytes.assign(count, 0);
    if (share_normalization) normalized.resize(count);
    ParallelFor(
        count, threads,
        [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) {
            if (!need_normalized) {
              results[i] = (*fingerprinter)->Compute(batch[i].text);
              continue;
            }
            auto details = (*fingerprinter)->ComputeDetails(batch[i].text, false, true);
            if (!details.ok()) {
              results[i] = details.status();
              continue;
            }
            results[i] = details->fingerprint;
            normalized_bytes[i] = details->normalized_text.size();
            if (share_normalization) normalized[i] = std::move(details->normalized_text);
          }
        },
        16);
    if (use_lsh) {
      // Shingles -> signature -> band keys, timed apart from the fingerprints.
      auto lsh_start = Clock::now();
      batch_keys.assign(count * bands, 0);
      batch_has_keys.assign(count, 0);
      ParallelFor(
          count, threads,
          [&](size_t begin, size_t end) {
            std::vector<uint64_t> shingles;
            for (size_t i = begin; i < end; ++i) {
              if (!results[i].ok()) continue;
              if (share_normalization) {
                ShingleSimilarity::ShinglesOfNormalized(normalized[i], &shingles);
              } else if (!(*similarity)->Shingles(batch[i].text, &shingles).ok()) {
                continue;
              }
              batch_has_keys[i] = lsh->BandKeysOf(
                  shingles, std::span<uint32_t>(batch_keys.data() + i * bands, bands));
            }
          },
          16);
      lsh_seconds += SecondsSince(lsh_start);
    }
    if (use_lsh && spill) {
      // Band-major: each band's file holds one key per fingerprinted document (0 without keys).
      for (int b = 0; b < bands; ++b) {
        band_column.clear();
        for (size_t i = 0; i < count; ++i) {
          if (results[i].ok()) band_column.push_back(batch_keys[i * bands + b]);
        }
        NEARDUP_RETURN_IF_ERROR(
            band_files[b].Append(band_column.data(), band_column.size() * sizeof(uint32_t)));
        note_spill(static_cast<int64_t>(band_column.size() * sizeof(uint32_t)));
      }
    }
    for (size_t i = 0; i < count; ++i) {
      Document& doc = batch[i];
      if (!results[i].ok()) {
        const Status& error = results[i].status();
        if (reader_options.strict) return error.WithContext(doc.location);
        ++report.failed[StatusCodeName(error.code())];
        if (reader_options.on_warning) {
          reader_options.on_warning(doc.location + ": cannot fingerprint: " + error.ToString());
        }
        continue;
      }
      if (use_lsh && spill) {
        has_keys.push_back(batch_has_keys[i] != 0);
      } else if (use_lsh) {
        keys.Append(batch_has_keys[i]
                        ? std::span<const uint32_t>(batch_keys.data() + i * bands, bands)
                        : std::span<const uint32_t>());
      }
      DedupDocument record;
      record.id = std::move(doc.id);
      record.fingerprint = *results[i];
      record.text_bytes = doc.text.size();
      record.normalized_bytes = normalized_bytes[i];
      record.content_hash = XXH3_64bits(doc.text.data(), doc.text.size());
      record.squeezed_hash = SqueezedHash(doc.text);
      record.score = doc.score;
      record.file_index = doc.file_index;
      record.line = doc.line;
      report.text_bytes += doc.text.size();
      report.documents.push_back(std::move(record));
    }
    if (!reserved && count > 0 && reader.total_input_bytes() > 0 &&
        reader.input_bytes_consumed() > 0) {
      // Room for twice the corpus at the first batch's bytes per document, so the document
      // table is not copied while growing (a copy briefly holds it twice, and the first batch
      // may hold longer documents than the rest). Only the pages written become resident: the
      // unused part of the reservation costs address space, not memory.
      reserved = true;
      const double per_byte = static_cast<double>(report.documents.size()) /
                              static_cast<double>(reader.input_bytes_consumed());
      const double estimate = 2.0 * per_byte * static_cast<double>(reader.total_input_bytes());
      if (estimate > static_cast<double>(report.documents.size()) && estimate < 4.3e9) {
        report.documents.reserve(static_cast<size_t>(estimate));
        if (use_lsh && spill) has_keys.reserve(static_cast<size_t>(estimate));
      }
    }
    if (progress) {
      progress("fingerprint", reader.input_bytes_consumed(), reader.total_input_bytes(),
               report.documents.size());
    }
  }
  batch.clear();
  batch.shrink_to_fit();
  std::vector<uint32_t>().swap(batch_keys);
  std::vector<std::string>().swap(normalized);
  for (SpillFile& file : band_files) NEARDUP_RETURN_IF_ERROR(file.Flush());
  report.skipped = reader.skipped();
  const double fingerprint_seconds = SecondsSince(stage_start);
  report.stages.push_back({"read", read_seconds, report.documents.size(), report.text_bytes});
  report.stages.push_back({"fingerprint", fingerprint_seconds - read_seconds - lsh_seconds,
                           report.documents.size(), report.text_bytes});
  if (use_lsh) {
    report.stages.push_back({"minhash", lsh_seconds, report.documents.size(), report.text_bytes});
  }
  stage_memory(&report.stages, 0);
  if (report.documents.size() > UINT32_MAX) {
    return Status::ResourceExhausted("more than 4294967295 documents");
  }
  auto qualified = QualifyDuplicateIds(&report, reader_options.strict);
  if (!qualified.ok()) return qualified.status();
  report.duplicate_ids = *qualified;
  report.fallbacks = reader.fallbacks();
  const size_t n = report.documents.size();

  // Candidate pairs come as sorted runs of distinct packed pairs (a << 32 | b), merged later.
  constexpr uint8_t kFromLsh = 1, kFromSimHash = 2, kWhitespace = 4;
  std::vector<PairRun> runs;
  std::vector<std::vector<uint64_t>> memory_runs;  // when not spilling
  std::vector<SpillFile> run_files;                // when spilling: one per LSH worker

  // ---- Stage 2a: LSH candidates (documents sharing a band key), one band at a time per worker:
  // the band's keys (4 bytes per document), its records and a sort buffer (8 bytes each). ----
  if (use_lsh) {
    stage_start = Clock::now();
    if (progress) progress("lsh", 0, 0, n);
    const int workers = std::max(1, std::min(threads, bands));
    struct Worker {
      std::vector<std::pair<uint64_t, uint64_t>> spilled;  // (offset, count) of each band's run
      std::vector<std::vector<uint64_t>> kept;             // each band's run, when not spilling
      LshJoinStats stats;
      Status status;
    };
    std::vector<Worker> state(workers);
    if (spill) {
      for (int w = 0; w < workers; ++w) {
        auto file = SpillFile::Create(options.temp_directory);
        if (!file.ok()) return file.status();
        run_files.push_back(std::move(*file));
      }
    }
    const std::vector<bool>& present = spill ? has_keys : keys.has_keys_bits();
    std::mutex spill_mutex;
    ParallelFor(
        workers, workers,
        [&](size_t begin, size_t end) {
          for (size_t w = begin; w < end; ++w) {
            Worker& worker = state[w];
            std::vector<uint64_t> records, scratch, pairs;
            std::vector<uint32_t> band_keys;
            for (int band = static_cast<int>(w); band < bands; band += workers) {
              std::span<const uint32_t> view;
              if (spill) {
                band_keys.resize(n);
                worker.status = band_files[band].ReadAt(0, band_keys.data(), n * sizeof(uint32_t));
                if (!worker.status.ok()) return;
                view = band_keys;
              } else {
                view = keys.band_keys(band);
              }
              LshBandPairs(view, present, options.lsh.bucket_window, &pairs, &worker.stats,
                           &records, &scratch);
              if (spill) {
                SpillFile& file = run_files[w];
                worker.spilled.emplace_back(file.size(), pairs.size());
                worker.status = file.Append(pairs.data(), pairs.size() * sizeof(uint64_t));
                if (!worker.status.ok()) return;
                std::lock_guard<std::mutex> lock(spill_mutex);
                note_spill(static_cast<int64_t>(pairs.size() * sizeof(uint64_t)));
              } else {
                worker.kept.push_back(pairs);
              }
            }
            if (spill) worker.status = run_files[w].Flush();
          }
        },
        1);
    band_files.clear();  // closes (and so frees) the band key files
    if (spill) note_spill(-static_cast<int64_t>(uint64_t{n} * sizeof(uint32_t) * bands));
    keys = BandKeyTable(0);
    std::vector<bool>().swap(has_keys);
    for (int w = 0; w < workers; ++w) {
      Worker& worker = state[w];
      NEARDUP_RETURN_IF_ERROR(worker.status);
      report.lsh_stats.records += worker.stats.records;
      report.lsh_stats.buckets += worker.stats.buckets;
      report.lsh_stats.oversized_buckets += worker.stats.oversized_buckets;
      report.lsh_stats.largest_bucket =
          std::max(report.lsh_stats.largest_bucket, worker.stats.largest_bucket);
      report.lsh_stats.bucket_pairs += worker.stats.bucket_pairs;
      for (auto [offset, count] : worker.spilled) {
        runs.push_back({&run_files[w], offset, count, {}, kFromLsh});
      }
      for (auto& kept : worker.kept) memory_runs.push_back(std::move(kept));
    }
    for (const auto& kept : memory_runs) runs.push_back({nullptr, 0, 0, kept, kFromLsh});
    report.stages.push_back({"lsh", SecondsSince(stage_start), report.lsh_stats.bucket_pairs, 0});
    stage_memory(&report.stages, report.stages.size() - 1);
  }

  // ---- Stage 2b: SimHash join within k (permuted-table index). ----
  std::vector<uint64_t> simhash_pairs;
  if (use_simhash && n > 0) {
    stage_start = Clock::now();
    if (progress) progress("join", 0, 0, n);
    std::vector<Fingerprint> fingerprints;
    fingerprints.reserve(n);
    for (const DedupDocument& doc : report.documents) fingerprints.push_back(doc.fingerprint);
    PermutedIndexOptions index_options;
    index_options.bits = options.fingerprint.bits;
    index_options.max_k = options.max_distance;
    index_options.expected_size = static_cast<double>(n);
    index_options.threads = threads;
    auto index = PermutedIndex::Create(index_options);
    if (!index.ok()) return index.status().WithContext("fingerprint index");
    std::vector<uint64_t> ids(n);
    std::iota(ids.begin(), ids.end(), uint64_t{0});
    NEARDUP_RETURN_IF_ERROR((*index)->AddBatch(ids, fingerprints));
    std::vector<Fingerprint>().swap(fingerprints);
    std::vector<uint64_t>().swap(ids);
    auto joined = (*index)->SelfJoin(options.max_distance);
    index->reset();
    if (!joined.ok()) return joined.status();
    simhash_pairs.reserve(joined->size());
    for (const NeighborPair& pair : *joined) simhash_pairs.push_back(pair.a << 32 | pair.b);
    std::sort(simhash_pairs.begin(), simhash_pairs.end());
    simhash_pairs.erase(std::unique(simhash_pairs.begin(), simhash_pairs.end()),
                        simhash_pairs.end());
    report.simhash_candidate_pairs = simhash_pairs.size();
    runs.push_back({nullptr, 0, 0, simhash_pairs, kFromSimHash});
    report.stages.push_back({"join", SecondsSince(stage_start), simhash_pairs.size(), 0});
    stage_memory(&report.stages, report.stages.size() - 1);
  }

  // ---- Stage 2c: merge the candidates, add the whitespace-only variants, and mark the
  // documents whose shingles verification needs. ----
  stage_start = Clock::now();
  std::vector<uint64_t> whitespace_pairs;  // pairs of equal whitespace-free hash (pre-verified)
  {
    // Pair each document with the first one of equal squeezed hash.
    std::unordered_map<uint64_t, uint32_t> first_with_hash;
    for (uint32_t i = 0; i < n; ++i) {
      auto [it, inserted] = first_with_hash.try_emplace(report.documents[i].squeezed_hash, i);
      if (!inserted) whitespace_pairs.push_back(uint64_t{it->second} << 32 | i);
    }
    std::sort(whitespace_pairs.begin(), whitespace_pairs.end());
    runs.push_back({nullptr, 0, 0, whitespace_pairs, kWhitespace});
  }
  std::vector<uint64_t> simhash_only;  // packed pairs of the SimHash join the others did not find
  // Verification slot of each document whose shingles are needed (UINT32_MAX: not needed).
  std::vector<uint32_t> slot;
  uint32_t needed = 0;
  auto needs_jaccard = [&](uint64_t packed, uint8_t sources) {
    if (sources & kWhitespace) return false;
    return !IsExactDuplicate(report.documents[packed >> 32],
                             report.documents[static_cast<uint32_t>(packed)]);
  };
  {
    if (verify) slot.assign(n, UINT32_MAX);
    PairRunMerger merger(runs);
    uint64_t packed = 0;
    uint8_t sources = 0;
    for (;;) {
      auto next = merger.Next(&packed, &sources);
      if (!next.ok()) return next.status();
      if (!*next) break;
      ++report.candidate_pairs;
      if (sources & kFromLsh) ++report.lsh_candidate_pairs;
      if (use_lsh && sources == kFromSimHash) simhash_only.push_back(packed);
      if (verify && needs_jaccard(packed, sources)) {
        slot[packed >> 32] = 0;
        slot[static_cast<uint32_t>(packed)] = 0;
      }
    }
    if (verify) {
      for (uint32_t& s : slot) s = s == 0 ? needed++ : UINT32_MAX;
    }
    report.lsh_stats.candidate_pairs = report.lsh_candidate_pairs;
  }
  report.stages.push_back({"merge", SecondsSince(stage_start), report.candidate_pairs, 0});
  stage_memory(&report.stages, report.stages.size() - 1);

  // ---- Stage 3: verification by shingle Jaccard: the inputs are read again and the narrowed
  // (32-bit) shingle sets of the documents involved are kept (spilled to a temporary file, read
  // back pair by pair); then the candidates are merged again and verified in blocks. ----
  const size_t merge_stage = report.stages.size() - 1;
  stage_start = Clock::now();
  uint64_t verified_bytes = 0;
  std::vector<std::vector<uint32_t>> shingles;  // by slot, when not spilling
  std::optional<SpillFile> shingle_file;
  std::vector<uint64_t> shingle_offsets;  // by slot, plus the end, when spilling
  if (verify && needed > 0) {
    if (spill) {
      auto file = SpillFile::Create(options.temp_directory);
      if (!file.ok()) return file.status();
      shingle_file.emplace(std::move(*file));
      shingle_offsets.reserve(uint64_t{needed} + 1);
    } else {
      shingles.resize(needed);
    }
    NEARDUP_RETURN_IF_ERROR(reader.Rewind());
    // Walk the inputs again; the i-th successfully fingerprinted document is documents[i].
    // Documents that failed fingerprinting are recognised by (file, line) and skipped.
    size_t next_doc = 0;
    std::vector<std::pair<uint32_t, std::string>> pending;
    std::vector<std::vector<uint32_t>> computed;
    Document doc;
    auto flush = [&]() -> Status {
      computed.resize(pending.size());
      ParallelFor(
          pending.size(), threads,
          [&](size_t begin, size_t end) {
            std::vector<uint64_t> wide;
            for (size_t i = begin; i < end; ++i) {
              std::vector<uint32_t>& narrow = computed[i];
              narrow.clear();
              if (!(*similarity)->Shingles(pending[i].second, &wide).ok()) continue;
              ShingleSimilarity::Narrow(wide, &narrow);
            }
          },
          8);
      for (size_t i = 0; i < pending.size(); ++i) {
        if (spill) {
          shingle_offsets.push_back(shingle_file->size() / sizeof(uint32_t));
          NEARDUP_RETURN_IF_ERROR(
              shingle_file->Append(computed[i].data(), computed[i].size() * sizeof(uint32_t)));
          note_spill(static_cast<int64_t>(computed[i].size() * sizeof(uint32_t)));
        } else {
          computed[i].shrink_to_fit();
          shingles[pending[i].first] = std::move(computed[i]);
        }
      }
      pending.clear();
      return Status::Ok();
    };
    for (;;) {
      auto got = reader.Next(&doc);
      if (!got.ok()) return got.status();
      if (!*got || next_doc >= n) break;
      const DedupDocument& record = report.documents[next_doc];
      if (doc.file_index != record.file_index || doc.line != record.line) continue;
      uint32_t s = slot[next_doc];
      ++next_doc;
      if (s == UINT32_MAX) continue;
      verified_bytes += doc.text.size();
      pending.emplace_back(s, std::move(doc.text));
      if (pending.size() >= options.batch_size) NEARDUP_RETURN_IF_ERROR(flush());
      if (progress && next_doc % 1024 == 0) progress("verify", next_doc, n, next_doc);
    }
    NEARDUP_RETURN_IF_ERROR(flush());
    std::vector<std::vector<uint32_t>>().swap(computed);
    if (spill) {
      // Slots are numbered in document order, so the file holds the sets in slot order.
      shingle_offsets.push_back(shingle_file->size() / sizeof(uint32_t));
      NEARDUP_RETURN_IF_ERROR(shingle_file->Flush());
      if (shingle_offsets.size() != uint64_t{needed} + 1) {
        return Status::Internal("verification: the inputs changed while dedup was running");
      }
    }
  }
  {
    // Candidates in blocks: similarity -2 = to compute.
    PairRunMerger merger(runs);
    constexpr size_t kBlock = 1 << 18;
    std::vector<uint64_t> block;
    std::vector<double> similarity_of;
    Status read_status;
    std::mutex read_mutex;
    auto verify_block = [&]() -> Status {
      ParallelFor(
          block.size(), threads,
          [&](size_t begin, size_t end) {
            std::vector<uint32_t> set_a, set_b;
            uint32_t loaded_a = UINT32_MAX;
            auto load = [&](uint32_t document, std::vector<uint32_t>* set) -> Status {
              const uint32_t s = slot[document];
              const uint64_t from = shingle_offsets[s], to = shingle_offsets[s + 1];
              set->resize(to - from);
              return shingle_file->ReadAt(from * sizeof(uint32_t), set->data(),
                                          (to - from) * sizeof(uint32_t));
            };
            for (size_t i = begin; i < end; ++i) {
              if (similarity_of[i] != -2) continue;
              const uint32_t a = static_cast<uint32_t>(block[i] >> 32);
              const uint32_t b = static_cast<uint32_t>(block[i]);
              if (!spill) {
                similarity_of[i] =
                    ShingleSimilarity::Jaccard32(shingles[slot[a]], shingles[slot[b]]);
                continue;
              }
              Status status;
              if (a != loaded_a) {
                status = load(a, &set_a);
                loaded_a = a;
              }
              if (status.ok()) status = load(b, &set_b);
              if (!status.ok()) {
                std::lock_guard<std::mutex> lock(read_mutex);
                read_status = status;
                loaded_a = UINT32_MAX;
                continue;
              }
              similarity_of[i] = ShingleSimilarity::Jaccard32(set_a, set_b);
            }
          },
          256);
      NEARDUP_RETURN_IF_ERROR(read_status);
      for (size_t i = 0; i < block.size(); ++i) {
        if (verify && similarity_of[i] < verify_threshold) continue;
        const uint32_t a = static_cast<uint32_t>(block[i] >> 32);
        const uint32_t b = static_cast<uint32_t>(block[i]);
        report.pairs.push_back(
            {a, b,
             HammingDistance(report.documents[a].fingerprint, report.documents[b].fingerprint),
             similarity_of[i]});
      }
      block.clear();
      similarity_of.clear();
      return Status::Ok();
    };
    uint64_t packed = 0;
    uint8_t sources = 0;
    for (;;) {
      auto next = merger.Next(&packed, &sources);
      if (!next.ok()) return next.status();
      if (!*next) break;
      block.push_back(packed);
      double value = -1;  // unverified (verification off)
      if (sources & kWhitespace) {
        value = 1.0;
      } else if (verify) {
        value = needs_jaccard(packed, sources) ? -2 : 1.0;
      }
      similarity_of.push_back(value);
      if (block.size() >= kBlock) NEARDUP_RETURN_IF_ERROR(verify_block());
    }
    NEARDUP_RETURN_IF_ERROR(verify_block());
  }
  shingle_file.reset();
  std::vector<std::vector<uint32_t>>().swap(shingles);
  std::vector<uint64_t>().swap(shingle_offsets);
  std::vector<uint32_t>().swap(slot);
  runs.clear();
  run_files.clear();
  std::vector<std::vector<uint64_t>>().swap(memory_runs);
  std::vector<uint64_t>().swap(simhash_pairs);
  std::vector<uint64_t>().swap(whitespace_pairs);
  report.spilled = spill;
  report.spill_peak_bytes = spill_peak_bytes;
  if (verify) {
    report.stages.push_back(
        {"verify", SecondsSince(stage_start), report.candidate_pairs, verified_bytes});
    stage_memory(&report.stages, report.stages.size() - 1);
  } else {
    report.stages[merge_stage].seconds += SecondsSince(stage_start);  // the pairs' second merge
  }

  for (const DuplicatePair& pair : report.pairs) {
    report.simhash_only_accepted_pairs += std::binary_search(
        simhash_only.begin(), simhash_only.end(), static_cast<uint64_t>(pair.a) << 32 | pair.b);
  }
  report.simhash_only_candidate_pairs = simhash_only.size();
  std::vector<uint64_t>().swap(simhash_only);

  // ---- Stage 4: clusters. ----
  stage_start = Clock::now();
  if (progress) progress("cluster", 0, 0, report.documents.size());
  BuildClusters(report.documents, report.pairs, options.keep, &report.clusters, &report.removed);
  report.stages.push_back({"cluster", SecondsSince(stage_start), report.pairs.size(), 0});
  stage_memory(&report.stages, report.stages.size() - 1);
  report.total_seconds = SecondsSince(run_start);
  return report;
}

}  // namespace neardup
