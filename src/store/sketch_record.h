// What a kDedup store keeps of a document's DocumentSketch (neardup/sketch.h), in every layer (log
// op, memtable, segment): the pair rule's hashes, the band keys and the encoded shingle set.
//
// Internal header. A plain value.
#ifndef NEARDUP_STORE_SKETCH_RECORD_H_
#define NEARDUP_STORE_SKETCH_RECORD_H_

#include <cstdint>
#include <string>
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
  std::string set;                  // EncodeShingleSet of the narrowed shingle set

  static SketchRecord From(const DocumentSketch& sketch) {
    SketchRecord record;
    record.hashes = {sketch.content_hash, sketch.text_bytes, sketch.squeezed_hash};
    record.band_keys = sketch.band_keys;
    EncodeShingleSet(sketch.shingles, &record.set);
    return record;
  }
};

}  // namespace neardup::store

#endif  // NEARDUP_STORE_SKETCH_RECORD_H_
