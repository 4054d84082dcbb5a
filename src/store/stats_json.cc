// JSON form of StoreStats; see stats_json.h.
#include "store/stats_json.h"

namespace neardup {

void WriteStoreStatsFields(const StoreStats& stats, JsonWriter* writer) {
  writer->Key("documents").Uint(stats.documents);
  writer->Key("segments").Uint(stats.segments);
  writer->Key("segment_entries").Uint(stats.segment_entries);
  writer->Key("memtable_entries").Uint(stats.memtable_entries);
  writer->Key("wal_bytes").Uint(stats.wal_bytes);
  writer->Key("disk_bytes").Uint(stats.disk_bytes);
  writer->Key("flushes").Uint(stats.flushes);
  writer->Key("compactions").Uint(stats.compactions);
  writer->Key("flush_seconds").Double(stats.flush_seconds);
  writer->Key("compaction_seconds").Double(stats.compaction_seconds);
  writer->Key("searches").Uint(stats.searches);
  writer->Key("writes").Uint(stats.writes);
  writer->Key("wal_syncs").Uint(stats.wal_syncs);
  writer->Key("open_seconds").Double(stats.open_seconds);
  writer->Key("bits").Int(stats.bits);
  writer->Key("indexed_k").Int(stats.indexed_k);
  // The old name of indexed_k, kept for one release so that no client breaks silently
  // (deprecated in docs/api.md and docs/openapi.yaml; removed in the release after).
  writer->Key("max_k").Int(stats.indexed_k);
  writer->Key("index_design").String(stats.index_design);
  writer->Key("index_bytes_per_fingerprint").Double(stats.index_bytes_per_fingerprint);
  writer->Key("fingerprint_options").String(stats.fingerprint_options);
  writer->Key("rule").String(StoreRuleName(stats.rule));
  if (stats.rule == StoreRule::kDedup) {
    writer->Key("threshold").Double(stats.lsh.threshold);
    const LshParameters parameters = stats.lsh.parameters.value_or(LshParameters{});
    writer->Key("bands").Int(parameters.bands);
    writer->Key("rows").Int(parameters.rows);
    writer->Key("bucket_window").Uint(stats.lsh.bucket_window);
    writer->Key("verification_form").String(stats.verification_form);
    writer->Key("containment").Double(stats.pair_rule.containment_threshold);
    writer->Key("containment_min_shingles").Double(stats.pair_rule.containment_min_shingles);
    writer->Key("containment_min_ratio").Double(stats.pair_rule.containment_min_ratio);
    writer->Key("edited").Double(stats.pair_rule.edited_threshold);
    writer->Key("edited_min_jaccard").Double(stats.pair_rule.edited_min_jaccard);
  }
  writer->Key("state").String(StoreStateName(stats.health.state));
  writer->Key("state_reason").String(stats.health.reason);
  writer->Key("write_errors").Uint(stats.health.write_errors);
  writer->Key("write_recoveries").Uint(stats.health.recoveries);
  writer->Key("wal_dropped_bytes").Uint(stats.wal_dropped_bytes);
  writer->Key("wal_dropped").String(stats.wal_dropped);
  writer->Key("wal_dropped_file").String(stats.wal_dropped_file);
}

}  // namespace neardup
