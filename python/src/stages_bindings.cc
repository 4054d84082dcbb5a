// neardup._neardup.stages: the dedup stages of neardup/dedup_stages.h over NumPy arrays, for
// neardup.dask and anyone composing a dedup run partition by partition. Each function is one
// library call: arrays in, arrays out, the GIL released while the library works. Document numbers
// are uint64; fingerprints come as two uint64 arrays, hi (0 for 64 bits) and lo.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.h"
#include "neardup/dedup_stages.h"
#include "neardup/hamming_join.h"

namespace py = pybind11;

namespace neardup::python {
namespace {

template <typename T>
py::array_t<T> Take(std::vector<T>&& values) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(static_cast<py::ssize_t>(owned->size()), owned->data(), free);
}

// A 1-D array of T viewed (or, when it is not already one, converted once). TypeError naming
// `what` for something that is not array-like, ValueError for another shape.
template <typename T>
class ArrayView {
 public:
  ArrayView(py::handle object, const char* what) {
    array_ = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(object);
    if (!array_) {
      PyErr_Clear();
      throw py::type_error(
          std::string(what) + ": expected an array of " +
          py::str(py::dtype::of<T>()).cast<std::string>() + ", got " +
          py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>());
    }
    if (array_.ndim() != 1) throw py::value_error(std::string(what) + ": expected one dimension");
  }
  std::span<const T> span() const { return {array_.data(), static_cast<size_t>(array_.shape(0))}; }
  size_t size() const { return static_cast<size_t>(array_.shape(0)); }

 private:
  py::array_t<T, py::array::c_style | py::array::forcecast> array_;
};

void SameLength(size_t a, size_t b, const char* names) {
  if (a != b) {
    throw py::value_error(std::string(names) + ": lengths differ (" + std::to_string(a) + " and " +
                          std::to_string(b) + ")");
  }
}

std::vector<Fingerprint> Fingerprints(py::handle hi_object, py::handle lo_object, int bits) {
  ArrayView<uint64_t> hi(hi_object, "hi"), lo(lo_object, "lo");
  SameLength(hi.size(), lo.size(), "hi, lo");
  std::vector<Fingerprint> out(lo.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = Fingerprint{bits == 128 ? hi.span()[i] : 0, lo.span()[i], bits};
  }
  return out;
}

py::tuple PairArrays(const std::vector<LshPair>& pairs) {
  std::vector<uint64_t> a(pairs.size()), b(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    a[i] = pairs[i].a;
    b[i] = pairs[i].b;
  }
  return py::make_tuple(Take(std::move(a)), Take(std::move(b)));
}

py::tuple NeighborArrays(const std::vector<NeighborPair>& pairs) {
  std::vector<uint64_t> a(pairs.size()), b(pairs.size());
  std::vector<int32_t> d(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    a[i] = pairs[i].a;
    b[i] = pairs[i].b;
    d[i] = pairs[i].distance;
  }
  return py::make_tuple(Take(std::move(a)), Take(std::move(b)), Take(std::move(d)));
}

// ---- 1. document facts

class PyDocumentPass {
 public:
  explicit PyDocumentPass(const py::dict& kwargs) {
    DedupOptions options = DedupOptionsFromKeywords(kwargs);
    Result<std::unique_ptr<DocumentPass>> created = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      created = DocumentPass::Create(options);
    }
    if (!created.ok()) ThrowStatus(created.status());
    pass_ = std::move(*created);
  }

  // The facts of `texts` (a sequence of str or bytes) as columns; "error" holds None or the
  // reason a document has no facts.
  py::dict Columns(py::handle texts, bool with_sets, int threads) const {
    if (PyUnicode_Check(texts.ptr()) || PyBytes_Check(texts.ptr())) {
      throw py::type_error("texts: expected a sequence of str or bytes, got a single string");
    }
    std::vector<py::object> owners;
    std::vector<std::string_view> views;
    for (py::handle item : py::iter(texts)) {
      owners.push_back(py::reinterpret_borrow<py::object>(item));
      if (PyUnicode_Check(item.ptr())) {
        Py_ssize_t size = 0;
        const char* data = PyUnicode_AsUTF8AndSize(item.ptr(), &size);
        if (data == nullptr) throw py::error_already_set();
        views.emplace_back(data, static_cast<size_t>(size));
      } else if (PyBytes_Check(item.ptr())) {
        views.emplace_back(PyBytes_AS_STRING(item.ptr()),
                           static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())));
      } else {
        throw py::type_error(
            "texts[" + std::to_string(views.size()) + "]: expected str or bytes, got " +
            py::str(py::type::handle_of(item).attr("__name__")).cast<std::string>());
      }
    }
    DocumentColumns columns;
    {
      py::gil_scoped_release release;
      ComputeDocumentColumns(*pass_, views, with_sets, threads, &columns);
    }
    const size_t n = columns.size();
    std::vector<uint64_t> hi(n), lo(n);
    std::vector<uint8_t> ok(n);
    py::list errors;
    for (size_t i = 0; i < n; ++i) {
      hi[i] = columns.fingerprints[i].hi;
      lo[i] = columns.fingerprints[i].lo;
      ok[i] = columns.status[i].ok() ? 1 : 0;
      if (ok[i]) {
        errors.append(py::none());
      } else {
        errors.append(columns.status[i].ToString());
      }
    }
    py::dict out;
    out["ok"] = Take(std::move(ok)).attr("astype")("bool");
    out["error"] = errors;
    out["hi"] = Take(std::move(hi));
    out["lo"] = Take(std::move(lo));
    out["text_bytes"] = Take(std::move(columns.text_bytes));
    out["normalized_bytes"] = Take(std::move(columns.normalized_bytes));
    out["content_hash"] = Take(std::move(columns.content_hashes));
    out["squeezed_hash"] = Take(std::move(columns.squeezed_hashes));
    out["band_keys"] = Take(std::move(columns.band_keys))
                           .attr("reshape")(py::make_tuple(n, std::max(columns.bands, 0)));
    out["has_keys"] = Take(std::move(columns.has_keys)).attr("astype")("bool");
    if (!columns.set_offsets.empty()) {
      out["set_offsets"] = Take(std::move(columns.set_offsets));
      out["set_values"] = Take(std::move(columns.set_values));
    }
    return out;
  }

  const DocumentPass& pass() const { return *pass_; }

 private:
  std::unique_ptr<DocumentPass> pass_;
};

// ---- 4. clusters

// BuildClusters over documents 0..n-1 (canonical order) and accepted pairs: per cluster
// (kept, [(document, distance_to_kept, via, distance_to_via, similarity_to_via, reason)]).
py::list BuildClustersOf(py::handle hi_a, py::handle lo_a, int bits, py::handle bytes_a,
                         py::handle normalized_a, py::handle content_a, py::handle score_a,
                         py::handle pair_a, py::handle pair_b, py::handle distance_a,
                         py::handle similarity_a, const std::string& keep) {
  KeepPolicy policy;
  std::string field;
  if (Status parsed = ParseKeepPolicy(keep, &policy, &field); !parsed.ok()) ThrowStatus(parsed);
  std::vector<Fingerprint> fps = Fingerprints(hi_a, lo_a, bits);
  ArrayView<uint64_t> bytes(bytes_a, "text_bytes"), normalized(normalized_a, "normalized_bytes"),
      content(content_a, "content_hash");
  ArrayView<double> score(score_a, "score");
  ArrayView<uint64_t> a(pair_a, "a"), b(pair_b, "b");
  ArrayView<int32_t> distance(distance_a, "distance");
  ArrayView<double> similarity(similarity_a, "similarity");
  const size_t n = fps.size();
  SameLength(n, bytes.size(), "fingerprints, text_bytes");
  SameLength(n, normalized.size(), "fingerprints, normalized_bytes");
  SameLength(n, content.size(), "fingerprints, content_hash");
  SameLength(n, score.size(), "fingerprints, score");
  SameLength(a.size(), b.size(), "a, b");
  SameLength(a.size(), distance.size(), "a, distance");
  SameLength(a.size(), similarity.size(), "a, similarity");
  std::vector<DedupDocument> documents(n);
  for (size_t i = 0; i < n; ++i) {
    documents[i].fingerprint = fps[i];
    documents[i].text_bytes = bytes.span()[i];
    documents[i].normalized_bytes = normalized.span()[i];
    documents[i].content_hash = content.span()[i];
    if (!std::isnan(score.span()[i])) documents[i].score = score.span()[i];
  }
  std::vector<DuplicatePair> pairs(a.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const uint64_t x = a.span()[i], y = b.span()[i];
    if (x >= n || y >= n || x >= y) {
      throw py::value_error("pair " + std::to_string(i) + ": (" + std::to_string(x) + ", " +
                            std::to_string(y) + ") is not a < b < " + std::to_string(n));
    }
    // NaN (or a negative value) = unverified.
    const double value = similarity.span()[i];
    pairs[i] = {static_cast<uint32_t>(x), static_cast<uint32_t>(y), distance.span()[i],
                value >= 0 ? std::optional<double>(value) : std::nullopt};
  }
  std::vector<DedupCluster> clusters;
  std::vector<bool> removed;
  {
    py::gil_scoped_release release;
    BuildClusters(documents, pairs, policy, &clusters, &removed);
  }
  py::list out;
  for (const DedupCluster& cluster : clusters) {
    py::list members;
    for (const ClusterMember& m : cluster.removed) {
      members.append(py::make_tuple(m.document, m.distance_to_kept, m.via, m.distance_to_via,
                                    m.similarity_to_via, m.reason));
    }
    out.append(py::make_tuple(cluster.kept, members));
  }
  return out;
}

// HammingJoin.keys: Key(table, fp) of every fingerprint, an (n, tables) array.
py::object HammingKeysOf(const HammingJoin& self, py::handle hi, py::handle lo) {
  std::vector<Fingerprint> fps = Fingerprints(hi, lo, self.bits());
  std::vector<uint64_t> keys;
  {
    py::gil_scoped_release release;
    self.Keys(fps, &keys);
  }
  return Take(std::move(keys)).attr("reshape")(py::make_tuple(fps.size(), self.tables()));
}

// HammingJoin.bucket_pairs: the pairs of one bucket that a table reports.
py::tuple HammingBucketPairsOf(const HammingJoin& self, size_t table, py::handle documents_object,
                               py::handle hi, py::handle lo) {
  if (table >= self.tables()) throw py::value_error("table: out of range");
  ArrayView<uint64_t> documents(documents_object, "documents");
  std::vector<Fingerprint> fps = Fingerprints(hi, lo, self.bits());
  SameLength(documents.size(), fps.size(), "documents, fingerprints");
  std::vector<NeighborPair> pairs;
  {
    py::gil_scoped_release release;
    self.BucketPairs(table, documents.span(), fps, &pairs);
  }
  return NeighborArrays(pairs);
}

py::tuple HammingSelfJoinOf(const HammingJoin& self, py::handle hi, py::handle lo, int threads) {
  std::vector<Fingerprint> fps = Fingerprints(hi, lo, self.bits());
  std::vector<NeighborPair> pairs;
  {
    py::gil_scoped_release release;
    pairs = self.SelfJoin(fps, threads);
  }
  return NeighborArrays(pairs);
}

// lsh_bucket_pairs: the LSH bucket rule over (bucket, document) records, with its counts.
py::tuple LshBucketPairsOf(py::handle buckets_object, py::handle documents_object,
                           uint32_t window) {
  ArrayView<uint64_t> buckets(buckets_object, "buckets"), documents(documents_object, "documents");
  SameLength(buckets.size(), documents.size(), "buckets, documents");
  if (window < 1) throw py::value_error("window: must be at least 1");
  LshJoinStats stats;
  std::vector<LshPair> pairs;
  {
    py::gil_scoped_release release;
    pairs = LshBucketRecordPairs(buckets.span(), documents.span(), window, &stats);
  }
  py::dict counts;
  counts["records"] = stats.records;
  counts["buckets"] = stats.buckets;
  counts["oversized_buckets"] = stats.oversized_buckets;
  counts["largest_bucket"] = stats.largest_bucket;
  counts["bucket_pairs"] = stats.bucket_pairs;
  counts["candidate_pairs"] = stats.candidate_pairs;
  py::tuple ab = PairArrays(pairs);
  return py::make_tuple(ab[0], ab[1], counts);
}

py::tuple FirstOfEqualHashPairsOf(py::handle hashes_object, py::handle documents_object) {
  ArrayView<uint64_t> hashes(hashes_object, "hashes"), documents(documents_object, "documents");
  SameLength(hashes.size(), documents.size(), "hashes, documents");
  std::vector<LshPair> pairs;
  {
    py::gil_scoped_release release;
    pairs = FirstOfEqualHashPairs(hashes.span(), documents.span());
  }
  return PairArrays(pairs);
}

// merge_candidate_pairs: runs of (packed pairs, source), each checked sorted and distinct.
py::tuple MergeCandidatePairsOf(const py::list& runs) {
  std::vector<ArrayView<uint64_t>> views;
  std::vector<CandidateRun> candidate_runs;
  for (py::handle run : runs) {
    auto pair = run.cast<py::tuple>();
    if (pair.size() != 2) throw py::value_error("runs: expected (packed pairs, source)");
    views.emplace_back(pair[0], "packed pairs");
  }
  for (size_t i = 0; i < views.size(); ++i) {
    candidate_runs.push_back({views[i].span(), runs[i].cast<py::tuple>()[1].cast<uint8_t>()});
    const auto run = views[i].span();
    for (size_t j = 1; j < run.size(); ++j) {
      if (run[j - 1] >= run[j]) {
        throw py::value_error("runs[" + std::to_string(i) +
                              "]: packed pairs must be sorted and distinct");
      }
    }
  }
  std::vector<uint64_t> pairs;
  std::vector<uint8_t> sources;
  {
    py::gil_scoped_release release;
    MergeCandidatePairs(candidate_runs, &pairs, &sources);
  }
  return py::make_tuple(Take(std::move(pairs)), Take(std::move(sources)));
}

// Stage 1: the per-document pass.
void RegisterDocumentPass(py::module_& s) {
  py::class_<PyDocumentPass>(s, "DocumentPass")
      .def(py::init([](py::kwargs kwargs) { return new PyDocumentPass(kwargs); }))
      .def("columns", &PyDocumentPass::Columns, py::arg("texts"), py::arg("with_sets") = false,
           py::arg("threads") = 0)
      .def_property_readonly("bands",
                             [](const PyDocumentPass& self) { return self.pass().bands(); })
      .def_property_readonly("uses_lsh",
                             [](const PyDocumentPass& self) { return self.pass().uses_lsh(); })
      .def_property_readonly("bits", [](const PyDocumentPass& self) {
        return self.pass().options().fingerprint.bits;
      });
}

// Stage 2: fingerprints within k.
void RegisterHammingJoin(py::module_& s) {
  py::class_<HammingJoin>(s, "HammingJoin")
      .def(py::init([](int bits, int k, double expected_size) {
             Result<HammingJoin> join = HammingJoin::Create(bits, k, expected_size);
             if (!join.ok()) ThrowStatus(join.status());
             return new HammingJoin(std::move(*join));
           }),
           py::arg("bits"), py::arg("k"), py::arg("expected_size"))
      .def_property_readonly("tables", &HammingJoin::tables)
      .def_property_readonly("bits", &HammingJoin::bits)
      .def_property_readonly("k", &HammingJoin::k)
      .def(
          "keys", &HammingKeysOf, py::arg("hi"), py::arg("lo"),
          "Key(table, fp) of every fingerprint: an (n, tables) uint64 array; equal (table, key) is "
          "a bucket.")
      .def("bucket_pairs", &HammingBucketPairsOf, py::arg("table"), py::arg("documents"),
           py::arg("hi"), py::arg("lo"),
           "The pairs (a, b, distance) of one bucket that this table reports.")
      .def("self_join", &HammingSelfJoinOf, py::arg("hi"), py::arg("lo"), py::arg("threads") = 0);
}

// Stage 2: the LSH bucket rule, the whitespace rule and the distinct merge of candidates.
void RegisterCandidateRules(py::module_& s) {
  s.def("lsh_bucket_pairs", &LshBucketPairsOf, py::arg("buckets"), py::arg("documents"),
        py::arg("window"),
        "The LSH bucket rule over (bucket = band << 32 | key, document) records: (a, b, counts).");
  s.def("lsh_bucket_key", &LshBucketKey, py::arg("band"), py::arg("key"));
  s.def("first_of_equal_hash_pairs", &FirstOfEqualHashPairsOf, py::arg("hashes"),
        py::arg("documents"),
        "The whitespace rule: each document with the first of equal hash, (first, document).");
  s.def("merge_candidate_pairs", &MergeCandidatePairsOf, py::arg("runs"),
        "The distinct merge of sorted runs of packed pairs (a << 32 | b), each with its source "
        "bit: (packed, sources).");
  s.attr("LSH") = static_cast<int>(kLshCandidate);
  s.attr("SIMHASH") = static_cast<int>(kSimHashCandidate);
  s.attr("WHITESPACE") = static_cast<int>(kWhitespaceCandidate);
}

}  // namespace

void RegisterStageBindings(py::module_& m) {
  py::module_ s = m.def_submodule(
      "stages", "The dedup stages of neardup/dedup_stages.h over NumPy arrays (for neardup.dask).");
  RegisterDocumentPass(s);
  RegisterHammingJoin(s);
  RegisterCandidateRules(s);
  s.def("build_clusters", &BuildClustersOf, py::arg("hi"), py::arg("lo"), py::arg("bits"),
        py::arg("text_bytes"), py::arg("normalized_bytes"), py::arg("content_hash"),
        py::arg("score"), py::arg("a"), py::arg("b"), py::arg("distance"), py::arg("similarity"),
        py::arg("keep"));
}

}  // namespace neardup::python
