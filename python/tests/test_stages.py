"""neardup._neardup.stages, the library's dedup stages over arrays: applied partition by partition
they give what the single-process calls give, and bad arguments are TypeError / ValueError."""
import numpy as np
import pytest

import neardup
from neardup._neardup import stages

TEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank today.",
    "The quick brown fox jumps over the lazy dog near the river bank today!",
    "<p>The  quick brown fox</p> jumps over the lazy dog near the river bank today.",
    "今天天气很好，我们一起去公园散步吧，顺便看看湖边的风景。",
    "Completely different words about databases, indexes and query planning.",
]


def test_document_columns_match_the_fingerprinter_and_the_lsh():
    documents = stages.DocumentPass()
    columns = documents.columns(TEXTS, with_sets=True, threads=2)
    assert columns["ok"].all() and columns["error"] == [None] * len(TEXTS)
    fingerprinter = neardup.Fingerprinter()
    assert [int(x) for x in columns["lo"]] == [fingerprinter.fingerprint(t) for t in TEXTS]
    assert list(columns["text_bytes"]) == [len(t.encode()) for t in TEXTS]
    # The default rule's LSH plan reaches down to the `edited` reason's floor (0.45): 41 x 3, the
    # threshold's alone (MinHashLsh's default) with edited=0.
    assert documents.bands == 41 and stages.DocumentPass(edited=0).bands == 30
    lsh = neardup.MinHashLsh(bands=41, rows=3)
    keys, has = lsh.band_keys(TEXTS)
    assert columns["band_keys"].shape == (len(TEXTS), documents.bands)
    assert np.array_equal(columns["band_keys"][has], keys[has])
    assert np.array_equal(columns["has_keys"], has)
    offsets, values = columns["set_offsets"], columns["set_values"]
    assert offsets.shape == (len(TEXTS) + 1,)
    # Exact and whitespace-only copies share their hashes the way the whitespace rule reads them.
    assert columns["squeezed_hash"][0] != columns["squeezed_hash"][1]
    assert len(values) == offsets[-1]
    assert stages.DocumentPass(candidates="simhash").columns(TEXTS)["band_keys"].shape == (5, 0)


def test_document_columns_report_bad_texts_per_document():
    columns = stages.DocumentPass().columns(["fine text here", b"bad \xff utf-8"])
    assert list(columns["ok"]) == [True, False]
    assert columns["error"][0] is None and "UTF-8" in columns["error"][1]
    with pytest.raises(TypeError, match="texts"):
        stages.DocumentPass().columns("not a list")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        stages.DocumentPass().columns(["a", 3])


@pytest.mark.parametrize("bits", [64, 128])
def test_hamming_join_by_buckets_equals_self_join_and_brute_force(bits):
    rng = np.random.default_rng(bits)
    centres = rng.integers(0, 2**63, size=(30, 2), dtype=np.uint64)
    rows = centres[rng.integers(0, 30, size=800)]
    flips = rng.integers(0, 64, size=(800, 3))
    for column in range(3):  # up to three flipped bits of the low word
        rows[:, 1] ^= np.uint64(1) << flips[:, column].astype(np.uint64)
    hi = rows[:, 0] if bits == 128 else np.zeros(800, dtype=np.uint64)
    lo = rows[:, 1].copy()
    k = 3
    join = stages.HammingJoin(bits, k, 1e6)
    a, b, d = join.self_join(hi, lo)
    expected = set()
    for i in range(800):
        distance = np.array([bin(int(x)).count("1") for x in (lo ^ lo[i])]) + (
            np.array([bin(int(x)).count("1") for x in (hi ^ hi[i])]) if bits == 128 else 0)
        for j in np.nonzero(distance <= k)[0]:
            if j > i:
                expected.add((i, int(j), int(distance[j])))
    assert set(zip(a.tolist(), b.tolist(), d.tolist())) == expected
    keys = join.keys(hi, lo)
    assert keys.shape == (800, join.tables)
    found = []
    for table in range(join.tables):
        for key in np.unique(keys[:, table]):
            members = np.nonzero(keys[:, table] == key)[0].astype(np.uint64)
            if len(members) < 2:
                continue
            ba, bb, bd = join.bucket_pairs(table, members, hi[members], lo[members])
            found += list(zip(ba.tolist(), bb.tolist(), bd.tolist()))
    assert sorted(found) == sorted(expected)  # each pair once over all buckets
    with pytest.raises(ValueError):
        stages.HammingJoin(64, 40, 100)
    with pytest.raises(TypeError, match="hi"):
        join.keys("nope", lo)


def test_lsh_bucket_pairs_of_shuffled_records_equal_the_candidate_pairs():
    lsh = neardup.MinHashLsh(bucket_window=4)
    texts = [f"shared words of a story number {i % 7} told again and again" for i in range(60)]
    keys, has = lsh.band_keys(texts)
    expected = lsh.candidate_pairs(keys, has)
    rows, bands = np.nonzero(np.ones_like(keys, dtype=bool) & has[:, None])
    buckets = np.array([stages.lsh_bucket_key(int(band), int(keys[row, band]))
                        for row, band in zip(rows, bands)], dtype=np.uint64)
    order = np.random.default_rng(1).permutation(len(buckets))
    a, b, counts = stages.lsh_bucket_pairs(buckets[order], rows.astype(np.uint64)[order], 4)
    assert np.array_equal(a, expected[0]) and np.array_equal(b, expected[1])
    assert counts["candidate_pairs"] == len(a) and counts["records"] == len(buckets)


def test_whitespace_rule_merge_and_clusters():
    a, b = stages.first_of_equal_hash_pairs(np.array([5, 7, 5, 9, 7], dtype=np.uint64),
                                            np.array([4, 1, 0, 3, 8], dtype=np.uint64))
    assert list(zip(a, b)) == [(0, 4), (1, 8)]
    packed, sources = stages.merge_candidate_pairs([
        (np.array([1, 5], dtype=np.uint64), stages.LSH),
        (np.array([5, 7], dtype=np.uint64), stages.SIMHASH),
    ])
    assert list(packed) == [1, 5, 7]
    assert list(sources) == [stages.LSH, stages.LSH | stages.SIMHASH, stages.SIMHASH]
    with pytest.raises(ValueError, match="sorted"):
        stages.merge_candidate_pairs([(np.array([5, 1], dtype=np.uint64), stages.LSH)])
    zeros = np.zeros(3, dtype=np.uint64)
    clusters = stages.build_clusters(
        zeros, np.array([1, 1, 9], dtype=np.uint64), 64, np.array([10, 20, 30], dtype=np.uint64),
        np.array([10, 20, 30], dtype=np.uint64), np.array([1, 2, 3], dtype=np.uint64),
        np.full(3, np.nan),
        np.array([0], dtype=np.uint64), np.array([1], dtype=np.uint64),
        np.array([0], dtype=np.int32), np.array([0.9]), "longest")
    assert clusters == [(1, [(0, 0, 1, 0, 0.9, "near_duplicate")])]
    # An unverified pair (NaN similarity) has none: None, not -1.
    unverified = stages.build_clusters(
        zeros, np.array([1, 1, 9], dtype=np.uint64), 64, np.array([10, 20, 30], dtype=np.uint64),
        np.array([10, 20, 30], dtype=np.uint64), np.array([1, 2, 3], dtype=np.uint64),
        np.full(3, np.nan),
        np.array([0], dtype=np.uint64), np.array([1], dtype=np.uint64),
        np.array([0], dtype=np.int32), np.array([np.nan]), "longest")
    assert unverified == [(1, [(0, 0, 1, 0, None, "near_duplicate")])]
    with pytest.raises(ValueError, match="a < b"):
        stages.build_clusters(
            zeros, zeros, 64, zeros, zeros, zeros, np.full(3, np.nan),
            np.array([2], dtype=np.uint64), np.array([1], dtype=np.uint64),
            np.array([0], dtype=np.int32), np.array([0.9]), "first")


def test_keywords_are_the_registry_options_with_python_errors():
    with pytest.raises(TypeError, match="shingle: expected an int, got str"):
        neardup.Fingerprinter(shingle="2")
    with pytest.raises(TypeError, match="no_t2s: expected True or False"):
        neardup.Fingerprinter(no_t2s=1)
    with pytest.raises(TypeError, match="threshold: expected a number, got str"):
        stages.DocumentPass(threshold="0.5")
    with pytest.raises(ValueError, match="^shingle must be in"):
        neardup.Fingerprinter(shingle=0)
    with pytest.raises(ValueError, match=r"^threads must be 0 \(all cores\) to 65536"):
        neardup.Fingerprinter(threads=-1)
    with pytest.raises(TypeError, match="unexpected option 'colour'"):
        stages.DocumentPass(colour=1)
    options = neardup.Fingerprinter().options
    assert options["shingle"] == 2 and options["tokenizer"] == "auto"
    assert options["no_nfkc"] is False and options["bits"] == 64
    assert neardup.Fingerprinter(tokenizer="char", ngram=3).options["ngram"] == 3
    assert neardup.Fingerprinter(profile="yanyiwu").options["top_k"] == 5
