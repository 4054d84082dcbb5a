#!/usr/bin/env bash
# The first thing to run: installs and builds the neardup tool (scripts/setup.sh: the library and
# the tool only), then deduplicates the repository's own sample corpus (sample/: 400 SpamAssassin
# spam mails and 1,500 Song ci poems, which hold natural exact and near duplicates) into out/demo/
# and shows a few clusters, then writes the run's HTML report (out/demo/report.html) and prints
# its path. Needs nothing but the clone (and Debian packages).
#
#   bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

NEARDUP=${NEARDUP_BUILD_DIR:-build}/neardup
INPUTS=(sample/en_spamassassin.jsonl sample/zh_poetry.jsonl)
OUT=out/demo
mkdir -p "$OUT"

# --force: the demo replaces its own outputs of an earlier run (never an input).
echo "demo: $NEARDUP dedup ${INPUTS[*]} -o $OUT --write-kept $OUT/kept.jsonl --force"
"$NEARDUP" dedup "${INPUTS[@]}" -o "$OUT" --write-kept "$OUT/kept.jsonl" --force

echo
echo "Outputs:"
for f in clusters.jsonl keep.txt remove.txt summary.json kept.jsonl; do
  printf '  %-16s %s\n' "$f" "$(wc -l < "$OUT/$f") lines"
done
echo
echo "Summary ($OUT/summary.json):"
/usr/bin/python3 - "$OUT/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"  {s['documents_fingerprinted']} documents, {s['clusters']} clusters, "
      f"{s['documents_removed']} removed, {s['documents_kept']} kept, {s['total_seconds']:.2f} s")
for st in s["stages"]:
    print(f"    {st['stage']:<12} {st['seconds']:.3f} s")
PY
echo
echo "A few clusters (kept document, then removed members with distance and reason):"
/usr/bin/python3 - "$OUT/clusters.jsonl" "${INPUTS[@]}" <<'PY'
import json, sys
texts = {}
for path in sys.argv[2:]:
    for line in open(path, encoding="utf-8"):
        d = json.loads(line)
        texts[d["id"]] = d["text"]
def preview(doc_id):
    return " ".join(texts.get(doc_id.split("@")[0], "").split())[:70]
clusters = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
# Near-duplicate clusters first: they are the interesting ones.
clusters.sort(key=lambda c: (all(m["reason"] == "exact_duplicate" for m in c["removed"]), -c["size"]))
for c in clusters[:4]:
    print(f"- cluster {c['cluster']} ({c['size']} documents), keep {c['kept']['id']}: {preview(c['kept']['id'])}")
    for m in c["removed"][:3]:
        sim = f", Jaccard {m['similarity_to_via']:.2f}" if "similarity_to_via" in m else ""
        print(f"    remove {m['id']} (distance {m['distance']}, {m['reason']}{sim}): {preview(m['id'])}")
PY
pair=$(/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    c = json.loads(line)
    near = [m for m in c["removed"] if m["reason"] != "exact_duplicate"]
    if near:
        print(c["kept"]["id"], near[0]["id"]); break
' "$OUT/clusters.jsonl")
echo
files=()
for input in "${INPUTS[@]}"; do files+=(--file "$input"); done
echo "Why are two of them near-duplicates? $NEARDUP explain ${files[*]} $pair"
# shellcheck disable=SC2086  # two ids
"$NEARDUP" explain "${files[@]}" $pair | head -n 7

# The run as one HTML page: clusters with word-level diffs, the similarity histogram, a sample to
# review. Self-contained: open it from disk in any browser.
echo
echo "The report: $NEARDUP report $OUT -o $OUT/report.html --force"
"$NEARDUP" report "$OUT" -o "$OUT/report.html" --force -q >/dev/null
echo "Open $(cd "$OUT" && pwd)/report.html in a browser."
