#!/usr/bin/env python3
"""Chooses dedup's pair-rule defaults on held-out data (docs/quality.md, "How the defaults were
chosen"), and prints the precision / recall curves per label.

The labelled pairs of ../shared/devpairs are split by set (N1_exact, S_en, X_zh, ...): for each
set, the rule's parameters are chosen on all the OTHER sets and the held-out set is scored with
them. The defaults are then chosen on all of devpairs the same way, and scored on the stress set
(bench/make_stress_set.py), which never takes part in a choice.

Each pair is judged exactly as dedup's pair rule judges it (neardup/pair_rule.h: exact and
whitespace-only copies, Jaccard >= T, or containment >= C with the size guard, every shingle
weighing 1 or, with boilerplate weights, F / df above F documents), on the library's own shingle
sets (neardup._Shingler, the narrowed sets dedup verifies), with document frequencies counted
exactly over the documents of the run (the corpus plus the labelled set's documents, as
`neardup eval` runs dedup). A pair counts as found with the probability that the LSH stage makes
it a candidate (1 - (1 - J^r)^b at its plain Jaccard J, with the bands and rows dedup chooses for
the rule), so the choice pays for what the candidate stage would miss. The real `neardup eval`
then confirms the chosen defaults (docs/quality.md).

Objective on the training sets: every positive label's recall >= 0.97 and every negative label's
false-positive rate <= 0.5 % (the aims of issue 25), then the highest F1, then the widest margin
(the largest 5th percentile, over the labelled positive and negative pairs the rule decides by
their sets, of how far inside the rule a positive pair is and how far outside a negative one), so that among equally scoring rules the one farthest from every pair is chosen.

    PYTHONPATH=build/python /usr/bin/python3 bench/choose_defaults.py --stress /tmp/stress
    PYTHONPATH=build/python /usr/bin/python3 bench/choose_defaults.py --stress /tmp/stress \
        --boilerplate on
"""
import argparse
import collections
import csv
import glob
import itertools
import json
import math
import os
import re
import sys

import numpy as np

import neardup
from neardup import _neardup

PLAIN_JACCARD_FLOOR = 0.2  # PairRule::kPlainJaccardFloor (neardup/pair_rule.h)
WHITESPACE = re.compile(r"[ \t\n\r\f\v\u00a0\u3000]")


def classify(label):
    positive = {"exact", "exact_ws", "near_dup_real", "near_dup_template", "syn_light_edit",
                "syn_boilerplate", "syn_reorder_delete", "syn_insert", "syn_width_case",
                "syn_html"}
    negative = {"negative_random", "negative_same_boilerplate", "negative_same_template",
                "negative_short", "negative_related_language", "paraphrase"}
    if label in positive or label.startswith("positive_"):
        return "positive"
    if label in negative or label.startswith("negative_"):
        return "negative"
    return "other"


def read_jsonl(paths):
    ids, texts = [], []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                ids.append(record["id"])
                texts.append(record["text"])
    return ids, texts


class Run:
    """The documents of one dedup run (corpus + a labelled set's documents) and the features of
    the labelled pairs."""

    def __init__(self, corpus_files, labelled_dir, frequencies):
        ids, texts = read_jsonl(corpus_files + [os.path.join(labelled_dir, "docs.jsonl")])
        index = {}
        for i, doc_id in enumerate(ids):
            index.setdefault(doc_id, i)
        shingler = _neardup._Shingler(True)
        sets = shingler.batch(texts, 0)
        lengths = np.array([len(s) for s in sets])
        values, counts = np.unique(np.concatenate(sets), return_counts=True)
        self.documents = len(ids)
        self.pairs = []
        with open(os.path.join(labelled_dir, "pairs.tsv"), encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                a, b = index.get(row["id_a"]), index.get(row["id_b"])
                if a is None or b is None:
                    continue
                self.pairs.append((row["set"], row["label"], a, b))
        n = len(self.pairs)
        self.exact = np.zeros(n, bool)
        self.whitespace = np.zeros(n, bool)
        self.plain = np.zeros((n, 3))  # |A|, |B|, |A & B|
        # Document frequencies of every shingle of each pair, flattened: part 0 = only in A,
        # 1 = only in B, 2 = shared; pair_of = the pair's number.
        dfs, parts, pair_of = [], [], []
        for k, (_, _, a, b) in enumerate(self.pairs):
            ta, tb = texts[a], texts[b]
            self.exact[k] = ta == tb
            self.whitespace[k] = WHITESPACE.sub("", ta) == WHITESPACE.sub("", tb)
            sa, sb = sets[a], sets[b]
            shared = np.intersect1d(sa, sb, assume_unique=True)
            self.plain[k] = (len(sa), len(sb), len(shared))
            for part, values_of in enumerate((np.setdiff1d(sa, shared, assume_unique=True),
                                              np.setdiff1d(sb, shared, assume_unique=True),
                                              shared)):
                dfs.append(counts[np.searchsorted(values, values_of)])
                parts.append(np.full(len(values_of), part, np.int8))
                pair_of.append(np.full(len(values_of), k, np.int32))
        self.df = np.concatenate(dfs)
        self.part = np.concatenate(parts)
        self.pair_of = np.concatenate(pair_of)
        self.sets = np.array([p[0] for p in self.pairs])
        self.labels = np.array([p[1] for p in self.pairs])
        self.classes = np.array([classify(p[1]) for p in self.pairs])
        self.weighted = {}
        for f in frequencies:
            if f == 0:  # no boilerplate weights: run.plain
                continue
            self.weighted[f] = self.weigh(lambda df: np.where(df < f, 1.0, f / df))

    def weigh(self, weight):
        """(w(A), w(B), w(A & B)) per pair for a weight function of the document frequency."""
        w = weight(self.df.astype(float))
        n = len(self.pairs)
        sums = [np.bincount(self.pair_of[self.part == p], w[self.part == p], minlength=n)
                for p in range(3)]
        return np.stack([sums[0] + sums[2], sums[1] + sums[2], sums[2]], axis=1)


def lsh_parameters(lowest):
    bands, rows = neardup.choose_lsh_parameters(lowest)
    return bands, rows


def judge(run, config):
    """Probability each pair is flagged under `config`, and the margins of the pairs decided by
    similarity."""
    threshold, containment, min_ratio, min_shingles, frequency = config
    wa, wb, wi = (run.weighted[frequency] if frequency else run.plain).T
    union = wa + wb - wi
    jaccard = np.where(union > 0, wi / np.maximum(union, 1e-12), 0)
    small, large = np.minimum(wa, wb), np.maximum(wa, wb)
    contain = np.where(small > 0, np.minimum(1, wi / np.maximum(small, 1e-12)), 0)
    empty = (run.plain[:, 0] == 0) | (run.plain[:, 1] == 0)
    near = (jaccard >= threshold) & ~empty
    guard = (containment > 0) & (small > 0) & (small >= min_shingles) & (small >= min_ratio * large)
    contained = guard & (contain >= containment) & ~empty
    rule = near | contained
    pa, pb, pi = run.plain.T
    plain_j = np.where(pa + pb - pi > 0, pi / np.maximum(pa + pb - pi, 1), 0)
    if frequency:  # with weights, the plain Jaccard must reach PairRule::kPlainJaccardFloor
        rule = rule & (plain_j >= PLAIN_JACCARD_FLOOR)
    # The LSH stage finds a pair with probability 1 - (1 - J^r)^b at its plain Jaccard.
    bands, rows = lsh_parameters(lowest_accepted(config))
    found = 1 - (1 - plain_j ** rows) ** bands
    hashes = run.exact | run.whitespace
    flagged = np.where(hashes, 1.0, rule * found)
    # How far inside the rule a pair is (> 0: accepted; < 0: how far it is from being accepted):
    # the larger of its Jaccard's and (with the guard met) its containment's distance to their
    # thresholds. A positive pair's margin is that, a negative pair's its opposite.
    inside = np.where(guard, np.maximum(jaccard - threshold, contain - containment),
                      jaccard - threshold)
    margin = np.where(run.classes == "negative", -inside, inside)
    margin = np.where(hashes, np.inf, margin)
    _ACCEPTED[(id(run), config)] = (rule & ~hashes, contained & ~near & ~hashes, found)
    return flagged, margin


# Per (run, rule): the pairs the rule accepts by their sets, those accepted only as contained,
# and each pair's probability of being an LSH candidate (for the candidate recall).
_ACCEPTED = {}


def candidate_recall(run, config, mask):
    """Expected LSH candidate recall over the labelled pairs in `mask` that the rule accepts by
    their sets (all of them, and those accepted only as `contained`), with their counts."""
    judged(run, config)
    accepted, contained, found = _ACCEPTED[(id(run), config)]
    out = []
    for m in (accepted & mask, contained & mask):
        out.append((float(found[m].mean()) if m.any() else float("nan"), int(m.sum()),
                    float(found[m].min()) if m.any() else float("nan")))
    return out


def score(run, flagged, mask):
    """Precision, recall, F1 and per-label rates over the pairs in `mask`."""
    out = {"labels": {}}
    tp = fp = fn = 0.0
    for label in sorted(set(run.labels[mask])):
        m = mask & (run.labels == label)
        rate = flagged[m].mean()
        out["labels"][label] = (classify(label), int(m.sum()), rate)
        if classify(label) == "positive":
            tp += flagged[m].sum()
            fn += (1 - flagged[m]).sum()
        elif classify(label) == "negative":
            fp += flagged[m].sum()
    out["tp"], out["fp"], out["fn"] = tp, fp, fn
    out["precision"] = tp / (tp + fp) if tp + fp > 0 else 1.0
    out["recall"] = tp / (tp + fn) if tp + fn > 0 else 1.0
    p, r = out["precision"], out["recall"]
    out["f1"] = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return out


_JUDGED = {}


def judged(run, config):
    key = (id(run), config)
    if key not in _JUDGED:
        _JUDGED[key] = judge(run, config)
    return _JUDGED[key]


def objective(run, config, mask):
    flagged, margin = judged(run, config)
    s = score(run, flagged, mask)
    violations = 0.0
    for cls, _, rate in s["labels"].values():
        if cls == "positive":
            violations += max(0.0, 0.97 - rate)
        elif cls == "negative":
            violations += max(0.0, rate - 0.005)
    decided = margin[mask & np.isfinite(margin) & (run.classes != "other")]
    spread = float(np.percentile(decided, 5)) if len(decided) else 0.0
    return (-round(violations, 6), round(s["f1"], 6), spread), s


def grid(frequencies, max_bands):
    """The rules tried: the threshold, F (0 = no boilerplate weights; --boilerplate), and
    containment off or on with its size guard. Only rules whose LSH plan keeps 3 rows a band
    are tried (the lowest Jaccard they accept is >= 0.446): 2 rows made 18 times the candidate
    pairs at a million documents and 7 times the CPU time (docs/quality.md); and, with
    --max-bands, at most that many bands (30 = the plan at 0.5, whose cost at 1M documents is
    the one measured)."""
    for threshold in (0.4, 0.45, 0.5, 0.55, 0.6):
        for frequency in frequencies:
            options = [(0.0, 0.0, 0.0)] + list(itertools.product(
                (0.85, 0.9, 0.95), (0.5, 0.6, 0.7), (20, 30, 50)))
            for containment, ratio, shingles in options:
                config = (threshold, containment, ratio, shingles, frequency)
                bands, rows = lsh_parameters(lowest_accepted(config))
                if rows >= 3 and (max_bands <= 0 or bands <= max_bands):
                    yield config


def lowest_accepted(config):
    threshold, containment, ratio, _, _ = config
    if containment > 0:
        return min(threshold, containment * ratio / (1 + ratio - containment * ratio))
    return threshold


def describe(config):
    t, c, r, m, f = config
    rule = f"T={t:.2f}"
    rule += f", contained >= {c:.2f} (ratio >= {r:.1f}, >= {m:.0f} shingles)" if c else ", containment off"
    rule += f", boilerplate F={f}" if f else ", no boilerplate weights"
    return rule


# dedup's defaults before this choice (T, containment, ratio, shingles): preferred among ties.
CURRENT = (0.5, 0.9, 0.6, 30)


def best(run, mask, configs):
    """The best rule by objective(); among rules that tie (the data cannot tell them apart), the
    current defaults, then one with containment on (issue 25 asks for the reason), then the
    first in grid order."""
    return max(((objective(run, c, mask)[0] + (c[:4] == CURRENT, c[1] > 0), c) for c in configs),
               key=lambda x: x[0])[1]


def curve(run, config, mask, title):
    """Per label: the fraction flagged at thresholds 0.3 .. 0.8 and the chosen one (the rest of
    `config` kept)."""
    thresholds = sorted({0.3, 0.4, 0.5, 0.6, 0.7, 0.8, config[0]})
    rows = collections.defaultdict(list)
    overall = []
    for t in thresholds:
        c = (t,) + tuple(config[1:])
        flagged, _ = judge(run, c)
        s = score(run, flagged, mask)
        overall.append(s)
        for label, (cls, n, rate) in s["labels"].items():
            rows[(cls, label, n)].append(rate)
    print(f"\n{title}\n")
    print("| label | class | pairs | " + " | ".join(f"T={t:g}" for t in thresholds) + " |")
    print("|---|---|---|" + "---|" * len(thresholds))
    for (cls, label, n), rates in sorted(rows.items(), key=lambda x: (x[0][0] != "positive", x[0][1])):
        print(f"| {label} | {cls} | {n} | " + " | ".join(f"{100 * r:.1f}%" for r in rates) + " |")
    for key in ("precision", "recall", "f1"):
        print(f"| **{key}** | | | " + " | ".join(f"{s[key]:.3f}" for s in overall) + " |")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", default=os.path.join(here, "..", "..", "shared"))
    parser.add_argument("--stress", help="the stress set's directory (bench/make_stress_set.py)")
    parser.add_argument("--boilerplate", choices=("off", "on"), default="off",
                        help="off: rules without boilerplate weights (dedup's default); on: "
                        "rules with weights, F from --frequencies")
    parser.add_argument("--frequencies", default="10,20,30,50,100,200,500",
                        help="boilerplate F values to try with --boilerplate on")
    parser.add_argument("--max-bands", type=int, default=30,
                        help="only rules whose LSH plan has at most this many bands (0: any)")
    args = parser.parse_args()
    frequencies = [0]
    if args.boilerplate == "on":
        frequencies = [int(f) for f in args.frequencies.split(",") if f and int(f) > 0]
    corpus = sorted(glob.glob(os.path.join(args.shared, "corpus", "*.jsonl")))
    dev = Run(corpus, os.path.join(args.shared, "devpairs"), frequencies)
    configs = list(grid(frequencies, args.max_bands))
    print(f"{len(dev.pairs)} devpairs pairs over {dev.documents} documents; {len(configs)} rules")

    print("\n## Held out by set (chosen on the other sets)\n")
    print("| held-out set | chosen on the others | positives | negatives | precision | recall | F1 | lowest positive label recall | highest negative label FP rate |")
    print("|---|---|---|---|---|---|---|---|---|")
    for held in sorted(set(dev.sets)):
        train = dev.sets != held
        test = ~train
        chosen = best(dev, train, configs)
        flagged, _ = judged(dev, chosen)
        s = score(dev, flagged, test)
        pos = [r for c, _, r in s["labels"].values() if c == "positive"]
        neg = [r for c, _, r in s["labels"].values() if c == "negative"]
        n_pos = sum(n for c, n, _ in s["labels"].values() if c == "positive")
        n_neg = sum(n for c, n, _ in s["labels"].values() if c == "negative")
        f1 = f"{s['f1']:.3f}" if n_pos else "n/a"
        print(f"| {held} | {describe(chosen)} | {n_pos} | {n_neg} | {s['precision']:.3f} | "
              f"{s['recall']:.3f} | {f1} | {min(pos) * 100:.1f}% | " if pos else
              f"| {held} | {describe(chosen)} | {n_pos} | {n_neg} | {s['precision']:.3f} | n/a | n/a | n/a | ",
              end="")
        print(f"{max(neg) * 100:.1f}% |" if neg else "n/a |")

    everything = np.ones(len(dev.pairs), bool)
    chosen = best(dev, everything, configs)
    print(f"\n## Chosen on all of devpairs: {describe(chosen)}\n")
    ranked = sorted(((objective(dev, c, everything)[0], c) for c in configs), reverse=True)[:12]
    print("| rule | constraint violations | F1 | margin (5th percentile) |")
    print("|---|---|---|---|")
    for (violations, f1, spread), c in ranked:
        print(f"| {describe(c)} | {-violations:.4f} | {f1:.4f} | {spread:.3f} |")
    (r_all, n_all, lo_all), (r_in, n_in, lo_in) = candidate_recall(dev, chosen, everything)
    print(f"\nExpected LSH candidate recall over the devpairs pairs the rule accepts by their sets: "
          f"{r_all:.4f} ({n_all} pairs, lowest {lo_all:.3f}); accepted only as contained: "
          f"{r_in:.4f} ({n_in} pairs, lowest {lo_in:.3f})")
    curve(dev, chosen, everything, "### devpairs: fraction flagged per label by threshold (the other "
          "parameters as chosen)")

    if args.stress:
        stress = Run(corpus, args.stress, frequencies)
        all_stress = np.ones(len(stress.pairs), bool)
        flagged, _ = judge(stress, chosen)
        s = score(stress, flagged, all_stress)
        print(f"\n## Stress set with the chosen rule ({len(stress.pairs)} pairs over "
              f"{stress.documents} documents): precision {s['precision']:.3f}, recall "
              f"{s['recall']:.3f}, F1 {s['f1']:.3f}\n")
        (r_all, n_all, lo_all), (r_in, n_in, lo_in) = candidate_recall(stress, chosen, all_stress)
        print(f"Expected LSH candidate recall over the stress pairs the rule accepts by their "
              f"sets: {r_all:.4f} ({n_all} pairs, lowest {lo_all:.3f}); accepted only as "
              f"contained: {r_in:.4f} ({n_in} pairs, lowest {lo_in:.3f})")
        curve(stress, chosen, all_stress, "### stress set: fraction flagged per label by threshold")
        # What the stress set would have chosen (reported only: never used).
        own = best(stress, all_stress, configs)
        print(f"\n(For reference only, not used: the rule the stress set itself would choose: "
              f"{describe(own)})")


if __name__ == "__main__":
    main()
