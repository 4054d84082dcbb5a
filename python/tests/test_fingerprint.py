"""Fingerprints, keywords, extract_tags and distance: identical to the CLI, errors as exceptions,
no leak over a million calls, and threads calling in parallel."""
import gc
import json
import os
import threading

import numpy as np
import psutil
import pytest

import neardup
from conftest import run_cli, write_jsonl

OPTION_SETS = [
    ({}, []),
    ({"bits": 128}, ["--bits", "128"]),
    ({"tokenizer": "char", "ngram": 3}, ["--tokenizer", "char", "--ngram", "3"]),
    ({"shingle": 1, "weighting": "tfidf", "top_k": 50}, ["--shingle", "1", "--weighting", "tfidf", "--top-k", "50"]),
    ({"no_t2s": True, "no_casefold": True, "keep_markup": True}, ["--no-t2s", "--no-casefold", "--keep-markup"]),
    ({"profile": "yanyiwu"}, ["--profile", "yanyiwu"]),
]


@pytest.mark.parametrize("options,flags", OPTION_SETS)
def test_fingerprints_match_cli(binary, sample_texts, tmp_path, options, flags):
    path = tmp_path / "in.jsonl"
    write_jsonl(path, [{"id": str(i), "text": t} for i, t in enumerate(sample_texts)])
    cli = {int(row["id"]): row for row in
           map(json.loads, run_cli(binary, "fingerprint", str(path), *flags).splitlines())}
    fingerprinter = neardup.Fingerprinter(**options)
    batch, ok = fingerprinter.fingerprint_batch(sample_texts, errors="mask")
    bits = options.get("bits", 64)
    assert batch.dtype == np.uint64
    assert batch.shape == ((len(sample_texts),) if bits == 64 else (len(sample_texts), 2))
    # A text with no features (a mail that is markup only) is skipped by the CLI with a warning and
    # refused by Python (ValueError, or False in the mask): the same texts either way.
    assert [i for i in range(len(sample_texts)) if not ok[i]] == \
        [i for i in range(len(sample_texts)) if i not in cli]
    assert len(cli) >= len(sample_texts) - 5
    for i in range(len(sample_texts)):
        if i not in cli:
            with pytest.raises(ValueError, match="no features"):
                fingerprinter.fingerprint(sample_texts[i])
    for i, row in cli.items():
        single = fingerprinter.fingerprint(sample_texts[i])
        assert neardup.to_hex(single, bits) == row["fingerprint"], sample_texts[i][:80]
        if bits == 64:
            assert int(batch[i]) == single
        else:
            assert (int(batch[i, 0]) << 64 | int(batch[i, 1])) == single


def test_keywords_match_cli(binary, sample_texts, tmp_path):
    path = tmp_path / "in.jsonl"
    write_jsonl(path, [{"id": str(i), "text": t} for i, t in enumerate(sample_texts)])
    cli = [json.loads(line) for line in run_cli(binary, "keywords", str(path)).splitlines()]
    fingerprinter = neardup.Fingerprinter()
    for text, row in zip(sample_texts, cli):
        ours = fingerprinter.keywords(text, top_k=20)
        assert [w for w, _ in ours] == [w for w, _ in row["keywords"]]
        assert [weight for _, weight in ours] == pytest.approx([weight for _, weight in row["keywords"]], rel=1e-12)


def test_extract_tags_match_cli(binary, sample_texts, tmp_path):
    path = tmp_path / "in.jsonl"
    write_jsonl(path, [{"id": str(i), "text": t} for i, t in enumerate(sample_texts)])
    cli = [json.loads(line) for line in
           run_cli(binary, "keywords", "--extract-tags", "--top-k", "10", str(path)).splitlines()]
    for text, row in zip(sample_texts, cli):
        ours = neardup.extract_tags(text, top_k=10)
        assert [w for w, _ in ours] == [w for w, _ in row["keywords"]]
        assert [weight for _, weight in ours] == pytest.approx([weight for _, weight in row["keywords"]], rel=1e-12)


def test_extract_tags_known_value():
    # jieba.analyse.extract_tags("我来到北京清华大学，清华大学是好学校", topK=1)
    assert neardup.extract_tags("我来到北京清华大学，清华大学是好学校", top_k=1)[0][0] == "清华大学"
    assert neardup.cut("我来到北京清华大学") == ["我", "来到", "北京", "清华大学"]


def test_distance_matches_cli(binary):
    out = run_cli(binary, "distance", "--json", "f773be40a3f0a3e5", "f773be40a3f0a3e4")
    assert neardup.distance("f773be40a3f0a3e5", "f773be40a3f0a3e4") == json.loads(out)["distance"] == 1
    assert neardup.distance(0, (1 << 64) - 1) == 64
    assert neardup.distance(1 << 100, 0) == 1
    fingerprinter = neardup.Fingerprinter()
    a, b = "the cat sat on the mat today", "the cat sat on the mat yesterday"
    out = run_cli(binary, "distance", "--json", "--text", a, b)
    assert fingerprinter.distance(a, b) == json.loads(out)["distance"]
    assert neardup.parse_fingerprint("d:5") == 5


def test_errors_are_exceptions_with_the_cpp_message(tmp_path):
    with pytest.raises(ValueError, match="tokenizer: expected one of"):
        neardup.Fingerprinter(tokenizer="words")
    with pytest.raises(ValueError, match="bits"):
        neardup.Fingerprinter(bits=32)
    with pytest.raises(TypeError, match="unexpected option 'colour'"):
        neardup.Fingerprinter(colour="red")
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        neardup.Fingerprinter(idf=str(tmp_path / "nonexistent.txt"))
    bad = tmp_path / "bad_idf.txt"
    bad.write_text("word not-a-number\n")
    with pytest.raises(OSError):
        neardup.Fingerprinter(weighting="tfidf", idf=str(bad))
    fingerprinter = neardup.Fingerprinter()
    with pytest.raises(ValueError, match="invalid UTF-8 at byte 3"):
        fingerprinter.fingerprint(b"abc\xff")
    with pytest.raises(ValueError, match=r"texts\[1\]: invalid UTF-8"):
        fingerprinter.fingerprint_batch(["fine", b"\xc3"])
    with pytest.raises(TypeError, match=r"texts\[2\]"):
        fingerprinter.fingerprint_batch(["a", "b", None])
    with pytest.raises(TypeError):
        fingerprinter.fingerprint_batch("one string is not a batch")
    with pytest.raises(ValueError):  # lone surrogate: not encodable as UTF-8
        fingerprinter.fingerprint("bad \ud800 text")
    with pytest.raises(ValueError, match="fingerprint"):
        neardup.distance("xyz", 0)
    values, ok = fingerprinter.fingerprint_batch(["fine", b"\xc3", "also fine"], errors="mask")
    assert ok.tolist() == [True, False, True]
    assert int(values[2]) == fingerprinter.fingerprint("also fine")


def test_batch_accepts_numpy_and_pandas_sequences():
    import pandas as pd

    fingerprinter = neardup.Fingerprinter()
    texts = ["first text here", "second text here", "第三个文本"]
    expected = fingerprinter.fingerprint_batch(texts)
    assert (fingerprinter.fingerprint_batch(np.array(texts)) == expected).all()
    assert (fingerprinter.fingerprint_batch(pd.Series(texts)) == expected).all()
    assert (fingerprinter.fingerprint_batch(t for t in texts) == expected).all()
    assert fingerprinter.fingerprint_batch([]).shape == (0,)


def test_threads_calling_in_parallel(sample_texts):
    fingerprinter = neardup.Fingerprinter()
    _, has_features = fingerprinter.fingerprint_batch(sample_texts, errors="mask")
    sample_texts = [t for t, ok in zip(sample_texts, has_features) if ok]  # markup-only mails out
    expected = [fingerprinter.fingerprint(t) for t in sample_texts]
    expected_tags = [neardup.extract_tags(t, top_k=5) for t in sample_texts[:100]]
    failures = []

    def work(seed):
        order = list(range(len(sample_texts)))
        order = order[seed:] + order[:seed]
        for i in order:
            if fingerprinter.fingerprint(sample_texts[i]) != expected[i]:
                failures.append(("fingerprint", i))
        if (fingerprinter.fingerprint_batch(sample_texts) != np.array(expected, dtype=np.uint64)).any():
            failures.append(("batch", seed))
        for i in range(100):
            if neardup.extract_tags(sample_texts[i], top_k=5) != expected_tags[i]:
                failures.append(("tags", i))

    threads = [threading.Thread(target=work, args=(s * 37,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def _rss():
    gc.collect()
    return psutil.Process(os.getpid()).memory_info().rss


def test_no_leak_over_a_million_calls():
    fingerprinter = neardup.Fingerprinter()
    texts = ["near duplicate detection %d with simhash" % i for i in range(100)]
    bad = b"broken \xff utf-8"
    for text in texts:  # warm up allocator pools and caches
        fingerprinter.fingerprint(text)
    before = _rss()
    for i in range(1_000_000):
        fingerprinter.fingerprint(texts[i % 100])
        if i % 10 == 0:
            try:
                fingerprinter.fingerprint(bad)
            except ValueError:
                pass
        if i % 1000 == 0:
            fingerprinter.fingerprint_batch(texts)
            neardup.distance(i, i + 1)
    after = _rss()
    # A leak of even 16 bytes per call would show as 16 MB; allow 8 MB of allocator noise.
    assert after - before < 8 * 1024 * 1024, (before, after)
