#!/usr/bin/env python3
"""Builds the dedup stress set: labelled document pairs, harder than ../shared/devpairs, made
from the dev corpus (../shared/corpus) by a fixed recipe, never used to choose a default.

Writes OUT/docs.jsonl (the generated documents: id, lang, kind, text) and OUT/pairs.tsv (the
devpairs format: set, id_a, id_b, label, sim, note, plus `source`: the corpus document the
pair's content comes from, FILE#N, for splitting the pairs by source document in
bench/heldout_eval.py), so `neardup eval --devpairs OUT` scores it (dedup over the corpus plus
these documents). Standard library only; deterministic for a given --seed (the same files byte
for byte).

Content: real corpus documents (or contiguous excerpts of 600-4,000 characters at line breaks)
of every corpus file, in five language groups (en, ru, ja, zh, and the other UDHR languages).
Boilerplate: REAL recurring text of the corpus, not invented: runs of 2+ consecutive lines that
recur in 5 or more documents of one corpus file (mailing-list footers of the spam archive,
licence and translator footers of the man pages, LibreOffice help navigation, ...), combined into
a pool of site templates (a header and a footer from one corpus file). Each template wraps many
stress documents, as a site's template wraps its pages, and a document is only ever wrapped in
boilerplate from a corpus file other than its own.

Kinds (label: class; set = kind_language):
  positive_wrap_one       A the content, B = header + content + footer (20-150 % of the content)
  positive_wrap_both      A and B the same content in two different templates
  positive_edit_02/05/10  2, 5, 10 % of the words substituted, deleted or inserted (of Han / kana
                          text: 1.5, 3.75, 7.5 % of the characters, as devpairs' syn_light_edit
                          takes ~1.5 % of the characters for ~2 % of the words)
  graded_edit_20          the same at 20 % (a heavy rewrite: reported, not scored)
  positive_reorder_blocks the text cut at line breaks into 3-6 blocks, put in another order
  positive_reorder_sentences  20 % of the adjacent sentence pairs swapped
  positive_mass_copy      two of 60 copies of one text, each 1-4 % edited (its shingles are as
                          frequent as boilerplate)
  positive_short_edit     a short text (40-200 characters, 10+ units) with one unit substituted
  negative_short_different  two different short texts of one corpus file, lengths within 1.5x
  negative_template_only  two different documents of one corpus file in the same template, the
                          template 20-60 % of each (different content, same template)
  graded_template_heavy   the same with the template 60-80 % of each (devpairs grades such pairs:
                          template_similar)

    /usr/bin/python3 bench/make_stress_set.py /tmp/stress          # about 6,000 documents
    build/neardup eval --devpairs /tmp/stress --markdown stress.md
"""
import argparse
import collections
import glob
import json
import os
import random
import re
import sys

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
# One unit: a Han / kana character, or a run of other word characters (what the verification
# shingles count as units, closely enough for choosing edit positions).
UNIT = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]|[^\W\u3040-\u30ff\u3400-\u9fff]+")
SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*|\n+")
WORD3 = re.compile(r"\w+")

LANG_OF_FILE = {
    "en_kjv": "en", "en_manpages": "en", "en_movie_reviews": "en", "en_spamassassin": "en",
    "en_speeches": "en", "ja_manpages": "ja", "multi_udhr": "udhr", "ru_manpages": "ru",
    "zh_debian_docs": "zh", "zh_fortunes": "zh", "zh_lohelp": "zh", "zh_manpages": "zh",
    "zh_poetry": "zh",
}


def load_corpus(corpus_dir):
    files = {}
    for path in sorted(glob.glob(os.path.join(corpus_dir, "*.jsonl"))):
        name = os.path.basename(path)[:-len(".jsonl")]
        if name not in LANG_OF_FILE:
            continue
        with open(path, encoding="utf-8") as f:
            files[name] = [json.loads(line)["text"] for line in f]
    if not files:
        sys.exit(f"make_stress_set: no corpus files in {corpus_dir}")
    return files


def normalise_line(line):
    return " ".join(line.split())


def find_boilerplate_runs(texts):
    """Runs of 2+ consecutive lines that each recur in 5+ documents of this file: real
    boilerplate blocks, each kept once."""
    df = collections.Counter()
    for text in texts:
        df.update({normalise_line(l) for l in text.split("\n") if len(normalise_line(l)) >= 12})
    runs = []
    seen = set()
    for text in texts:
        run = []
        for line in text.split("\n") + [""]:
            key = normalise_line(line)
            if len(key) >= 12 and df[key] >= 5:
                run.append(key)
                continue
            if len(run) >= 2:
                block = "\n".join(run)
                if block not in seen and len(block) >= 60:
                    seen.add(block)
                    runs.append(block)
            run = []
    return runs


def build_templates(rng, files, count):
    """`count` templates (source file, header, footer), each of blocks of one corpus file."""
    pools = {name: find_boilerplate_runs(texts) for name, texts in files.items()}
    sources = sorted(name for name, runs in pools.items() if len(runs) >= 4)
    templates = []
    for i in range(count):
        source = sources[i % len(sources)]
        runs = pools[source]
        header = "\n".join(rng.sample(runs, rng.randint(1, 2)))
        footer = "\n".join(rng.sample(runs, rng.randint(1, 3)))
        templates.append((source, header, footer))
    return templates


def wrap(template, text):
    _, header, footer = template
    return f"{header}\n\n{text}\n\n{footer}"


def excerpt(rng, text, low, high):
    """A contiguous part of `text` of low..high characters cut at line breaks (the whole text
    when it is short enough), or None."""
    if len(text) < low:
        return None
    if len(text) <= high:
        return text
    target = rng.randint(low, high)
    start = rng.randint(0, len(text) - target)
    begin = text.rfind("\n", 0, start) + 1
    end = text.find("\n", begin + target)
    end = len(text) if end < 0 else end
    part = text[begin:end].strip()
    return part if len(part) >= low else None


def word3(text):
    units = UNIT.findall(text.lower())
    n = 5 if CJK.search(text[:400]) else 3
    return {tuple(units[i:i + n]) for i in range(max(1, len(units) - n + 1))}


def jaccard(a, b):
    sa, sb = word3(a), word3(b)
    return len(sa & sb) / max(1, len(sa | sb))


def edit_units(rng, text, rate, vocabulary):
    """Substitutes (half), deletes (a quarter) or inserts after (a quarter) each unit with
    probability `rate`; new units come from `vocabulary` (units of other documents of the same
    corpus file)."""
    cjk = CJK.search(text[:400]) is not None
    if cjk:
        rate *= 0.75  # a Chinese or Japanese word is 1.3-1.5 characters (the devpairs convention)
    out = []
    last = 0
    for match in UNIT.finditer(text):
        out.append(text[last:match.start()])
        last = match.end()
        unit = match.group(0)
        if rng.random() >= rate:
            out.append(unit)
            continue
        op = rng.random()
        if op < 0.5:
            out.append(rng.choice(vocabulary))
        elif op < 0.75:
            pass  # deleted
        else:
            out.append(unit + ("" if cjk else " ") + rng.choice(vocabulary))
    out.append(text[last:])
    return "".join(out)


def reorder_blocks(rng, text):
    lines = [l for l in text.split("\n")]
    if len(lines) < 3:
        return None
    blocks_count = min(len(lines), rng.randint(3, 6))
    cuts = sorted(rng.sample(range(1, len(lines)), blocks_count - 1))
    blocks = [lines[a:b] for a, b in zip([0] + cuts, cuts + [len(lines)])]
    order = list(range(len(blocks)))
    while order == sorted(order):
        rng.shuffle(order)
    return "\n".join("\n".join(blocks[i]) for i in order)


def reorder_sentences(rng, text):
    parts = [p for p in SENTENCE_END.split(text) if p and p.strip()]
    if len(parts) < 4:
        return None
    joiner = "" if CJK.search(text[:400]) else " "
    i = 0
    swapped = 0
    while i + 1 < len(parts):
        if rng.random() < 0.2:
            parts[i], parts[i + 1] = parts[i + 1], parts[i]
            swapped += 1
            i += 2
        else:
            i += 1
    return joiner.join(parts) if swapped else None


class Writer:
    def __init__(self):
        self.docs = []
        self.pairs = []
        self.counter = collections.Counter()

    def pair(self, kind, lang, label, text_a, text_b, note, source):
        n = self.counter[(kind, lang)]
        self.counter[(kind, lang)] += 1
        base = f"stress/{kind}/{lang}/{n:04d}"
        ids = []
        for side, text in (("a", text_a), ("b", text_b)):
            doc_id = f"{base}/{side}"
            self.docs.append({"id": doc_id, "lang": lang, "kind": kind, "text": text})
            ids.append(doc_id)
        sim = jaccard(text_a, text_b)
        self.pairs.append((f"{kind}_{lang}", ids[0], ids[1], label, f"{sim:.4f}", note, source))

    def document(self, kind, lang, text):
        n = self.counter[(kind, lang, "doc")]
        self.counter[(kind, lang, "doc")] += 1
        doc_id = f"stress/{kind}/{lang}/d{n:05d}"
        self.docs.append({"id": doc_id, "lang": lang, "kind": kind, "text": text})
        return doc_id

    def pair_ids(self, kind, lang, label, id_a, id_b, text_a, text_b, note, source):
        sim = jaccard(text_a, text_b)
        self.pairs.append((f"{kind}_{lang}", id_a, id_b, label, f"{sim:.4f}", note, source))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output", help="output directory (docs.jsonl and pairs.tsv)")
    parser.add_argument("--corpus", default=os.path.join(here, "..", "..", "shared", "corpus"))
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--per-kind", type=int, default=40,
                        help="pairs per kind and corpus file (fewer where the file is small)")
    parser.add_argument("--mass-copies", type=int, default=60,
                        help="copies of each mass-copied text (two texts per corpus file)")
    parser.add_argument("--max-source-uses", type=int, default=0,
                        help="at most this many pairs of the wrap, edit and reorder kinds per "
                        "source document (0: no cap, the default set). Small corpus files "
                        "otherwise reuse a source in dozens of pairs, which makes its text a mass "
                        "copy to boilerplate weights (docs/quality.md)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    files = load_corpus(args.corpus)
    templates = build_templates(rng, files, 24)
    out = Writer()

    for name, texts in files.items():
        lang = LANG_OF_FILE[name]
        long_texts = [t for t in texts if len(t) >= 600]
        short_texts = [t for t in texts if 40 <= len(t) <= 200 and len(UNIT.findall(t)) >= 10]
        # The source document of a pair (FILE#N, N its first place in the file), found from the
        # text rng.choice() returned, so recording it draws nothing from rng.
        number = {}
        for n, text in enumerate(texts):
            number.setdefault(text, n)

        def source_of(text):
            return f"{name}#{number[text]}"

        vocabulary = [u for t in rng.sample(texts, min(len(texts), 200)) for u in UNIT.findall(t)]
        # Boilerplate of another corpus file, of the same language where there is one.
        foreign = [t for t in templates if t[0] != name and LANG_OF_FILE[t[0]] == lang]
        if len(foreign) < 4:
            foreign = [t for t in templates if t[0] != name]
        uses = collections.Counter()  # pairs per source document (--max-source-uses)
        if len(long_texts) >= 10:
            for kind, label, make in [
                ("wrap_one", "positive_wrap_one", None),
                ("wrap_both", "positive_wrap_both", None),
                ("edit_02", "positive_edit_02", 0.02),
                ("edit_05", "positive_edit_05", 0.05),
                ("edit_10", "positive_edit_10", 0.10),
                ("edit_20", "graded_edit_20", 0.20),
                ("reorder_blocks", "positive_reorder_blocks", None),
                ("reorder_sentences", "positive_reorder_sentences", None),
            ]:
                made = 0
                for attempt in range(args.per_kind * 5):
                    if made >= args.per_kind:
                        break
                    chosen = rng.choice(long_texts)
                    source = source_of(chosen)
                    if args.max_source_uses and uses[source] >= args.max_source_uses:
                        continue
                    content = excerpt(rng, chosen, 600, 4000)
                    if content is None:
                        continue
                    if kind == "wrap_one":
                        template = rng.choice(foreign)
                        ratio = (len(template[1]) + len(template[2])) / len(content)
                        if not 0.2 <= ratio <= 1.5:
                            continue
                        out.pair(kind, lang, label, content, wrap(template, content),
                                 f"{name}: boilerplate of {template[0]}, {ratio:.0%} of the text",
                                 source)
                    elif kind == "wrap_both":
                        first, second = rng.sample(foreign, 2)
                        ratio = max(len(t[1]) + len(t[2]) for t in (first, second)) / len(content)
                        if not 0.2 <= ratio <= 1.0:
                            continue
                        out.pair(kind, lang, label, wrap(first, content), wrap(second, content),
                                 f"{name}: templates of {first[0]} and {second[0]}", source)
                    elif kind.startswith("edit"):
                        edited = edit_units(rng, content, make, vocabulary)
                        out.pair(kind, lang, label, content, edited,
                                 f"{name}: {make:.0%} of the units edited", source)
                    elif kind == "reorder_blocks":
                        moved = reorder_blocks(rng, content)
                        if moved is None:
                            continue
                        out.pair(kind, lang, label, content, moved, f"{name}: blocks reordered",
                                 source)
                    else:
                        moved = reorder_sentences(rng, content)
                        if moved is None:
                            continue
                        out.pair(kind, lang, label, content, moved,
                                 f"{name}: 20 % of adjacent sentences swapped", source)
                    made += 1
                    uses[source] += 1
            # Mass copies: one text copied many times, each copy lightly edited (a syndicated
            # article, a spam campaign): its shingles are as frequent as boilerplate.
            for base_number in range(2):
                chosen = rng.choice(long_texts)
                base = excerpt(rng, chosen, 600, 4000)
                if base is None:
                    continue
                copies = [edit_units(rng, base, rng.uniform(0.01, 0.04), vocabulary)
                          for _ in range(args.mass_copies)]
                ids = []
                for c, text in enumerate(copies):
                    ids.append(out.document("mass_copy", lang, text))
                for _ in range(args.per_kind // 2):
                    x, y = rng.sample(range(len(copies)), 2)
                    out.pair_ids("mass_copy", lang, "positive_mass_copy", ids[x], ids[y],
                                 copies[x], copies[y],
                                 f"{name}: two of {len(copies)} copies of one text, 1-4 % edited",
                                 source_of(chosen))
            # Template-only negatives: two different documents in one template.
            made = 0
            for attempt in range(args.per_kind * 10):
                if made >= args.per_kind:
                    break
                template = rng.choice(foreign)
                size = len(template[1]) + len(template[2])
                share = rng.uniform(0.2, 0.8)
                length = int(size * (1 - share) / share)
                if length < 150:
                    continue
                first, second = rng.sample(texts, 2)
                a = excerpt(rng, first, int(length * 0.8), int(length * 1.2) + 1)
                b = excerpt(rng, second, int(length * 0.8), int(length * 1.2) + 1)
                if a is None or b is None or jaccard(a, b) >= 0.1:
                    continue
                # devpairs labels templated pairs above Jaccard ~0.5 template_similar (graded):
                # a template of more than 60 % of each page is graded here too.
                kind = "template_only" if share <= 0.6 else "template_heavy"
                label = "negative_template_only" if share <= 0.6 else "graded_template_heavy"
                out.pair(kind, lang, label, wrap(template, a), wrap(template, b),
                         f"{name}: template of {template[0]}, ~{share:.0%} of each document",
                         source_of(first))
                made += 1
        if len(short_texts) >= 20:
            made = 0
            for attempt in range(args.per_kind * 5):
                if made >= args.per_kind:
                    break
                text = rng.choice(short_texts)
                units = list(UNIT.finditer(text))
                target = rng.choice(units)
                replacement = rng.choice(vocabulary)
                if replacement == target.group(0):
                    continue
                edited = text[:target.start()] + replacement + text[target.end():]
                out.pair("short_edit", lang, "positive_short_edit", text, edited,
                         f"{name}: one of {len(units)} units substituted", source_of(text))
                made += 1
            made = 0
            for attempt in range(args.per_kind * 10):
                if made >= args.per_kind:
                    break
                a, b = rng.sample(short_texts, 2)
                if a == b or max(len(a), len(b)) > 1.5 * min(len(a), len(b)) or jaccard(a, b) >= 0.1:
                    continue
                out.pair("short_different", lang, "negative_short_different", a, b,
                         f"{name}: two different short texts", source_of(a))
                made += 1

    os.makedirs(args.output, exist_ok=True)
    with open(os.path.join(args.output, "docs.jsonl"), "w", encoding="utf-8") as f:
        for doc in out.docs:
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
    with open(os.path.join(args.output, "pairs.tsv"), "w", encoding="utf-8") as f:
        f.write("set\tid_a\tid_b\tlabel\tsim\tnote\tsource\n")
        for row in out.pairs:
            f.write("\t".join(row) + "\n")
    labels = collections.Counter(row[3] for row in out.pairs)
    print(f"make_stress_set: {len(out.docs)} documents, {len(out.pairs)} pairs in {args.output}: "
          + ", ".join(f"{label} {count}" for label, count in sorted(labels.items())),
          file=sys.stderr)


if __name__ == "__main__":
    main()
