#!/usr/bin/env python3
"""Writes N distractor documents: texts that are near-duplicates of nothing (of each other, of the
dev corpus or of ../shared/devpairs), to mix the labelled pairs into a large corpus.

Each distractor is 8-24 sentences of one corpus file (one language / genre), drawn at random from
the distinct sentences of that file, with at most 2 sentences from any one corpus document and no
sentence repeated. A devpairs text is therefore never copied: a distractor shares at most 2
sentences with any corpus document (and so with any devpairs document made from it), far below the
shingle Jaccard of a near-duplicate. Sentences are split at . ! ? and their full-width forms and
at line breaks; those shorter than 30 characters (12 for Chinese / Japanese) are dropped, so that
one short line repeated across the corpus ("See also", a poem's refrain) does not tie documents, and
so are those longer than 60 shingle units (words, or characters of Han / kana / Thai / Lao /
Myanmar / Khmer text), so that no one sentence dominates a document's shingles, those holding "<"
(an unclosed <script> or <style> tag would hide the rest of the text from the markup stripper), and
those that are not prose (fewer than 5 words, or fewer than half of them alphabetic words of 3+
letters: quoted-printable or hex-dump lines of spam, whose few short tokens made 199 of a million
distractors of the first version verify as near-duplicates of each other).

With --dup-rate R (default 0: distractors only), a fraction R of the documents are instead planted
near-duplicate copies of a recent distractor (one of the last --window), of known kinds: the
mutations of generate_corpus.py ("exact" copies, whitespace and case "noise", one "sentence" dropped
or swapped, ~3 % of the "words" substituted) and "boilerplate" (the text wrapped in a header and a
footer sentence shared by many documents). Such lines carry "derived_from" (the original's id; null
for originals) and "copy_kind", and the ground truth is also written beside the output as
OUTPUT.truth.tsv (copy_id, original_id, kind), so a dedup run can be scored for recall of the
planted copies without parsing the corpus again. This is the large-run benchmark corpus of
bench/dedup_bench.sh: unlike generate_corpus.py, whose originals are cut from the same ~28k corpus
documents and so share long passages, its originals overlap only in incidental sentences, so the
benchmark measures scaling rather than verification of thousands of related originals.

Standard library only; deterministic for a given --seed. Ids are "distractor/NNNNNNNNN".

    /usr/bin/python3 bench/generate_distractors.py 1000000 /tmp/distractors_1m.jsonl
    /usr/bin/python3 bench/generate_distractors.py 1000000 /tmp/planted_1m.jsonl --dup-rate 0.1
"""
import argparse
import glob
import gzip
import json
import os
import random
import re
import sys

from generate_corpus import mutate_with_kind

SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*|\n+")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
# Scripts whose every character is a shingle unit in neardup's verification (Han, kana, Thai, Lao,
# Myanmar, Khmer): a sentence in them weighs one unit per character, elsewhere one per word.
CHARACTER_UNITS = re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff]")
MAX_UNITS = 60


def is_prose(sentence):
    """At least 5 word tokens, at least half of them alphabetic words of 3+ letters: drops encoded
    junk (quoted-printable "=F5=F4" or hex-dump lines, base64) whose few distinct short tokens
    would make unrelated documents share many shingles."""
    tokens = re.findall(r"\w+", sentence)
    words = sum(1 for t in tokens if len(t) >= 3 and t.isalpha())
    return len(tokens) >= 5 and words * 2 >= len(tokens)


def load_groups(corpus_dir, only):
    """One pool of (sentence, source document number) per corpus file."""
    groups = []
    for path in sorted(glob.glob(os.path.join(corpus_dir, "*.jsonl"))):
        if only and only not in os.path.basename(path):
            continue
        seen = set()
        pool = []
        with open(path, encoding="utf-8") as f:
            for doc_number, line in enumerate(f):
                text = json.loads(line).get("text", "")
                if not isinstance(text, str):
                    continue
                for sentence in SENTENCE_END.split(text):
                    sentence = " ".join(sentence.split())
                    cjk = len(CJK.findall(sentence))
                    min_chars = 12 if cjk * 2 >= len(sentence) else 30
                    if len(sentence) < min_chars or sentence in seen or "<" in sentence:
                        continue
                    characters = len(CHARACTER_UNITS.findall(sentence))
                    words = len(CHARACTER_UNITS.sub(" ", sentence).split())
                    if characters + words > MAX_UNITS:
                        continue
                    if cjk * 2 < len(sentence) and not is_prose(sentence):
                        continue
                    seen.add(sentence)
                    pool.append((sentence, doc_number))
        if len(pool) >= 200:
            groups.append((os.path.basename(path), pool))
    if not groups:
        sys.exit(f"generate_distractors: no usable *.jsonl documents in {corpus_dir}")
    return groups


def make_distractor(rng, pool, sentences):
    chosen = []
    used_sentence = set()
    per_source = {}
    attempts = 0
    while len(chosen) < sentences and attempts < sentences * 20:
        attempts += 1
        index = rng.randrange(len(pool))
        sentence, source = pool[index]
        if index in used_sentence or per_source.get(source, 0) >= 2:
            continue
        used_sentence.add(index)
        per_source[source] = per_source.get(source, 0) + 1
        chosen.append(sentence)
    joiner = "" if CJK.search(chosen[0]) else " "
    # A paragraph break every few sentences, as in real documents.
    parts = []
    for i, sentence in enumerate(chosen):
        parts.append(sentence)
        parts.append("\n\n" if i % 5 == 4 else joiner)
    return "".join(parts).strip()


def make_boilerplate(rng, groups, count):
    """count (header, footer) sentence pairs per corpus file: the shared wrapping of a
    "boilerplate" copy (a site's header and footer)."""
    return [[(rng.choice(pool)[0], rng.choice(pool)[0]) for _ in range(count)] for _, pool in groups]


def plant_copy(rng, text, wrappings):
    """A near-duplicate of text and its kind: one in five is wrapped in boilerplate, the others
    are mutated as generate_corpus.py does."""
    if rng.random() < 0.2:
        header, footer = rng.choice(wrappings)
        joiner = "" if CJK.search(text[:200]) else " "
        return f"{header}{joiner}\n\n{text}\n\n{footer}", "boilerplate"
    return mutate_with_kind(rng, text)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("count", type=int, help="number of documents to write")
    parser.add_argument("output", help="output JSONL path (.gz for gzip; - for stdout)")
    parser.add_argument("--corpus", default=os.path.join(here, "..", "..", "shared", "corpus"))
    parser.add_argument("--min-sentences", type=int, default=8)
    parser.add_argument("--max-sentences", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", default="", help="use only corpus files whose name holds this")
    parser.add_argument("--dup-rate", type=float, default=0.0,
                        help="fraction of planted near-duplicate copies (default 0: none)")
    parser.add_argument("--window", type=int, default=10000,
                        help="copies are made of one of this many most recent originals")
    args = parser.parse_args()
    if args.min_sentences < 5 or args.max_sentences < args.min_sentences:
        sys.exit("generate_distractors: need 5 <= --min-sentences <= --max-sentences")

    rng = random.Random(args.seed)
    groups = load_groups(args.corpus, args.only)
    # Languages / genres in proportion to their pools' sizes.
    weights = [len(pool) for _, pool in groups]
    if args.output == "-":
        out = sys.stdout
    elif args.output.endswith(".gz"):
        out = gzip.open(args.output, "wt", encoding="utf-8", compresslevel=3)
    else:
        out = open(args.output, "w", encoding="utf-8")
    planted = args.dup_rate > 0
    truth = None
    if planted:
        if args.output == "-":
            sys.exit("generate_distractors: --dup-rate needs an output file (truth goes beside it)")
        truth = open(args.output + ".truth.tsv", "w", encoding="utf-8")
        truth.write("copy_id\toriginal_id\tkind\n")
        wrappings = make_boilerplate(random.Random(args.seed + 1), groups, 16)
        recent = []  # ring of (id, text, group index) of the last --window originals
    copies = 0
    with out:
        for i in range(args.count):
            doc_id = f"distractor/{i:09d}"
            if planted and recent and rng.random() < args.dup_rate:
                source_id, source_text, g = recent[rng.randrange(len(recent))]
                text, kind = plant_copy(rng, source_text, wrappings[g])
                truth.write(f"{doc_id}\t{source_id}\t{kind}\n")
                copies += 1
                out.write(json.dumps({"id": doc_id, "text": text, "from": groups[g][0],
                                      "derived_from": source_id, "copy_kind": kind},
                                     ensure_ascii=False))
                out.write("\n")
                continue
            g = rng.choices(range(len(groups)), weights)[0] if planted else None
            name, pool = groups[g] if planted else rng.choices(groups, weights)[0]
            sentences = rng.randint(args.min_sentences, args.max_sentences)
            text = make_distractor(rng, pool, sentences)
            record = {"id": doc_id, "text": text, "from": name}
            if planted:
                record["derived_from"] = None
                if len(recent) < args.window:
                    recent.append((doc_id, text, g))
                else:
                    recent[i % args.window] = (doc_id, text, g)
            out.write(json.dumps(record, ensure_ascii=False))
            out.write("\n")
    if truth:
        truth.close()
    pools = ", ".join(f"{name} {len(pool)}" for name, pool in groups)
    print(f"generate_distractors: wrote {args.count} documents ({copies} planted copies) to "
          f"{args.output} "
          f"(sentence pools: {pools})", file=sys.stderr)


if __name__ == "__main__":
    main()
