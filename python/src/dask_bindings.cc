// neardup.dask's calls into the library (python/neardup/dask.py): every task of a distributed
// dedup hands NumPy arrays to one of these functions and gets arrays back, so no per-document
// Python work is done in any stage. They keep no state between calls but engines cached per
// option set, and release the GIL while they work.
//
//   _dask_range_lines   a byte range of a file moved to line starts, and its line breaks
//   _dask_read          one partition's documents through the library's DocumentReader (a byte
//                       range of a JSONL file, a whole file, or JSONL bytes made from a DataFrame
//                       partition) and dedup's per-document pass over them (fingerprint, hashes,
//                       band keys and narrowed shingle set from one normalisation); the band keys,
//                       whitespace-free hashes and id hashes come out grouped by the shuffle
//                       partition they go to
//   _dask_shared        the documents whose hash (of their id) is shared
//   _dask_verify        the pair rule over candidate pairs: exact, whitespace-only, or shingle
//                       Jaccard at the threshold
//   _dask_gather_coded_sets / _dask_gather_strings   rows of a stored column
//   _dask_clusters      components and the keep decision (BuildClusters) over arrays
//   _dask_cluster_lines clusters.jsonl lines, written by the library's serializer
// The LSH bucket rule and the whitespace rule are the public stages' (neardup._neardup.stages:
// lsh_bucket_pairs, first_of_equal_hash_pairs), called by dask.py directly.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "bindings.h"
#include "common/json_writer.h"
#include "common/parallel.h"
#include "common/set_codec.h"
#include "dedup/shingle_hashes.h"
#include "neardup/clusters.h"
#include "neardup/dedup.h"
#include "neardup/dedup_stages.h"
#include "neardup/document_reader.h"
#include "neardup/fingerprinter.h"
#include "neardup/minhash_lsh.h"
#include "neardup/pair_rule.h"
#include "neardup/shingles.h"

namespace py = pybind11;

namespace neardup::python {
namespace {

// A NumPy array that owns `values` (no copy).
template <typename T>
py::array_t<T> Take(std::vector<T>&& values) {
  auto* heap = new std::vector<T>(std::move(values));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({static_cast<py::ssize_t>(heap->size())},
                        {static_cast<py::ssize_t>(sizeof(T))}, heap->data(), owner);
}

// A read-only view of a 1-D array of T (any NumPy array convertible without a copy is accepted;
// others are copied once).
template <typename T>
struct View {
  py::array_t<T, py::array::c_style | py::array::forcecast> array;
  explicit View(py::handle object)
      : array(py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(object)) {
    if (!array) throw py::type_error("expected a 1-D array");
    if (array.ndim() != 1) throw py::value_error("expected a 1-D array");
  }
  size_t size() const { return static_cast<size_t>(array.shape(0)); }
  const T* data() const { return array.data(); }
  T operator[](size_t i) const { return array.data()[i]; }
  std::span<const T> span() const { return {data(), size()}; }
};

// The shuffle partition of a record key: a mixed hash reduced to [0, n).
uint32_t Route(uint64_t key, uint32_t n) {
  uint64_t x = key + 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return static_cast<uint32_t>(((x >> 32) * n) >> 32);
}

// The number of bits needed for values up to `max_value` (0 for 0).
int BitsFor(uint64_t max_value) { return max_value == 0 ? 0 : std::bit_width(max_value); }

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(std::string_view bytes, size_t* pos, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= bytes.size()) return false;
    const auto byte = static_cast<uint8_t>(bytes[(*pos)++]);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) {
      *v = result;
      return true;
    }
  }
  return false;
}

// A band-key block of neardup.dask's shuffle: the (key, row) records of one (partition, band),
// sorted by key then row, as the record count n (varint), the distinct keys in the one set codec
// (common/set_codec.h), a bitmap of n bits (bit i set: record i's key differs from record
// i - 1's) and each record's row in `row_bits` bits, bits filled from the least significant end
// of each byte.
void EncodeBandBlock(std::span<const uint64_t> records, int row_bits, std::string* out) {
  const size_t n = records.size();
  PutVarint(n, out);
  std::vector<uint32_t> keys;
  std::string bits((n + 7) / 8 + (n * row_bits + 7) / 8, '\0');
  auto set_bit = [&](size_t at) {
    bits[at / 8] = static_cast<char>(bits[at / 8] | (1 << (at % 8)));
  };
  for (size_t i = 0; i < n; ++i) {
    const auto key = static_cast<uint32_t>(records[i] >> 32);
    if (i == 0 || key != keys.back()) {
      keys.push_back(key);
      set_bit(i);
    }
  }
  // The rows, row_bits each, through a 64-bit accumulator.
  size_t at = (n + 7) / 8;
  uint64_t word = 0;
  int filled = 0;
  for (size_t i = 0; i < n; ++i) {
    word |= static_cast<uint64_t>(static_cast<uint32_t>(records[i])) << filled;
    filled += row_bits;
    while (filled >= 8) {
      bits[at++] = static_cast<char>(word);
      word >>= 8;
      filled -= 8;
    }
  }
  if (filled > 0) bits[at] = static_cast<char>(word);
  EncodeShingleSet(keys, out);
  out->append(bits);
}

// Decodes a whole block (EncodeBandBlock) into keys and rows (appended). False when the bytes are
// not such a block: damage, never an out-of-bounds read.
bool DecodeBandBlock(std::string_view bytes, int row_bits, std::vector<uint32_t>* keys,
                     std::vector<uint32_t>* rows, std::vector<uint32_t>* distinct) {
  size_t pos = 0;
  uint64_t n = 0;
  if (!GetVarint(bytes, &pos, &n) || n > bytes.size() * 8) return false;
  size_t used = 0;
  if (!DecodeShingleSet(bytes.substr(pos), distinct, &used)) return false;
  pos += used;
  const size_t map_bytes = (n + 7) / 8, row_bytes = (n * row_bits + 7) / 8;
  if (bytes.size() - pos != map_bytes + row_bytes) return false;
  const auto* bits = reinterpret_cast<const uint8_t*>(bytes.data()) + pos;
  auto bit = [&](size_t at) { return (bits[at / 8] >> (at % 8)) & 1; };
  size_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (bit(i)) {
      if (next == distinct->size()) return false;
      ++next;
    } else if (i == 0) {
      return false;
    }
    keys->push_back((*distinct)[next - 1]);
  }
  // The rows, row_bits each, through a 64-bit accumulator.
  const uint8_t* in = bits + map_bytes;
  const uint64_t mask = row_bits == 32 ? 0xFFFFFFFFu : (uint64_t{1} << row_bits) - 1;
  uint64_t word = 0;
  int filled = 0;
  for (size_t i = 0; i < n; ++i) {
    while (filled < row_bits) {
      word |= static_cast<uint64_t>(*in++) << filled;
      filled += 8;
    }
    rows->push_back(static_cast<uint32_t>(word & mask));
    word >>= row_bits;
    filled -= row_bits;
  }
  return next == distinct->size();
}

// The band keys of one shuffle partition d (the keys k with (k * dests) >> 32 == d, a range of at
// most `width` keys from base(d)) in as few blocks as fit 32-bit values: `per_chunk` bands share
// a block, band b's key k stored as the value (b % per_chunk) * width + (k - base(d)). The values
// then spread over nearly all of [0, 2^32), where the set codec's coding is tight.
struct BandChunks {
  uint32_t dests;
  int bands;
  uint64_t width;  // ceil(2^32 / dests)
  int per_chunk;

  BandChunks(uint32_t dests_in, int bands_in)
      : dests(std::max<uint32_t>(dests_in, 1)),
        bands(bands_in),
        width(((uint64_t{1} << 32) + dests - 1) / dests),
        per_chunk(static_cast<int>(
            std::clamp<uint64_t>((uint64_t{1} << 32) / width, 1, std::max(bands_in, 1)))) {}

  uint64_t base(uint32_t d) const {
    return (static_cast<uint64_t>(d) << 32) / dests +
           (((static_cast<uint64_t>(d) << 32) % dests) != 0);
  }
  int first_band(int b) const { return b - b % per_chunk; }
  uint32_t Value(uint32_t d, int b, uint32_t key) const {
    return static_cast<uint32_t>(static_cast<uint64_t>(b % per_chunk) * width + (key - base(d)));
  }
  // The band and key of `value` in the block of partition d whose first band is `first`; false
  // when it names no band or key of that partition (damage).
  bool Decode(uint32_t d, int first, uint32_t value, int* band, uint32_t* key) const {
    const uint64_t in_chunk = value / width;
    *band = first + static_cast<int>(in_chunk);
    const uint64_t k = base(d) + value % width;
    *key = static_cast<uint32_t>(k);
    return in_chunk < static_cast<uint64_t>(per_chunk) && *band < bands &&
           k < (uint64_t{1} << 32) && ((k * dests) >> 32) == d;
  }
};

// Sorts band records (value << 32 | row) whose rows ascend in the order given, as std::sort would:
// an LSD radix sort on the 32-bit values (three 11-bit digits, a digit every record shares
// skipped), stable, so equal values keep their ascending rows. `scratch` is reused across calls.
void SortBandRecords(std::span<uint64_t> records, std::vector<uint64_t>* scratch) {
  const size_t n = records.size();
  if (n < 256) {
    std::sort(records.begin(), records.end());
    return;
  }
  constexpr int kDigitBits = 11;
  constexpr uint64_t kMask = (uint64_t{1} << kDigitBits) - 1;
  std::array<std::array<uint32_t, kMask + 1>, 3> counts{};
  for (const uint64_t r : records) {
    ++counts[0][(r >> 32) & kMask];
    ++counts[1][(r >> (32 + kDigitBits)) & kMask];
    ++counts[2][(r >> (32 + 2 * kDigitBits)) & kMask];
  }
  scratch->resize(n);
  uint64_t* from = records.data();
  uint64_t* to = scratch->data();
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = 32 + pass * kDigitBits;
    std::array<uint32_t, kMask + 1>& count = counts[pass];
    if (count[(from[0] >> shift) & kMask] == n) continue;  // one digit value: already in order
    uint32_t sum = 0;
    for (uint32_t& c : count) {
      const uint32_t here = c;
      c = sum;
      sum += here;
    }
    for (size_t i = 0; i < n; ++i) to[count[(from[i] >> shift) & kMask]++] = from[i];
    std::swap(from, to);
  }
  if (from != records.data()) std::copy(from, from + n, records.data());
}

// The dedup stages' per-document pass (neardup/dedup_stages.h) of one option set, built once per
// process and shared by its tasks.
std::shared_ptr<const DocumentPass> PassFor(const py::dict& kwargs, const std::string& key) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const DocumentPass>> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const DedupOptions options = DedupOptionsFromKeywords(kwargs);
  Result<std::unique_ptr<DocumentPass>> created = Status::Internal("unset");
  {
    py::gil_scoped_release release;
    created = DocumentPass::Create(options);
  }
  if (!created.ok()) ThrowStatus(created.status());
  std::shared_ptr<const DocumentPass> pass = std::move(*created);
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, std::move(pass)).first->second;
}

std::string ReadRange(const std::string& path, uint64_t start, uint64_t end);
// A frequency sketch saved by _DaskFrequencies.save (ShingleFrequencies::Serialize).
ShingleFrequencies ReadFrequencySketch(const std::string& path);

// THE pair rule (neardup/pair_rule.h) of one option set (ResolvePairRule), built once per process
// and shared by its tasks; with boilerplate weights, `frequencies` names the run's merged
// frequency sketch (a file written by _DaskFrequencies.save), read once per process and kept
// with the rule (PairRule::Create with the options' BoilerplateOptions, as dedup does); a
// process keeps the rule of one such sketch at a time.
std::shared_ptr<const PairRule> RuleFor(const py::dict& kwargs, const std::string& key,
                                        const std::string& frequencies = std::string()) {
  struct Held {
    std::unique_ptr<ShingleFrequencies> sketch;  // null: no weights
    std::optional<PairRule> rule;
  };
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Held>> cache;
  const std::string cache_key = key + '\n' + frequencies;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(cache_key);
    if (it != cache.end()) return std::shared_ptr<const PairRule>(it->second, &*it->second->rule);
  }
  const DedupOptions options = DedupOptionsFromKeywords(kwargs);
  auto held = std::make_shared<Held>();
  if (!frequencies.empty()) {
    held->sketch = std::make_unique<ShingleFrequencies>(ReadFrequencySketch(frequencies));
  }
  Result<PairRule> created =
      PairRule::Create(ResolvePairRule(options), held->sketch.get(), options.boilerplate_options);
  if (!created.ok()) ThrowStatus(created.status());
  held->rule.emplace(std::move(*created));
  std::lock_guard<std::mutex> lock(mutex);
  if (held->sketch) {  // one run's sketch at a time (up to 64 MiB): drop the others' rules
    std::erase_if(cache, [](const auto& entry) { return entry.second->sketch != nullptr; });
  }
  auto it = cache.emplace(cache_key, std::move(held)).first;
  return std::shared_ptr<const PairRule>(it->second, &*it->second->rule);
}

// Rewrites the places the reader names ("opened:LINE..." or "opened") to the partition's own
// name and line numbers: a byte range of a file is read as an input of its own whose first line
// is line `shift + 1` of the file.
struct PlaceRewriter {
  std::string opened;   // the name the reader was given
  std::string display;  // the name places should show
  int64_t shift = 0;    // added to every line number

  std::string operator()(const std::string& text) const {
    if (text == opened) return display;
    if (text.size() <= opened.size() || text.compare(0, opened.size(), opened) != 0 ||
        text[opened.size()] != ':') {
      return text;
    }
    size_t at = opened.size() + 1, end = at;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    if (end == at) return text;
    const int64_t line = std::stoll(text.substr(at, end - at)) + shift;
    return display + ":" + std::to_string(line) + text.substr(end);
  }
};

std::string ReadRange(const std::string& path, uint64_t start, uint64_t end) {
  std::string bytes;
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    ThrowStatus(Status::IoError(path + ": cannot open: " + std::strerror(errno)));
  }
  bytes.resize(end - start);
  size_t got = 0;
  if (std::fseek(file, static_cast<long>(start), SEEK_SET) == 0) {
    got = std::fread(bytes.data(), 1, bytes.size(), file);
  }
  std::fclose(file);
  if (got != bytes.size()) ThrowStatus(Status::IoError(path + ": short read"));
  return bytes;
}

ShingleFrequencies ReadFrequencySketch(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    ThrowStatus(Status::IoError(path + ": cannot open: " + std::strerror(errno)));
  }
  std::fseek(file, 0, SEEK_END);
  const long size = std::ftell(file);
  std::fclose(file);
  Result<ShingleFrequencies> sketch =
      ShingleFrequencies::Deserialize(ReadRange(path, 0, size < 0 ? 0 : size));
  if (!sketch.ok()) ThrowStatus(sketch.status().WithContext(path));
  return std::move(*sketch);
}

// The `lines` task of neardup.dask: the byte range [start, end) of a file of `size` bytes with
// both ends moved to the next line start (0, or just after a line break; at most size), and the
// line breaks between them, read in 1 MiB blocks with the GIL released.
py::dict RangeLines(const std::string& path, int64_t start, int64_t end, int64_t size) {
  int64_t first = 0, last = 0;
  uint64_t breaks = 0;
  std::string failure;
  {
    py::gil_scoped_release release;
    FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) {
      failure = path + ": cannot open: " + std::strerror(errno);
    } else {
      std::vector<char> block(1 << 20);
      const int fd = fileno(file);
      auto read_at = [&](int64_t at, size_t want) -> ssize_t {
        const ssize_t got = pread(fd, block.data(), std::min(want, block.size()), at);
        if (got < 0) failure = path + ": cannot read: " + std::strerror(errno);
        return got;
      };
      auto line_start = [&](int64_t position) -> int64_t {
        if (position <= 0) return 0;
        if (position >= size) return size;
        for (int64_t at = position - 1; at < size;) {
          const ssize_t got = read_at(at, block.size());
          if (got <= 0) break;
          const void* found = std::memchr(block.data(), '\n', static_cast<size_t>(got));
          if (found != nullptr) return at + (static_cast<const char*>(found) - block.data()) + 1;
          at += got;
        }
        return size;
      };
      first = line_start(start);
      last = std::max(first, line_start(end));
      for (int64_t at = first; at < last && failure.empty();) {
        const ssize_t got = read_at(at, static_cast<size_t>(last - at));
        if (got <= 0) break;
        breaks += static_cast<uint64_t>(std::count(block.data(), block.data() + got, '\n'));
        at += got;
      }
      std::fclose(file);
    }
  }
  if (!failure.empty()) ThrowStatus(Status::IoError(failure));
  py::dict out;
  out["start"] = first;
  out["end"] = last;
  out["breaks"] = breaks;
  return out;
}

void AddCount(py::dict* counts, const std::string& name, uint64_t value) {
  py::str key(name);
  (*counts)[key] = counts->contains(key) ? py::cast<uint64_t>((*counts)[key]) + value : value;
}

// A partition's input for the reader: the name it is opened under (a memory input, or the file
// itself), and how the places it reports are rewritten.
struct PartitionInput {
  std::string input;
  PlaceRewriter rewrite;
};

PartitionInput OpenInput(const py::dict& source, DocumentReaderOptions* reader_options) {
  const std::string name = py::cast<std::string>(source["name"]);
  PartitionInput in{std::string(), PlaceRewriter{name, name, 0}};
  if (!source["data"].is_none()) {
    py::bytes data = py::reinterpret_borrow<py::bytes>(source["data"]);
    in.input = name.empty() ? "<partition>.jsonl" : name + ".jsonl";
    in.rewrite.opened = in.input;
    in.rewrite.shift = py::cast<int64_t>(source["line_shift"]);
    reader_options->memory_inputs[in.input] =
        std::make_shared<const std::string>(std::string(data));
    return in;
  }
  const std::string path = py::cast<std::string>(source["path"]);
  const int64_t start = py::cast<int64_t>(source["start"]);
  const int64_t end = py::cast<int64_t>(source["end"]);
  if (end < 0) {
    in.input = path;
    in.rewrite.opened = path;
    return in;
  }
  // The range as an input of its own, named like the file (so read as its format).
  std::string bytes;
  {
    py::gil_scoped_release release;
    bytes = ReadRange(path, static_cast<uint64_t>(start), static_cast<uint64_t>(end));
  }
  in.rewrite.shift = py::cast<int64_t>(source["first_line"]) - 1;
  if (start > 0 && std::string_view(bytes).substr(0, 3) == "\xEF\xBB\xBF") {
    // Only a file's first bytes may be a byte-order mark: keep it, behind a blank line.
    bytes.insert(bytes.begin(), '\n');
    in.rewrite.shift -= 1;
  }
  in.input = name;
  reader_options->memory_inputs[in.input] = std::make_shared<const std::string>(std::move(bytes));
  return in;
}

// One partition's per-document columns, in reading order (the documents that were fingerprinted),
// and the reader's counts.
struct PartitionColumns {
  std::vector<uint8_t> id_blob;
  std::vector<uint64_t> id_offsets{0}, lines, hi, lo, text_bytes, normalized_bytes, content_hash,
      squeezed_hash, set_offsets{0};
  std::vector<double> scores;
  std::vector<uint32_t> keys, set_sizes;
  std::string set_codes;
  // With the pair rule's `edited` reason on: the coded narrowed unit sets, as the shingle sets.
  std::vector<uint64_t> unit_offsets{0};
  std::string unit_codes;
  std::vector<uint8_t> has_keys;
  // With boilerplate weights: each document's number among the documents the reader gave (those
  // that could not be fingerprinted included), which the frequency count samples by.
  std::vector<uint32_t> read_index;
  uint64_t read = 0;  // the documents the reader gave
  uint64_t total_text_bytes = 0;
  std::map<std::string, uint64_t> failed, skipped, fallbacks;
};

// Up to docs->size() documents from the reader into *docs: how many; *done once the input ended.
Result<size_t> ReadBatch(DocumentReader* reader, std::vector<Document>* docs, bool* done) {
  size_t count = 0;
  while (count < docs->size()) {
    Result<bool> got = reader->Next(&(*docs)[count]);
    if (!got.ok()) return got.status();
    if (!*got) {
      *done = true;
      break;
    }
    ++count;
  }
  return count;
}

// Reads a partition into PartitionColumns: the reader's documents in batches, each batch through
// dedup's per-document pass (fingerprint, hashes, band keys and set from one normalisation), and
// the documents that have facts appended; the others are counted as failed (an error if strict).
class PartitionReader {
 public:
  PartitionReader(const DocumentPass& pass, const DocumentReaderOptions& reader_options,
                  const PlaceRewriter& rewrite, bool want_sets, bool want_units, int threads,
                  bool want_read_index)
      : pass_(pass),
        reader_options_(reader_options),
        rewrite_(rewrite),
        want_sets_(want_sets),
        want_units_(want_units),
        threads_(threads),
        want_read_index_(want_read_index) {}

  // Every document of `input` (call without the GIL).
  Status Read(const std::string& input, PartitionColumns* columns) {
    auto opened = DocumentReader::Open({input}, reader_options_);
    if (!opened.ok()) return opened.status();
    std::unique_ptr<DocumentReader> reader = std::move(*opened);
    std::vector<Document> docs(2048);
    Status error;
    for (bool done = false; !done && error.ok();) {
      Result<size_t> count = ReadBatch(reader.get(), &docs, &done);
      if (!count.ok()) {
        error = count.status();
        break;
      }
      if (*count == 0) break;
      error = AddBatch(std::span<const Document>(docs.data(), *count), columns);
    }
    columns->skipped = reader->skipped();
    columns->fallbacks = reader->fallbacks();
    return error;
  }

 private:
  Status AddBatch(std::span<const Document> docs, PartitionColumns* columns) {
    texts_.clear();
    for (const Document& doc : docs) texts_.push_back(doc.text);
    ComputeDocumentColumns(pass_, texts_, want_sets_, threads_, &facts_);
    if (want_sets_ && !pass_.uses_lsh()) ComputeSecondPassSets();
    for (size_t i = 0; i < docs.size(); ++i) {
      const Document& doc = docs[i];
      if (!facts_.status[i].ok()) {
        const Status& failure = facts_.status[i];
        if (reader_options_.strict) return failure.WithContext(rewrite_(doc.location));
        // Counted by the command's names (dedup.cc): markup-only texts as "no_features".
        ++columns->failed[Fingerprinter::IsNoFeatures(failure) ? "no_features"
                                                               : StatusCodeName(failure.code())];
        reader_options_.on_warning(doc.location + ": cannot fingerprint: " + failure.ToString());
        continue;
      }
      if (want_read_index_) {
        if (columns->read + i > UINT32_MAX) {
          return Status::ResourceExhausted("more than 4294967295 documents in a partition");
        }
        columns->read_index.push_back(static_cast<uint32_t>(columns->read + i));
      }
      AddDocument(doc, i, columns);
    }
    columns->read += docs.size();
    return Status::Ok();
  }

  // The sets (and, with the `edited` reason on, unit sets) the run's verification reads when the
  // pass has no LSH stage (RunDedup's second pass computes them so).
  void ComputeSecondPassSets() {
    second_sets_.assign(texts_.size(), {});
    second_units_.assign(want_units_ ? texts_.size() : 0, {});
    ParallelFor(
        texts_.size(), threads_,
        [&](size_t begin, size_t end) {
          std::vector<uint64_t> wide, units;
          for (size_t i = begin; i < end; ++i) {
            if (!facts_.status[i].ok()) continue;
            if (want_units_) {  // and the unit sets of the `edited` reason, from the same cut
              if (pass_.shingler().ShinglesAndUnits(texts_[i], &wide, &units).ok()) {
                ShingleSimilarity::Narrow(wide, &second_sets_[i]);
                ShingleSimilarity::NarrowUnits(units, &second_units_[i]);
              }
            } else if (pass_.shingler().Shingles(texts_[i], &wide).ok()) {
              ShingleSimilarity::Narrow(wide, &second_sets_[i]);
            }
          }
        },
        8);
  }

  // Document i of the batch, which has facts, appended to every column.
  void AddDocument(const Document& doc, size_t i, PartitionColumns* c) {
    if (doc.id == doc.location) {  // no id field: the place is the id
      const std::string id = rewrite_(doc.location);
      c->id_blob.insert(c->id_blob.end(), id.begin(), id.end());
    } else {
      c->id_blob.insert(c->id_blob.end(), doc.id.begin(), doc.id.end());
    }
    c->id_offsets.push_back(c->id_blob.size());
    c->lines.push_back(doc.line == 0 ? 0 : static_cast<uint64_t>(doc.line + rewrite_.shift));
    const Fingerprint& fp = facts_.fingerprints[i];
    c->hi.push_back(fp.hi);
    c->lo.push_back(fp.lo);
    c->text_bytes.push_back(doc.text.size());
    c->total_text_bytes += doc.text.size();
    c->normalized_bytes.push_back(facts_.normalized_bytes[i]);
    c->content_hash.push_back(facts_.content_hashes[i]);
    c->squeezed_hash.push_back(facts_.squeezed_hashes[i]);
    c->scores.push_back(doc.score ? *doc.score : std::nan(""));
    const int bands = pass_.bands();
    if (bands > 0) {
      c->has_keys.push_back(facts_.has_keys[i]);
      c->keys.insert(c->keys.end(), facts_.band_keys.begin() + i * bands,
                     facts_.band_keys.begin() + (i + 1) * bands);
    }
    if (want_sets_) {
      std::span<const uint32_t> set =
          pass_.uses_lsh()
              ? std::span<const uint32_t>(facts_.set_values.data() + facts_.set_offsets[i],
                                          facts_.set_offsets[i + 1] - facts_.set_offsets[i])
              : std::span<const uint32_t>(second_sets_[i]);
      EncodeShingleSet(set, &c->set_codes);
      c->set_offsets.push_back(c->set_codes.size());
      c->set_sizes.push_back(static_cast<uint32_t>(set.size()));
    }
    if (want_units_) {  // the pass's (from its one cut), or the second pass's
      std::span<const uint32_t> units =
          pass_.uses_lsh()
              ? std::span<const uint32_t>(facts_.unit_values.data() + facts_.unit_offsets[i],
                                          facts_.unit_offsets[i + 1] - facts_.unit_offsets[i])
              : std::span<const uint32_t>(second_units_[i]);
      EncodeShingleSet(units, &c->unit_codes, ShingleSimilarity::kUnitBits);
      c->unit_offsets.push_back(c->unit_codes.size());
    }
  }

  const DocumentPass& pass_;
  const DocumentReaderOptions& reader_options_;
  const PlaceRewriter& rewrite_;
  const bool want_sets_;
  const bool want_units_;
  const int threads_;
  const bool want_read_index_;
  // Reused from batch to batch.
  std::vector<std::string_view> texts_;
  DocumentColumns facts_;
  std::vector<std::vector<uint32_t>> second_sets_;   // without the LSH stage
  std::vector<std::vector<uint32_t>> second_units_;  // ... and their unit sets (edited on)
};

// A partition's records grouped by the shuffle partition (of `dests`) they go to.
struct PartitionRecords {
  std::vector<uint64_t> band_offsets;  // block (d, b) of the band records at [d * bands + b]
  std::string band_codes;
  std::vector<uint64_t> ws_offsets, ws_hashes, id_offsets, id_hashes;
  std::vector<uint32_t> ws_rows, id_rows;
};

// Band keys: a key goes to the partition of its range ((key * dests) >> 32, whatever the band);
// BandChunks packs the bands of a partition into as few blocks as fit 32 bits, each block an
// EncodeBandBlock (the distinct values in the one set codec, a bit per record and its row).
// Counting sort into blocks, then each block sorted in place and coded.
void GroupBandKeys(const PartitionColumns& c, int bands, uint32_t dests,
                   std::vector<uint64_t>* band_offsets, std::string* band_codes) {
  const size_t n = c.hi.size();
  const int row_bits = BitsFor(n == 0 ? 0 : n - 1);
  const size_t blocks = static_cast<size_t>(dests) * bands;
  const BandChunks chunks(dests, bands);
  std::vector<uint64_t> starts(blocks + 1, 0);
  std::vector<uint32_t> block_of(n * bands);
  for (size_t i = 0; i < n; ++i) {
    if (!c.has_keys[i]) continue;
    for (int b = 0; b < bands; ++b) {
      const uint32_t k = c.keys[i * bands + b];
      const uint32_t d = static_cast<uint32_t>((static_cast<uint64_t>(k) * dests) >> 32);
      block_of[i * bands + b] = d * bands + chunks.first_band(b);
      ++starts[block_of[i * bands + b] + 1];
    }
  }
  for (size_t j = 1; j <= blocks; ++j) starts[j] += starts[j - 1];
  std::vector<uint64_t> records(starts[blocks]);  // BandChunks value << 32 | row
  {
    std::vector<uint64_t> fill(starts.begin(), starts.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      if (!c.has_keys[i]) continue;
      for (int b = 0; b < bands; ++b) {
        const uint32_t k = c.keys[i * bands + b];
        const uint32_t d = static_cast<uint32_t>((static_cast<uint64_t>(k) * dests) >> 32);
        records[fill[block_of[i * bands + b]]++] =
            static_cast<uint64_t>(chunks.Value(d, b, k)) << 32 | i;
      }
    }
  }
  std::vector<uint64_t> scratch;
  for (size_t j = 0; j < blocks; ++j) {
    const std::span<uint64_t> block(records.data() + starts[j], starts[j + 1] - starts[j]);
    if (!block.empty()) {  // else no block (a band folded into its chunk's first, or no keys)
      SortBandRecords(block, &scratch);
      EncodeBandBlock(block, row_bits, band_codes);
    }
    (*band_offsets)[j + 1] = band_codes->size();
  }
}

// (hash, row) records grouped by the partition Route gives the hash: a counting sort, stable.
void GroupByRoute(const std::vector<uint64_t>& hashes, uint32_t dests,
                  std::vector<uint64_t>* offsets, std::vector<uint64_t>* out_hashes,
                  std::vector<uint32_t>* out_rows) {
  const size_t n = hashes.size();
  offsets->assign(dests + 1, 0);
  std::vector<uint32_t> dest(n);
  for (size_t i = 0; i < n; ++i) {
    dest[i] = Route(hashes[i], dests);
    ++(*offsets)[dest[i] + 1];
  }
  for (size_t j = 1; j < offsets->size(); ++j) (*offsets)[j] += (*offsets)[j - 1];
  std::vector<uint64_t> fill(offsets->begin(), offsets->end() - 1);
  out_hashes->resize(n);
  out_rows->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t at = fill[dest[i]]++;
    (*out_hashes)[at] = hashes[i];
    (*out_rows)[at] = static_cast<uint32_t>(i);
  }
}

// The band keys, whitespace-free hashes and id hashes grouped by shuffle partition (call without
// the GIL).
PartitionRecords GroupRecords(const PartitionColumns& c, int bands, uint32_t dests) {
  PartitionRecords r;
  r.band_offsets.assign(static_cast<size_t>(dests) * bands + 1, 0);
  if (bands > 0) GroupBandKeys(c, bands, dests, &r.band_offsets, &r.band_codes);
  GroupByRoute(c.squeezed_hash, dests, &r.ws_offsets, &r.ws_hashes, &r.ws_rows);
  const size_t n = c.hi.size();
  std::vector<uint64_t> id_hash(n);
  for (size_t i = 0; i < n; ++i) {
    id_hash[i] =
        XXH3_64bits(c.id_blob.data() + c.id_offsets[i], c.id_offsets[i + 1] - c.id_offsets[i]);
  }
  GroupByRoute(id_hash, dests, &r.id_offsets, &r.id_hashes, &r.id_rows);
  return r;
}

// The reader's counts as _dask_read returns them.
py::dict CountsDict(const PartitionColumns& c, const std::vector<std::string>& warnings,
                    uint64_t warning_count) {
  py::dict counts;
  counts["documents"] = c.hi.size();
  counts["read"] = c.read;
  counts["text_bytes"] = c.total_text_bytes;
  py::dict skipped_dict, fallback_dict, failed_dict;
  for (const auto& [reason, count] : c.skipped) AddCount(&skipped_dict, reason, count);
  for (const auto& [reason, count] : c.fallbacks) AddCount(&fallback_dict, reason, count);
  for (const auto& [code, count] : c.failed) AddCount(&failed_dict, code, count);
  counts["skipped"] = skipped_dict;
  counts["fallbacks"] = fallback_dict;
  counts["failed"] = failed_dict;
  counts["warnings"] = warnings;
  counts["warning_count"] = warning_count;
  return counts;
}

// The columns and records as NumPy arrays that own them (no copies but the two byte strings).
py::dict PartitionDict(PartitionColumns&& c, PartitionRecords&& r) {
  const size_t n = c.hi.size();
  py::dict out;
  out["id_blob"] = Take(std::move(c.id_blob));
  out["id_offsets"] = Take(std::move(c.id_offsets));
  out["line"] = Take(std::move(c.lines));
  out["hi"] = Take(std::move(c.hi));
  out["lo"] = Take(std::move(c.lo));
  out["text_bytes"] = Take(std::move(c.text_bytes));
  out["normalized_bytes"] = Take(std::move(c.normalized_bytes));
  out["content_hash"] = Take(std::move(c.content_hash));
  out["squeezed_hash"] = Take(std::move(c.squeezed_hash));
  out["score"] = Take(std::move(c.scores));
  out["set_offsets"] = Take(std::move(c.set_offsets));
  out["set_codes"] = Take(std::vector<uint8_t>(c.set_codes.begin(), c.set_codes.end()));
  out["set_sizes"] = Take(std::move(c.set_sizes));
  out["unit_offsets"] = Take(std::move(c.unit_offsets));
  out["unit_codes"] = Take(std::vector<uint8_t>(c.unit_codes.begin(), c.unit_codes.end()));
  out["read_index"] = Take(std::move(c.read_index));
  out["band_offsets"] = Take(std::move(r.band_offsets));
  out["band_codes"] = Take(std::vector<uint8_t>(r.band_codes.begin(), r.band_codes.end()));
  out["row_bits"] = BitsFor(n == 0 ? 0 : n - 1);
  out["ws_offsets"] = Take(std::move(r.ws_offsets));
  out["ws_hashes"] = Take(std::move(r.ws_hashes));
  out["ws_rows"] = Take(std::move(r.ws_rows));
  out["idh_offsets"] = Take(std::move(r.id_offsets));
  out["idh_hashes"] = Take(std::move(r.id_hashes));
  out["idh_rows"] = Take(std::move(r.id_rows));
  return out;
}

// One partition's documents and their per-document facts.
//
// source: {"name": how places show the input, "path": file to read (None for "data"), "data":
//          JSONL bytes (a DataFrame partition) or None, "start"/"end": byte range of "path"
//          (end < 0: the whole file, compressed or not), "first_line": the range's first line
//          number in the file, "line_shift": added to the reader's line numbers instead (for
//          "data": -1 gives 0-based rows)}
// Returns the columns (ids as a UTF-8 blob with offsets), the band key / whitespace hash / id
// hash records grouped by shuffle partition (`dests` of them; block (d, b) of the band records
// at offsets[d * bands + b]), the reader's counts and the (rewritten) warnings.
py::dict ReadPartition(const py::dict& source, const py::dict& kwargs, const std::string& key,
                       uint32_t dests, int threads, size_t max_warnings) {
  std::shared_ptr<const DocumentPass> pass = PassFor(kwargs, key);
  const DedupOptions& options = pass->options();
  if (dests == 0) throw py::value_error("dests must be positive");
  DocumentReaderOptions reader_options = options.reader;
  if (options.keep == KeepPolicy::kField) reader_options.score_field = options.keep_field;
  const PartitionInput in = OpenInput(source, &reader_options);
  const PlaceRewriter& rewrite = in.rewrite;
  auto warnings = std::make_shared<std::vector<std::string>>();
  auto warning_count = std::make_shared<uint64_t>(0);
  reader_options.on_warning = [warnings, warning_count, rewrite,
                               max_warnings](const std::string& message) {
    ++*warning_count;
    if (warnings->size() < max_warnings) warnings->push_back(rewrite(message));
  };
  const bool want_sets = ResolveVerifyThreshold(options) > 0;
  // The unit sets only when the pair rule's `edited` reason is on (no cost otherwise).
  const bool want_units = want_sets && ResolvePairRule(options).edited_threshold > 0;
  // The documents' reading numbers only when boilerplate weights are counted (UsesBoilerplate).
  const bool want_read_index = want_sets && pass->uses_lsh() && options.boilerplate;

  PartitionColumns columns;
  Status error;
  {
    py::gil_scoped_release release;
    error = PartitionReader(*pass, reader_options, rewrite, want_sets, want_units, threads,
                            want_read_index)
                .Read(in.input, &columns);
  }
  if (!error.ok()) ThrowStatus(Status(error.code(), rewrite(error.message())));
  const size_t n = columns.hi.size();
  if (!want_sets) {
    columns.set_offsets.assign(n + 1, 0);
    columns.set_sizes.assign(n, 0);
  }
  if (!want_units) columns.unit_offsets.assign(n + 1, 0);
  PartitionRecords records;
  {
    py::gil_scoped_release release;
    records = GroupRecords(columns, pass->bands(), dests);
  }
  py::dict counts = CountsDict(columns, *warnings, *warning_count);
  py::dict out = PartitionDict(std::move(columns), std::move(records));
  out["counts"] = counts;
  return out;
}

// Sorted (key, document) records: the ranges of equal keys.
template <typename Fn>
void ForEachGroup(std::vector<std::pair<uint64_t, uint64_t>>& records, Fn fn) {
  std::sort(records.begin(), records.end());
  for (size_t begin = 0; begin < records.size();) {
    size_t end = begin + 1;
    while (end < records.size() && records[end].first == records[begin].first) ++end;
    fn(begin, end);
    begin = end;
  }
}

// The documents whose hash is shared with another document (sorted), and for each the first
// document of its hash (to compare the ids themselves: hashes may collide).
py::tuple SharedOf(py::handle hash_array, py::handle doc_array) {
  View<uint64_t> hashes(hash_array), docs(doc_array);
  if (hashes.size() != docs.size()) throw py::value_error("hash and doc sizes differ");
  std::vector<uint64_t> shared, group_first;
  {
    py::gil_scoped_release release;
    std::vector<std::pair<uint64_t, uint64_t>> records(hashes.size());
    for (size_t i = 0; i < records.size(); ++i) records[i] = {hashes[i], docs[i]};
    ForEachGroup(records, [&](size_t begin, size_t end) {
      if (end - begin < 2) return;
      for (size_t i = begin; i < end; ++i) {
        shared.push_back(records[i].second);
        group_first.push_back(records[begin].second);
      }
    });
  }
  return py::make_tuple(Take(std::move(shared)), Take(std::move(group_first)));
}

// The facts of document x the pair rule reads from hashes (no shingles).
PairDocument HashFacts(const View<uint64_t>& content, const View<uint64_t>& bytes,
                       const View<uint64_t>& squeezed, uint32_t x) {
  return PairDocument{content[x], bytes[x], squeezed[x], {}, std::nullopt};
}

// The candidate pairs (a, b: document indices into the per-document columns) and the columns
// the pair rule reads from hashes, checked.
struct PairColumns {
  View<uint32_t> a, b, sizes;
  View<uint64_t> content, bytes, squeezed;
  PairColumns(py::handle a_array, py::handle b_array, py::handle content_array,
              py::handle bytes_array, py::handle squeezed_array, py::handle sizes_array)
      : a(a_array),
        b(b_array),
        sizes(sizes_array),
        content(content_array),
        bytes(bytes_array),
        squeezed(squeezed_array) {
    const size_t n = content.size();
    if (b.size() != a.size()) throw py::value_error("a and b sizes differ");
    if (bytes.size() != n || squeezed.size() != n || sizes.size() != n) {
      throw py::value_error("document columns of different sizes");
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] >= n || b[i] >= n) throw py::value_error("pair names a document out of range");
    }
  }
};

// The summary's similarity histogram measures the exact Jaccard of a sample of the rejected
// pairs, chosen as dedup chooses it: by a hash of the pair (a << 32 | b, in the run's document
// numbers); the pair is measured at sample rate 2^-level when the hash's lowest `level` bits are
// zero. Returns that count of trailing zero bits (64 for a zero hash).
int SampleLevel(const View<uint64_t>& canonical, uint32_t x, uint32_t y) {
  const uint64_t a = std::min(canonical[x], canonical[y]), b = std::max(canonical[x], canonical[y]);
  const uint64_t packed = a << 32 | b;
  return std::countr_zero(static_cast<uint64_t>(XXH3_64bits(&packed, sizeof(packed))));
}

// Whether a pair's hashes settle it (exact or whitespace duplicates): only those reasons are taken
// from a decision without shingles (with verification off, threshold 0, it would call every pair
// a near_duplicate of similarity 0).
bool ByHashes(const PairDecision& decision) {
  return decision.reason == DuplicateReason::kExact ||
         decision.reason == DuplicateReason::kWhitespace;
}

// Whether each candidate pair needs its shingle sets, as dedup's verification decides: not when
// the pair rule settles it from the hashes (exact or whitespace duplicates), nor when
// verification is off, nor when its set sizes rule out every reason of the rule -- unless the
// pair is in the histogram's sample at `level` (SampleLevel; canonical: the run's document
// number of each document).
py::array_t<bool> NeedsShingles(py::handle a_array, py::handle b_array, py::handle content_array,
                                py::handle bytes_array, py::handle squeezed_array,
                                py::handle sizes_array, py::handle canonical_array, int level,
                                const py::dict& kwargs, const std::string& key,
                                const std::string& frequencies) {
  PairColumns c(a_array, b_array, content_array, bytes_array, squeezed_array, sizes_array);
  View<uint64_t> canonical(canonical_array);
  if (canonical.size() != c.content.size()) throw py::value_error("canonical of a different size");
  const std::shared_ptr<const PairRule> rule = RuleFor(kwargs, key, frequencies);
  const bool verify = rule->options().jaccard_threshold > 0;
  py::array_t<bool> out(static_cast<py::ssize_t>(c.a.size()));
  bool* need = out.mutable_data();
  for (size_t i = 0; i < c.a.size(); ++i) {
    const uint32_t x = c.a[i], y = c.b[i];
    need[i] =
        verify &&
        !ByHashes(rule->Decide(HashFacts(c.content, c.bytes, c.squeezed, x),
                               HashFacts(c.content, c.bytes, c.squeezed, y))) &&
        (rule->MayAcceptBySizes(c.sizes[x], c.sizes[y]) || SampleLevel(canonical, x, y) >= level);
  }
  return out;
}

// THE pair rule over candidate pairs, as dedup's verification applies it: exact and whitespace
// duplicates from the hashes; with verification on, the others by their narrowed shingle sets
// (set_offsets (n + 1) / set_values; a pair NeedsShingles rules out may have empty sets: its
// sizes decide it); with verification off, every other pair is a near_duplicate of similarity -1.
// Returns (similarity f64, reason u8 = DuplicateReason; 0: not duplicates, measured f64: the
// exact Jaccard of a rejected pair in the histogram's sample at `level` (see NeedsShingles), else
// -1, sample_level u8: its SampleLevel). With the rule's `edited` reason on, unit_offsets /
// unit_values give the documents' narrowed unit sets the same way (required then).
py::tuple VerifyPairs(py::handle a_array, py::handle b_array, py::handle content_array,
                      py::handle bytes_array, py::handle squeezed_array, py::handle sizes_array,
                      py::handle set_offsets_array, py::handle set_values_array,
                      py::handle canonical_array, int level, const py::dict& kwargs,
                      const std::string& key, int threads, py::handle unit_offsets_array,
                      py::handle unit_values_array, const std::string& frequencies) {
  PairColumns c(a_array, b_array, content_array, bytes_array, squeezed_array, sizes_array);
  View<uint64_t> canonical(canonical_array);
  if (canonical.size() != c.content.size()) throw py::value_error("canonical of a different size");
  View<uint64_t> set_offsets(set_offsets_array);
  View<uint32_t> set_values(set_values_array);
  const size_t n = c.content.size();
  const std::shared_ptr<const PairRule> rule = RuleFor(kwargs, key, frequencies);
  const bool verify = rule->options().jaccard_threshold > 0;
  const bool units = verify && rule->options().edited_threshold > 0;
  if (units && (unit_offsets_array.is_none() || unit_values_array.is_none())) {
    throw py::value_error("the edited reason needs unit_offsets and unit_values");
  }
  View<uint64_t> unit_offsets(units ? unit_offsets_array : set_offsets_array);
  View<uint32_t> unit_values(units ? unit_values_array : set_values_array);
  if (verify) {
    for (const auto& [offsets, values] :
         {std::pair{&set_offsets, &set_values}, std::pair{&unit_offsets, &unit_values}}) {
      if (offsets->size() != n + 1) throw py::value_error("set offsets of a different size");
      for (size_t i = 0; i < n; ++i) {
        if ((*offsets)[i + 1] < (*offsets)[i] || (*offsets)[i + 1] > values->size()) {
          throw py::value_error("set offsets out of range");
        }
      }
    }
  }
  std::vector<double> similarity(c.a.size(), -1), measured(c.a.size(), -1);
  std::vector<uint8_t> reason(c.a.size(), 0), sample_level(c.a.size(), 0);
  // With boilerplate weights, each document's weighted size, computed once (-1: not yet).
  std::unique_ptr<std::atomic<double>[]> weight_of;
  if (verify && rule->weighted() && n > 0) {
    weight_of = std::make_unique<std::atomic<double>[]>(n);
    for (size_t d = 0; d < n; ++d) weight_of[d].store(-1, std::memory_order_relaxed);
  }
  auto WeightOf = [&](uint32_t d, std::span<const uint32_t> set) {
    double w = weight_of[d].load(std::memory_order_relaxed);
    if (w < 0) {
      w = rule->Weight(set);
      weight_of[d].store(w, std::memory_order_relaxed);
    }
    return w;
  };
  {
    py::gil_scoped_release release;
    ParallelFor(
        c.a.size(), threads,
        [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) {
            const uint32_t x = c.a[i], y = c.b[i];
            PairDocument doc_x = HashFacts(c.content, c.bytes, c.squeezed, x);
            PairDocument doc_y = HashFacts(c.content, c.bytes, c.squeezed, y);
            const PairDecision by_hashes = rule->Decide(doc_x, doc_y);
            if (ByHashes(by_hashes)) {
              similarity[i] = by_hashes.similarity;
              reason[i] = static_cast<uint8_t>(by_hashes.reason);
              continue;
            }
            if (!verify) {
              reason[i] = static_cast<uint8_t>(DuplicateReason::kNearDuplicate);
              continue;
            }
            similarity[i] = 0;
            const int sampled = SampleLevel(canonical, x, y);
            sample_level[i] = static_cast<uint8_t>(sampled);
            const bool reachable = rule->MayAcceptBySizes(c.sizes[x], c.sizes[y]);
            if (!reachable && sampled < level) continue;  // sets not read: rejected, unmeasured
            doc_x.shingles = std::span<const uint32_t>(set_values.data() + set_offsets[x],
                                                       set_offsets[x + 1] - set_offsets[x]);
            doc_y.shingles = std::span<const uint32_t>(set_values.data() + set_offsets[y],
                                                       set_offsets[y + 1] - set_offsets[y]);
            if (units) {
              doc_x.units = std::span<const uint32_t>(unit_values.data() + unit_offsets[x],
                                                      unit_offsets[x + 1] - unit_offsets[x]);
              doc_y.units = std::span<const uint32_t>(unit_values.data() + unit_offsets[y],
                                                      unit_offsets[y + 1] - unit_offsets[y]);
            }
            if (weight_of && reachable) {  // as dedup: the plain floor first, then the weights
              if (!rule->PassesPlainFloor(doc_x, doc_y)) {
                if (sampled >= level) measured[i] = Jaccard32(doc_x.shingles, doc_y.shingles);
                continue;
              }
              doc_x.weight = WeightOf(x, doc_x.shingles);
              doc_y.weight = WeightOf(y, doc_y.shingles);
            }
            const PairDecision decision =
                reachable ? rule->DecideFast(doc_x, doc_y) : PairDecision{};
            similarity[i] = decision.similarity;
            reason[i] = static_cast<uint8_t>(decision.reason);
            if (!decision.duplicate() && sampled >= level) {
              measured[i] = Jaccard32(doc_x.shingles, doc_y.shingles);
            }
          }
        },
        256);
  }
  return py::make_tuple(Take(std::move(similarity)), Take(std::move(reason)),
                        Take(std::move(measured)), Take(std::move(sample_level)));
}

// Hamming distances of fingerprints (hi, lo) a[i] and b[i].
py::array_t<int32_t> Distances(py::handle hi_a_array, py::handle lo_a_array, py::handle hi_b_array,
                               py::handle lo_b_array, int bits) {
  View<uint64_t> hi_a(hi_a_array), lo_a(lo_a_array), hi_b(hi_b_array), lo_b(lo_b_array);
  const size_t n = lo_a.size();
  if (hi_a.size() != n || hi_b.size() != n || lo_b.size() != n) {
    throw py::value_error("sizes differ");
  }
  std::vector<int32_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] =
        HammingDistance(Fingerprint{hi_a[i], lo_a[i], bits}, Fingerprint{hi_b[i], lo_b[i], bits});
  }
  return Take(std::move(out));
}

// Rows of a UTF-8 blob with offsets, as Python strings.
py::list GatherStrings(py::handle offsets_array, py::handle blob_array, py::handle rows_array) {
  View<uint64_t> offsets(offsets_array), rows(rows_array);
  View<uint8_t> blob(blob_array);
  const size_t n = offsets.size() == 0 ? 0 : offsets.size() - 1;
  py::list out;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= n || offsets[rows[i]] > offsets[rows[i] + 1] ||
        offsets[rows[i] + 1] > blob.size()) {
      throw py::value_error("row out of range");
    }
    const char* data = reinterpret_cast<const char*>(blob.data()) + offsets[rows[i]];
    out.append(py::str(data, offsets[rows[i] + 1] - offsets[rows[i]]));
  }
  return out;
}

// BuildClusters over documents [0, n) (their facts) and accepted pairs (a, b indices, distance,
// similarity, pair_reason: DuplicateReason). Returns per document: kept (its cluster's kept
// document, or -1 outside any cluster), via (-1 for kept ones), distance_to_kept,
// distance_to_via, similarity_to_via, reason (index into the returned list of reason names;
// 0 = "kept"), via_reason (the pair rule's reason for (via, document): DuplicateReason).
py::tuple Clusters(py::handle hi_array, py::handle lo_array, int bits, py::handle bytes_array,
                   py::handle normalized_array, py::handle content_array, py::handle score_array,
                   py::handle a_array, py::handle b_array, py::handle distance_array,
                   py::handle similarity_array, py::handle pair_reason_array,
                   const std::string& keep) {
  KeepPolicy policy;
  std::string field;
  Status parsed = ParseKeepPolicy(keep, &policy, &field);
  if (!parsed.ok()) ThrowStatus(parsed);
  View<uint64_t> hi(hi_array), lo(lo_array), bytes(bytes_array), normalized(normalized_array),
      content(content_array);
  View<double> score(score_array), similarity(similarity_array);
  View<uint32_t> a(a_array), b(b_array);
  View<int32_t> distance(distance_array);
  View<uint8_t> pair_reason(pair_reason_array);
  const size_t n = lo.size();
  if (hi.size() != n || bytes.size() != n || normalized.size() != n || content.size() != n ||
      score.size() != n) {
    throw py::value_error("document columns of different sizes");
  }
  if (b.size() != a.size() || distance.size() != a.size() || similarity.size() != a.size() ||
      pair_reason.size() != a.size()) {
    throw py::value_error("pair columns of different sizes");
  }
  std::vector<DedupDocument> documents(n);
  for (size_t i = 0; i < n; ++i) {
    documents[i].fingerprint = Fingerprint{hi[i], lo[i], bits};
    documents[i].text_bytes = bytes[i];
    documents[i].normalized_bytes = normalized[i];
    documents[i].content_hash = content[i];
    if (!std::isnan(score[i])) documents[i].score = score[i];
  }
  std::vector<DuplicatePair> pairs(a.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (a[i] >= n || b[i] >= n) throw py::value_error("pair names a document out of range");
    if (pair_reason[i] == 0 || pair_reason[i] > static_cast<uint8_t>(DuplicateReason::kEdited)) {
      throw py::value_error("pair reason out of range");
    }
    pairs[i] = {
        a[i], b[i], distance[i],
        similarity[i] >= 0 ? std::optional<double>(similarity[i]) : std::nullopt,  // -1: unset
        static_cast<DuplicateReason>(pair_reason[i])};
  }
  std::vector<int64_t> kept(n, -1), via(n, -1);
  std::vector<int32_t> to_kept(n, 0), to_via(n, 0);
  std::vector<double> sim_via(n, -1);
  std::vector<uint8_t> reason(n, 0), via_reason(n, 0);
  std::vector<std::string> reasons{"kept"};
  {
    py::gil_scoped_release release;
    std::vector<DedupCluster> clusters;
    std::vector<bool> removed;
    BuildClusters(documents, pairs, policy, &clusters, &removed);
    for (const DedupCluster& cluster : clusters) {
      kept[cluster.kept] = cluster.kept;
      for (const ClusterMember& m : cluster.removed) {
        kept[m.document] = cluster.kept;
        via[m.document] = m.via;
        to_kept[m.document] = m.distance_to_kept;
        to_via[m.document] = m.distance_to_via;
        sim_via[m.document] = m.similarity_to_via.value_or(-1);
        auto it = std::find(reasons.begin(), reasons.end(), m.reason);
        if (it == reasons.end()) it = reasons.insert(reasons.end(), m.reason);
        reason[m.document] = static_cast<uint8_t>(it - reasons.begin());
        via_reason[m.document] = static_cast<uint8_t>(m.via_reason);
      }
    }
  }
  return py::make_tuple(Take(std::move(kept)), Take(std::move(via)), Take(std::move(to_kept)),
                        Take(std::move(to_via)), Take(std::move(sim_via)), Take(std::move(reason)),
                        reasons, Take(std::move(via_reason)));
}

// clusters.jsonl lines of clusters given as arrays, written by the library's serializer:
//   per document (members of the clusters): id (UTF-8 blob + offsets), location, text_bytes,
//   hi, lo; per cluster (in order): cluster number, kept document, and its removed members
//   [member_offsets[c], member_offsets[c + 1]) of member, distance, via, distance_to_via,
//   similarity_to_via, reason (index into `reasons`), via_reason (DuplicateReason).
py::bytes ClusterLines(py::handle id_offsets_array, py::handle id_blob_array,
                       py::handle location_offsets_array, py::handle location_blob_array,
                       py::handle bytes_array, py::handle hi_array, py::handle lo_array, int bits,
                       py::handle cluster_array, py::handle kept_array,
                       py::handle member_offsets_array, py::handle member_array,
                       py::handle distance_array, py::handle via_array,
                       py::handle distance_to_via_array, py::handle similarity_array,
                       py::handle reason_array, const std::vector<std::string>& reasons,
                       py::handle via_reason_array) {
  View<uint64_t> id_offsets(id_offsets_array), location_offsets(location_offsets_array),
      bytes(bytes_array), hi(hi_array), lo(lo_array), cluster(cluster_array),
      member_offsets(member_offsets_array);
  View<uint8_t> id_blob(id_blob_array), location_blob(location_blob_array), reason(reason_array),
      via_reason(via_reason_array);
  View<uint32_t> kept(kept_array), member(member_array), via(via_array);
  View<int32_t> distance(distance_array), distance_to_via(distance_to_via_array);
  View<double> similarity(similarity_array);
  const size_t n = bytes.size();
  if (id_offsets.size() != n + 1 || location_offsets.size() != n + 1 || hi.size() != n ||
      lo.size() != n) {
    throw py::value_error("document columns of different sizes");
  }
  if (kept.size() != cluster.size() || member_offsets.size() != cluster.size() + 1 ||
      member_offsets[cluster.size()] != member.size() || via_reason.size() != member.size()) {
    throw py::value_error("cluster columns of different sizes");
  }
  auto text = [](const View<uint8_t>& blob, const View<uint64_t>& offsets, size_t i) {
    if (offsets[i] > offsets[i + 1] || offsets[i + 1] > blob.size()) {
      throw py::value_error("string offsets out of range");
    }
    return std::string(reinterpret_cast<const char*>(blob.data()) + offsets[i],
                       offsets[i + 1] - offsets[i]);
  };
  DedupReport report;
  report.documents.resize(n);
  report.input_files.resize(n);
  for (size_t i = 0; i < n; ++i) {
    DedupDocument& doc = report.documents[i];
    doc.id = text(id_blob, id_offsets, i);
    doc.text_bytes = bytes[i];
    doc.fingerprint = Fingerprint{hi[i], lo[i], bits};
    doc.file_index = static_cast<uint32_t>(i);  // the location is the whole "file" name
    report.input_files[i] = text(location_blob, location_offsets, i);
  }
  for (size_t c = 0; c < cluster.size(); ++c) {
    DedupCluster entry;
    entry.cluster_id = cluster[c];
    entry.kept = kept[c];
    for (uint64_t m = member_offsets[c]; m < member_offsets[c + 1]; ++m) {
      if (member[m] >= n || via[m] >= n || reason[m] >= reasons.size() || kept[c] >= n ||
          via_reason[m] > static_cast<uint8_t>(DuplicateReason::kEdited)) {
        throw py::value_error("cluster member out of range");
      }
      ClusterMember cm;
      cm.document = member[m];
      cm.distance_to_kept = distance[m];
      cm.via = via[m];
      cm.distance_to_via = distance_to_via[m];
      if (similarity[m] >= 0) cm.similarity_to_via = similarity[m];  // -1: unset
      cm.reason = reasons[reason[m]];
      cm.via_reason = static_cast<DuplicateReason>(via_reason[m]);
      entry.removed.push_back(std::move(cm));
    }
    report.clusters.push_back(std::move(entry));
  }
  std::string out = DedupClusterLines(report);
  return py::bytes(out);
}

// The documents of one partition as Python lists (ids, texts, locations), read as _dask_read
// reads them: the rows of neardup.dask.read_jsonl's DataFrame.
py::dict ReadDocuments(const py::dict& source, const py::dict& kwargs) {
  DedupOptions options = DedupOptionsFromKeywords(kwargs);
  DocumentReaderOptions reader_options = options.reader;
  PartitionInput in = OpenInput(source, &reader_options);
  auto warnings = std::make_shared<std::vector<std::string>>();
  const PlaceRewriter rewrite = in.rewrite;
  reader_options.on_warning = [warnings, rewrite](const std::string& message) {
    if (warnings->size() < 1000) warnings->push_back(rewrite(message));
  };
  std::vector<Document> docs;
  Status error;
  {
    py::gil_scoped_release release;
    auto opened = DocumentReader::Open({in.input}, reader_options);
    if (!opened.ok()) {
      error = opened.status();
    } else {
      Document doc;
      for (;;) {
        Result<bool> got = (*opened)->Next(&doc);
        if (!got.ok()) {
          error = got.status();
          break;
        }
        if (!*got) break;
        docs.push_back(std::move(doc));
      }
    }
  }
  if (!error.ok()) ThrowStatus(Status(error.code(), rewrite(error.message())));
  py::list ids, texts, locations;
  for (const Document& doc : docs) {
    const std::string location = rewrite(doc.location);
    ids.append(py::str(doc.id == doc.location ? location : doc.id));
    texts.append(py::str(doc.text));
    locations.append(py::str(location));
  }
  py::dict out;
  out["ids"] = ids;
  out["texts"] = texts;
  out["locations"] = locations;
  out["warnings"] = *warnings;
  return out;
}

// The input files of `inputs` (files and directories) in the reader's canonical order, as the
// reader names them (what `neardup dedup` lists in its locations).
std::vector<std::string> ExpandInputs(const std::vector<std::string>& inputs) {
  Result<std::unique_ptr<DocumentReader>> reader = Status::Internal("unset");
  {
    py::gil_scoped_release release;
    reader = DocumentReader::Open(inputs, DocumentReaderOptions());
  }
  if (!reader.ok()) ThrowStatus(reader.status());
  return (*reader)->files();
}

// Connected components of pairs (the library's union-find): the distinct documents (sorted) and
// the smallest document of each one's component.
py::tuple Components(py::handle a_array, py::handle b_array) {
  View<uint64_t> a(a_array), b(b_array);
  if (b.size() != a.size()) throw py::value_error("a and b sizes differ");
  std::vector<uint64_t> nodes, labels;
  {
    py::gil_scoped_release release;
    std::vector<NeighborPair> pairs(a.size());
    for (size_t i = 0; i < a.size(); ++i) pairs[i] = {a[i], b[i], 0};
    for (const ClusterAssignment& c : ConnectedComponents({}, pairs)) {
      nodes.push_back(c.id);
      labels.push_back(c.component);
    }
  }
  return py::make_tuple(Take(std::move(nodes)), Take(std::move(labels)));
}

// summary.json of `neardup dedup` with the options of `kwargs`, from counts (the library's
// serializer; the counts that it derives from the documents, pairs and clusters of a report are
// given by the caller, which has none of them in memory).
std::string SummaryJson(const py::dict& kwargs, const py::dict& counts) {
  DedupOptions options = DedupOptionsFromKeywords(kwargs);
  DedupReport report;
  const bool use_lsh = options.candidates != DedupOptions::Candidates::kSimHash;
  const bool use_simhash = options.candidates != DedupOptions::Candidates::kLsh;
  if (use_lsh) {
    Result<MinHashLshOptions> lsh = ResolveDedupLsh(options);
    if (!lsh.ok()) ThrowStatus(lsh.status());
    report.lsh = *lsh->parameters;
  }
  if (use_simhash) report.k = options.k;
  report.verify_threshold = std::max(0.0, ResolveVerifyThreshold(options));
  report.rule = ResolvePairRule(options);
  if (counts.contains("boilerplate") && !counts["boilerplate"].is_none()) {
    py::dict boilerplate = counts["boilerplate"];
    report.boilerplate = true;
    report.boilerplate_documents = py::cast<uint32_t>(boilerplate["documents"]);
    report.boilerplate_sketch_bytes = py::cast<uint64_t>(boilerplate["sketch_bytes"]);
    report.boilerplate_counted_every = py::cast<uint32_t>(boilerplate["sample_every"]);
  }
  for (auto [key, value] : py::cast<py::dict>(counts["pairs_by_reason"])) {
    report.pairs_by_reason[py::cast<std::string>(key)] = py::cast<uint64_t>(value);
  }
  for (auto [key, value] : py::cast<py::dict>(counts["skipped"])) {
    report.skipped[py::cast<std::string>(key)] = py::cast<uint64_t>(value);
  }
  for (auto [key, value] : py::cast<py::dict>(counts["fallbacks"])) {
    report.fallbacks[py::cast<std::string>(key)] = py::cast<uint64_t>(value);
  }
  for (auto [key, value] : py::cast<py::dict>(counts["failed"])) {
    report.failed[py::cast<std::string>(key)] = py::cast<uint64_t>(value);
  }
  if (!counts["histogram"].is_none()) {  // with verification on
    py::dict h = counts["histogram"];
    SimilarityHistogram& histogram = report.similarity_histogram;
    histogram.accepted = py::cast<std::vector<uint64_t>>(h["accepted"]);
    histogram.rejected = py::cast<std::vector<uint64_t>>(h["rejected"]);
    if (histogram.accepted.size() != SimilarityHistogram::kBins ||
        histogram.rejected.size() != SimilarityHistogram::kBins) {
      throw py::value_error("histogram bins");
    }
    histogram.rejected_pairs = py::cast<uint64_t>(h["rejected_pairs"]);
    histogram.rejected_measured = py::cast<uint64_t>(h["rejected_measured"]);
    histogram.rejected_sample_every = py::cast<uint64_t>(h["rejected_sample_every"]);
  }
  report.duplicate_ids = py::cast<uint64_t>(counts["duplicate_ids"]);
  report.text_bytes = py::cast<uint64_t>(counts["text_bytes"]);
  report.candidate_pairs = py::cast<uint64_t>(counts["candidate_pairs"]);
  report.lsh_candidate_pairs = py::cast<uint64_t>(counts["lsh_candidate_pairs"]);
  report.simhash_candidate_pairs = py::cast<uint64_t>(counts["simhash_candidate_pairs"]);
  report.simhash_only_candidate_pairs = py::cast<uint64_t>(counts["simhash_only_candidate_pairs"]);
  report.simhash_only_accepted_pairs = py::cast<uint64_t>(counts["simhash_only_accepted_pairs"]);
  py::dict lsh = counts["lsh_buckets"];
  report.lsh_stats.records = py::cast<uint64_t>(lsh["records"]);
  report.lsh_stats.buckets = py::cast<uint64_t>(lsh["buckets"]);
  report.lsh_stats.oversized_buckets = py::cast<uint64_t>(lsh["oversized"]);
  report.lsh_stats.largest_bucket = py::cast<uint64_t>(lsh["largest"]);
  report.lsh_stats.bucket_pairs = py::cast<uint64_t>(lsh["pairs_before_dedup"]);
  report.spilled = true;
  report.spill_peak_bytes = py::cast<uint64_t>(counts["spill_bytes"]);
  for (py::handle stage : py::cast<py::list>(counts["stages"])) {
    py::tuple t = py::cast<py::tuple>(stage);
    report.stages.push_back(
        {py::cast<std::string>(t[0]), py::cast<double>(t[1]), py::cast<uint64_t>(t[2]), 0});
  }
  report.total_seconds = py::cast<double>(counts["total_seconds"]);
  report.input_files = py::cast<std::vector<std::string>>(counts["input_files"]);
  return DedupSummaryJson(report, &options);
}

// Writes `path` (through a temporary name renamed into place): IoError naming it on failure.
Status WriteWhole(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  FILE* file = std::fopen(tmp.c_str(), "wb");
  bool ok = file != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  if (file != nullptr && std::fclose(file) != 0) ok = false;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::IoError(path + ": cannot write: " + error);
  }
  return Status::Ok();
}

// One partition's keep.txt and remove.txt parts (one id a line, in input order) and, unless
// `decisions_path` is empty, its decisions part (JSONL {"id", "keep"}). The ids are the blob's,
// but rows `renamed_rows` (ascending) take `renamed_ids` (shared ids named apart).
py::tuple WriteIdParts(py::handle offsets_array, py::handle blob_array, py::handle remove_array,
                       py::handle renamed_rows_array, const std::vector<std::string>& renamed_ids,
                       const std::string& keep_path, const std::string& remove_path,
                       const std::string& decisions_path) {
  View<uint64_t> offsets(offsets_array), renamed_rows(renamed_rows_array);
  View<uint8_t> blob(blob_array), remove(remove_array);
  const size_t n = remove.size();
  if (offsets.size() != n + 1 || renamed_rows.size() != renamed_ids.size()) {
    throw py::value_error("sizes differ");
  }
  for (size_t i = 0; i < n; ++i) {
    if (offsets[i] > offsets[i + 1] || offsets[i + 1] > blob.size()) {
      throw py::value_error("id offsets out of range");
    }
  }
  for (size_t i = 0; i < renamed_rows.size(); ++i) {
    if (renamed_rows[i] >= n || (i > 0 && renamed_rows[i] <= renamed_rows[i - 1])) {
      throw py::value_error("renamed rows must be ascending rows");
    }
  }
  uint64_t kept = 0, removed = 0;
  Status written;
  {
    py::gil_scoped_release release;
    std::string keep_out, remove_out, decisions_out;
    size_t next = 0;
    for (size_t i = 0; i < n; ++i) {
      std::string_view id(reinterpret_cast<const char*>(blob.data()) + offsets[i],
                          offsets[i + 1] - offsets[i]);
      if (next < renamed_rows.size() && renamed_rows[next] == i) id = renamed_ids[next++];
      AppendIdLine(id, remove[i] ? &remove_out : &keep_out);
      (remove[i] ? removed : kept) += 1;
      if (!decisions_path.empty()) {
        decisions_out += "{\"id\":";
        AppendJsonString(id, &decisions_out);
        decisions_out += remove[i] ? ",\"keep\":false}\n" : ",\"keep\":true}\n";
      }
    }
    written = WriteWhole(keep_path, keep_out);
    if (written.ok()) written = WriteWhole(remove_path, remove_out);
    if (written.ok() && !decisions_path.empty()) {
      written = WriteWhole(decisions_path, decisions_out);
    }
  }
  if (!written.ok()) ThrowStatus(written);
  return py::make_tuple(kept, removed);
}

// The band-key records of shuffle partition `dest` from every source partition's coded blocks:
// (band << 32 | key, partition << 32 | row), for the bucket rule.
py::tuple BandRecords(const py::list& codes, const py::list& offsets, const py::list& row_bits,
                      const std::vector<uint64_t>& partitions, uint32_t dest, int bands) {
  const size_t sources = partitions.size();
  if (codes.size() != sources || offsets.size() != sources || row_bits.size() != sources) {
    throw py::value_error("one code, offsets and row_bits per partition");
  }
  std::vector<View<uint8_t>> code_views;
  std::vector<View<uint64_t>> offset_views;
  std::vector<int> widths;
  for (size_t p = 0; p < sources; ++p) {
    code_views.emplace_back(codes[p]);
    offset_views.emplace_back(offsets[p]);
    widths.push_back(py::cast<int>(row_bits[p]));
    if (widths.back() < 0 || widths.back() > 32) throw py::value_error("row_bits out of range");
    if (offset_views.back().size() < static_cast<size_t>(dest + 1) * bands + 1) {
      throw py::value_error("band offsets too short");
    }
  }
  std::vector<uint64_t> buckets, docs;
  bool ok = true;
  {
    py::gil_scoped_release release;
    std::vector<uint32_t> keys, rows, distinct;
    const size_t dests = (offset_views.empty() ? 0 : offset_views[0].size() - 1) / bands;
    for (size_t p = 0; p < sources && ok; ++p) {
      const View<uint64_t>& off = offset_views[p];
      for (int b = 0; b < bands && ok; ++b) {
        const size_t j = static_cast<size_t>(dest) * bands + b;
        if (off[j + 1] < off[j] || off[j + 1] > code_views[p].size()) {
          ok = false;
          break;
        }
        if (off[j + 1] == off[j]) continue;  // no block
        if (dest >= dests || offset_views[p].size() != dests * bands + 1) {
          ok = false;
          break;
        }
        const BandChunks chunks(static_cast<uint32_t>(dests), bands);
        keys.clear();
        rows.clear();
        std::string_view block(reinterpret_cast<const char*>(code_views[p].data()) + off[j],
                               off[j + 1] - off[j]);
        ok = DecodeBandBlock(block, widths[p], &keys, &rows, &distinct);
        for (size_t i = 0; ok && i < keys.size(); ++i) {
          int band = 0;
          uint32_t key = 0;
          ok = chunks.Decode(dest, b, keys[i], &band, &key);
          buckets.push_back(static_cast<uint64_t>(band) << 32 | key);
          docs.push_back(partitions[p] << 32 | rows[i]);
        }
      }
    }
  }
  if (!ok) ThrowStatus(Status::Corruption("a band-key block does not decode"));
  return py::make_tuple(Take(std::move(buckets)), Take(std::move(docs)));
}

// Rows `rows` of coded sets (offsets n + 1 over `codes`): the sets decoded, as a CSR (offsets,
// values), and the coded bytes they took.
// The boilerplate weights' frequency sketch of a neardup.dask run, counted and merged as dedup's
// first pass counts it (FrequencySketchFor; see neardup/dedup_stages.h): one per group of
// partitions, saved to a work file, merged into the run's sketch that verification reads.
class DaskFrequencies {
 public:
  // The empty sketch of a run with these options over `input_bytes` of input.
  DaskFrequencies(const py::dict& kwargs, uint64_t input_bytes)
      : sketch_(FrequencySketchFor(input_bytes, DedupOptionsFromKeywords(kwargs))) {}

  // Counts a partition's documents as dedup does: row r (its coded narrowed shingle set
  // set_codes[set_offsets[r], set_offsets[r + 1])) when its reading number, first +
  // read_index[r], is a multiple of sample_every() and it has shingles.
  void Add(uint64_t first, py::handle offsets_array, py::handle codes_array,
           py::handle read_index_array) {
    View<uint64_t> offsets(offsets_array);
    View<uint8_t> codes(codes_array);
    View<uint32_t> read_index(read_index_array);
    if (offsets.size() != read_index.size() + 1) {
      throw py::value_error("read_index and set_offsets do not match");
    }
    for (size_t r = 0; r < read_index.size(); ++r) {
      if (offsets[r + 1] < offsets[r] || offsets[r + 1] > codes.size()) {
        throw py::value_error("set offsets out of range");
      }
    }
    bool ok = true;
    {
      py::gil_scoped_release release;
      const uint32_t every = sketch_.sample_every();
      std::vector<uint32_t> set;
      for (size_t r = 0; r < read_index.size() && ok; ++r) {
        if ((first + read_index[r]) % every != 0 || offsets[r + 1] == offsets[r]) continue;
        size_t used = 0;
        ok = DecodeShingleSet(
                 std::string_view(reinterpret_cast<const char*>(codes.data()) + offsets[r],
                                  offsets[r + 1] - offsets[r]),
                 &set, &used) &&
             used == offsets[r + 1] - offsets[r];
        if (ok && !set.empty()) sketch_.AddDocument(set);
      }
    }
    if (!ok) ThrowStatus(Status::Corruption("a shingle set does not decode"));
  }

  // Adds the counts of a sketch saved by Save() (same size, sampling and seed).
  void MergeFile(const std::string& path) {
    Status merged = sketch_.Merge(ReadFrequencySketch(path));
    if (!merged.ok()) ThrowStatus(merged.WithContext(path));
  }

  // Writes the sketch to `path` (through a temporary file renamed over it).
  void Save(const std::string& path) const {
    const std::string bytes = sketch_.Serialize();
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    FILE* file = std::fopen(tmp.c_str(), "wb");
    if (file == nullptr)
      ThrowStatus(Status::IoError(tmp + ": cannot open: " + std::strerror(errno)));
    const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
    if (std::fclose(file) != 0 || !written || std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      ThrowStatus(Status::IoError(path + ": cannot write: " + std::strerror(errno)));
    }
  }

  // F of the weights a PairRule with this sketch applies (PairRule::boilerplate_documents()).
  uint32_t BoilerplateDocuments(const py::dict& kwargs) const {
    const DedupOptions options = DedupOptionsFromKeywords(kwargs);
    Result<PairRule> rule =
        PairRule::Create(ResolvePairRule(options), &sketch_, options.boilerplate_options);
    if (!rule.ok()) ThrowStatus(rule.status());
    return rule->boilerplate_documents();
  }

  const ShingleFrequencies& sketch() const { return sketch_; }

 private:
  ShingleFrequencies sketch_;
};

py::tuple GatherCodedSets(py::handle offsets_array, py::handle codes_array, py::handle rows_array) {
  View<uint64_t> offsets(offsets_array), rows(rows_array);
  View<uint8_t> codes(codes_array);
  const size_t n = offsets.size() == 0 ? 0 : offsets.size() - 1;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= n || offsets[rows[i] + 1] < offsets[rows[i]] ||
        offsets[rows[i] + 1] > codes.size()) {
      throw py::value_error("row out of range");
    }
  }
  std::vector<uint64_t> out_offsets{0};
  std::vector<uint32_t> values, set;
  uint64_t bytes = 0;
  bool ok = true;
  {
    py::gil_scoped_release release;
    for (size_t i = 0; i < rows.size() && ok; ++i) {
      const uint64_t from = offsets[rows[i]], to = offsets[rows[i] + 1];
      size_t used = 0;
      ok = DecodeShingleSet(
               std::string_view(reinterpret_cast<const char*>(codes.data()) + from, to - from),
               &set, &used) &&
           used == to - from;
      values.insert(values.end(), set.begin(), set.end());
      bytes += to - from;
      out_offsets.push_back(values.size());
    }
  }
  if (!ok) ThrowStatus(Status::Corruption("a shingle set does not decode"));
  return py::make_tuple(Take(std::move(out_offsets)), Take(std::move(values)), bytes);
}

// The SimHash join of a run (neardup/hamming_join.h), built once per process: every task of a
// run must use the same expected size, so that they agree on the design.
std::shared_ptr<const HammingJoin> JoinFor(int bits, int k, double expected_size) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, double>, std::shared_ptr<const HammingJoin>> cache;
  const auto key = std::make_tuple(bits, k, expected_size);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  Result<HammingJoin> join = HammingJoin::Create(bits, k, expected_size);
  if (!join.ok()) ThrowStatus(join.status());
  auto shared = std::make_shared<const HammingJoin>(std::move(*join));
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, std::move(shared)).first->second;
}

std::vector<Fingerprint> FingerprintsOf(const View<uint64_t>& hi, const View<uint64_t>& lo,
                                        int bits) {
  std::vector<Fingerprint> fps(lo.size());
  for (size_t i = 0; i < fps.size(); ++i) fps[i] = Fingerprint{hi[i], lo[i], bits};
  return fps;
}

// The SimHash join's bucket records of one partition's documents, grouped by shuffle partition:
// per (document, table) the table, its key, the row and the fingerprint.
py::dict HammingRecords(py::handle hi_array, py::handle lo_array, int bits, int k,
                        double expected_size, uint32_t dests) {
  View<uint64_t> hi(hi_array), lo(lo_array);
  if (hi.size() != lo.size()) throw py::value_error("hi and lo sizes differ");
  if (dests == 0) throw py::value_error("dests must be positive");
  std::shared_ptr<const HammingJoin> join = JoinFor(bits, k, expected_size);
  const size_t n = lo.size(), tables = join->tables();
  std::vector<uint64_t> offsets(dests + 1, 0), out_keys, out_hi, out_lo;
  std::vector<uint16_t> out_tables;
  std::vector<uint32_t> out_rows;
  {
    py::gil_scoped_release release;
    std::vector<Fingerprint> fps = FingerprintsOf(hi, lo, bits);
    std::vector<uint64_t> keys;
    join->Keys(fps, &keys);
    std::vector<uint32_t> dest(keys.size());
    for (size_t j = 0; j < keys.size(); ++j) {
      dest[j] = Route(keys[j] * 0x9E3779B97F4A7C15ULL + (j % tables), dests);
      ++offsets[dest[j] + 1];
    }
    for (size_t d = 1; d < offsets.size(); ++d) offsets[d] += offsets[d - 1];
    std::vector<uint64_t> fill(offsets.begin(), offsets.end() - 1);
    out_keys.resize(keys.size());
    out_hi.resize(keys.size());
    out_lo.resize(keys.size());
    out_tables.resize(keys.size());
    out_rows.resize(keys.size());
    for (size_t j = 0; j < keys.size(); ++j) {
      const uint64_t at = fill[dest[j]]++;
      const size_t i = j / tables;
      out_keys[at] = keys[j];
      out_tables[at] = static_cast<uint16_t>(j % tables);
      out_rows[at] = static_cast<uint32_t>(i);
      out_hi[at] = fps[i].hi;
      out_lo[at] = fps[i].lo;
    }
    (void)n;
  }
  py::dict out;
  out["sh_offsets"] = Take(std::move(offsets));
  out["sh_tables"] = Take(std::move(out_tables));
  out["sh_keys"] = Take(std::move(out_keys));
  out["sh_rows"] = Take(std::move(out_rows));
  out["sh_hi"] = Take(std::move(out_hi));
  out["sh_lo"] = Take(std::move(out_lo));
  return out;
}

// The SimHash join over one shuffle partition's bucket records: each bucket's pairs within k by
// HammingJoin::BucketPairs (each pair from its first agreeing table only). Returns (a, b,
// distance), sorted.
py::tuple HammingPairs(int bits, int k, double expected_size, py::handle tables_array,
                       py::handle keys_array, py::handle docs_array, py::handle hi_array,
                       py::handle lo_array) {
  View<uint16_t> tables(tables_array);
  View<uint64_t> keys(keys_array), docs(docs_array), hi(hi_array), lo(lo_array);
  const size_t n = keys.size();
  if (tables.size() != n || docs.size() != n || hi.size() != n || lo.size() != n) {
    throw py::value_error("record columns of different sizes");
  }
  std::shared_ptr<const HammingJoin> join = JoinFor(bits, k, expected_size);
  for (size_t i = 0; i < n; ++i) {
    if (tables[i] >= join->tables()) throw py::value_error("table out of range");
  }
  std::vector<NeighborPair> pairs;
  {
    py::gil_scoped_release release;
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      if (tables[x] != tables[y]) return tables[x] < tables[y];
      if (keys[x] != keys[y]) return keys[x] < keys[y];
      return docs[x] < docs[y];
    });
    std::vector<uint64_t> members;
    std::vector<Fingerprint> fps;
    for (size_t begin = 0; begin < n;) {
      size_t end = begin + 1;
      while (end < n && tables[order[end]] == tables[order[begin]] &&
             keys[order[end]] == keys[order[begin]]) {
        ++end;
      }
      if (end - begin > 1) {
        members.clear();
        fps.clear();
        for (size_t j = begin; j < end; ++j) {
          members.push_back(docs[order[j]]);
          fps.push_back(Fingerprint{hi[order[j]], lo[order[j]], bits});
        }
        join->BucketPairs(tables[order[begin]], members, fps, &pairs);
      }
      begin = end;
    }
    std::sort(pairs.begin(), pairs.end(), [](const NeighborPair& x, const NeighborPair& y) {
      return x.a != y.a ? x.a < y.a : x.b < y.b;
    });
  }
  std::vector<uint64_t> a, b;
  std::vector<int32_t> distance;
  for (const NeighborPair& pair : pairs) {
    a.push_back(pair.a);
    b.push_back(pair.b);
    distance.push_back(pair.distance);
  }
  return py::make_tuple(Take(std::move(a)), Take(std::move(b)), Take(std::move(distance)));
}

// Appends `text` as a JSON string, its bytes as they are but for the escapes JSON needs (an
// invalid UTF-8 sequence stays invalid, so the reader skips the record as it would a file's).
void AppendRawJsonString(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
    } else {
      out->push_back(ch);
    }
  }
  out->push_back('"');
}

bool IsInstance(PyObject* o, const py::object& type) {
  const int is = PyObject_IsInstance(o, type.ptr());
  if (is < 0) PyErr_Clear();
  return is == 1;
}

// A DataFrame cell as the JSON value the reader sees: None, NaN, NA and NaT are null; booleans,
// integers and finite floats as Python's json writes them; str and bytes as strings (lone
// surrogates and invalid UTF-8 kept invalid, so the record is skipped as invalid UTF-8); any
// other object as its str().
void AppendCell(py::handle value, std::string* out) {
  static const py::object numpy = py::module_::import("numpy");
  static const py::object np_bool = numpy.attr("bool_");
  static const py::object np_floating = numpy.attr("floating");
  static const py::object pandas = py::module_::import("pandas");
  static const py::object na = pandas.attr("NA");
  static const py::object nat = pandas.attr("NaT");
  PyObject* o = value.ptr();
  if (o == Py_None || o == na.ptr() || o == nat.ptr()) {
    out->append("null");
  } else if (PyBool_Check(o) || IsInstance(o, np_bool)) {
    out->append(PyObject_IsTrue(o) == 1 ? "true" : "false");
  } else if (PyUnicode_Check(o)) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(o, &size);
    if (data != nullptr) {
      AppendRawJsonString(std::string_view(data, static_cast<size_t>(size)), out);
    } else {  // lone surrogates: their bytes, invalid UTF-8
      PyErr_Clear();
      py::bytes raw =
          py::reinterpret_steal<py::bytes>(PyUnicode_AsEncodedString(o, "utf-8", "surrogatepass"));
      if (!raw) throw py::error_already_set();
      AppendRawJsonString(std::string_view(raw), out);
    }
  } else if (PyBytes_Check(o)) {
    AppendRawJsonString(std::string_view(py::reinterpret_borrow<py::bytes>(value)), out);
  } else if (PyFloat_Check(o) || IsInstance(o, np_floating)) {
    const double x = py::cast<double>(value);
    if (std::isfinite(x)) {
      out->append(py::str(py::float_(x).attr("__repr__")()));
    } else {
      out->append("null");
    }
  } else if (PyLong_Check(o) || PyIndex_Check(o)) {
    out->append(py::str(py::reinterpret_steal<py::object>(PyNumber_Index(o))));
  } else {
    AppendRawJsonString(std::string(py::str(value)), out);
  }
}

// The JSONL the library's reader reads for a DataFrame partition: one {"id", "text"[, score]}
// line per row (neardup.dask's documents stage for a DataFrame input).
py::bytes RowsJsonl(const py::list& ids, const py::list& texts, const py::object& scores,
                    const std::string& score_field) {
  const size_t n = texts.size();
  if (ids.size() != n) throw py::value_error("ids and texts sizes differ");
  const bool with_scores = !scores.is_none();
  py::list score_list = with_scores ? py::cast<py::list>(scores) : py::list();
  if (with_scores && score_list.size() != n) {
    throw py::value_error("scores and texts sizes differ");
  }
  std::string out;
  std::string field;
  if (with_scores) AppendRawJsonString(score_field, &field);
  for (size_t i = 0; i < n; ++i) {
    out.append("{\"id\":");
    AppendCell(ids[i], &out);
    out.append(",\"text\":");
    AppendCell(texts[i], &out);
    if (with_scores) {
      out.push_back(',');
      out.append(field);
      out.push_back(':');
      AppendCell(score_list[i], &out);
    }
    out.append("}\n");
  }
  return py::bytes(out);
}
}  // namespace

void RegisterDaskBindings(py::module_& m) {
  m.def("_dask_read", &ReadPartition, py::arg("source"), py::arg("options"), py::arg("key"),
        py::arg("dests"), py::arg("threads") = 0, py::arg("max_warnings") = 1000);
  m.def("_dask_shared", &SharedOf, py::arg("hashes"), py::arg("docs"));
  m.def("_dask_verify", &VerifyPairs, py::arg("a"), py::arg("b"), py::arg("content_hash"),
        py::arg("text_bytes"), py::arg("squeezed_hash"), py::arg("set_sizes"),
        py::arg("set_offsets"), py::arg("set_values"), py::arg("canonical"), py::arg("level"),
        py::arg("options"), py::arg("key"), py::arg("threads") = 0,
        py::arg("unit_offsets") = py::none(), py::arg("unit_values") = py::none(),
        py::arg("frequencies") = "");
  m.def("_dask_distances", &Distances);
  m.def("_dask_gather_strings", &GatherStrings, py::arg("offsets"), py::arg("blob"),
        py::arg("rows"));
  m.def("_dask_clusters", &Clusters);
  m.def("_dask_cluster_lines", &ClusterLines);
  m.def("_dask_documents", &ReadDocuments, py::arg("source"), py::arg("options"));
  m.def("_dask_expand", &ExpandInputs, py::arg("inputs"));
  m.def("_dask_range_lines", &RangeLines, py::arg("path"), py::arg("start"), py::arg("end"),
        py::arg("size"));
  m.def("_dask_is_jsonl", [](const std::string& path) { return IsJsonlPath(path); });
  m.def("_dask_needs_shingles", &NeedsShingles, py::arg("a"), py::arg("b"), py::arg("content_hash"),
        py::arg("text_bytes"), py::arg("squeezed_hash"), py::arg("set_sizes"), py::arg("canonical"),
        py::arg("level"), py::arg("options"), py::arg("key"), py::arg("frequencies") = "");
  m.def("_dask_components", &Components);
  m.def("_dask_write_id_parts", &WriteIdParts);
  m.def("_dask_band_records", &BandRecords);
  m.def("_dask_gather_coded_sets", &GatherCodedSets);
  m.def("_dask_hamming_records", &HammingRecords);
  m.def("_dask_hamming_pairs", &HammingPairs);
  m.def("_dask_rows_jsonl", &RowsJsonl, py::arg("ids"), py::arg("texts"), py::arg("scores"),
        py::arg("score_field"));
  // Whether a dedup run with these options applies boilerplate weights (counted over the whole
  // input: neardup.dask's `frequencies` stage).
  m.def(
      "_dask_uses_boilerplate",
      [](const py::dict& kwargs) {
        const DedupOptions options = DedupOptionsFromKeywords(kwargs);
        return options.boilerplate && options.candidates != DedupOptions::Candidates::kSimHash &&
               ResolveVerifyThreshold(options) > 0;
      },
      py::arg("options"));
  m.def("_dask_summary_json", &SummaryJson, py::arg("options"), py::arg("counts"));
  py::class_<DaskFrequencies>(m, "_DaskFrequencies")
      .def(py::init<const py::dict&, uint64_t>(), py::arg("options"), py::arg("input_bytes"))
      .def("add", &DaskFrequencies::Add, py::arg("first"), py::arg("set_offsets"),
           py::arg("set_codes"), py::arg("read_index"))
      .def("merge_file", &DaskFrequencies::MergeFile, py::arg("path"))
      .def("save", &DaskFrequencies::Save, py::arg("path"))
      .def("boilerplate_documents", &DaskFrequencies::BoilerplateDocuments, py::arg("options"))
      .def_property_readonly("memory_bytes",
                             [](const DaskFrequencies& f) { return f.sketch().memory_bytes(); })
      .def_property_readonly("sample_every",
                             [](const DaskFrequencies& f) { return f.sketch().sample_every(); })
      .def_property_readonly(
          "counted_documents",
          [](const DaskFrequencies& f) { return f.sketch().counted_documents(); })
      .def_property_readonly("total", [](const DaskFrequencies& f) { return f.sketch().total(); });
}

}  // namespace neardup::python
