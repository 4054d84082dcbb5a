// The JSON form of StoreStats, shared by `neardup index stats` and the server's /v1/stats.
//
// Internal header (the JSON writer is internal).
#ifndef NEARDUP_STORE_STATS_JSON_H_
#define NEARDUP_STORE_STATS_JSON_H_

#include "common/json_writer.h"
#include "neardup/store.h"

namespace neardup {

// Writes every StoreStats field as a key and value into the object `writer` has open.
void WriteStoreStatsFields(const StoreStats& stats, JsonWriter* writer);

}  // namespace neardup

#endif  // NEARDUP_STORE_STATS_JSON_H_
