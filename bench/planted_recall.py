#!/usr/bin/env python3
"""Scores a dedup run against the planted near-duplicate copies of a generated corpus: recall per
copy kind (a copy counts as found when it shares a cluster with its original) and the clusters that
join documents of different originals (which the generator made unrelated).

The ground truth is the TSV that bench/generate_distractors.py --dup-rate writes beside its output
(copy_id, original_id, kind). For a corpus that has a "derived_from" field but no TSV (from
bench/generate_corpus.py) pass --from-jsonl: the truth is read from the corpus itself, kind "copy".

    /usr/bin/python3 bench/planted_recall.py CORPUS.jsonl.truth.tsv OUT/clusters.jsonl LABEL
    /usr/bin/python3 bench/planted_recall.py --from-jsonl CORPUS.jsonl OUT/clusters.jsonl LABEL
"""
import argparse
import collections
import json
import sys


def truth_from_tsv(path):
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:3] != ["copy_id", "original_id", "kind"]:
            sys.exit(f"planted_recall: {path}:1: expected the header copy_id, original_id, kind")
        for number, line in enumerate(f, start=2):
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3:
                sys.exit(f"planted_recall: {path}:{number}: expected 3 tab-separated fields")
            yield fields[0], fields[1], fields[2]


def truth_from_jsonl(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if doc.get("derived_from") is not None:
                yield doc["id"], doc["derived_from"], "copy"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("truth", help="truth TSV (or the corpus JSONL with --from-jsonl)")
    parser.add_argument("clusters", help="clusters.jsonl of the dedup run")
    parser.add_argument("label", help="printed before the figures")
    parser.add_argument("--from-jsonl", action="store_true")
    args = parser.parse_args()

    copies = list(truth_from_jsonl(args.truth) if args.from_jsonl else truth_from_tsv(args.truth))
    original_of = {copy: original for copy, original, _ in copies}
    cluster_of = {}
    mixed = 0
    with open(args.clusters, encoding="utf-8") as f:
        for number, line in enumerate(f):
            cluster = json.loads(line)
            members = [cluster["kept"]["id"]] + [m["id"] for m in cluster["removed"]]
            roots = set()
            for member in members:
                cluster_of[member] = number
                roots.add(original_of.get(member, member))
            mixed += len(roots) > 1
    total = collections.Counter(kind for _, _, kind in copies)
    found = collections.Counter(
        kind for copy, original, kind in copies
        if copy in cluster_of and cluster_of[copy] == cluster_of.get(original))
    hits = sum(found.values())
    per_kind = ", ".join(f"{kind} {100 * found[kind] / total[kind]:.1f}% of {total[kind]}"
                         for kind in sorted(total))
    print(f"{args.label}: planted copies found {hits}/{len(copies)} "
          f"({100 * hits / max(1, len(copies)):.2f}%): {per_kind}; clusters joining different "
          f"originals: {mixed}")


if __name__ == "__main__":
    main()
