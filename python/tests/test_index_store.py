"""The Hamming index (against a brute-force answer) and the persistent store."""
import numpy as np
import pytest

import neardup


def _popcount(x):
    return np.unpackbits(x.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)


@pytest.fixture(scope="module")
def fingerprints():
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**63, size=3000, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, size=3000, dtype=np.uint64)
    # Plant near neighbours: flip 0..4 random bits of the first 500.
    near = base[:500].copy()
    for i in range(500):
        for bit in rng.choice(64, size=rng.integers(0, 5), replace=False):
            near[i] ^= np.uint64(1) << np.uint64(bit)
    return np.concatenate([base, near])


def test_search_and_batch_match_brute_force(fingerprints):
    index = neardup.HammingIndex.build(fingerprints, indexed_k=4)
    assert len(index) == len(fingerprints) and index.bits == 64 and index.indexed_k == 4
    queries = fingerprints[::97]
    q, ids, dist = index.search_batch(queries, 4)
    for row, query in enumerate(queries):
        d = _popcount(fingerprints ^ query)
        expected = sorted((int(d[i]), i) for i in np.nonzero(d <= 4)[0])
        got_ids, got_dist = index.search(int(query), 4)
        assert list(zip(got_dist.tolist(), got_ids.tolist())) == expected
        mine = q == row
        assert list(zip(dist[mine].tolist(), ids[mine].tolist())) == expected


def test_self_join_matches_brute_force(fingerprints):
    index = neardup.HammingIndex.build(fingerprints, indexed_k=3)
    a, b, d = index.self_join(3)
    got = set(zip(a.tolist(), b.tolist(), d.tolist()))
    expected = set()
    for i in range(len(fingerprints)):
        dist = _popcount(fingerprints[i + 1:] ^ fingerprints[i])
        for j in np.nonzero(dist <= 3)[0]:
            expected.add((i, i + 1 + int(j), int(dist[j])))
    assert got == expected and len(expected) > 300


def test_add_remove_and_128_bits():
    index = neardup.HammingIndex(bits=64, indexed_k=3)
    index.add(np.array([10, 11], dtype=np.uint64), np.array([0b1111, 0b0111], dtype=np.uint64))
    index.add(12, 0b0011)
    assert index.search(0b1111, 2)[0].tolist() == [10, 11, 12]
    assert index.remove(11, 0b0111) == 1
    assert index.search(0b1111, 2)[0].tolist() == [10, 12]
    wide = neardup.HammingIndex(bits=128, indexed_k=2)
    wide.add(None, np.array([[1, 0], [1, 3], [0, 0]], dtype=np.uint64))
    ids, dist = wide.search((1 << 64) | 1, 2)
    assert ids.tolist() == [0, 1, 2] and dist.tolist() == [1, 1, 2]
    with pytest.raises(ValueError, match="k"):
        index.search(0, 9)
    with pytest.raises(ValueError):
        index.add(None, np.zeros((2, 2), dtype=np.uint64))  # 128-bit rows into a 64-bit index
    with pytest.raises(ValueError):
        neardup.HammingIndex(bits=32)


def test_store_roundtrip_and_errors(tmp_path):
    path = str(tmp_path / "store")
    fp = neardup.Fingerprinter()
    a = fp.fingerprint("the quick brown fox jumps over the lazy dog again and again")
    b = fp.fingerprint("the quick brown fox jumps over the lazy dog again and again!")
    with neardup.open_store(path, sync="none", rule="simhash") as store:  # bare fingerprints
        assert store.add("doc-a", a, metadata=b'{"n":1}') is False
        result = store.check_and_add("doc-b", b, k=3)
        assert [d["id"] for d in result["duplicates"]] == ["doc-a"] and result["added"] is False
        result = store.check_and_add("doc-b", b, k=3, always_add=True)
        assert result["added"] is True
        store.add_batch(["x", "y"], np.array([1, 2], dtype=np.uint64))
        assert store.stats()["documents"] == 4
        hits = store.search(a, 3)
        assert {h["id"] for h in hits} == {"doc-a", "doc-b"} and hits[0]["distance"] == 0
        with pytest.raises(KeyError):
            store.get("missing")
        with pytest.raises(ValueError):
            store.search(a, 200)
        with pytest.raises(ValueError):
            store.add("", a)
    with neardup.Store(path) as store:  # reopened: everything is still there
        assert store.get("doc-a")["metadata"] == '{"n":1}'  # str (JSON text), issue 22
        assert store.get("doc-b")["metadata"] is None
        assert store.get("doc-b")["fingerprint"] == b
        store.remove("x")
        assert store.stats()["documents"] == 3
    with pytest.raises(FileExistsError):
        neardup.Store(path, error_if_exists=True)
    with pytest.raises(FileNotFoundError):
        neardup.Store(str(tmp_path / "none"), create_if_missing=False)
    with pytest.raises(ValueError, match="closed"):
        store.stats()


def test_store_records_fingerprint_options(tmp_path):
    """Like `neardup index create`, a new store records the fingerprint options the keywords
    choose; reopening keeps them, and a conflicting keyword is refused by its keyword name."""
    path = str(tmp_path / "store")
    with neardup.Store(path, shingle=3, tokenizer="icu", rule="simhash") as store:
        recorded = store.fingerprint_options
        assert "shingle=3" in recorded and "tokenizer=icu" in recorded and "bits=64" in recorded
        assert store.stats()["fingerprint_options"] == recorded
        store.add("a", 5)
    with neardup.Store(path) as store:  # no keywords: the recorded options
        assert store.fingerprint_options == recorded and store.get("a")["fingerprint"] == 5
    with neardup.Store(path, shingle=3) as store:  # the same value: accepted
        assert store.fingerprint_options == recorded
    with pytest.raises(ValueError) as error:
        neardup.Store(path, shingle=4)
    message = str(error.value)
    assert "shingle=3, not shingle=4 (shingle)" in message and "--" not in message, message
    with pytest.raises(ValueError, match="128") as error:
        neardup.Store(path, bits=128)
    assert "--" not in str(error.value)
    with neardup.Store(path) as store:  # the refused opens changed nothing
        assert store.fingerprint_options == recorded and store.stats()["documents"] == 1
    with pytest.raises(TypeError, match="no_such_option"):
        neardup.Store(str(tmp_path / "other"), no_such_option=1)
    with neardup.Store(str(tmp_path / "wide"), bits=128) as store:
        assert store.stats()["bits"] == 128 and "bits=128" in store.fingerprint_options


def test_store_keywords_come_from_the_option_registry(tmp_path):
    """The store's own keywords are the registry's (as `neardup serve` has them as flags): a small
    wal_flush_bytes bounds the log by flushing, a wrong type is a TypeError and a bad value a
    ValueError, both naming the keyword."""
    path = str(tmp_path / "store")
    with neardup.Store(path, wal_flush_bytes=1, memtable_limit=1000, rule="simhash") as store:
        store.add("a", 5)
        store.add("b", 6)
        assert store.stats()["flushes"] >= 1 and store.stats()["memtable_entries"] < 2
    with pytest.raises(TypeError, match="wal_flush_bytes: expected an int, got str"):
        neardup.Store(str(tmp_path / "s2"), wal_flush_bytes="1")
    with pytest.raises(ValueError, match="^wal_flush_bytes must be in"):
        neardup.Store(str(tmp_path / "s3"), wal_flush_bytes=-1)
    with pytest.raises(ValueError, match="^memtable_limit must be in"):
        neardup.Store(str(tmp_path / "s4"), memtable_limit=0)


def test_store_applies_the_dedup_rule(tmp_path):
    """A store created with the defaults answers with `neardup dedup`'s rule: each duplicate
    carries its reason, verified similarity and Hamming distance; check_batch checks in order,
    against the earlier added documents of the batch too; add="never" is a pure lookup."""
    path = str(tmp_path / "store")
    text = ("The quick brown fox jumps over the lazy dog while the farmer watches from the porch "
            "and the children play in the field behind the old red barn near the river bend")
    with neardup.Store(path, sync="none") as store:
        assert store.rule == "dedup" and store.stats()["documents"] == 0
        first = store.check(text, id="a", metadata=b'{"n":1}')
        assert first == {"duplicate": False, "added": True, "replaced": False, "duplicates": []}
        exact = store.check(text, add="never")
        assert exact["duplicate"] and not exact["added"]
        (dup,) = exact["duplicates"]
        assert dup["id"] == "a" and dup["reason"] == "exact_duplicate"
        assert dup["similarity"] == 1.0 and dup["distance"] == 0 and dup["metadata"] == '{"n":1}'
        results = store.check_batch([text + " today", "  ".join(text.split()),
                                     "An unrelated note about storage engines and their logs"],
                                    ids=["b", "c", "d"])
        assert [r["added"] for r in results] == [False, False, True]
        near = results[0]["duplicates"][0]
        sets = neardup.shingles([text, text + " today"])
        assert near["reason"] == "near_duplicate"
        assert near["similarity"] == neardup.jaccard(sets[0], sets[1])
        assert results[1]["duplicates"][0]["reason"] == "whitespace_duplicate"
        assert store.stats()["documents"] == 2
        with pytest.raises(ValueError, match='rule="simhash"'):
            store.add("bare", 5)
        with pytest.raises(TypeError):
            store.check_batch("not a list of texts")
        with pytest.raises(TypeError):
            store.check_batch([text, 5], ids=["x", "y"])
        with pytest.raises(ValueError, match="ids"):
            store.check(text)  # adding needs an id
    with neardup.Store(path) as store:  # reopened: the same answers
        assert store.check(text + " today", add="never")["duplicates"][0]["id"] == "a"
    with pytest.raises(ValueError, match="threshold"):
        neardup.Store(path, threshold=0.8)


def test_old_names_work_with_a_deprecation_warning(tmp_path):
    """max_k, the old name of indexed_k (one name for one meaning: the radius the tables serve),
    still works in HammingIndex and Store, with a DeprecationWarning; giving both is a TypeError."""
    with pytest.warns(DeprecationWarning, match="max_k is an old name: use indexed_k"):
        index = neardup.HammingIndex(bits=64, max_k=2)
    assert index.indexed_k == 2
    with pytest.warns(DeprecationWarning, match="max_k is an old name"):
        assert index.max_k == 2
    with pytest.warns(DeprecationWarning, match="max_k is an old name"):
        assert neardup.HammingIndex.build(np.arange(10, dtype=np.uint64), max_k=1).indexed_k == 1
    with pytest.raises(TypeError, match="not both"):
        neardup.HammingIndex(indexed_k=2, max_k=2)
    with pytest.warns(DeprecationWarning, match="max_k is an old name: use indexed_k"):
        with neardup.Store(str(tmp_path / "s"), max_k=4, rule="simhash") as store:
            stats = store.stats()
            assert stats["indexed_k"] == 4
            assert stats["max_k"] == 4  # the deprecated alias of indexed_k, for one release
    with pytest.warns(DeprecationWarning, match="expected_documents is an old name"):
        neardup.Store(str(tmp_path / "t"), expected_documents=1e5).close()


def test_store_sync_keywords_are_the_registrys(tmp_path):
    """sync, group_commit_ms and verify_checksums are the option registry's store options (the
    command line's --sync, --group-commit-ms, --no-verify): the same values and checks."""
    path = str(tmp_path / "s")
    with neardup.Store(path, sync="group", group_commit_ms=1, rule="simhash") as store:
        store.add("a", 0x0123456789ABCDEF)
        assert store.stats()["documents"] == 1
    with neardup.Store(path, sync="none", verify_checksums=False) as store:
        assert store.stats()["documents"] == 1
    with pytest.raises(ValueError, match=r"sync: expected one of every,group,none, got \"often\""):
        neardup.Store(path, sync="often")
    with pytest.raises(ValueError, match="group_commit_ms is the window of sync group, not of "
                                         "sync every"):
        neardup.Store(path, group_commit_ms=5)
    with pytest.raises(ValueError, match=r"group_commit_ms must be in \[0, 1000\]"):
        neardup.Store(path, sync="group", group_commit_ms=5000)
    with pytest.raises(ValueError, match=r"indexed_k must be in \[0, 15\] for a store"):
        neardup.Store(str(tmp_path / "t"), indexed_k=20)
    with pytest.raises(ValueError, match="memory_budget"):
        neardup.Store(str(tmp_path / "t"), memory_budget="lots")
    with pytest.raises(TypeError):
        neardup.Store(path, verify_checksums="yes")


def test_store_records_its_containment_options(tmp_path):
    """The containment options of a new dedup-rule store are recorded with its rule: a store
    created with containment=0.95 answers with 0.95 after reopening (a copy contained at ~0.92 is
    no duplicate), stats() shows them, and another value at open is refused."""
    path = str(tmp_path / "store")
    large = " ".join("word%d" % i for i in range(120))
    words = ["word%d" % i for i in range(80)]
    words[20], words[60] = "other20", "other60"  # 2 of 80 words: contained at ~0.92
    at_92 = " ".join(words)
    small_set, large_set = (set(s) for s in neardup.shingles([at_92, large]))
    assert 0.9 <= len(small_set & large_set) / len(small_set) < 0.95
    with neardup.Store(path, sync="none", threshold=0.8, containment=0.95,
                       containment_min_shingles=20) as store:
        assert store.check(large, id="large")["added"]
    with neardup.Store(path) as store:
        stats = store.stats()
        assert (stats["containment"], stats["containment_min_shingles"],
                stats["containment_min_ratio"]) == (0.95, 20, 0.6)
        assert stats["threshold"] == 0.8 and stats["rule"] == "dedup"
        assert store.check(at_92, add="never")["duplicates"] == []
    with pytest.raises(ValueError, match="containment"):
        neardup.Store(path, containment=0.9)
    with pytest.raises(ValueError, match="containment"):
        neardup.Store(str(tmp_path / "other"), containment=1.5)


def test_store_records_its_edited_options(tmp_path):
    """The `edited` reason of a new dedup-rule store (issue 25) is recorded with its rule: a
    lightly edited copy (every 12th of 300 words replaced, below the 0.8 threshold) is `edited`
    after reopening, stats() shows the options, and another value at open is refused; a store
    created with the defaults has it on at 0.8; one created with edited=0 (as every store made
    before the default turned it on) answers with it off when reopened with the defaults, and
    refuses it, also the default value given explicitly."""
    path = str(tmp_path / "store")
    original = " ".join("token%d" % i for i in range(300))
    copy = " ".join(("changed%d" if i % 12 == 6 else "token%d") % i for i in range(300))
    with neardup.Store(path, sync="none", threshold=0.8, edited=0.7,
                       edited_min_jaccard=0.3) as store:
        assert store.check(original, id="original")["added"]
    with neardup.Store(path) as store:
        stats = store.stats()
        assert (stats["edited"], stats["edited_min_jaccard"]) == (0.7, 0.3)
        found = store.check(copy, add="never")["duplicates"]
        assert [(d["id"], d["reason"]) for d in found] == [("original", "edited")]
        assert found[0]["similarity"] >= 0.7
    with pytest.raises(ValueError, match="edited"):
        neardup.Store(path, edited=0.5)
    default = str(tmp_path / "default")
    with neardup.Store(default, sync="none", threshold=0.8) as store:
        stats = store.stats()
        assert (stats["edited"], stats["edited_min_jaccard"]) == (0.8, 0.45)
        assert (stats["bands"], stats["rows"]) == (41, 3)  # planned down to the floor, 0.45
        assert store.check(original, id="original")["added"]
        found = store.check(copy, add="never")["duplicates"]
        assert [(d["id"], d["reason"]) for d in found] == [("original", "edited")]
    plain = str(tmp_path / "plain")
    with neardup.Store(plain, sync="none", threshold=0.8, edited=0) as store:
        assert store.stats()["edited"] == 0
        assert store.check(original, id="original")["added"]
        assert store.check(copy, add="never")["duplicates"] == []
    with neardup.Store(plain, sync="none") as store:  # the default options
        stats = store.stats()
        assert stats["edited"] == 0 and stats["bands"] == 28  # 0.8's plan with containment
        assert store.check(copy, add="never")["duplicates"] == []
        assert store.check(copy, id="copy")["added"]
        assert store.stats()["documents"] == 2
    for value in (0.7, 0.8):
        with pytest.raises(ValueError, match="edited threshold 0, not %g" % value):
            neardup.Store(plain, edited=value)
