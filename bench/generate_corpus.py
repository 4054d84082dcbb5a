#!/usr/bin/env python3
"""Writes N synthetic JSONL documents made from the dev corpus, with known near-duplicates.

Each "original" document joins random chunks of 2-3 different corpus documents of one corpus file
(so originals are distinct from each other); with probability --dup-rate a document is instead a
mutated copy of a recent original (word substitutions, a dropped or swapped sentence, whitespace and
case noise, or an exact copy). Every line is {"id", "text", "derived_from"} ("derived_from" is the
original's id for copies, null otherwise), so a dedup run can be checked against the truth.

Standard library only. Deterministic for a given --seed. Memory stays small: the corpus (~50 MB)
plus a window of recent originals.

    python3 bench/generate_corpus.py 1000000 /tmp/gen_1m.jsonl
    python3 bench/generate_corpus.py 100000 /tmp/gen_100k.jsonl.gz --dup-rate 0.3
"""
import argparse
import collections
import glob
import gzip
import json
import os
import random
import re
import sys

SENTENCE_END = re.compile(r"(?<=[.!?。！？\n])")


def load_corpus(corpus_dir):
    groups = []
    for path in sorted(glob.glob(os.path.join(corpus_dir, "*.jsonl"))):
        texts = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                text = json.loads(line).get("text", "")
                if len(text) >= 80:
                    texts.append(text)
        if len(texts) >= 3:
            groups.append(texts)
    if not groups:
        sys.exit(f"generate_corpus: no usable *.jsonl documents in {corpus_dir}")
    return groups


def chunk(rng, text, chars):
    if len(text) <= chars:
        return text
    start = rng.randrange(0, len(text) - chars)
    return text[start:start + chars]


def make_original(rng, groups, chunk_chars):
    texts = rng.choice(groups)
    parts = [chunk(rng, rng.choice(texts), chunk_chars) for _ in range(rng.choice((2, 3)))]
    return "\n".join(parts)


def mutate_with_kind(rng, text):
    """Returns (mutated copy of text, kind): "exact", "noise" (whitespace and case), "sentence"
    (one sentence dropped or swapped with the next) or "words" (~3 % of the words, or characters
    of text without spaces, substituted)."""
    kind = rng.random()
    if kind < 0.15:
        return text, "exact"
    if kind < 0.30:  # whitespace and case noise
        text = re.sub(r" ", lambda m: "  " if rng.random() < 0.1 else " ", text)
        return (text.upper() if rng.random() < 0.3 else text + "\n\n"), "noise"
    sentences = [s for s in SENTENCE_END.split(text) if s]
    if kind < 0.55 and len(sentences) > 3:  # drop or swap one sentence
        i = rng.randrange(len(sentences) - 1)
        if rng.random() < 0.5:
            del sentences[i]
        else:
            sentences[i], sentences[i + 1] = sentences[i + 1], sentences[i]
        return "".join(sentences), "sentence"
    # substitute ~3% of words (or characters for text without spaces)
    if text.count(" ") > len(text) / 20:
        words = text.split(" ")
        for _ in range(max(1, len(words) * 3 // 100)):
            words[rng.randrange(len(words))] = rng.choice(("lorem", "ipsum", "dolor", "amet"))
        return " ".join(words), "words"
    chars = list(text)
    for _ in range(max(1, len(chars) * 3 // 100)):
        chars[rng.randrange(len(chars))] = rng.choice("的一是不了人我在有他这")
    return "".join(chars), "words"


def mutate(rng, text):
    return mutate_with_kind(rng, text)[0]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("count", type=int, help="number of documents to write")
    parser.add_argument("output", help="output JSONL path (.gz for gzip; - for stdout)")
    parser.add_argument("--corpus", default=os.path.join(here, "..", "..", "shared", "corpus"))
    parser.add_argument("--dup-rate", type=float, default=0.3, help="fraction of mutated copies")
    parser.add_argument("--chunk-chars", type=int, default=250, help="characters per chunk")
    parser.add_argument("--window", type=int, default=10000, help="recent originals copied from")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    groups = load_corpus(args.corpus)
    recent = collections.deque(maxlen=args.window)
    if args.output == "-":
        out = sys.stdout
    elif args.output.endswith(".gz"):
        out = gzip.open(args.output, "wt", encoding="utf-8", compresslevel=3)
    else:
        out = open(args.output, "w", encoding="utf-8")
    copies = 0
    with out:
        for i in range(args.count):
            doc_id = f"gen/{i:09d}"
            if recent and rng.random() < args.dup_rate:
                source_id, source_text = rng.choice(recent)
                text, derived = mutate(rng, source_text), source_id
                copies += 1
            else:
                text, derived = make_original(rng, groups, args.chunk_chars), None
                recent.append((doc_id, text))
            out.write(json.dumps({"id": doc_id, "text": text, "derived_from": derived},
                                 ensure_ascii=False))
            out.write("\n")
    print(f"generate_corpus: wrote {args.count} documents ({copies} mutated copies) to "
          f"{args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
