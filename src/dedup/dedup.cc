// RunDedup, BuildClusters and the keep policies; see neardup/dedup.h.
#include "neardup/dedup.h"

#include <malloc.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/parallel.h"
#include "common/utf8.h"
#include "dedup/document_hashes.h"
#include "dedup/pair_runs.h"
#include "dedup/shingle_hashes.h"
#include "dedup/spill_file.h"
#include "index/lsh_band_pairs.h"
#include "neardup/clusters.h"
#include "neardup/dedup_stages.h"
#include "neardup/hamming_join.h"
#include "neardup/jieba.h"
#include "neardup/shingles.h"
#include "neardup/text.h"

namespace neardup {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU time of the calling thread.
double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
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

// Breadth-first walk of the accepted pairs from `kept`: each document reached, with the
// document it was reached from ("via"), the pair's distance and similarity, and why it goes.
std::unordered_map<uint32_t, ClusterMember> LinkFromKept(
    const std::vector<DedupDocument>& documents, uint32_t kept,
    std::unordered_map<uint32_t, std::vector<const DuplicatePair*>>* adjacency) {
  std::unordered_map<uint32_t, ClusterMember> linked;
  std::deque<uint32_t> queue{kept};
  std::unordered_map<uint32_t, bool> seen{{kept, true}};
  while (!queue.empty()) {
    uint32_t current = queue.front();
    queue.pop_front();
    // Neighbours in canonical order so "via" is deterministic.
    std::vector<const DuplicatePair*> edges = (*adjacency)[current];
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
          HammingDistance(documents[other].fingerprint, documents[kept].fingerprint);
      member.via_reason = edge->reason;
      if (IsExactDuplicate(documents[other], documents[kept])) {
        member.reason = "exact_duplicate";
      } else if (current == kept) {
        member.reason = edge->reason == DuplicateReason::kContained ? "contained"
                        : edge->reason == DuplicateReason::kEdited  ? "edited"
                                                                    : "near_duplicate";
      } else {
        member.reason = "chained";
      }
      linked[other] = std::move(member);
    }
  }
  return linked;
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
    std::unordered_map<uint32_t, ClusterMember> linked =
        LinkFromKept(documents, entry.kept, &adjacency);
    for (uint64_t member : *entry.members) {
      const uint32_t doc = static_cast<uint32_t>(member);
      if (doc == entry.kept) continue;
      cluster.removed.push_back(std::move(linked[doc]));
      (*removed)[doc] = true;
    }
    clusters->push_back(std::move(cluster));
  }
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
  if (options.threads < 0) {
    return Status::InvalidArgument("threads must be 0 (all cores) or more, got " +
                                   std::to_string(options.threads));
  }
  const int largest_k = options.fingerprint.bits / 8;
  if (options.k < 0 || options.k > largest_k) {
    return Status::InvalidArgument("k (the SimHash join radius) must be in [0, " +
                                   std::to_string(largest_k) + "] for " +
                                   std::to_string(options.fingerprint.bits) + "-bit fingerprints");
  }
  auto lsh = ResolveLshParameters(options.lsh);  // first: the threshold is verify's default
  if (!lsh.ok()) return lsh.status();
  const double verify = ResolveVerifyThreshold(options);
  if (verify < 0 || verify > 1)
    return Status::InvalidArgument("verify_threshold must be in [0, 1]");
  NEARDUP_RETURN_IF_ERROR(ValidatePairRuleOptions(ResolvePairRule(options)));
  auto dedup_lsh = ResolveDedupLsh(options);
  if (!dedup_lsh.ok()) return dedup_lsh.status();
  if (options.boilerplate) {
    ShingleFrequencies probe(64);
    auto rule = PairRule::Create(ResolvePairRule(options), &probe, options.boilerplate_options);
    if (!rule.ok()) return rule.status();
  }
  if (options.keep == KeepPolicy::kField && options.keep_field.empty()) {
    return Status::InvalidArgument("keep_field: the field keep policy needs a field name");
  }
  return Status::Ok();
}

}  // namespace

Result<PairJudgement> JudgePair(std::string_view a, std::string_view b, const DedupOptions& options,
                                const ShingleFrequencies* frequencies) {
  NEARDUP_RETURN_IF_ERROR(CheckOptions(options));
  PairJudgement judgement;
  judgement.verify_threshold = ResolveVerifyThreshold(options);
  judgement.rule = ResolvePairRule(options);
  if (UsesSimHash(options)) judgement.k = options.k;
  auto fingerprinter = Fingerprinter::Create(options.fingerprint);
  if (!fingerprinter.ok()) return fingerprinter.status().WithContext("fingerprint options");
  auto fa = (*fingerprinter)->Compute(a);
  if (!fa.ok()) return fa.status().WithContext("A");
  auto fb = (*fingerprinter)->Compute(b);
  if (!fb.ok()) return fb.status().WithContext("B");
  judgement.distance = HammingDistance(*fa, *fb);
  judgement.within_k = UsesSimHash(options) && judgement.distance <= options.k;
  auto similarity =
      ShingleSimilarity::Create(options.fingerprint.normalize.traditional_to_simplified);
  if (!similarity.ok()) return similarity.status();
  std::vector<uint64_t> sa, sb;
  NEARDUP_RETURN_IF_ERROR((*similarity)->Shingles(a, &sa));
  NEARDUP_RETURN_IF_ERROR((*similarity)->Shingles(b, &sb));
  auto lsh_options = ResolveDedupLsh(options);
  if (!lsh_options.ok()) return lsh_options.status();
  auto lsh = MinHashLsh::Create(*lsh_options);
  if (!lsh.ok()) return lsh.status();
  judgement.lsh = lsh->parameters();
  std::vector<uint32_t> ka(judgement.lsh.bands), kb(judgement.lsh.bands);
  if (lsh->BandKeysOf(sa, ka) && lsh->BandKeysOf(sb, kb)) {
    judgement.shared_bands = MinHashLsh::SharedBands(ka, kb);
  }
  judgement.lsh_candidate = UsesLsh(options) && judgement.shared_bands > 0;
  // The pair rule, on the facts dedup computes for each document.
  DocumentFacts facts_a, facts_b;
  NEARDUP_RETURN_IF_ERROR(ComputeDocumentFacts(a, **similarity, &facts_a));
  NEARDUP_RETURN_IF_ERROR(ComputeDocumentFacts(b, **similarity, &facts_b));
  auto rule = PairRule::Create(judgement.rule, options.boilerplate ? frequencies : nullptr,
                               options.boilerplate_options);
  if (!rule.ok()) return rule.status();
  judgement.boilerplate_documents = rule->boilerplate_documents();
  const PairDecision decision = rule->Decide(facts_a.view(), facts_b.view());
  // What the LSH stage sees: the unweighted sets (whatever the hashes say).
  judgement.plain_jaccard = facts_a.shingles.empty() || facts_b.shingles.empty()
                                ? 0.0
                                : ShingleSimilarity::Jaccard32(facts_a.shingles, facts_b.shingles);
  judgement.exact = decision.reason == DuplicateReason::kExact;
  judgement.whitespace_only = judgement.exact || decision.reason == DuplicateReason::kWhitespace;
  judgement.reason = decision.reason;
  judgement.jaccard = decision.jaccard;
  judgement.containment = decision.containment;
  judgement.size_guard = decision.size_guard;
  judgement.unit_jaccard = decision.unit_jaccard.value_or(
      facts_a.units.empty() || facts_b.units.empty()
          ? 0.0
          : ShingleSimilarity::Jaccard32(facts_a.units, facts_b.units));
  judgement.verified = judgement.verify_threshold <= 0 || decision.duplicate();
  judgement.duplicate = judgement.whitespace_only ||
                        ((judgement.lsh_candidate || judgement.within_k) && judgement.verified);
  return judgement;
}

// The frequency sketch of a run over `input_bytes` of input (0: unknown): a quarter of the
// input's size rounded up to a power of two, at most boilerplate_sketch_bytes (a distinct shingle
// of a document takes about 4 to 14 bytes of text, so its counters stay lightly loaded and the
// sketch's resolution, 16 x shingles / bytes, stays below BoilerplateOptions::min_documents until
// the cap binds: PairRule::Create). Only when the input is more than four times the cap is one
// document in s counted (s a power of two up to 64, from the input's size), so the counting time
// stays bounded; sampling leaves the resolution as it is (it divides the shingles counted and
// multiplies the counts by s), the cap's size decides it.
ShingleFrequencies FrequencySketchFor(uint64_t input_bytes, const DedupOptions& options) {
  size_t bytes = options.boilerplate_sketch_bytes;
  uint32_t sample_every = 1;
  if (input_bytes > 0) {
    bytes = std::min<uint64_t>(bytes, std::bit_ceil(std::max<uint64_t>(
                                          input_bytes / 4 + (input_bytes % 4 != 0), 1 << 16)));
    const uint64_t counted_bytes = std::max<uint64_t>(uint64_t{4} * bytes, 1);
    if (input_bytes > counted_bytes) {
      sample_every = static_cast<uint32_t>(
          std::min<uint64_t>(64, std::bit_ceil((input_bytes + counted_bytes - 1) / counted_bytes)));
    }
  }
  return ShingleFrequencies(bytes, sample_every);
}

namespace {

// Sources of a candidate pair (PairRun::source bits).
constexpr uint8_t kFromLsh = kLshCandidate, kFromSimHash = kSimHashCandidate,
                  kWhitespace = kWhitespaceCandidate;

// Whether the similarity histogram measures a rejected pair: its hash & mask is 0.
bool SampledPair(uint64_t packed, uint64_t mask) {
  return (XXH3_64bits(&packed, sizeof(uint64_t)) & mask) == 0;
}

// A pair that DeferredUnits decided `edited` (similarity_of): judged again with its unit sets.
constexpr double kEditedDeferred = -3;

// A block of candidate pairs being verified: the pairs (sorted by a), what is decided of each
// (similarity_of -2: still to judge by the sets; kEditedDeferred: to judge again with unit sets),
// and the exact Jaccard of the rejected pairs the histogram samples (`measured`, -1 = not
// measured).
struct BlockVerdicts {
  std::span<const uint64_t> pairs;
  std::vector<double>& similarity_of;
  std::vector<DuplicateReason>& reason_of;
  std::vector<double> measured;
  uint64_t sample_mask = 0;  // a rejected pair is measured when its hash & sample_mask is 0

  bool Sampled(size_t i) const { return SampledPair(pairs[i], sample_mask); }
};

// One thread's buffers for judging a block's pairs in groups of kSize.
struct PairGroup {
  static constexpr size_t kSize = 256;
  std::vector<std::vector<uint32_t>> buffers_a = std::vector<std::vector<uint32_t>>(kSize);
  std::vector<std::vector<uint32_t>> buffers_b = std::vector<std::vector<uint32_t>>(kSize);
  std::vector<PairDocument> left, right;
  std::vector<size_t> judged;  // the block index of left[j], right[j]
  std::vector<PairDecision> decisions;
};

// One RunDedup call: the options, the engines, the intermediate data each stage hands to the
// next, and the report being filled. RunDedup calls the stages in order; each frees what later
// stages no longer need. Candidate pairs come as sorted runs of distinct packed pairs
// (a << 32 | b), merged by PairRunMerger. Intermediate data (band keys, candidate pair runs,
// shingle sets of the documents to verify) lives in unlinked temporary files when spilling,
// else in memory.
class DedupRun {
 public:
  DedupRun(const DedupOptions& options, const DedupProgress& progress)
      : options_(options), progress_(progress) {}
  ~DedupRun() {
    if (jieba_loader_.joinable()) jieba_loader_.join();
  }

  // Checks the options, creates the engines, opens the inputs and (when spilling) the band key
  // files.
  Status Open(const std::vector<std::string>& inputs);
  // Stage 1: reads the inputs in batches, fingerprints them and computes their band keys.
  Status ReadAndFingerprint();
  // Stage 2a (LSH candidates only): documents sharing a band key, one band at a time per worker.
  Status LshCandidates();
  // Stage 2b (SimHash candidates only): SimHash join within k (permuted-table index).
  Status SimHashCandidates();
  // Stage 2c: merges the candidates, adds the whitespace-only variants and gives a verification
  // slot to each document whose shingles verification needs.
  Status MergeCandidates();
  // Stage 3: reads the needed shingle sets, then verifies the candidates into report.pairs.
  Status Verify();
  // Stage 4: clusters, and the run's total time.
  void Cluster();

  DedupReport TakeReport() { return std::move(report_); }

 private:
  // One LSH worker's results.
  struct LshWorker {
    std::vector<std::pair<uint64_t, uint64_t>> spilled;  // (offset, count) of each band's run
    std::vector<std::vector<uint64_t>> kept;             // each band's run, when not spilling
    LshJoinStats stats;
    Status status;
  };

  // Peak memory of the stages from `from` on (when asked): the peak since the previous stage.
  void NoteStageMemory(size_t from);
  // Adds `delta` bytes to the temporary files' size and its peak.
  void NoteSpill(int64_t delta);
  // One batch of stage 1: its documents and what the per-document pass computed for them. Two
  // of them alternate: while the workers fingerprint one, the reading thread records the
  // previous one and reads the next into it.
  struct Batch;
  // The wall and thread times of one batch's pass.
  struct PassTimes {
    double seconds = 0;          // until both the workers and the calling thread were done
    double workers_seconds = 0;  // until the last worker was done
    double fingerprint_thread_seconds = 0, minhash_thread_seconds = 0;  // summed over workers
  };
  // Reads up to a batch of documents into `batch`; sets batch->count, and *done at the end.
  Status ReadBatch(Batch* batch, bool* done);
  // The first time a batch holds a document the default tokenizer will cut with jieba (Han text
  // without kana), loads the default jieba dictionary on a thread of its own: the workers then do
  // not stop in the middle of a batch while one of them loads it.
  void PreloadJiebaFor(const Batch& batch);
  // Sizes the batch's results for the pass.
  void PrepareBatch(Batch* batch);
  // The per-document pass over the batch, on all worker threads: each document's hashes,
  // fingerprint and, from the same normalised text, its shingles -> MinHash signature -> band
  // keys and (while the budget lasts) its narrowed shingle set for verification. The calling
  // thread runs `alongside` meanwhile (with more than one thread; else after the pass).
  PassTimes FingerprintBatch(Batch* batch, const std::function<void()>& alongside);
  // Splits the pass's wall time between the read, fingerprint and minhash stages, given how long
  // the calling thread spent recording the previous batch and reading the next (and the CPU time
  // of the reading). Reading counts with the time the pass waited for it, plus its share of the
  // workers' cores while it ran beside them; the MinHash part of what remains goes to minhash in
  // proportion to the workers' thread time; the rest stays fingerprinting.
  void AttributePass(const PassTimes& pass, double read_wall, double read_cpu, double record_wall);
  // Keeps the narrowed shingle set of the next document (in document order) from stage 1 while
  // the sets fit in options_.first_pass_set_bytes; after the first one that does not, keeps none.
  Status KeepFirstPassSet(std::span<const uint32_t> set);
  // Appends the batch's keys to the band files, band-major: each band's file holds one key per
  // fingerprinted document (0 without keys).
  Status SpillBandKeys(const Batch& batch);
  // Adds the batch's documents to the report (and their keys to the table); warns about, or
  // with --strict fails on, the ones that could not be fingerprinted. Then the band keys' spill,
  // the document table's reservation and the progress report.
  Status RecordBatch(Batch* batch);
  // At the first batch: reserves room for twice the corpus at its bytes per document, given the
  // input bytes read up to the end of the batch.
  void ReserveDocuments(size_t count, uint64_t bytes_read);
  // Ends stage 1: frees its buffers, records its timings and names shared ids apart.
  Status FinishFingerprinting(Clock::time_point stage_start);
  // Worker w's bands: their candidate pairs, spilled or kept.
  void RunLshWorker(int w, int workers, LshWorker* worker, std::mutex* spill_mutex);
  // Sums the workers' statistics and lists their runs.
  Status CollectLshWorkers(std::vector<LshWorker>* state);
  // The pairs of documents of equal whitespace-free hash (pre-verified), as a run.
  void WhitespaceCandidates();
  // True when the pair's similarity has to be computed from shingles.
  bool NeedsJaccard(uint64_t packed, uint8_t sources) const;
  // Sets computed in a walk over the inputs (LoadSets), by slot: in memory, or spilled to a
  // temporary file when spilling.
  struct LoadedSets {
    std::vector<std::vector<uint32_t>> sets;  // when not spilling
    std::optional<SpillFile> file;
    std::vector<uint64_t> offsets;  // when spilling: set s at values [offsets[s], offsets[s + 1])
  };
  // Reads the inputs again and keeps the narrowed (32-bit) shingle sets of the documents with
  // a slot (slot_) in loaded_shingles_.
  Status LoadShingles();
  // Reads the inputs again, documents [0, end), and keeps in `out` the narrowed shingle sets
  // (with `units`, the narrowed unit sets) of the `count` documents whose slot_of(document) is
  // not UINT32_MAX (called in document order; the slots number them in document order).
  Status LoadSets(uint32_t count, const std::function<uint32_t(uint32_t)>& slot_of, size_t end,
                  bool units, LoadedSets* out);
  // The sets of the pending documents, stored by slot. `normalizer` normalises as the shingler.
  Status FlushSets(const TextNormalizer& normalizer, bool units,
                   std::vector<std::pair<uint32_t, std::string>>* pending,
                   std::vector<std::vector<uint32_t>>* computed, LoadedSets* out);
  // Set `slot` of `sets` (read into the first elements of `buffer` when spilled).
  Status LoadedSet(const LoadedSets& sets, uint32_t slot, std::vector<uint32_t>* buffer,
                   std::span<const uint32_t>* set) const;
  // With `edited` on, the pairs the rule decided `edited` with PairRule::DeferredUnits, judged
  // again with the unit sets of their documents (built now, in a walk over the inputs, for
  // these documents only) and recorded as RecordVerdicts records, in pair order.
  Status JudgeDeferredEdited();
  // Merges the candidates again and verifies them in blocks.
  Status VerifyCandidates();
  // Judges the block's pairs still to judge by their sets (similarity -2) with the pair rule and
  // accepts its duplicates.
  Status VerifyBlock(std::vector<uint64_t>* block, std::vector<double>* similarity_of,
                     std::vector<DuplicateReason>* reason_of);
  // Sizes the similarity histogram on the first block (with verification): the rejected pairs
  // are sampled one in rejected_sample_every, so that at most kMeasureAll are measured.
  void PrepareHistogram();
  // Judges the block's pairs [begin, end) still to judge, in groups (any read error returned).
  Status JudgeRange(size_t begin, size_t end, BlockVerdicts* verdicts) const;
  // One group's pairs [first, last): each pair's sets read (or found in memory), the pairs
  // below the rule's plain floor settled without a weight, the others gathered in `group` for
  // DecidePairs.
  Status GatherGroup(size_t first, size_t last, PairGroup* group, BlockVerdicts* verdicts) const;
  // The weighted size of a document's set, computed once per run (unset without weights).
  std::optional<double> WeightOf(uint32_t document, std::span<const uint32_t> set) const;
  // The block's duplicates into the report (pairs, counts by reason) and every verdict into
  // the similarity histogram; the pairs decided kEditedDeferred into deferred_edited_.
  void RecordVerdicts(const BlockVerdicts& verdicts);
  // One verdict, as RecordVerdicts records it (`measured`: the sampled Jaccard of a rejected
  // pair, -1 = not measured).
  void RecordVerdict(uint64_t packed, DuplicateReason reason, double similarity, double measured);
  // A document's facts for the pair rule without its set (the hashes decide exact and
  // whitespace-only pairs).
  PairDocument HashFacts(uint32_t document) const;
  // The narrowed shingle set of `document`: kept from stage 1, or loaded by LoadShingles (read
  // into the first elements of `buffer` when spilled).
  Status SetOf(uint32_t document, std::vector<uint32_t>* buffer,
               std::span<const uint32_t>* set) const;
  // Frees the candidates and shingles, records the verify stage and counts SimHash-only pairs.
  void FinishVerify(Clock::time_point stage_start);

  const DedupOptions& options_;
  const DedupProgress& progress_;
  const Clock::time_point run_start_ = Clock::now();
  int threads_ = 1;
  std::unique_ptr<DocumentPass> pass_;  // stage 1's engines (neardup/dedup_stages.h)
  bool use_lsh_ = false;
  bool use_simhash_ = false;
  int bands_ = 0;
  DocumentReaderOptions reader_options_;
  double verify_threshold_ = 0;
  bool verify_ = false;
  // The pair rule, made when stage 1 ends (its boilerplate weights read the frequencies counted
  // in stage 1).
  std::optional<PairRule> rule_;
  // With boilerplate weights: each document's weighted set size, computed the first time a pair
  // needs it (< 0: not yet); 8 bytes per document.
  std::unique_ptr<std::atomic<double>[]> weight_of_;
  std::unique_ptr<DocumentReader> reader_;
  DedupReport report_;
  bool spill_ = false;
  uint64_t spill_bytes_ = 0, spill_peak_bytes_ = 0;

  // Stage 1.
  // Shingle document frequencies for the boilerplate weights, counted by the workers (one chunk
  // of documents at a time under the mutex; the counts do not depend on the order).
  std::optional<ShingleFrequencies> frequencies_;
  std::mutex frequencies_mutex_;
  std::thread jieba_loader_;
  bool jieba_wanted_ = false;  // the default jieba dictionary may be needed and is not loading
  std::vector<SpillFile> band_files_;
  // The stage's wall time attributed to reading and to the MinHash part of the pass (the rest is
  // fingerprinting; see AttributePass).
  double read_seconds_ = 0, lsh_seconds_ = 0;
  BandKeyTable keys_{0};
  std::vector<bool> has_keys_;  // per document, when spilling
  std::vector<uint32_t> band_column_;
  // Narrowed shingle sets kept from stage 1 (verification needs no second pass for them): those
  // of documents [0, first_pass_documents_), set d at values [first_offsets_[d],
  // first_offsets_[d + 1]) of first_sets_ (in memory) or of first_file_ (spilling). Kept while
  // they fit in options_.first_pass_set_bytes (the LSH stage cuts the shingles anyway).
  bool keep_sets_ = false;
  // The pair rule's `edited` reason is on. Unit sets are built only for the pairs that need
  // them (JudgeDeferredEdited): most candidates are decided by their shingle sets alone.
  bool edited_ = false;
  // A batch's narrowed sets: each worker chunk appends its documents' sets to an arena of its
  // own; Batch::set_of[i] = (arena, offset, size) of batch document i.
  struct SetRef {
    uint32_t arena = 0;
    uint32_t size = 0;
    uint64_t offset = 0;
  };
  struct Batch {
    std::vector<Document> documents;  // [0, count) hold this batch's documents
    size_t count = 0;
    uint64_t bytes_read = 0;           // the reader's input_bytes_consumed() after the batch
    uint64_t first_number = 0;         // the number (in reading order) of documents[0]
    std::vector<Status> status;        // DocumentPass::Fingerprint's
    std::vector<DedupDocument> facts;  // what the pass computed (id and place come at record)
    std::vector<uint32_t> keys;        // count * bands_, when use_lsh_
    std::vector<uint8_t> has_keys;
    bool with_sets = false;  // keep_sets_ when the pass began: set_of and arenas were filled
    std::vector<std::vector<uint32_t>> arenas;
    std::vector<SetRef> set_of;
  };
  Batch batches_[2];
  uint32_t first_pass_documents_ = 0;
  std::vector<uint64_t> first_offsets_;
  std::vector<uint32_t> first_sets_;
  std::optional<SpillFile> first_file_;
  bool reserved_ = false;
  size_t n_ = 0;
  uint64_t documents_read_ = 0;

  // Stage 2.
  std::vector<PairRun> runs_;
  std::vector<std::vector<uint64_t>> memory_runs_;  // when not spilling
  std::vector<SpillFile> run_files_;                // when spilling: one per LSH worker
  std::vector<uint64_t> simhash_pairs_;
  std::vector<uint64_t> whitespace_pairs_;
  std::vector<uint64_t> simhash_only_;  // packed pairs of the SimHash join the others missed
  // Verification slot of each document whose shingles are needed (UINT32_MAX: not needed).
  std::vector<uint32_t> slot_;
  uint32_t needed_ = 0;

  // Stage 3.
  size_t merge_stage_ = 0;
  uint64_t verified_bytes_ = 0;
  LoadedSets loaded_shingles_;
  std::vector<uint64_t> deferred_edited_;  // packed pairs decided kEditedDeferred, in order
};

Status DedupRun::Open(const std::vector<std::string>& inputs) {
  threads_ = options_.threads > 0 ? options_.threads : DefaultThreadCount();
  auto pass = DocumentPass::Create(options_);  // checks the options first
  if (!pass.ok()) return pass.status();
  pass_ = std::move(*pass);
  use_lsh_ = pass_->uses_lsh();
  use_simhash_ = UsesSimHash(options_);
  bands_ = pass_->lsh().parameters().bands;

  reader_options_ = options_.reader;
  if (options_.keep == KeepPolicy::kField) reader_options_.score_field = options_.keep_field;
  verify_threshold_ = ResolveVerifyThreshold(options_);
  verify_ = verify_threshold_ > 0;
  if (verify_) reader_options_.spool_stdin = true;
  auto opened = DocumentReader::Open(inputs, reader_options_);
  if (!opened.ok()) return opened.status();
  reader_ = std::move(*opened);
  // The boilerplate weights need every document's shingles in stage 1 (the LSH stage cuts them).
  if (options_.boilerplate && use_lsh_ && verify_) {
    frequencies_.emplace(FrequencySketchFor(reader_->total_input_bytes(), options_));
  }

  report_.input_files = reader_->files();
  if (use_lsh_) report_.lsh = pass_->lsh().parameters();
  if (use_simhash_) report_.k = options_.k;
  report_.verify_threshold = verify_ ? verify_threshold_ : 0;
  report_.rule = ResolvePairRule(options_);
  if (options_.measure_stage_memory) ResetPeakMemory();

  spill_ = options_.spill;
  if (spill_ && use_lsh_) {
    band_files_.reserve(bands_);
    for (int b = 0; b < bands_; ++b) {
      auto file = SpillFile::Create(options_.temp_directory);
      if (!file.ok()) return file.status();
      band_files_.push_back(std::move(*file));
    }
  }
  return Status::Ok();
}

void DedupRun::NoteStageMemory(size_t from) {
  if (!options_.measure_stage_memory) return;
  const uint64_t peak = PeakMemoryBytes();
  for (size_t i = from; i < report_.stages.size(); ++i) report_.stages[i].peak_memory_bytes = peak;
  ResetPeakMemory();
}

void DedupRun::NoteSpill(int64_t delta) {
  spill_bytes_ = static_cast<uint64_t>(static_cast<int64_t>(spill_bytes_) + delta);
  spill_peak_bytes_ = std::max(spill_peak_bytes_, spill_bytes_);
}

Status DedupRun::ReadAndFingerprint() {
  const auto stage_start = Clock::now();
  keys_ = BandKeyTable(use_lsh_ && !spill_ ? bands_ : 0);
  keep_sets_ = use_lsh_ && verify_ && options_.first_pass_set_bytes > 0;
  edited_ = options_.edited_threshold > 0;
  jieba_wanted_ = options_.fingerprint.profile != HashProfile::kYanyiwuSimhash &&
                  options_.fingerprint.features.tokenizer == Tokenizer::kAuto &&
                  options_.fingerprint.features.jieba_dir.empty();
  if (keep_sets_) {
    first_offsets_.push_back(0);
    if (spill_) {
      auto file = SpillFile::Create(options_.temp_directory);
      if (!file.ok()) return file.status();
      first_file_.emplace(std::move(*file));
    }
  }
  // A pipeline of two batches: while the workers run the pass over one, this thread records the
  // previous one and reads the next into its place.
  bool done = false;
  Batch* current = &batches_[0];
  Batch* other = &batches_[1];
  // Each holds half a batch_size, so as many documents are in memory as without the pipeline.
  for (Batch& batch : batches_) {
    batch.documents.resize(std::max<size_t>(1, (options_.batch_size + 1) / 2));
  }
  const auto first_read = Clock::now();
  NEARDUP_RETURN_IF_ERROR(ReadBatch(current, &done));
  read_seconds_ += SecondsSince(first_read);
  while (current->count > 0) {
    PreloadJiebaFor(*current);
    PrepareBatch(current);
    Status recorded = Status::Ok(), read = Status::Ok();
    double read_wall = 0, read_cpu = 0, record_wall = 0;
    const PassTimes pass = FingerprintBatch(current, [&] {
      const auto record_start = Clock::now();
      if (other->count > 0) recorded = RecordBatch(other);
      other->count = 0;
      record_wall = SecondsSince(record_start);
      if (!recorded.ok() || done) return;
      const auto read_start = Clock::now();
      const double cpu_start = ThreadCpuSeconds();
      read = ReadBatch(other, &done);
      read_cpu = ThreadCpuSeconds() - cpu_start;
      read_wall = SecondsSince(read_start);
    });
    AttributePass(pass, read_wall, read_cpu, record_wall);
    NEARDUP_RETURN_IF_ERROR(recorded);
    if (!read.ok()) {
      // A read error comes after the errors of the documents before it, as without the pipeline.
      NEARDUP_RETURN_IF_ERROR(RecordBatch(current));
      return read;
    }
    std::swap(current, other);
  }
  if (other->count > 0) NEARDUP_RETURN_IF_ERROR(RecordBatch(other));
  return FinishFingerprinting(stage_start);
}

Status DedupRun::ReadBatch(Batch* batch, bool* done) {
  batch->count = 0;
  batch->first_number = documents_read_;
  while (batch->count < batch->documents.size()) {
    auto got = reader_->Next(&batch->documents[batch->count]);
    if (!got.ok()) return got.status();
    if (!*got) {
      *done = true;
      break;
    }
    ++batch->count;
  }
  batch->bytes_read = reader_->input_bytes_consumed();
  documents_read_ += batch->count;
  return Status::Ok();
}

void DedupRun::PreloadJiebaFor(const Batch& batch) {
  if (!jieba_wanted_) return;
  for (size_t i = 0; i < batch.count; ++i) {
    if (utf8::HanWithoutKana(batch.documents[i].text)) {
      jieba_wanted_ = false;
      // The extractor loads the same process-wide dictionary (JiebaSegmenter::Default) and waits
      // for this load if it needs the dictionary first; a failure is reported there.
      // The loader's thread has a malloc arena of its own that later work does not reuse: give
      // back the loading's temporary memory (~30 MB of peak otherwise).
      jieba_loader_ = std::thread([] {
        (void)JiebaSegmenter::Default();
        malloc_trim(0);
      });
      return;
    }
  }
}

void DedupRun::PrepareBatch(Batch* batch) {
  const size_t count = batch->count;
  batch->status.assign(count, Status::Internal("not computed"));
  batch->facts.assign(count, DedupDocument{});
  if (use_lsh_) {
    batch->keys.assign(count * bands_, 0);
    batch->has_keys.assign(count, 0);
  }
  batch->arenas.clear();
  batch->with_sets = keep_sets_;
  if (batch->with_sets) batch->set_of.assign(count, SetRef{});
}

DedupRun::PassTimes DedupRun::FingerprintBatch(Batch* batch,
                                               const std::function<void()>& alongside) {
  const auto pass_start = Clock::now();
  std::mutex timing_mutex;
  PassTimes times;
  Clock::time_point workers_end = pass_start;
  auto pass = [&](size_t begin, size_t end) {
    DocumentPass::Scratch scratch;  // its buffers' capacity is reused from document to document
    std::vector<uint32_t> arena;
    std::vector<size_t> arena_documents;
    std::vector<uint32_t> counted_sets, counted_sizes;  // the chunk's sets, for frequencies_
    double fingerprint_here = 0, minhash_here = 0;
    auto last = Clock::now();
    for (size_t i = begin; i < end; ++i) {
      const std::string& text = batch->documents[i].text;
      Status& status = batch->status[i];
      status = pass_->Fingerprint(text, &scratch, &batch->facts[i]);
      auto now = Clock::now();
      fingerprint_here += std::chrono::duration<double>(now - last).count();
      last = now;
      if (!use_lsh_ || !status.ok()) continue;
      const bool counted =
          frequencies_ && (batch->first_number + i) % frequencies_->sample_every() == 0;
      batch->has_keys[i] = pass_->Sketch(
          text, &scratch, std::span<uint32_t>(batch->keys.data() + i * bands_, bands_),
          batch->with_sets || counted, /*want_units=*/false);
      if (batch->with_sets) {
        const size_t at = arena.size();
        arena.insert(arena.end(), scratch.set.begin(), scratch.set.end());
        batch->set_of[i] = {0, static_cast<uint32_t>(arena.size() - at), at};
        arena_documents.push_back(i);
      }
      if (counted && scratch.shingled) {
        counted_sets.insert(counted_sets.end(), scratch.set.begin(), scratch.set.end());
        counted_sizes.push_back(static_cast<uint32_t>(scratch.set.size()));
      }
      now = Clock::now();
      minhash_here += std::chrono::duration<double>(now - last).count();
      last = now;
    }
    if (!counted_sizes.empty()) {
      std::lock_guard<std::mutex> lock(frequencies_mutex_);
      size_t at = 0;
      for (uint32_t size : counted_sizes) {
        frequencies_->AddDocument(std::span<const uint32_t>(counted_sets.data() + at, size));
        at += size;
      }
      minhash_here += std::chrono::duration<double>(Clock::now() - last).count();
      last = Clock::now();
    }
    std::lock_guard<std::mutex> lock(timing_mutex);
    times.fingerprint_thread_seconds += fingerprint_here;
    times.minhash_thread_seconds += minhash_here;
    workers_end = std::max(workers_end, last);
    if (!arena_documents.empty()) {
      for (size_t i : arena_documents) {
        batch->set_of[i].arena = static_cast<uint32_t>(batch->arenas.size());
      }
      batch->arenas.push_back(std::move(arena));
    }
  };
  if (threads_ > 1) {
    ParallelForAlongside(batch->count, threads_, pass, 16, alongside);
  } else {
    pass(0, batch->count);
    workers_end = Clock::now();
    alongside();
  }
  times.workers_seconds = std::chrono::duration<double>(workers_end - pass_start).count();
  times.seconds = SecondsSince(pass_start);
  return times;
}

void DedupRun::AttributePass(const PassTimes& pass, double read_wall, double read_cpu,
                             double record_wall) {
  const double wait = std::max(0.0, pass.seconds - pass.workers_seconds);
  const double alongside = read_wall + record_wall;
  const double read_wait = alongside > 0 ? wait * read_wall / alongside : 0;
  // The part of the reading done while the workers ran, and the CPU time it took from them
  // (when they have every core to themselves).
  const double read_beside = std::max(0.0, read_wall - read_wait);
  const double stolen =
      read_wall > 0 && threads_ > 1 && threads_ >= DefaultThreadCount()
          ? std::min(pass.workers_seconds, read_cpu * (read_beside / read_wall) / threads_)
          : 0.0;
  read_seconds_ += read_wait + stolen;
  const double thread_seconds = pass.fingerprint_thread_seconds + pass.minhash_thread_seconds;
  if (pass.minhash_thread_seconds > 0) {
    lsh_seconds_ += (pass.workers_seconds - stolen) * pass.minhash_thread_seconds / thread_seconds;
  }
}

Status DedupRun::KeepFirstPassSet(std::span<const uint32_t> set) {
  const uint64_t total = first_offsets_.back() + set.size();
  if (total * sizeof(uint32_t) > options_.first_pass_set_bytes) {
    keep_sets_ = false;  // this and the later documents' sets come from LoadShingles
    return Status::Ok();
  }
  if (spill_) {
    NEARDUP_RETURN_IF_ERROR(first_file_->Append(set.data(), set.size() * sizeof(uint32_t)));
    NoteSpill(static_cast<int64_t>(set.size() * sizeof(uint32_t)));
  } else {
    first_sets_.insert(first_sets_.end(), set.begin(), set.end());
  }
  first_offsets_.push_back(total);
  ++first_pass_documents_;
  return Status::Ok();
}

Status DedupRun::SpillBandKeys(const Batch& batch) {
  for (int b = 0; b < bands_; ++b) {
    band_column_.clear();
    for (size_t i = 0; i < batch.count; ++i) {
      if (batch.status[i].ok()) band_column_.push_back(batch.keys[i * bands_ + b]);
    }
    NEARDUP_RETURN_IF_ERROR(
        band_files_[b].Append(band_column_.data(), band_column_.size() * sizeof(uint32_t)));
    NoteSpill(static_cast<int64_t>(band_column_.size() * sizeof(uint32_t)));
  }
  return Status::Ok();
}

Status DedupRun::RecordBatch(Batch* batch) {
  if (use_lsh_ && spill_) NEARDUP_RETURN_IF_ERROR(SpillBandKeys(*batch));
  for (size_t i = 0; i < batch->count; ++i) {
    Document& doc = batch->documents[i];
    if (!batch->status[i].ok()) {
      const Status& error = batch->status[i];
      if (reader_options_.strict) return error.WithContext(doc.location);
      ++report_.failed[Fingerprinter::IsNoFeatures(error) ? "no_features"
                                                          : StatusCodeName(error.code())];
      if (reader_options_.on_warning) {
        reader_options_.on_warning(doc.location + ": cannot fingerprint: " + error.ToString());
      }
      continue;
    }
    if (use_lsh_ && spill_) {
      has_keys_.push_back(batch->has_keys[i] != 0);
    } else if (use_lsh_) {
      keys_.Append(batch->has_keys[i]
                       ? std::span<const uint32_t>(batch->keys.data() + i * bands_, bands_)
                       : std::span<const uint32_t>());
    }
    if (keep_sets_ && batch->with_sets) {
      const SetRef& ref = batch->set_of[i];
      const uint32_t* values =
          ref.size > 0 ? batch->arenas[ref.arena].data() + ref.offset : nullptr;
      NEARDUP_RETURN_IF_ERROR(KeepFirstPassSet(std::span<const uint32_t>(values, ref.size)));
    }
    DedupDocument record = std::move(batch->facts[i]);
    record.id = std::move(doc.id);
    record.score = doc.score;
    record.file_index = doc.file_index;
    record.line = doc.line;
    report_.text_bytes += doc.text.size();
    report_.documents.push_back(std::move(record));
  }
  ReserveDocuments(batch->count, batch->bytes_read);
  if (progress_) {
    progress_("fingerprint", batch->bytes_read, reader_->total_input_bytes(),
              report_.documents.size());
  }
  return Status::Ok();
}

void DedupRun::ReserveDocuments(size_t count, uint64_t bytes_read) {
  if (reserved_ || count == 0 || reader_->total_input_bytes() == 0 || bytes_read == 0) {
    return;
  }
  // Room for twice the corpus at the first batch's bytes per document, so the document table
  // is not copied while growing (a copy briefly holds it twice, and the first batch may hold
  // longer documents than the rest). Only the pages written become resident: the unused part
  // of the reservation costs address space, not memory.
  reserved_ = true;
  const double per_byte =
      static_cast<double>(report_.documents.size()) / static_cast<double>(bytes_read);
  const double estimate = 2.0 * per_byte * static_cast<double>(reader_->total_input_bytes());
  if (estimate > static_cast<double>(report_.documents.size()) && estimate < 4.3e9) {
    report_.documents.reserve(static_cast<size_t>(estimate));
    if (use_lsh_ && spill_) has_keys_.reserve(static_cast<size_t>(estimate));
  }
}

Status DedupRun::FinishFingerprinting(Clock::time_point stage_start) {
  if (jieba_loader_.joinable()) jieba_loader_.join();
  for (Batch& batch : batches_) batch = Batch();
  for (SpillFile& file : band_files_) NEARDUP_RETURN_IF_ERROR(file.Flush());
  if (first_file_) NEARDUP_RETURN_IF_ERROR(first_file_->Flush());
  report_.skipped = reader_->skipped();
  const double fingerprint_seconds = SecondsSince(stage_start);
  const uint64_t documents = report_.documents.size();
  report_.stages.push_back({"read", read_seconds_, documents, report_.text_bytes});
  report_.stages.push_back({"fingerprint", fingerprint_seconds - read_seconds_ - lsh_seconds_,
                            documents, report_.text_bytes});
  if (use_lsh_) report_.stages.push_back({"minhash", lsh_seconds_, documents, report_.text_bytes});
  NoteStageMemory(0);
  if (report_.documents.size() > UINT32_MAX) {
    return Status::ResourceExhausted("more than 4294967295 documents");
  }
  auto qualified = QualifyDuplicateIds(&report_, reader_options_.strict);
  if (!qualified.ok()) return qualified.status();
  report_.duplicate_ids = *qualified;
  report_.fallbacks = reader_->fallbacks();
  n_ = report_.documents.size();
  auto rule = PairRule::Create(report_.rule, frequencies_ ? &*frequencies_ : nullptr,
                               options_.boilerplate_options);
  if (!rule.ok()) return rule.status();
  rule_.emplace(std::move(*rule));
  if (rule_->weighted() && n_ > 0) {
    weight_of_ = std::make_unique<std::atomic<double>[]>(n_);
    for (size_t d = 0; d < n_; ++d) weight_of_[d].store(-1, std::memory_order_relaxed);
  }
  report_.boilerplate = rule_->weighted();
  report_.boilerplate_documents = rule_->boilerplate_documents();
  report_.boilerplate_sketch_bytes = frequencies_ ? frequencies_->memory_bytes() : 0;
  report_.boilerplate_counted_every = frequencies_ ? frequencies_->sample_every() : 0;
  return Status::Ok();
}

Status DedupRun::LshCandidates() {
  // Per worker and band: the band's keys (4 bytes per document), then a key slice's records, a
  // sort buffer and a run of pairs (about 1 byte per document each; see RunLshWorker).
  if (!use_lsh_) return Status::Ok();
  const auto stage_start = Clock::now();
  if (progress_) progress_("lsh", 0, 0, n_);
  const int workers = std::max(1, std::min(threads_, bands_));
  std::vector<LshWorker> state(workers);
  if (spill_) {
    for (int w = 0; w < workers; ++w) {
      auto file = SpillFile::Create(options_.temp_directory);
      if (!file.ok()) return file.status();
      run_files_.push_back(std::move(*file));
    }
  }
  std::mutex spill_mutex;
  ParallelFor(
      workers, workers,
      [&](size_t begin, size_t end) {
        for (size_t w = begin; w < end; ++w) {
          RunLshWorker(static_cast<int>(w), workers, &state[w], &spill_mutex);
        }
      },
      1);
  band_files_.clear();  // closes (and so frees) the band key files
  if (spill_) NoteSpill(-static_cast<int64_t>(uint64_t{n_} * sizeof(uint32_t) * bands_));
  keys_ = BandKeyTable(0);
  std::vector<bool>().swap(has_keys_);
  NEARDUP_RETURN_IF_ERROR(CollectLshWorkers(&state));
  report_.stages.push_back({"lsh", SecondsSince(stage_start), report_.lsh_stats.bucket_pairs, 0});
  NoteStageMemory(report_.stages.size() - 1);
  return Status::Ok();
}

void DedupRun::RunLshWorker(int w, int workers, LshWorker* worker, std::mutex* spill_mutex) {
  const std::vector<bool>& present = spill_ ? has_keys_ : keys_.has_keys_bits();
  std::vector<uint64_t> records, scratch, pairs;
  std::vector<uint32_t> band_keys;
  // A band's pairs go out in sorted runs of at most one pair per 8 documents (and at least
  // 64 Ki pairs), the size of a key slice's records (LshBandPairRuns), so the run buffer and its
  // sort never outgrow them however many pairs a band yields: a worker holds the band's keys
  // (4 bytes per document), then about 1 byte each for records, sort buffer and run.
  const size_t max_run_pairs = std::max<size_t>(n_ / 8, size_t{1} << 16);
  auto emit_run = [&](std::span<const uint64_t> run) {
    if (!worker->status.ok()) return;
    if (!spill_) {
      worker->kept.emplace_back(run.begin(), run.end());
      return;
    }
    SpillFile& file = run_files_[w];
    worker->spilled.emplace_back(file.size(), run.size());
    worker->status = file.Append(run.data(), run.size() * sizeof(uint64_t));
    std::lock_guard<std::mutex> lock(*spill_mutex);
    NoteSpill(static_cast<int64_t>(run.size() * sizeof(uint64_t)));
  };
  pairs.reserve(max_run_pairs);  // address space: pages are touched only as pairs come
  for (int band = w; band < bands_; band += workers) {
    std::span<const uint32_t> view;
    if (spill_) {
      band_keys.resize(n_);
      worker->status = band_files_[band].ReadAt(0, band_keys.data(), n_ * sizeof(uint32_t));
      if (!worker->status.ok()) return;
      view = band_keys;
    } else {
      view = keys_.band_keys(band);
    }
    LshBandPairRuns(view, present, options_.lsh.bucket_window, max_run_pairs, emit_run,
                    &worker->stats, &pairs, &records, &scratch);
    if (!worker->status.ok()) return;
  }
  if (spill_) worker->status = run_files_[w].Flush();
}

Status DedupRun::CollectLshWorkers(std::vector<LshWorker>* state) {
  for (size_t w = 0; w < state->size(); ++w) {
    LshWorker& worker = (*state)[w];
    NEARDUP_RETURN_IF_ERROR(worker.status);
    report_.lsh_stats.records += worker.stats.records;
    report_.lsh_stats.buckets += worker.stats.buckets;
    report_.lsh_stats.oversized_buckets += worker.stats.oversized_buckets;
    report_.lsh_stats.largest_bucket =
        std::max(report_.lsh_stats.largest_bucket, worker.stats.largest_bucket);
    report_.lsh_stats.bucket_pairs += worker.stats.bucket_pairs;
    for (auto [offset, count] : worker.spilled) {
      runs_.push_back({&run_files_[w], offset, count, {}, kFromLsh});
    }
    for (auto& kept : worker.kept) memory_runs_.push_back(std::move(kept));
  }
  for (const auto& kept : memory_runs_) runs_.push_back({nullptr, 0, 0, kept, kFromLsh});
  return Status::Ok();
}

Status DedupRun::SimHashCandidates() {
  if (!use_simhash_ || n_ == 0) return Status::Ok();
  const auto stage_start = Clock::now();
  if (progress_) progress_("join", 0, 0, n_);
  auto join = HammingJoin::Create(options_.fingerprint.bits, options_.k, static_cast<double>(n_));
  if (!join.ok()) return join.status().WithContext("SimHash join");
  std::vector<NeighborPair> joined;
  {
    std::vector<Fingerprint> fingerprints;
    fingerprints.reserve(n_);
    for (const DedupDocument& doc : report_.documents) fingerprints.push_back(doc.fingerprint);
    joined = join->SelfJoin(fingerprints, threads_);  // sorted, each pair once
  }
  simhash_pairs_.reserve(joined.size());
  for (const NeighborPair& pair : joined) simhash_pairs_.push_back(pair.a << 32 | pair.b);
  report_.simhash_candidate_pairs = simhash_pairs_.size();
  runs_.push_back({nullptr, 0, 0, simhash_pairs_, kFromSimHash});
  report_.stages.push_back({"join", SecondsSince(stage_start), simhash_pairs_.size(), 0});
  NoteStageMemory(report_.stages.size() - 1);
  return Status::Ok();
}

void DedupRun::WhitespaceCandidates() {
  std::vector<uint64_t> hashes(n_), documents(n_);
  for (uint32_t i = 0; i < n_; ++i) {
    hashes[i] = report_.documents[i].squeezed_hash;
    documents[i] = i;
  }
  for (const LshPair& pair : FirstOfEqualHashPairs(hashes, documents)) {
    whitespace_pairs_.push_back(pair.a << 32 | pair.b);
  }
  runs_.push_back({nullptr, 0, 0, whitespace_pairs_, kWhitespace});
}

bool DedupRun::NeedsJaccard(uint64_t packed, uint8_t sources) const {
  if (sources & kWhitespace) return false;
  return !rule_->Decide(HashFacts(packed >> 32), HashFacts(static_cast<uint32_t>(packed)))
              .duplicate();
}

Status DedupRun::MergeCandidates() {
  const auto stage_start = Clock::now();
  WhitespaceCandidates();
  if (verify_) slot_.assign(n_, UINT32_MAX);
  NEARDUP_RETURN_IF_ERROR(PairRunMerger(runs_).ForEach([&](uint64_t packed, uint8_t sources) {
    ++report_.candidate_pairs;
    if (sources & kFromLsh) ++report_.lsh_candidate_pairs;
    if (use_lsh_ && sources == kFromSimHash) simhash_only_.push_back(packed);
    if (verify_ && NeedsJaccard(packed, sources)) {
      // Documents whose sets stage 1 kept need no slot.
      const uint32_t a = static_cast<uint32_t>(packed >> 32), b = static_cast<uint32_t>(packed);
      if (a >= first_pass_documents_) slot_[a] = 0;
      if (b >= first_pass_documents_) slot_[b] = 0;
    }
    return Status::Ok();
  }));
  if (verify_) {
    for (uint32_t& s : slot_) s = s == 0 ? needed_++ : UINT32_MAX;
  }
  report_.lsh_stats.candidate_pairs = report_.lsh_candidate_pairs;
  report_.stages.push_back({"merge", SecondsSince(stage_start), report_.candidate_pairs, 0});
  NoteStageMemory(report_.stages.size() - 1);
  return Status::Ok();
}

Status DedupRun::Verify() {
  merge_stage_ = report_.stages.size() - 1;
  const auto stage_start = Clock::now();
  if (verify_ && needed_ > 0) NEARDUP_RETURN_IF_ERROR(LoadShingles());
  NEARDUP_RETURN_IF_ERROR(VerifyCandidates());
  FinishVerify(stage_start);
  return Status::Ok();
}

Status DedupRun::LoadShingles() {
  return LoadSets(
      needed_, [this](uint32_t document) { return slot_[document]; }, n_, /*units=*/false,
      &loaded_shingles_);
}

Status DedupRun::LoadSets(uint32_t count, const std::function<uint32_t(uint32_t)>& slot_of,
                          size_t end, bool units, LoadedSets* out) {
  if (spill_) {
    auto file = SpillFile::Create(options_.temp_directory);
    if (!file.ok()) return file.status();
    out->file.emplace(std::move(*file));
    out->offsets.reserve(uint64_t{count} + 1);
  } else {
    out->sets.resize(count);
  }
  NEARDUP_RETURN_IF_ERROR(reader_->Rewind());
  auto normalizer = TextNormalizer::Create(pass_->shingler().normalize_options());
  if (!normalizer.ok()) return normalizer.status();
  // Walk the inputs again; the i-th successfully fingerprinted document is documents[i].
  // Documents that failed fingerprinting are recognised by (file, line) and skipped.
  end = std::min(end, n_);
  size_t next_doc = 0;
  std::vector<std::pair<uint32_t, std::string>> pending;
  std::vector<std::vector<uint32_t>> computed;
  Document doc;
  for (;;) {
    auto got = reader_->Next(&doc);
    if (!got.ok()) return got.status();
    if (!*got || next_doc >= end) break;
    const DedupDocument& record = report_.documents[next_doc];
    if (doc.file_index != record.file_index || doc.line != record.line) continue;
    uint32_t s = slot_of(static_cast<uint32_t>(next_doc));
    ++next_doc;
    if (s == UINT32_MAX) continue;
    verified_bytes_ += doc.text.size();
    pending.emplace_back(s, std::move(doc.text));
    if (pending.size() >= options_.batch_size) {
      NEARDUP_RETURN_IF_ERROR(FlushSets(**normalizer, units, &pending, &computed, out));
    }
    if (progress_ && !units && next_doc % 1024 == 0) {
      progress_("verify", next_doc, n_, next_doc);
    }
  }
  NEARDUP_RETURN_IF_ERROR(FlushSets(**normalizer, units, &pending, &computed, out));
  std::vector<std::vector<uint32_t>>().swap(computed);
  if (spill_) {
    // Slots are numbered in document order, so the file holds the sets in slot order.
    out->offsets.push_back(out->file->size() / sizeof(uint32_t));
    NEARDUP_RETURN_IF_ERROR(out->file->Flush());
    if (out->offsets.size() != uint64_t{count} + 1) {
      return Status::Internal("verification: the inputs changed while dedup was running");
    }
  }
  return Status::Ok();
}

Status DedupRun::FlushSets(const TextNormalizer& normalizer, bool units,
                           std::vector<std::pair<uint32_t, std::string>>* pending,
                           std::vector<std::vector<uint32_t>>* computed, LoadedSets* out) {
  computed->resize(pending->size());
  ParallelFor(
      pending->size(), threads_,
      [&](size_t begin, size_t end) {
        // The sets of ShingleSimilarity::ShinglesAndUnits, narrowed, made as stage 1 makes them
        // (shingle_hashes.h): from the hashes in text order, with no 64-bit set sorted.
        std::string normal;
        std::vector<uint64_t> unit_hashes, shingles;
        for (size_t i = begin; i < end; ++i) {
          std::vector<uint32_t>& set = (*computed)[i];
          set.clear();
          const std::string& text = (*pending)[i].second;
          if (normalizer.Normalize(text, &normal).ok()) {  // else: no shingles
            ShingleHashesInOrder(normal, &unit_hashes, &shingles);
            if (units) {
              NarrowedUnitSet(unit_hashes, &set);
            } else {
              NarrowedSet(shingles, &set);
            }
          }
        }
      },
      8);
  for (size_t i = 0; i < pending->size(); ++i) {
    std::vector<uint32_t>& set = (*computed)[i];
    if (spill_) {
      out->offsets.push_back(out->file->size() / sizeof(uint32_t));
      NEARDUP_RETURN_IF_ERROR(out->file->Append(set.data(), set.size() * sizeof(uint32_t)));
      NoteSpill(static_cast<int64_t>(set.size() * sizeof(uint32_t)));
    } else {
      set.shrink_to_fit();
      out->sets[(*pending)[i].first] = std::move(set);
    }
  }
  pending->clear();
  return Status::Ok();
}

Status DedupRun::VerifyCandidates() {
  // Candidates in blocks: similarity -2 = to judge by the sets.
  constexpr size_t kBlock = 1 << 18;
  std::vector<uint64_t> block;
  std::vector<double> similarity_of;
  std::vector<DuplicateReason> reason_of;
  NEARDUP_RETURN_IF_ERROR(PairRunMerger(runs_).ForEach([&](uint64_t packed, uint8_t) {
    block.push_back(packed);
    // Exact and whitespace-only pairs are decided by the rule from the hashes alone.
    const PairDecision by_hashes =
        rule_->Decide(HashFacts(packed >> 32), HashFacts(static_cast<uint32_t>(packed)));
    // (Without shingles, a rule that verifies nothing, threshold 0, would call every pair a
    // near_duplicate of similarity 0: only the hash reasons are taken from this decision.)
    const bool by_hash = by_hashes.reason == DuplicateReason::kExact ||
                         by_hashes.reason == DuplicateReason::kWhitespace;
    double value = -1;  // unverified (verification off)
    DuplicateReason reason = by_hash ? by_hashes.reason : DuplicateReason::kNearDuplicate;
    if (by_hash) {
      value = by_hashes.similarity;
    } else if (verify_) {
      value = -2;
      reason = DuplicateReason::kNone;
    }
    similarity_of.push_back(value);
    reason_of.push_back(reason);
    return block.size() >= kBlock ? VerifyBlock(&block, &similarity_of, &reason_of) : Status::Ok();
  }));
  NEARDUP_RETURN_IF_ERROR(VerifyBlock(&block, &similarity_of, &reason_of));
  return JudgeDeferredEdited();
}

PairDocument DedupRun::HashFacts(uint32_t document) const {
  const DedupDocument& d = report_.documents[document];
  return PairDocument{d.content_hash, d.text_bytes, d.squeezed_hash, {}, std::nullopt};
}

namespace {

// Values [from, to) of a spill file into the first elements of `buffer`, which only grows (no
// clearing of what the read overwrites).
Status ReadSpilledSet(const SpillFile& file, uint64_t from, uint64_t to,
                      std::vector<uint32_t>* buffer, std::span<const uint32_t>* set) {
  if (buffer->size() < to - from) buffer->resize(to - from);
  NEARDUP_RETURN_IF_ERROR(
      file.ReadAt(from * sizeof(uint32_t), buffer->data(), (to - from) * sizeof(uint32_t)));
  *set = std::span<const uint32_t>(buffer->data(), to - from);
  return Status::Ok();
}

}  // namespace

Status DedupRun::SetOf(uint32_t document, std::vector<uint32_t>* buffer,
                       std::span<const uint32_t>* set) const {
  if (document < first_pass_documents_) {
    const uint64_t from = first_offsets_[document], to = first_offsets_[document + 1];
    if (!spill_) {
      *set = std::span<const uint32_t>(first_sets_.data() + from, to - from);
      return Status::Ok();
    }
    return ReadSpilledSet(*first_file_, from, to, buffer, set);
  }
  return LoadedSet(loaded_shingles_, slot_[document], buffer, set);
}

Status DedupRun::LoadedSet(const LoadedSets& sets, uint32_t slot, std::vector<uint32_t>* buffer,
                           std::span<const uint32_t>* set) const {
  if (!spill_) {
    *set = sets.sets[slot];
    return Status::Ok();
  }
  return ReadSpilledSet(*sets.file, sets.offsets[slot], sets.offsets[slot + 1], buffer, set);
}

Status DedupRun::VerifyBlock(std::vector<uint64_t>* block, std::vector<double>* similarity_of,
                             std::vector<DuplicateReason>* reason_of) {
  PrepareHistogram();
  BlockVerdicts verdicts{*block, *similarity_of, *reason_of,
                         std::vector<double>(verify_ ? block->size() : 0, -1),
                         report_.similarity_histogram.rejected_sample_every - 1};
  Status read_status;
  std::mutex read_mutex;
  ParallelFor(
      block->size(), threads_,
      [&](size_t begin, size_t end) {
        Status status = JudgeRange(begin, end, &verdicts);
        if (!status.ok()) {
          std::lock_guard<std::mutex> lock(read_mutex);
          read_status = status;
        }
      },
      256);
  NEARDUP_RETURN_IF_ERROR(read_status);
  RecordVerdicts(verdicts);
  block->clear();
  similarity_of->clear();
  reason_of->clear();
  return Status::Ok();
}

void DedupRun::PrepareHistogram() {
  SimilarityHistogram& histogram = report_.similarity_histogram;
  if (verify_ && histogram.accepted.empty()) {
    histogram.accepted.assign(SimilarityHistogram::kBins, 0);
    histogram.rejected.assign(SimilarityHistogram::kBins, 0);
    while (report_.candidate_pairs / histogram.rejected_sample_every >
           SimilarityHistogram::kMeasureAll) {
      histogram.rejected_sample_every *= 2;
    }
  }
}

Status DedupRun::JudgeRange(size_t begin, size_t end, BlockVerdicts* verdicts) const {
  // The pairs that pass the plain floor are judged by the verification stage, DecidePairs
  // (DecideFast, as before: the same decisions).
  PairGroup group;
  Status read_error;
  for (size_t first = begin; first < end; first += PairGroup::kSize) {
    Status status = GatherGroup(first, std::min(end, first + PairGroup::kSize), &group, verdicts);
    if (!status.ok()) read_error = status;
    DecidePairs(*rule_, group.left, group.right, /*threads=*/1, &group.decisions,
                PairMeasure::kFast);
    for (size_t j = 0; j < group.judged.size(); ++j) {
      const size_t i = group.judged[j];
      const PairDecision& decision = group.decisions[j];
      if (edited_ && decision.reason == DuplicateReason::kEdited) {
        verdicts->similarity_of[i] = kEditedDeferred;
        continue;
      }
      verdicts->similarity_of[i] = decision.similarity;
      verdicts->reason_of[i] = decision.reason;
      if (verify_ && decision.reason == DuplicateReason::kNone && verdicts->Sampled(i)) {
        verdicts->measured[i] = Jaccard32(group.left[j].shingles, group.right[j].shingles);
      }
    }
  }
  return read_error;
}

Status DedupRun::GatherGroup(size_t first, size_t last, PairGroup* group,
                             BlockVerdicts* verdicts) const {
  group->left.clear();
  group->right.clear();
  group->judged.clear();
  Status read_error;
  size_t used_a = 0, used_b = 0;  // buffers taken in this group
  std::span<const uint32_t> set_a;
  uint32_t loaded_a = UINT32_MAX;
  std::optional<double> weight_a;
  for (size_t i = first; i < last; ++i) {
    if (verdicts->similarity_of[i] != -2) continue;
    const uint32_t a = static_cast<uint32_t>(verdicts->pairs[i] >> 32);
    const uint32_t b = static_cast<uint32_t>(verdicts->pairs[i]);
    Status status;
    if (a != loaded_a) {  // pairs come sorted by a: one read per document a
      status = SetOf(a, &group->buffers_a[used_a++], &set_a);
      loaded_a = a;
      weight_a.reset();  // looked up when a pair of a passes the floor
    }
    std::span<const uint32_t> set_b;
    if (status.ok()) status = SetOf(b, &group->buffers_b[used_b++], &set_b);
    if (!status.ok()) {
      read_error = status;
      loaded_a = UINT32_MAX;
      continue;
    }
    PairDocument doc_a = HashFacts(a), doc_b = HashFacts(b);
    doc_a.shingles = set_a;
    doc_b.shingles = set_b;
    if (edited_) {  // the real unit sets only for the pairs decided `edited` (JudgeDeferredEdited)
      doc_a.units = PairRule::DeferredUnits();
      doc_b.units = PairRule::DeferredUnits();
    }
    if (!rule_->PassesPlainFloor(doc_a, doc_b)) {  // settled without a weight
      verdicts->similarity_of[i] = 0;
      verdicts->reason_of[i] = DuplicateReason::kNone;
      if (verify_ && verdicts->Sampled(i)) verdicts->measured[i] = Jaccard32(set_a, set_b);
      continue;
    }
    if (!weight_a) weight_a = WeightOf(a, set_a);
    doc_a.weight = weight_a;
    doc_b.weight = WeightOf(b, set_b);
    group->left.push_back(doc_a);
    group->right.push_back(doc_b);
    group->judged.push_back(i);
  }
  return read_error;
}

std::optional<double> DedupRun::WeightOf(uint32_t document, std::span<const uint32_t> set) const {
  if (!weight_of_) return std::nullopt;
  double w = weight_of_[document].load(std::memory_order_relaxed);
  if (w < 0) {
    w = rule_->Weight(set);
    weight_of_[document].store(w, std::memory_order_relaxed);
  }
  return w;
}

void DedupRun::RecordVerdicts(const BlockVerdicts& verdicts) {
  for (size_t i = 0; i < verdicts.pairs.size(); ++i) {
    if (verdicts.similarity_of[i] == kEditedDeferred) {
      deferred_edited_.push_back(verdicts.pairs[i]);
      continue;
    }
    RecordVerdict(verdicts.pairs[i], verdicts.reason_of[i], verdicts.similarity_of[i],
                  verify_ ? verdicts.measured[i] : -1);
  }
}

void DedupRun::RecordVerdict(uint64_t packed, DuplicateReason reason, double similarity,
                             double measured) {
  SimilarityHistogram& histogram = report_.similarity_histogram;
  auto bin = [](double value) {
    return std::clamp(static_cast<int>(value * SimilarityHistogram::kBins + 1e-9), 0,
                      SimilarityHistogram::kBins - 1);
  };
  if (reason == DuplicateReason::kNone) {
    if (verify_) {
      ++histogram.rejected_pairs;
      if (measured >= 0) {
        ++histogram.rejected_measured;
        ++histogram.rejected[bin(measured)];
      }
    }
    return;
  }
  if (verify_ && similarity >= 0) ++histogram.accepted[bin(similarity)];
  const uint32_t a = static_cast<uint32_t>(packed >> 32);
  const uint32_t b = static_cast<uint32_t>(packed);
  ++report_.pairs_by_reason[DuplicateReasonName(reason)];
  report_.pairs.push_back(
      {a, b, HammingDistance(report_.documents[a].fingerprint, report_.documents[b].fingerprint),
       similarity >= 0 ? std::optional<double>(similarity) : std::nullopt, reason});
}

Status DedupRun::JudgeDeferredEdited() {
  if (deferred_edited_.empty()) return Status::Ok();
  // Their documents, ascending: unit set s is documents[s]'s.
  std::vector<uint32_t> documents;
  documents.reserve(2 * deferred_edited_.size());
  for (uint64_t packed : deferred_edited_) {
    documents.push_back(static_cast<uint32_t>(packed >> 32));
    documents.push_back(static_cast<uint32_t>(packed));
  }
  std::sort(documents.begin(), documents.end());
  documents.erase(std::unique(documents.begin(), documents.end()), documents.end());
  size_t cursor = 0;  // LoadSets asks in document order
  LoadedSets units;
  NEARDUP_RETURN_IF_ERROR(LoadSets(
      static_cast<uint32_t>(documents.size()),
      [&](uint32_t document) {
        while (cursor < documents.size() && documents[cursor] < document) ++cursor;
        return cursor < documents.size() && documents[cursor] == document
                   ? static_cast<uint32_t>(cursor)
                   : UINT32_MAX;
      },
      size_t{documents.back()} + 1, /*units=*/true, &units));
  auto slot_of = [&](uint32_t document) {
    return static_cast<uint32_t>(std::lower_bound(documents.begin(), documents.end(), document) -
                                 documents.begin());
  };
  // In groups, each pair's four sets in buffers of its own; the accepted pairs are appended to
  // report_.pairs and merged into their place (the blocks recorded them in pair order).
  const size_t recorded = report_.pairs.size();
  const uint64_t sample_mask = report_.similarity_histogram.rejected_sample_every - 1;
  constexpr size_t kGroup = 1024;
  std::vector<std::vector<uint32_t>> buffers(4 * kGroup);
  std::vector<PairDocument> left, right;
  std::vector<PairDecision> decisions;
  for (size_t first = 0; first < deferred_edited_.size(); first += kGroup) {
    const size_t last = std::min(deferred_edited_.size(), first + kGroup);
    left.clear();
    right.clear();
    for (size_t i = first; i < last; ++i) {
      const uint32_t a = static_cast<uint32_t>(deferred_edited_[i] >> 32);
      const uint32_t b = static_cast<uint32_t>(deferred_edited_[i]);
      std::vector<uint32_t>* buffer = &buffers[4 * (i - first)];
      PairDocument doc_a = HashFacts(a), doc_b = HashFacts(b);
      NEARDUP_RETURN_IF_ERROR(SetOf(a, &buffer[0], &doc_a.shingles));
      NEARDUP_RETURN_IF_ERROR(SetOf(b, &buffer[1], &doc_b.shingles));
      NEARDUP_RETURN_IF_ERROR(LoadedSet(units, slot_of(a), &buffer[2], &doc_a.units));
      NEARDUP_RETURN_IF_ERROR(LoadedSet(units, slot_of(b), &buffer[3], &doc_b.units));
      doc_a.weight = WeightOf(a, doc_a.shingles);
      doc_b.weight = WeightOf(b, doc_b.shingles);
      left.push_back(doc_a);
      right.push_back(doc_b);
    }
    DecidePairs(*rule_, left, right, threads_, &decisions, PairMeasure::kFast);
    for (size_t j = 0; j < decisions.size(); ++j) {
      const PairDecision& decision = decisions[j];
      const uint64_t packed = deferred_edited_[first + j];
      const double measured =
          decision.reason == DuplicateReason::kNone && SampledPair(packed, sample_mask)
              ? Jaccard32(left[j].shingles, right[j].shingles)
              : -1;
      RecordVerdict(packed, decision.reason, decision.similarity, measured);
    }
  }
  std::vector<uint64_t>().swap(deferred_edited_);
  auto by_pair = [](const DuplicatePair& x, const DuplicatePair& y) {
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  };
  std::inplace_merge(report_.pairs.begin(), report_.pairs.begin() + recorded, report_.pairs.end(),
                     by_pair);
  return Status::Ok();
}

void DedupRun::FinishVerify(Clock::time_point stage_start) {
  loaded_shingles_ = LoadedSets();
  first_file_.reset();
  std::vector<uint32_t>().swap(first_sets_);
  std::vector<uint64_t>().swap(first_offsets_);
  std::vector<uint32_t>().swap(slot_);
  weight_of_.reset();
  runs_.clear();
  run_files_.clear();
  std::vector<std::vector<uint64_t>>().swap(memory_runs_);
  std::vector<uint64_t>().swap(simhash_pairs_);
  std::vector<uint64_t>().swap(whitespace_pairs_);
  report_.spilled = spill_;
  report_.spill_peak_bytes = spill_peak_bytes_;
  if (verify_) {
    report_.stages.push_back(
        {"verify", SecondsSince(stage_start), report_.candidate_pairs, verified_bytes_});
    NoteStageMemory(report_.stages.size() - 1);
  } else {
    report_.stages[merge_stage_].seconds += SecondsSince(stage_start);  // the second merge
  }
  for (const DuplicatePair& pair : report_.pairs) {
    report_.simhash_only_accepted_pairs += std::binary_search(
        simhash_only_.begin(), simhash_only_.end(), static_cast<uint64_t>(pair.a) << 32 | pair.b);
  }
  report_.simhash_only_candidate_pairs = simhash_only_.size();
  std::vector<uint64_t>().swap(simhash_only_);
}

void DedupRun::Cluster() {
  const auto stage_start = Clock::now();
  if (progress_) progress_("cluster", 0, 0, report_.documents.size());
  BuildClusters(report_.documents, report_.pairs, options_.keep, &report_.clusters,
                &report_.removed);
  report_.stages.push_back({"cluster", SecondsSince(stage_start), report_.pairs.size(), 0});
  NoteStageMemory(report_.stages.size() - 1);
  report_.total_seconds = SecondsSince(run_start_);
}

}  // namespace

Result<DedupReport> RunDedup(const std::vector<std::string>& inputs, const DedupOptions& options,
                             const DedupProgress& progress) {
  DedupRun run(options, progress);
  NEARDUP_RETURN_IF_ERROR(run.Open(inputs));
  NEARDUP_RETURN_IF_ERROR(run.ReadAndFingerprint());
  NEARDUP_RETURN_IF_ERROR(run.LshCandidates());
  NEARDUP_RETURN_IF_ERROR(run.SimHashCandidates());
  NEARDUP_RETURN_IF_ERROR(run.MergeCandidates());
  NEARDUP_RETURN_IF_ERROR(run.Verify());
  run.Cluster();
  return run.TakeReport();
}

Status ValidateDedupOptions(const DedupOptions& options) { return CheckOptions(options); }

Result<ShingleFrequencies> CountShingleFrequencies(const std::vector<std::string>& inputs,
                                                   const DedupOptions& options) {
  NEARDUP_RETURN_IF_ERROR(CheckOptions(options));
  DocumentReaderOptions reader_options = options.reader;
  if (options.keep == KeepPolicy::kField) reader_options.score_field = options.keep_field;
  auto reader = DocumentReader::Open(inputs, reader_options);
  if (!reader.ok()) return reader.status();
  auto fingerprinter = Fingerprinter::Create(options.fingerprint);
  if (!fingerprinter.ok()) return fingerprinter.status();
  auto shingler =
      ShingleSimilarity::Create(options.fingerprint.normalize.traditional_to_simplified);
  if (!shingler.ok()) return shingler.status();
  ShingleFrequencies frequencies = FrequencySketchFor((*reader)->total_input_bytes(), options);
  const uint32_t every = frequencies.sample_every();
  // As dedup's first pass: document i (in reading order) counts when i % every == 0 and it can
  // be fingerprinted.
  std::vector<Document> batch(std::max<size_t>(1, options.batch_size));
  std::vector<std::vector<uint32_t>> sets(batch.size());
  std::vector<uint8_t> counted(batch.size());
  uint64_t number = 0;
  for (bool done = false; !done;) {
    size_t count = 0;
    while (count < batch.size()) {
      auto got = (*reader)->Next(&batch[count]);
      if (!got.ok()) return got.status();
      if (!*got) {
        done = true;
        break;
      }
      ++count;
    }
    ParallelFor(
        count, options.threads > 0 ? options.threads : DefaultThreadCount(),
        [&](size_t begin, size_t end) {
          std::vector<uint64_t> wide;
          for (size_t i = begin; i < end; ++i) {
            counted[i] = 0;
            if ((number + i) % every != 0) continue;
            if (!(*fingerprinter)->Compute(batch[i].text).ok()) continue;
            if (!(*shingler)->Shingles(batch[i].text, &wide).ok()) continue;
            ShingleSimilarity::Narrow(wide, &sets[i]);
            counted[i] = 1;
          }
        },
        16);
    for (size_t i = 0; i < count; ++i) {
      if (counted[i]) frequencies.AddDocument(sets[i]);
    }
    number += count;
  }
  return frequencies;
}

}  // namespace neardup
