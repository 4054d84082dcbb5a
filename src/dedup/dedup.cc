// RunDedup, BuildClusters and the keep policies; see neardup/dedup.h.
#include "neardup/dedup.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "common/parallel.h"
#include "dedup/document_hashes.h"
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

  // ---- Stage 1: read, fingerprint and band keys, in batches. ----
  auto stage_start = Clock::now();
  double read_seconds = 0, lsh_seconds = 0;
  std::vector<Document> batch(options.batch_size);
  std::vector<Result<Fingerprint>> results;
  std::vector<uint64_t> normalized_bytes;
  BandKeyTable keys(use_lsh ? bands : 0);
  std::vector<uint32_t> batch_keys;
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
      if (use_lsh) {
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
    if (progress) {
      progress("fingerprint", reader.input_bytes_consumed(), reader.total_input_bytes(),
               report.documents.size());
    }
  }
  batch.clear();
  batch.shrink_to_fit();
  std::vector<uint32_t>().swap(batch_keys);
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

  // ---- Stage 2a: LSH candidates (documents sharing a band key). ----
  std::vector<uint64_t> lsh_pairs;  // packed a << 32 | b, sorted
  if (use_lsh) {
    stage_start = Clock::now();
    if (progress) progress("lsh", 0, 0, n);
    std::vector<LshPair> found =
        LshCandidatePairs(keys, options.lsh.bucket_window, threads, &report.lsh_stats);
    keys = BandKeyTable(0);
    lsh_pairs.reserve(found.size());
    for (const LshPair& pair : found) lsh_pairs.push_back(pair.a << 32 | pair.b);
    report.lsh_candidate_pairs = found.size();
    report.stages.push_back({"lsh", SecondsSince(stage_start), found.size(), 0});
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
    report.simhash_candidate_pairs = simhash_pairs.size();
    report.stages.push_back({"join", SecondsSince(stage_start), simhash_pairs.size(), 0});
    stage_memory(&report.stages, report.stages.size() - 1);
  }

  // ---- Stage 2c: merge the candidates, add the whitespace-only variants. ----
  stage_start = Clock::now();
  std::vector<uint64_t> simhash_only;  // packed pairs of the SimHash join that LSH did not find
  {
    std::vector<uint64_t> merged;
    merged.reserve(lsh_pairs.size() + simhash_pairs.size());
    std::set_union(lsh_pairs.begin(), lsh_pairs.end(), simhash_pairs.begin(), simhash_pairs.end(),
                   std::back_inserter(merged));
    if (use_lsh && use_simhash) {
      // What the SimHash join adds to the LSH stage (measured: see simhash_only_accepted_pairs).
      std::set_difference(simhash_pairs.begin(), simhash_pairs.end(), lsh_pairs.begin(),
                          lsh_pairs.end(), std::back_inserter(simhash_only));
    }
    std::vector<uint64_t>().swap(lsh_pairs);
    std::vector<uint64_t>().swap(simhash_pairs);
    report.pairs.reserve(merged.size());
    for (uint64_t packed : merged) {
      const uint32_t a = static_cast<uint32_t>(packed >> 32), b = static_cast<uint32_t>(packed);
      report.pairs.push_back(
          {a, b, HammingDistance(report.documents[a].fingerprint, report.documents[b].fingerprint),
           -1.0});
    }
  }
  {
    // Whitespace-only variants: pair each document with the first one of equal squeezed hash.
    std::unordered_map<uint64_t, uint32_t> first_with_hash;
    std::vector<DuplicatePair> extra;
    for (uint32_t i = 0; i < report.documents.size(); ++i) {
      auto [it, inserted] = first_with_hash.try_emplace(report.documents[i].squeezed_hash, i);
      if (inserted) continue;
      const uint32_t first = it->second;
      extra.push_back(
          {first, i,
           HammingDistance(report.documents[first].fingerprint, report.documents[i].fingerprint),
           1.0});
    }
    if (!extra.empty() && !simhash_only.empty()) {
      // Pairs the whitespace-free hash finds anyway are not the SimHash join's contribution.
      std::vector<uint64_t> packed;
      for (const DuplicatePair& pair : extra) packed.push_back(uint64_t{pair.a} << 32 | pair.b);
      std::sort(packed.begin(), packed.end());
      std::vector<uint64_t> rest;
      std::set_difference(simhash_only.begin(), simhash_only.end(), packed.begin(), packed.end(),
                          std::back_inserter(rest));
      simhash_only.swap(rest);
    }
    if (!extra.empty()) {
      report.pairs.insert(report.pairs.end(), extra.begin(), extra.end());
      // Sort by (a, b), a pre-verified entry first, then keep one entry per pair.
      std::sort(report.pairs.begin(), report.pairs.end(),
                [](const DuplicatePair& x, const DuplicatePair& y) {
                  if (x.a != y.a) return x.a < y.a;
                  if (x.b != y.b) return x.b < y.b;
                  return x.similarity > y.similarity;
                });
      report.pairs.erase(std::unique(report.pairs.begin(), report.pairs.end(),
                                     [](const DuplicatePair& x, const DuplicatePair& y) {
                                       return x.a == y.a && x.b == y.b;
                                     }),
                         report.pairs.end());
    }
    report.candidate_pairs = report.pairs.size();
  }
  report.stages.push_back({"merge", SecondsSince(stage_start), report.candidate_pairs, 0});
  stage_memory(&report.stages, report.stages.size() - 1);

  // ---- Stage 3: verification by shingle Jaccard (re-reads only the documents involved). ----
  if (verify) {
    stage_start = Clock::now();
    std::vector<uint32_t> slot(n, UINT32_MAX);  // document -> index into shingle sets
    uint32_t needed = 0;
    for (DuplicatePair& pair : report.pairs) {
      if (pair.similarity >= 0) continue;  // already known (whitespace-only variant)
      if (IsExactDuplicate(report.documents[pair.a], report.documents[pair.b])) {
        pair.similarity = 1.0;
        continue;
      }
      if (slot[pair.a] == UINT32_MAX) slot[pair.a] = needed++;
      if (slot[pair.b] == UINT32_MAX) slot[pair.b] = needed++;
    }
    // The narrowed (32-bit) shingle sets, as ShingleSimilarity::VerifiedJaccard compares them.
    std::vector<std::vector<uint32_t>> shingles(needed);
    uint64_t verified_bytes = 0;
    if (needed > 0) {
      NEARDUP_RETURN_IF_ERROR(reader.Rewind());
      // Walk the inputs again; the i-th successfully fingerprinted document is documents[i].
      // Documents that failed fingerprinting are recognised by (file, line) and skipped.
      size_t next_doc = 0;
      std::vector<std::pair<uint32_t, std::string>> pending;
      Document doc;
      auto flush = [&] {
        ParallelFor(
            pending.size(), threads,
            [&](size_t begin, size_t end) {
              std::vector<uint64_t> wide;
              for (size_t i = begin; i < end; ++i) {
                std::vector<uint32_t>& narrow = shingles[pending[i].first];
                narrow.clear();
                if (!(*similarity)->Shingles(pending[i].second, &wide).ok()) continue;
                ShingleSimilarity::Narrow(wide, &narrow);
                narrow.shrink_to_fit();
              }
            },
            8);
        pending.clear();
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
        if (pending.size() >= options.batch_size) flush();
        if (progress && next_doc % 1024 == 0) progress("verify", next_doc, n, next_doc);
      }
      flush();
    }
    std::vector<DuplicatePair>& pairs = report.pairs;
    ParallelFor(
        pairs.size(), threads,
        [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) {
            if (pairs[i].similarity >= 0) continue;
            pairs[i].similarity = ShingleSimilarity::Jaccard32(shingles[slot[pairs[i].a]],
                                                               shingles[slot[pairs[i].b]]);
          }
        },
        256);
    pairs.erase(std::remove_if(
                    pairs.begin(), pairs.end(),
                    [&](const DuplicatePair& pair) { return pair.similarity < verify_threshold; }),
                pairs.end());
    report.stages.push_back(
        {"verify", SecondsSince(stage_start), report.candidate_pairs, verified_bytes});
    stage_memory(&report.stages, report.stages.size() - 1);
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
