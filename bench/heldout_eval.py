#!/usr/bin/env python3
"""Held-out evaluation of dedup's pair rule with the product's own pipeline (docs/quality.md,
"Held-out figures from real runs").

For every candidate rule (a small grid of --threshold / --containment settings; the LSH plan as
dedup resolves it, ResolveDedupLsh, unless the rule gives --bands/--rows), this runs the real
`neardup eval` twice: on ../shared/devpairs (dedup over the corpus plus devpairs' documents) and
on the stress set (bench/make_stress_set.py; dedup over the corpus plus its documents). A pair
counts as found when the dedup run put its two documents in one cluster (eval's "same cluster"
method: what a user gets), read from eval.json's list of missed pairs and false positives; with
--by-pair, when the pair itself was a candidate the pair rule accepted (eval's "candidate pair
(+verified)", eval.json's pair_errors: no cluster transitivity). Nothing here models the LSH
stage or re-implements the rule.

The choice is held out twice:
  * devpairs by set: for each set, the rule is chosen on all the OTHER devpairs sets plus the
    stress set's choice half, and the held-out set is reported;
  * the stress set by source document: pairs whose content comes from a corpus document in one
    half (a hash of the pairs.tsv `source` column, FILE#N) are the choice half, the others the
    reported half. The defaults are chosen on all of devpairs plus the choice half and reported
    on the held-out half.

Objective on the choice data: the aims of issue 25 first (every positive label's recall >= 0.97,
every negative label's false-positive rate <= 0.5 %; the sum of the shortfalls), then the highest
F1; among ties the current defaults.

    /usr/bin/python3 bench/make_stress_set.py /tmp/stress
    /usr/bin/python3 bench/heldout_eval.py --binary build/neardup --stress /tmp/stress \\
        --work /tmp/heldout > heldout_clusters.md
    /usr/bin/python3 bench/heldout_eval.py --binary build/neardup --stress /tmp/stress \
        --work /tmp/heldout --reuse --by-pair > heldout_pairs.md

With --curve it prints instead the fraction flagged per label at thresholds 0.3 .. 0.8 (every
other option at its default), all pairs of devpairs and of the stress set: docs/quality.md's
precision / recall curve.
"""
import argparse
import collections
import csv
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

# name: the flags of `neardup eval` that make the rule (the rest are dedup's defaults).
# Boilerplate weights are shown for reference only, never chosen: their counts depend on the
# corpus, so the answer for a pair would depend on what else was in the run (docs/quality.md).
REFERENCE_ONLY = {"T=0.50, --boilerplate", "T=0.45, --boilerplate", "T=0.40, --boilerplate",
                  "T=0.45, --boilerplate, F=50", "T=0.45, --boilerplate, F=100",
                  "T=0.50, --boilerplate, edited 0.8", "T=0.45, --boilerplate, edited 0.8",
                  "T=0.40, --boilerplate, edited 0.8 from J 0.4"}
RULES = [
    ("T=0.50 (defaults)", []),
    ("T=0.50, edited off", ["--edited", "0"]),
    ("T=0.40", ["--threshold", "0.4"]),
    ("T=0.45", ["--threshold", "0.45"]),
    ("T=0.45, 30x3", ["--threshold", "0.45", "--bands", "30", "--rows", "3"]),
    ("T=0.55", ["--threshold", "0.55"]),
    ("T=0.60", ["--threshold", "0.6"]),
    ("T=0.50, containment off", ["--containment", "0"]),
    ("T=0.45, containment off", ["--threshold", "0.45", "--containment", "0"]),
    ("T=0.50, contained >= 0.85", ["--containment", "0.85"]),
    ("T=0.50, contained ratio >= 0.5", ["--containment-min-ratio", "0.5"]),
    ("T=0.50, --boilerplate", ["--boilerplate"]),
    ("T=0.45, --boilerplate", ["--threshold", "0.45", "--boilerplate"]),
    ("T=0.40, --boilerplate", ["--threshold", "0.4", "--boilerplate"]),
    ("T=0.45, --boilerplate, F=50",
     ["--threshold", "0.45", "--boilerplate", "--boilerplate-min-documents", "50"]),
    ("T=0.45, --boilerplate, F=100",
     ["--threshold", "0.45", "--boilerplate", "--boilerplate-min-documents", "100"]),
    # The `edited` reason (shingle Jaccard >= the floor, 0.45 unless given, and the units'
    # multiset Jaccard >= S): S and the floor tried here.
    ("T=0.50, edited 0.7", ["--edited", "0.7"]),
    ("T=0.50, edited 0.75", ["--edited", "0.75"]),
    ("T=0.50, edited 0.8", ["--edited", "0.8"]),
    ("T=0.50, edited 0.85", ["--edited", "0.85"]),
    ("T=0.50, edited 0.8 from J 0.4", ["--edited", "0.8", "--edited-min-jaccard", "0.4"]),
    ("T=0.45, edited 0.8", ["--threshold", "0.45", "--edited", "0.8"]),
    ("T=0.50, --boilerplate, edited 0.8", ["--boilerplate", "--edited", "0.8"]),
    ("T=0.45, --boilerplate, edited 0.8", ["--threshold", "0.45", "--boilerplate", "--edited",
                                           "0.8"]),
    ("T=0.40, --boilerplate, edited 0.8 from J 0.4",
     ["--threshold", "0.4", "--boilerplate", "--edited", "0.8", "--edited-min-jaccard", "0.4"]),
]
# `edited` is on by default (0.8, from 2026-11-27): a rule that does not name it is measured with
# the reason off, so that each name says the whole rule.
RULES = [(name, flags if "--edited" in flags or not flags else flags + ["--edited", "0"])
         for name, flags in RULES]
# --curve: the fraction flagged per label by threshold (docs/quality.md's precision / recall
# curve), the `edited` reason off (the curve is the threshold's), every other option at its default.
CURVE = [(f"T={t:.2f}", ["--threshold", f"{t}", "--edited", "0"])
         for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)]
DEFAULTS = RULES[0][0]


def slug(name):
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def read_pairs(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def run_eval(args, name, flags, which):
    """Runs (or, with --reuse, reads the earlier run of) `neardup eval` for one rule on one
    labelled set; returns (eval.json, summary.json, CPU seconds or None)."""
    out = os.path.join(args.work, f"{which}_{slug(name)}")
    labelled = args.devpairs if which == "dev" else args.stress
    command = [args.binary, "eval", "--devpairs", labelled, "--corpus", args.corpus, "-o", out,
               "-f", "--json", "-j", str(args.threads)] + flags
    cpu = None
    cpu_file = out + ".cpu"  # the CPU seconds of the run, for --reuse
    if not (args.reuse and os.path.exists(os.path.join(out, "eval.json"))):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.time()
        with open(out + ".stderr", "w") as err:
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=err, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"heldout_eval: {which} {name}: {time.time() - started:.1f} s, {cpu:.1f} CPU-s",
              file=sys.stderr)
        with open(cpu_file, "w") as f:
            f.write(f"{cpu}\n")
    elif os.path.exists(cpu_file):
        with open(cpu_file) as f:
            cpu = float(f.read())
    with open(os.path.join(out, "eval.json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    return report, summary, cpu


class Outcomes:
    """Per labelled pair: its set, label, class (eval's), source and whether the run found it
    (for a negative: whether the run wrongly flagged it): by cluster (what a user gets: the two
    documents in one cluster) or, with by_pair, by the pair itself (a candidate the pair rule
    accepted; eval.json's pair_errors)."""

    def __init__(self, pairs, report, by_pair=False):
        if by_pair:
            wrong = collections.Counter((m["set"], m["a"], m["b"]) for m in report["pair_errors"])
        else:
            wrong = collections.Counter((m["set"], m["a"]["id"], m["b"]["id"])
                                        for m in report["missed"])
        classes = {row["label"]: row["class"] for row in report["labels"]}
        self.rows = []
        for p in pairs:
            key = (p["set"], p["id_a"], p["id_b"])
            cls = classes.get(p["label"], "other")
            is_wrong = wrong[key] > 0
            flagged = (not is_wrong) if cls == "positive" else is_wrong
            self.rows.append((p["set"], p["label"], cls, p.get("source", ""), flagged))


def score(rows):
    """Precision, recall, F1 and per-label (class, pairs, rate) over `rows`."""
    by_label = collections.defaultdict(lambda: [None, 0, 0])
    tp = fp = fn = 0
    for _, label, cls, _, flagged in rows:
        entry = by_label[label]
        entry[0] = cls
        entry[1] += 1
        entry[2] += flagged
        if cls == "positive":
            tp += flagged
            fn += not flagged
        elif cls == "negative":
            fp += flagged
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    labels = {k: (v[0], v[1], v[2] / v[1]) for k, v in by_label.items()}
    return {"precision": p, "recall": r, "f1": f1, "labels": labels, "positives": tp + fn,
            "negatives": sum(n for c, n, _ in labels.values() if c == "negative")}


def objective(name, rows):
    s = score(rows)
    shortfall = 0.0
    for cls, _, rate in s["labels"].values():
        if cls == "positive":
            shortfall += max(0.0, 0.97 - rate)
        elif cls == "negative":
            shortfall += max(0.0, rate - 0.005)
    return (-round(shortfall, 6), round(s["f1"], 6), name == DEFAULTS)


def best(results, select):
    """The rule whose rows chosen by select(which, row) score best."""
    def rows_of(name):
        return [row for which in ("dev", "stress") for row in results[name][which].rows
                if select(which, row)]
    return max((name for name in results if name not in REFERENCE_ONLY),
               key=lambda name: objective(name, rows_of(name)))


def held_out_half(source):
    return hashlib.sha256(source.encode()).digest()[0] & 1 == 1


def extremes(s):
    pos = [(rate, label) for label, (c, _, rate) in s["labels"].items() if c == "positive"]
    neg = [(rate, label) for label, (c, _, rate) in s["labels"].items() if c == "negative"]
    low = f"{100 * min(pos)[0]:.1f} % ({min(pos)[1]})" if pos else "n/a"
    high = f"{100 * max(neg)[0]:.1f} % ({max(neg)[1]})" if neg else "n/a"
    return low, high


def print_curve(args):
    """Per label (every label of eval.json, graded ones too), the fraction flagged at each
    threshold of CURVE (real runs, all pairs), then precision, recall and F1 over the positive and
    negative labels."""
    method = 1 if args.by_pair else 0  # eval.json's methods: same cluster, candidate pair
    for which, title in (("dev", "devpairs"), ("stress", "Stress set")):
        runs = [run_eval(args, name, flags, which)[0] for name, flags in CURVE]
        print(f"\n{title} (eval's \"{runs[0]['methods'][method]}\"):\n")
        print("| label | class | pairs | " + " | ".join(name for name, _ in CURVE) + " |")
        print("|---|---|---|" + "---|" * len(CURVE))
        order = {"positive": 0, "negative": 2}
        labels = sorted(runs[0]["labels"], key=lambda x: (order.get(x["class"], 1), x["label"]))
        for entry in labels:
            rates = [next(x for x in run["labels"] if x["label"] == entry["label"])["rates"][method]
                     for run in runs]
            print(f"| {entry['label']} | {entry['class']} | {entry['pairs']} | " +
                  " | ".join(f"{100 * r:.1f}%" for r in rates) + " |")
        totals = []
        for run in runs:
            tp = fn = fp = 0.0
            for x in run["labels"]:
                flagged = x["rates"][method] * x["pairs"]
                if x["class"] == "positive":
                    tp += flagged
                    fn += x["pairs"] - flagged
                elif x["class"] == "negative":
                    fp += flagged
            p = tp / (tp + fp) if tp + fp else 1.0
            r = tp / (tp + fn) if tp + fn else 1.0
            totals.append({"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0})
        for key in ("precision", "recall", "f1"):
            print(f"| **{key}** | | | " + " | ".join(f"{t[key]:.3f}" for t in totals) + " |")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.path.join(here, "..", "..", "shared")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=os.path.join(here, "..", "build", "neardup"))
    parser.add_argument("--devpairs", default=os.path.join(shared, "devpairs"))
    parser.add_argument("--corpus", default=os.path.join(shared, "corpus"))
    parser.add_argument("--stress", required=True,
                        help="the stress set's directory (bench/make_stress_set.py)")
    parser.add_argument("--work", required=True, help="directory for the eval runs' outputs")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--by-pair", action="store_true",
                        help="score the pairs themselves (a candidate the pair rule accepted) "
                        "instead of the clusters (both documents in one cluster, the default)")
    parser.add_argument("--reuse", action="store_true",
                        help="read the runs already in --work instead of running them again")
    parser.add_argument("--show", action="append", default=[], metavar="RULE",
                        help="also show this rule (a name of RULES, e.g. a reference-only one) in "
                        "the held-out stress table; may be repeated")
    parser.add_argument("--curve", action="store_true",
                        help="print the fraction flagged per label at thresholds 0.3 .. 0.8 (all "
                        "pairs, both data sets) instead of the held-out choice")
    args = parser.parse_args()
    if not os.path.isdir(args.devpairs) or not os.path.isdir(args.corpus):
        sys.exit(f"heldout_eval: {args.devpairs} or {args.corpus} is missing (../shared)")
    os.makedirs(args.work, exist_ok=True)
    dev_pairs = read_pairs(os.path.join(args.devpairs, "pairs.tsv"))
    stress_pairs = read_pairs(os.path.join(args.stress, "pairs.tsv"))
    if not stress_pairs or "source" not in stress_pairs[0]:
        sys.exit("heldout_eval: the stress set's pairs.tsv has no source column; make it again "
                 "with bench/make_stress_set.py")

    if args.curve:
        print_curve(args)
        return
    results, costs = {}, {}
    for name, flags in RULES:
        results[name] = {}
        costs[name] = {}
        for which, pairs in (("dev", dev_pairs), ("stress", stress_pairs)):
            report, summary, cpu = run_eval(args, name, flags, which)
            results[name][which] = Outcomes(pairs, report, args.by_pair)
            costs[name][which] = (summary["candidate_pairs"], cpu)

    method = ('"dedup: candidate pair (+verified)"' if args.by_pair else
              '"dedup: same cluster"')
    halves = collections.Counter(held_out_half(p["source"]) for p in stress_pairs)
    sources = collections.Counter(held_out_half(s) for s in {p["source"] for p in stress_pairs})
    print(f"devpairs: {len(dev_pairs)} pairs; stress set: {len(stress_pairs)} pairs from "
          f"{sum(sources.values())} source documents, choice half {halves[False]} pairs "
          f"({sources[False]} sources), held-out half {halves[True]} pairs ({sources[True]} "
          f"sources). Every figure below is eval's {method} method of a real `neardup eval` "
          f"run ({os.path.basename(args.binary)}).\n")

    print("## The rules tried (on the choice data: all of devpairs + the stress choice half)\n")
    print("| rule | LSH plan | F1 | lowest positive label | highest negative FP | aims shortfall "
          "| candidate pairs, devpairs run | candidate pairs, stress run | CPU-s (dev + stress) |")
    print("|---|---|---|---|---|---|---|---|---|")
    choice = lambda which, row: which == "dev" or not held_out_half(row[3])  # noqa: E731
    for name, _ in RULES:
        rows = [r for w in ("dev", "stress") for r in results[name][w].rows if choice(w, r)]
        s = score(rows)
        low, high = extremes(s)
        shortfall, _, _ = objective(name, rows)
        summary_path = os.path.join(args.work, f"dev_{slug(name)}", "summary.json")
        with open(summary_path, encoding="utf-8") as f:
            rule = json.load(f)["options"]
        plan = f"{rule.get('bands', '?')}x{rule.get('rows', '?')}"
        cpu = [costs[name][w][1] for w in ("dev", "stress")]
        cpu_text = f"{sum(cpu):.1f}" if None not in cpu else "n/a"
        shown_name = name + (" (reference only)" if name in REFERENCE_ONLY else "")
        print(f"| {shown_name} | {plan} | {s['f1']:.4f} | {low} | {high} | {-shortfall:.4f} | "
              f"{costs[name]['dev'][0]:,} | {costs[name]['stress'][0]:,} | {cpu_text} |")

    print("\n## devpairs held out by set (chosen on the other sets + the stress choice half)\n")
    print("| held-out set | chosen | positives | negatives | precision | recall | F1 | lowest "
          "positive label | highest negative FP | F1, defaults | lowest positive label, defaults "
          "| highest negative FP, defaults |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for held in sorted({p["set"] for p in dev_pairs}):
        chosen = best(results, lambda w, row: (w == "dev" and row[0] != held) or
                      (w == "stress" and not held_out_half(row[3])))
        s = score([r for r in results[chosen]["dev"].rows if r[0] == held])
        low, high = extremes(s)
        f1 = f"{s['f1']:.3f}" if s["positives"] else "n/a"
        recall = f"{s['recall']:.3f}" if s["positives"] else "n/a"
        d = score([r for r in results[DEFAULTS]["dev"].rows if r[0] == held])
        d_low, d_high = extremes(d)
        d_f1 = f"{d['f1']:.3f}" if d["positives"] else "n/a"
        print(f"| {held} | {chosen} | {s['positives']} | {s['negatives']} | "
              f"{s['precision']:.3f} | {recall} | {f1} | {low} | {high} | {d_f1} | {d_low} | "
              f"{d_high} |")

    for name in args.show:
        print(f"\n## devpairs by set with {name} (not chosen: shown with --show)\n")
        print("| set | positives | negatives | precision | recall | F1 | lowest positive label | "
              "highest negative FP |")
        print("|---|---|---|---|---|---|---|---|")
        for held in sorted({p["set"] for p in dev_pairs}):
            s = score([r for r in results[name]["dev"].rows if r[0] == held])
            low, high = extremes(s)
            f1 = f"{s['f1']:.3f}" if s["positives"] else "n/a"
            recall = f"{s['recall']:.3f}" if s["positives"] else "n/a"
            print(f"| {held} | {s['positives']} | {s['negatives']} | {s['precision']:.3f} | "
                  f"{recall} | {f1} | {low} | {high} |")

    chosen = best(results, choice)
    print(f"\n## Stress set, held-out half (the rule chosen on all of devpairs + the choice half: "
          f"{chosen})\n")
    shown = [chosen] + ([DEFAULTS] if chosen != DEFAULTS else [])
    for name in args.show:
        if name not in results:
            sys.exit(f"heldout_eval: --show {name!r} is not a rule here")
        if name not in shown:
            shown.append(name)
    scores = {name: score([r for r in results[name]["stress"].rows if held_out_half(r[3])])
              for name in shown}
    print("| label | class | pairs | " + " | ".join(shown) + " |")
    print("|---|---|---|" + "---|" * len(shown))
    labels = scores[chosen]["labels"]
    for label, (cls, n, _) in sorted(labels.items(), key=lambda x: (x[1][0] != "positive", x[0])):
        if cls not in ("positive", "negative"):
            continue  # graded: not scored
        print(f"| {label} | {cls} | {n} | " +
              " | ".join(f"{100 * scores[name]['labels'][label][2]:.1f} %" for name in shown) +
              " |")
    for key in ("precision", "recall", "f1"):
        print(f"| **{key}** | | | " + " | ".join(f"{scores[name][key]:.3f}" for name in shown) +
              " |")


if __name__ == "__main__":
    main()
