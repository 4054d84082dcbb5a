// What a kDedup store keeps of a document's DocumentSketch (neardup/sketch.h), in every layer (log
// op, memtable, segment): the pair rule's hashes, the band keys and the encoded shingle set (and,
// in a store whose rule has the `edited` reason on, the encoded unit set after it).
//
// Internal header. A plain value.
#ifndef NEARDUP_STORE_SKETCH_RECORD_H_
#define NEARDUP_STORE_SKETCH_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/set_codec.h"
#include "neardup/sketch.h"

namespace neardup::store {

// The hash facts of a document the pair rule compares (PairDocument's content_hash, text_bytes,
// squeezed_hash; neardup/pair_rule.h).
struct PairHashes {
  uint64_t content_hash = 0;
  uint64_t text_bytes = 0;
  uint64_t squeezed_hash = 0;
};

struct SketchRecord {
  PairHashes hashes;
  std::vector<uint32_t> band_keys;  // `bands` keys, or empty (no shingles)
  // EncodeShingleSet of the narrowed shingle set, then, with units (verification forms 2 and 3,
  // store/manifest.h), EncodeShingleSet of the narrowed unit set (universe 2^unit_bits).
  std::string set;

  // unit_bits: 0 (no unit set), 32 (form 2) or 20 (form 3).
  static SketchRecord From(const DocumentSketch& sketch, int unit_bits) {
    SketchRecord record;
    record.hashes = {sketch.content_hash, sketch.text_bytes, sketch.squeezed_hash};
    record.band_keys = sketch.band_keys;
    EncodeShingleSet(sketch.shingles, &record.set);
    if (unit_bits > 0) EncodeShingleSet(sketch.units, &record.set, unit_bits);
    return record;
  }
};

// The sets of a record's `set` bytes: the shingle set and, when `with_units`, the unit set after
// it. False when the bytes are damaged: the sets are then empty (a damaged unit set leaves the
// shingle set), and the pair rule finds no duplicate by them.
inline bool DecodeSketchSets(std::string_view bytes, bool with_units,
                             std::vector<uint32_t>* shingles, std::vector<uint32_t>* units) {
  size_t used = 0;
  units->clear();
  if (!DecodeShingleSet(bytes, shingles, &used)) return false;
  return !with_units || DecodeShingleSet(bytes.substr(used), units);
}

}  // namespace neardup::store

#endif  // NEARDUP_STORE_SKETCH_RECORD_H_
