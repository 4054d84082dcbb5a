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

Standard library only; deterministic for a given --seed. Ids are "distractor/NNNNNNNNN".

    /usr/bin/python3 bench/generate_distractors.py 1000000 /tmp/distractors_1m.jsonl
"""
import argparse
import glob
import gzip
import json
import os
import random
import re
import sys

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
    with out:
        for i in range(args.count):
            name, pool = rng.choices(groups, weights)[0]
            sentences = rng.randint(args.min_sentences, args.max_sentences)
            text = make_distractor(rng, pool, sentences)
            out.write(json.dumps({"id": f"distractor/{i:09d}", "text": text, "from": name},
                                 ensure_ascii=False))
            out.write("\n")
    pools = ", ".join(f"{name} {len(pool)}" for name, pool in groups)
    print(f"generate_distractors: wrote {args.count} documents to {args.output} "
          f"(sentence pools: {pools})", file=sys.stderr)


if __name__ == "__main__":
    main()
