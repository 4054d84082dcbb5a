// libFuzzer target for the store's file readers (segments with their index and sketch sections,
// write-ahead log, MANIFEST): two small valid stores are built once, a simhash-rule one and a
// dedup-rule one (its documents' sketches are made up here: the text stages are not linked); each
// input damages one file of one of them (overwrites it, or XORs bytes in at chosen offsets), then
// the store is opened with and without checksum verification, queried (fingerprint searches and,
// for the dedup store, rule checks, which read the band and whitespace tables and the encoded
// shingle sets) and closed, and RecoverStore runs over the damage. Every outcome must be a
// Status: never a crash, an out-of-bounds read or another sanitizer report.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "neardup/minhash_lsh.h"
#include "neardup/sketch.h"
#include "neardup/store.h"

namespace {

namespace fs = std::filesystem;

struct Template {
  fs::path dir;
  fs::path work;
  std::vector<std::string> files;  // names of the store's files (not LOCK)
};

// A made-up sketch from a seed for a store whose sketches take `lsh`'s bands and rows and, when
// unit_bits > 0, unit sets of that width: hashes, band keys from a small alphabet (so buckets are
// shared), a sorted set and a sorted unit set, tagged with the store's LSH parameters.
neardup::DocumentSketch MadeUpSketch(uint64_t seed, const neardup::LshParameters& lsh,
                                     uint64_t lsh_seed, int unit_bits) {
  neardup::DocumentSketch sketch;
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  sketch.content_hash = next();
  sketch.text_bytes = next() % 5000;
  sketch.squeezed_hash = seed % 7 == 0 ? 42 : next();  // some share one
  for (int b = 0; b < lsh.bands; ++b) {
    sketch.band_keys.push_back(static_cast<uint32_t>(next() % 16));
  }
  uint32_t value = 0;
  for (int i = 0; i < 40; ++i) sketch.shingles.push_back(value += 1 + next() % 1000);
  if (unit_bits > 0) {  // values below 2^unit_bits (at most 30 * 1000)
    sketch.has_units = true;
    sketch.unit_bits = unit_bits;
    uint32_t unit = 0;
    for (int i = 0; i < 30; ++i) sketch.units.push_back(unit += 1 + next() % 1000);
  }
  sketch.lsh_tag = neardup::LshTag(lsh, lsh_seed);
  return sketch;
}

// A made-up sketch that `store` takes: its own bands and rows and unit width (with the defaults'
// edited reason, 41 x 3 and 20-bit units).
neardup::DocumentSketch MadeUpSketchFor(neardup::DocumentStore& store, uint64_t seed) {
  const neardup::StoreStats stats = store.Stats();
  const auto lsh = neardup::ResolveLshParameters(stats.lsh);
  return MadeUpSketch(seed, lsh.ok() ? *lsh : neardup::LshParameters{30, 3}, stats.lsh.seed,
                      store.SketchUnitBits());
}

Template* Build(neardup::StoreRule rule) {
  auto* t = new Template();
  // tmpfs when there is one: the store fsyncs, and fsync on a busy disk costs milliseconds.
  static std::string made;
  for (const char* parent : {"/dev/shm", "/tmp"}) {
    if (!made.empty()) break;  // one directory for both templates
    std::string path = std::string(parent) + "/neardup_store_fuzz_XXXXXX";
    if (::mkdtemp(path.data()) != nullptr) {
      made = path;
      std::atexit([] { std::filesystem::remove_all(made); });
    }
  }
  if (made.empty()) std::abort();
  const char* root = made.c_str();
  if (root == nullptr) std::abort();
  const std::string name = neardup::StoreRuleName(rule);
  t->dir = fs::path(root) / ("template_" + name);
  t->work = fs::path(root) / ("work_" + name);
  neardup::StoreOptions options;
  options.rule = rule;
  options.sync_mode = neardup::SyncMode::kNone;
  auto store = neardup::DocumentStore::Open(t->dir.string(), options);
  if (!store.ok()) std::abort();
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto add = [&](int i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const std::string id = "doc-" + std::to_string(i);
    const neardup::DocumentSketch sketch = MadeUpSketchFor(**store, static_cast<uint64_t>(i));
    neardup::DocumentInput doc{id, neardup::Fingerprint::From64(x), R"({"i":1})"};
    if (rule == neardup::StoreRule::kDedup) doc.sketch = &sketch;
    if (!(*store)->Add(doc).ok()) std::abort();
  };
  for (int i = 0; i < 300; ++i) add(i);
  (void)(*store)->Flush();  // a segment
  for (int i = 300; i < 340; ++i) add(i);
  (void)(*store)->Remove("doc-3");  // log records after the segment
  // Leave the log unflushed: destroy without Close() would flush; copy the directory instead.
  fs::copy(t->dir, t->dir.string() + ".open", fs::copy_options::recursive);
  (void)(*store)->Close();
  fs::remove_all(t->dir);
  fs::rename(t->dir.string() + ".open", t->dir);
  for (const auto& entry : fs::directory_iterator(t->dir)) {
    const std::string name = entry.path().filename().string();
    if (name != "LOCK") t->files.push_back(name);
  }
  std::sort(t->files.begin(), t->files.end());
  if (t->files.empty()) std::abort();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Template* simhash = Build(neardup::StoreRule::kSimHash);
  static Template* dedup = Build(neardup::StoreRule::kDedup);
  if (size < 2) return 0;
  const bool rule_check = (data[1] & 16) != 0;
  Template* t = rule_check ? dedup : simhash;
  fs::remove_all(t->work);
  fs::copy(t->dir, t->work, fs::copy_options::recursive);
  const fs::path target = t->work / t->files[data[0] % t->files.size()];
  const uint8_t mode = data[1];
  const uint8_t* rest = data + 2;
  const size_t rest_size = size - 2;
  if (mode & 1) {
    // Replace the file with the input.
    std::ofstream(target, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(rest), static_cast<std::streamsize>(rest_size));
  } else {
    // XOR bytes at offsets: pairs of (16-bit offset, byte).
    std::string bytes;
    {
      std::ifstream in(target, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (!bytes.empty()) {
      for (size_t i = 0; i + 2 < rest_size; i += 3) {
        const size_t offset = (size_t(rest[i]) << 8 | rest[i + 1]) % bytes.size();
        bytes[offset] = static_cast<char>(bytes[offset] ^ rest[i + 2]);
      }
      if (mode & 4) bytes.resize(bytes.size() * (rest_size % 7) / 7);  // and truncate
      std::ofstream(target, std::ios::binary | std::ios::trunc)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
  }
  neardup::StoreOptions options;
  options.create_if_missing = false;
  options.sync_mode = neardup::SyncMode::kNone;
  options.compaction_trigger = 0;
  options.verify_checksums_on_open = (mode & 2) == 0;
  {
    auto store = neardup::DocumentStore::Open(t->work.string(), options);
    if (store.ok()) {
      uint64_t q = 0;
      for (size_t i = 0; i < rest_size && i < 8; ++i) q = q << 8 | rest[i];
      for (int k : {0, 3, 5, 64}) (void)(*store)->Search(neardup::Fingerprint::From64(q), k, 50);
      if (rule_check) {
        // Rule checks: a stored document's sketch (its buckets, its hash) and one from the input.
        std::vector<neardup::DocumentSketch> sketches = {MadeUpSketchFor(**store, q % 340),
                                                         MadeUpSketchFor(**store, q)};
        std::vector<neardup::DocumentInput> docs;
        for (const auto& sketch : sketches) {
          docs.push_back({"", neardup::Fingerprint::From64(q), ""});
          docs.back().sketch = &sketch;
        }
        neardup::CheckOptions check;
        check.add = neardup::AddMode::kNever;
        (void)(*store)->CheckBatch(docs, check);
      }
      (void)(*store)->Get("doc-1");
      (void)(*store)->Get("doc-320");
      (void)(*store)->Stats();
      (void)(*store)->Close();
    }
  }
  if (mode & 8) (void)neardup::RecoverStore(t->work.string());
  return 0;
}
