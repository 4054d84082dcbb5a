#!/usr/bin/env python3
"""Why boilerplate weights cost edit recall (docs/quality.md, "Why boilerplate weights cost
edited copies"): an analysis of two real `neardup eval` runs on the stress set, one with
`--boilerplate` and one without, at the same threshold.

It reads the documents of the runs (the corpus plus the stress set's docs.jsonl), cuts their
shingles and counts their document frequencies with the library itself (neardup._neardup: the
shingler dedup uses, the count-min sketch, and the pair rule's own weighted Jaccard through
_decide_pairs), and prints:

  1. the pairs the weighted run missed (eval.json pair_errors) that the plain run found, per label,
     and for each label: the plain Jaccard, the rule's weighted Jaccard, the same with exact
     document frequencies instead of the sketch's, and with the frequencies counted without the
     other stress documents made from the pair's own source document (pairs.tsv `source`);
  2. per label over all its pairs: the mean weight of the shared and of the differing shingles,
     the share of differing shingles found in at most 2 documents (made by the edit), and the
     fraction accepted at the threshold with and without weights (set arithmetic, no LSH);
  3. the weight's trade-off on the stress set's CHOICE half only (bench/heldout_eval.py's split):
     F (--boilerplate-min-documents) in 20, 50, 100, 200 at thresholds 0.40, 0.45, 0.50, and two
     variants of the weight that are not in the product (sqrt(F / df), and a difference counted
     as substitutions at the lighter side's weight);
  4. with --groups CLUSTERS.jsonl (a plain dedup run's clusters, e.g. eval --threshold 0.8): a
     prototype that is not in the product, document frequency counted once per group of
     near-duplicates (a cluster, or a document in none) instead of once per document, exact
     counts, weight F / df at F = 20, on the choice half and on the held-out half.

The sketch here counts every document; dedup counts one in s above 64 MB of input (s = 2 for the
corpus + stress set), so its estimates differ slightly: section 1 prints how many of the weighted
run's misses this analysis reproduces.

    /usr/bin/python3 bench/make_stress_set.py /tmp/stress
    build/neardup eval --devpairs /tmp/stress --corpus ../shared/corpus -o /tmp/bp45 -f --json \\
        --threshold 0.45 --boilerplate
    build/neardup eval --devpairs /tmp/stress --corpus ../shared/corpus -o /tmp/p45 -f --json \\
        --threshold 0.45
    build/neardup eval --devpairs /tmp/stress --corpus ../shared/corpus -o /tmp/p80 -f --json \\
        --threshold 0.8
    PYTHONPATH=build/python /usr/bin/python3 bench/boilerplate_analysis.py --stress /tmp/stress \\
        --weighted /tmp/bp45 --plain /tmp/p45 --groups /tmp/p80/clusters.jsonl
"""
import argparse
import collections
import csv
import glob
import hashlib
import json
import os
import sys

import numpy as np

from neardup import _neardup as N


def load_documents(files):
    """(ids, origin file stem, texts) of every JSONL record with a string text, in input order."""
    ids, origins, texts = [], [], []
    for path in files:
        stem = os.path.basename(path)[:-len(".jsonl")]
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record.get("text"), str):
                    ids.append(str(record.get("id")))
                    origins.append(stem)
                    texts.append(record["text"])
    return ids, origins, texts


def weights(estimates, F):
    estimates = np.asarray(estimates, dtype=float)
    return np.where(estimates >= F, F / np.maximum(estimates, 1), 1.0)


def held_out_half(source):  # bench/heldout_eval.py's split of the stress set
    return hashlib.sha256(source.encode()).digest()[0] & 1 == 1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stress", required=True)
    parser.add_argument("--corpus", default=os.path.join(here, "..", "..", "shared", "corpus"))
    parser.add_argument("--weighted", required=True, help="output of eval --boilerplate")
    parser.add_argument("--plain", required=True, help="output of eval without it")
    parser.add_argument("--groups", help="clusters.jsonl of a plain run: section 4")
    args = parser.parse_args()
    with open(os.path.join(args.weighted, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    rule = summary["pair_rule"]
    T, F = rule["jaccard_threshold"], rule["boilerplate_min_documents"]
    sketch_bytes = int(round(rule["frequency_sketch_mb"] * 1e6))

    files = sorted(glob.glob(os.path.join(args.corpus, "*.jsonl")))
    files.append(os.path.join(args.stress, "docs.jsonl"))
    ids, origins, texts = load_documents(files)
    facts = N._document_facts(texts)
    sets = facts["sets"]
    sketch = N._ShingleFrequencies(sketch_bytes)
    sketch.add(sets)
    df = collections.Counter()
    for s in sets:
        df.update(np.asarray(s).tolist())
    index = {}
    for i, x in enumerate(ids):
        index.setdefault(x, i)
    by_file = collections.defaultdict(list)
    for i, o in enumerate(origins):
        by_file[o].append(i)
    with open(os.path.join(args.stress, "pairs.tsv"), encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t")
                if r["id_a"] in index and r["id_b"] in index]
    source_docs = collections.defaultdict(set)  # a source's stress documents + the corpus one
    for r in rows:
        source_docs[r["source"]].update((index[r["id_a"]], index[r["id_b"]]))
    for source, docs in source_docs.items():
        stem, number = source.rsplit("#", 1)
        docs.add(by_file[stem][int(number)])
    print(f"{len(ids)} documents, {len(rows)} stress pairs; T = {T}, F = {F}, sketch "
          f"{sketch_bytes:,} bytes (every document counted)\n")

    def parts(r):
        a, b = np.asarray(sets[index[r["id_a"]]]), np.asarray(sets[index[r["id_b"]]])
        return np.intersect1d(a, b), np.setdiff1d(a, b), np.setdiff1d(b, a)

    def weighted_jaccard(shared, only_a, only_b, frequency):
        w = [weights([frequency(x) for x in s.tolist()], F).sum() for s in (shared, only_a,
                                                                              only_b)]
        return w[0] / max(1e-12, sum(w))

    # The rule's own decision and weighted Jaccard with this sketch, for every stress pair.
    hashes = np.asarray(facts["hashes"])
    left = [index[r["id_a"]] for r in rows]
    right = [index[r["id_b"]] for r in rows]
    decided = N._decide_pairs(hashes[left], [sets[i] for i in left], hashes[right],
                              [sets[i] for i in right], {"threshold": T, "boilerplate": True},
                              sketch)
    rule_jaccard = np.asarray(decided["jaccard"])

    # 1. The weighted run's extra misses.
    def pair_errors(run):
        with open(os.path.join(run, "eval.json"), encoding="utf-8") as f:
            return {(m["a"], m["b"]) for m in json.load(f)["pair_errors"] if m["kind"] == "missed"}
    extra = pair_errors(args.weighted) - pair_errors(args.plain)
    print("## 1. Positives the weighted run missed and the plain run found (pairs)\n")
    print("| label | pairs | reproduced here | plain J (median) | weighted J, rule (median) | "
          "weighted J, exact df | accepted if the pair's source were not reused | by language | "
          "the others, by source file |")
    print("|---|---|---|---|---|---|---|---|---|")
    by_label = collections.defaultdict(list)
    for n, r in enumerate(rows):
        if (r["id_a"], r["id_b"]) in extra:
            by_label[r["label"]].append(n)
    for label, members in sorted(by_label.items(), key=lambda x: -len(x[1])):
        plain, exact, unreused, reproduced = [], [], 0, 0
        still = collections.Counter()
        for n in members:
            r = rows[n]
            shared, only_a, only_b = parts(r)
            plain.append(len(shared) / (len(shared) + len(only_a) + len(only_b)))
            exact.append(weighted_jaccard(shared, only_a, only_b, lambda x: df[x]))
            union = np.union1d(np.union1d(shared, only_a), only_b)
            holders = collections.Counter()
            for i in source_docs[r["source"]] - {index[r["id_a"]], index[r["id_b"]]}:
                holders.update(np.intersect1d(np.asarray(sets[i]), union).tolist())
            if weighted_jaccard(shared, only_a, only_b, lambda x: df[x] - holders[x]) >= T:
                unreused += 1
            else:
                still[r["source"].rsplit("#", 1)[0]] += 1
            reproduced += rule_jaccard[n] < T
        languages = collections.Counter(rows[n]["set"].rsplit("_", 1)[1] for n in members)
        print(f"| {label} | {len(members)} | {reproduced} | {np.median(plain):.3f} "
              f"({min(plain):.3f}-{max(plain):.3f}) | {np.median(rule_jaccard[members]):.3f} | "
              f"{np.median(exact):.3f} | {unreused} | "
              f"{', '.join(f'{k} {v}' for k, v in languages.most_common())} | "
              f"{', '.join(f'{k} {v}' for k, v in still.most_common())} |")

    # 2. Per label: where the weight goes.
    print("\n## 2. Per label, all pairs: mean shingle weight, shared vs differing\n")
    print("| label | pairs | shared | differing | differing in <= 2 documents | mean plain J | "
          f"mean weighted J | plain J >= {T} | weighted J >= {T} |")
    print("|---|---|---|---|---|---|---|---|---|")
    per_label = collections.defaultdict(list)
    for n, r in enumerate(rows):
        per_label[r["label"]].append(n)
    for label in sorted(per_label):
        ws, wd, new, pj, wj = [], [], [], [], []
        for n in per_label[label]:
            shared, only_a, only_b = parts(rows[n])
            differing = np.concatenate([only_a, only_b])
            if len(shared) == 0 or len(differing) == 0:
                continue
            a, b = weights(sketch.estimate(shared), F), weights(sketch.estimate(differing), F)
            ws.append(a.mean())
            wd.append(b.mean())
            new.append(np.mean([df[x] <= 2 for x in differing.tolist()]))
            pj.append(len(shared) / (len(shared) + len(differing)))
            wj.append(a.sum() / (a.sum() + b.sum()))
        pj, wj = np.array(pj), np.array(wj)
        print(f"| {label} | {len(pj)} | {np.mean(ws):.3f} | {np.mean(wd):.3f} | "
              f"{np.mean(new):.3f} | {pj.mean():.3f} | {wj.mean():.3f} | {np.mean(pj >= T):.3f} | "
              f"{np.mean(wj >= T):.3f} |")

    # 3. The trade-off along F, on the choice half only.
    labels = ["positive_edit_10", "positive_wrap_both", "positive_wrap_one", "positive_mass_copy",
              "negative_template_only"]
    chosen = [n for n, r in enumerate(rows)
              if r["label"] in labels and not held_out_half(r["source"])]
    pre = []
    for n in chosen:
        shared, only_a, only_b = parts(rows[n])
        pre.append((rows[n]["label"], len(shared), np.asarray(sketch.estimate(shared), float),
                    np.asarray(sketch.estimate(only_a), float),
                    np.asarray(sketch.estimate(only_b), float)))

    def similarity(kind, f_value, n_shared, es, ea, eb):
        if kind == "none":
            return n_shared / (n_shared + len(ea) + len(eb))
        w = (lambda e: np.sqrt(weights(e, f_value))) if kind == "sqrt" else (
            lambda e: weights(e, f_value))
        s, wa, wb = w(es).sum(), np.sort(w(ea)), np.sort(w(eb))
        if kind == "substitution":  # the i-th lightest of each side paired, at the lighter weight
            k = min(len(wa), len(wb))
            d = 2 * np.minimum(wa[:k], wb[:k]).sum() + wa[k:].sum() + wb[k:].sum()
        else:
            d = wa.sum() + wb.sum()
        return s / max(1e-12, s + d)

    print("\n## 3. Choice half only: fraction accepted by weight and threshold (pairs, no LSH)\n")
    print("F/df is the rule's weight; sqrt(F/df) and 'substitution' (each side's differing "
          "weights sorted and paired, a pair counted twice at the lighter weight) are variants "
          "that are not in the product.\n")
    print("| weights | T | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    variants = [("none", None)] + [("F/df", f) for f in (20, 50, 100, 200)] + [
        ("sqrt", 20), ("substitution", 20)]
    for kind, f_value in variants:
        for t in (0.40, 0.45, 0.50):
            got = collections.defaultdict(list)
            for label, n_shared, es, ea, eb in pre:
                got[label].append(similarity(kind, f_value, n_shared, es, ea, eb) >= t)
            name = kind if f_value is None else f"{kind}, F = {f_value}"
            print(f"| {name} | {t:.2f} | " +
                  " | ".join(f"{100 * np.mean(got[label]):.1f} %" for label in labels) + " |")

    if args.groups:
        group_frequencies(args.groups, rows, index, sets, df, parts)


def group_frequencies(clusters_path, rows, index, sets, df, parts):
    """Section 4: the weighted Jaccard with a shingle counted once per group of near-duplicates."""
    group = list(range(len(sets)))
    with open(clusters_path, encoding="utf-8") as f:
        for line in f:
            cluster = json.loads(line)
            members = [cluster["kept"]["id"]] + [m["id"] for m in cluster["removed"]]
            for m in members:
                group[index[m]] = index[members[0]]
    members_of = collections.defaultdict(list)
    for i, g in enumerate(group):
        members_of[g].append(i)
    group_df = collections.Counter()
    for members in members_of.values():
        union = set()
        for i in members:
            union.update(np.asarray(sets[i]).tolist())
        group_df.update(union)
    labels = ["positive_edit_05", "positive_edit_10", "positive_wrap_both", "positive_wrap_one",
              "positive_mass_copy", "positive_reorder_sentences", "negative_template_only",
              "graded_template_heavy"]
    print(f"\n## 4. Prototype: document frequency once per group ({len(members_of)} groups of "
          f"{len(sets)} documents, {os.path.basename(os.path.dirname(clusters_path))}), F = 20, "
          "pairs, no LSH\n")
    print("| half | frequency | T | " + " | ".join(labels) + " |")
    print("|---|---|---|" + "---|" * len(labels))
    for half in ("choice", "held-out"):
        chosen = [r for r in rows if r["label"] in labels and
                  held_out_half(r["source"]) == (half == "held-out")]
        pre = []
        for r in chosen:
            shared, only_a, only_b = parts(r)
            differing = np.concatenate([only_a, only_b])
            pre.append((r["label"], shared.tolist(), differing.tolist()))
        for name, frequency in (("documents", df), ("groups", group_df)):
            for t in (0.40, 0.45, 0.50):
                got = collections.defaultdict(list)
                for label, shared, differing in pre:
                    s = weights([frequency[x] for x in shared], 20).sum()
                    d = weights([frequency[x] for x in differing], 20).sum()
                    got[label].append(s / max(1e-12, s + d) >= t)
                print(f"| {half} | {name} | {t:.2f} | " +
                      " | ".join(f"{100 * np.mean(got[label]):.1f} %" for label in labels) + " |")


if __name__ == "__main__":
    sys.exit(main())
