#!/usr/bin/env bash
# The first thing to run: installs and builds neardup (scripts/setup.sh), then deduplicates a
# sample of the shared dev corpus (Chinese fortunes + SpamAssassin spam, ~6.5k documents with
# natural exact and near duplicates) into out/demo/ and shows a few clusters.
#
#   bash scripts/demo.sh            # SHARED=/path/to/shared to use another corpus location
set -euo pipefail
cd "$(dirname "$0")/.."
bash "$(dirname "$0")/setup.sh"

NEARDUP=${NEARDUP_BUILD_DIR:-build}/neardup
SHARED=${SHARED:-../shared}
INPUTS=("$SHARED/corpus/zh_fortunes.jsonl" "$SHARED/corpus/en_spamassassin.jsonl")
for input in "${INPUTS[@]}"; do
  [ -f "$input" ] || { echo "demo: $input not found (set SHARED=...)" >&2; exit 1; }
done
OUT=out/demo
mkdir -p "$OUT"

echo "demo: $NEARDUP dedup ${INPUTS[*]} -o $OUT --write-kept $OUT/kept.jsonl"
"$NEARDUP" dedup "${INPUTS[@]}" -o "$OUT" --write-kept "$OUT/kept.jsonl"

echo
echo "Outputs:"
for f in clusters.jsonl keep.txt remove.txt summary.json kept.jsonl; do
  printf '  %-16s %s\n' "$f" "$(wc -l < "$OUT/$f") lines"
done
echo
echo "Summary ($OUT/summary.json):"
python3 - "$OUT/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"  {s['documents_fingerprinted']} documents, {s['clusters']} clusters, "
      f"{s['documents_removed']} removed, {s['documents_kept']} kept, {s['total_seconds']:.2f} s")
for st in s["stages"]:
    print(f"    {st['stage']:<12} {st['seconds']:.3f} s")
EOF
echo
echo "A few clusters (kept document, then removed members with distance and reason):"
python3 - "$OUT/clusters.jsonl" "${INPUTS[@]}" <<'EOF'
import json, sys
texts = {}
for path in sys.argv[2:]:
    for line in open(path, encoding="utf-8"):
        d = json.loads(line)
        texts[d["id"]] = d["text"]
def preview(doc_id):
    return " ".join(texts.get(doc_id, "").split())[:70]
clusters = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
# Show near-duplicate clusters first: they are the interesting ones.
clusters.sort(key=lambda c: (all(m["reason"] == "exact_duplicate" for m in c["removed"]), -c["size"]))
for c in clusters[:4]:
    print(f"- cluster {c['cluster']} ({c['size']} documents), keep {c['kept']['id']}: {preview(c['kept']['id'])}")
    for m in c["removed"][:3]:
        sim = f", Jaccard {m['similarity_to_via']:.2f}" if "similarity_to_via" in m else ""
        print(f"    remove {m['id']} (distance {m['distance']}, {m['reason']}{sim}): {preview(m['id'])}")
EOF
echo
echo "Try: $NEARDUP explain --file ${INPUTS[1]} ID_A ID_B    (ids from $OUT/clusters.jsonl)"
