#!/usr/bin/env python3
"""Puts several `neardup eval --markdown` reports side by side: one column per report, the
"dedup: same cluster" figures (overall precision / recall / F1 / false positives, then the rate per
label: recall for positive labels, false-positive rate for negative labels, flagged rate for graded
ones).

    /usr/bin/python3 bench/quality_table.py "28k defaults=a.md" "1M defaults=b.md" ...
"""
import re
import sys


def parse(path):
    text = open(path, encoding="utf-8").read()
    overall = {}
    labels = {}
    section = None
    for line in text.splitlines():
        if line.startswith("### "):
            section = line
            continue
        if not line.startswith("| ") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if section and section.startswith("### Overall") and cells[0] == "dedup: same cluster":
            overall = {"precision": cells[1], "recall": cells[2], "f1": cells[3], "fp": cells[4],
                       "after": cells[5]}
        elif section and section.startswith("### Per label") and cells[0] != "label":
            labels[cells[0]] = (cells[1], cells[3])  # class, dedup: same cluster
    documents = re.search(r"Documents: (\d+)", text)
    return overall, labels, documents.group(1) if documents else "?"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    columns = []
    for arg in sys.argv[1:]:
        name, _, path = arg.rpartition("=")
        columns.append((name, *parse(path)))
    print("| | " + " | ".join(name for name, *_ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    print("| documents | " + " | ".join(f"{int(d):,}" if d != "?" else d
                                        for *_, d in columns) + " |")
    for key, title in (("precision", "precision"), ("recall", "recall"), ("f1", "**F1**"),
                       ("fp", "false positives on negatives"),
                       ("after", "after-normalisation recall")):
        print(f"| {title} | " + " | ".join(o.get(key, "?") for _, o, _, _ in columns) + " |")
    all_labels = []
    for _, _, labels, _ in columns:
        for label in labels:
            if label not in all_labels:
                all_labels.append(label)
    order = {"positive": 0, "negative": 1, "positive after normalisation": 2, "graded": 3}
    all_labels.sort(key=lambda l: (order.get(next(
        (labels[l][0] for _, _, labels, _ in columns if l in labels), ""), 9), l))
    for label in all_labels:
        cls = next((labels[label][0] for _, _, labels, _ in columns if label in labels), "")
        cells = [labels.get(label, ("", "-"))[1] for _, _, labels, _ in columns]
        print(f"| {label} ({cls}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
