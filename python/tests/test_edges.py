"""Issue 22 in Python: a wrong type is a TypeError (never a crash), a bad value a ValueError, and
nothing is lost or overwritten silently: HammingIndex arrays, errors="mask", thread counts, Store
metadata, docstrings for help(), dedup_files' force / write_kept / json, shared ids in dedup."""
import gzip
import json
import os
import pydoc
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import neardup

BASE = ("The committee met on Tuesday to review the annual budget and agreed to postpone the vote "
        "on the new library building until the engineers deliver their final report")
OTHER = ("Bright orange fish swim slowly around the coral reef while divers photograph the turtles "
         "that rest on the sandy bottom near the wreck of an old cargo ship")
THIRD = ("A violent storm swept across the northern coast last night, tearing roofs from houses "
         "and leaving thousands of families without electricity until the morning")


def test_wrong_id_types_are_type_errors_not_a_crash():
    # Each call runs in a child interpreter first: on a build with the defect it dies (rc 139).
    script = textwrap.dedent("""
        import numpy as np, neardup
        index = neardup.HammingIndex()
        for ids in (['a', 'b'], np.array(['a', 'b'])):
            try:
                index.add(ids, np.array([1, 2], dtype=np.uint64))
            except TypeError as e:
                assert 'ids' in str(e), e
            else:
                raise SystemExit('no TypeError for %r' % (ids,))
        print('ok')
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ})
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("ids, fingerprints, error, words", [
    (["a", "b"], np.array([1, 2], dtype=np.uint64), TypeError, "ids[0]"),
    (np.array(["a", "b"]), np.array([1, 2], dtype=np.uint64), TypeError, "ids"),
    ([-1, 1.5], np.array([1, 2], dtype=np.uint64), ValueError, "ids[0]"),
    ([1, 1.5], np.array([1, 2], dtype=np.uint64), TypeError, "ids[1]"),
    ([1, 2], [-1, 1.5], ValueError, "fingerprints[0]"),
    ([1, 2], np.array([1.0, 2.0]), TypeError, "fingerprints"),
    (np.array([-1, 2]), np.array([1, 2], dtype=np.uint64), ValueError, "ids[0]"),
    ([True, False], [1, 2], TypeError, "ids[0]"),
    (None, [2 ** 64, 1], ValueError, "fingerprints[0]"),
    ("a", 5, TypeError, "ids"),
    (1, "zz-not-hex", ValueError, "fingerprint"),
])
def test_hamming_index_add_checks_every_value(ids, fingerprints, error, words):
    index = neardup.HammingIndex()
    with pytest.raises(error) as raised:
        index.add(ids, fingerprints)
    assert words in str(raised.value)
    assert "Unable to cast" not in str(raised.value)
    assert len(index) == 0  # nothing was added
    index.add([3, 4], [5, 6])  # integers of any kind still work
    index.add(np.array([7], dtype=np.int64), np.array([8], dtype=np.uint64))
    assert len(index) == 3


def test_hamming_index_build_does_not_wrap_negative_or_float_values():
    with pytest.raises(ValueError):
        neardup.HammingIndex.build([-1, 5])
    with pytest.raises(TypeError):
        neardup.HammingIndex.build([1.5, 5])
    assert len(neardup.HammingIndex.build([1, 5])) == 2


def test_errors_mask_masks_what_cannot_be_fingerprinted():
    fp = neardup.Fingerprinter()
    values, ok = fp.fingerprint_batch([BASE, None, OTHER, float("nan"), 42, "\ud800"],
                                      errors="mask")
    assert ok.tolist() == [True, False, True, False, False, False]
    assert values[0] == fp.fingerprint(BASE) and values[2] == fp.fingerprint(OTHER)
    assert values[1] == 0 and values[3] == 0
    with pytest.raises(TypeError):
        fp.fingerprint_batch([BASE, None])  # errors="raise" (the default) still raises


def test_negative_thread_counts_are_value_errors():
    for make in (lambda: neardup.Fingerprinter(threads=-1),
                 lambda: neardup.HammingIndex(threads=-1),
                 lambda: neardup.dedup([BASE, OTHER], threads=-1),
                 lambda: neardup.shingles([BASE], threads=-2),
                 lambda: neardup.MinHashLsh().band_keys([BASE], threads=-1)):
        with pytest.raises(ValueError, match="threads"):
            make()
    with pytest.raises(TypeError, match="threads"):
        neardup.Fingerprinter(threads="2")


def _fingerprint_store(path):
    try:  # a store that takes bare fingerprints (issue 19 made text stores the default)
        return neardup.Store(path, rule="simhash")
    except (TypeError, ValueError):  # a build without the rule keyword
        return neardup.Store(path)


def test_store_metadata_is_json_text_or_none(tmp_path):
    with _fingerprint_store(str(tmp_path / "st")) as store:
        store.add("with", 1, metadata='{"url":"https://example.org"}')
        store.add("without", 2)
        store.add("raw", 3, metadata=b"\xff\xfe")
        assert store.get("with")["metadata"] == '{"url":"https://example.org"}'
        assert store.get("without")["metadata"] is None
        assert store.get("raw")["metadata"] == b"\xff\xfe"  # not UTF-8: kept as given
        assert {hit["id"]: hit["metadata"] for hit in store.search(1, k=1)}["with"] == \
            '{"url":"https://example.org"}'


def test_help_shows_the_documentation():
    text = pydoc.render_doc(neardup.Fingerprinter, renderer=pydoc.plaintext)
    assert "Text in, SimHash fingerprint out" in text
    assert "errors=\"mask\"" in text and "ValueError" in text
    for obj in (neardup.Fingerprinter.fingerprint, neardup.Fingerprinter.fingerprint_batch,
                neardup.HammingIndex.add, neardup.HammingIndex.search, neardup.MinHashLsh,
                neardup.Store.check_and_add, neardup.distance, neardup.cut, neardup.jaccard):
        assert obj.__doc__ and len(obj.__doc__) > 40, obj
    assert "TypeError" in neardup.HammingIndex.add.__doc__


def _corpus(path):
    rows = [("a", BASE), ("b", BASE + " again"), ("c", OTHER)]
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in rows))
    return path


def test_dedup_files_force_write_kept_and_json(tmp_path, capsys):
    corpus = _corpus(tmp_path / "in.jsonl")
    out = tmp_path / "out"
    result = neardup.dedup_files([str(corpus)], str(out))
    assert result.remove == ["b"]
    with pytest.raises(FileExistsError):  # an existing output needs force, before any work
        neardup.dedup_files([str(corpus)], str(out))
    kept = tmp_path / "kept.jsonl.gz"
    neardup.dedup_files([str(corpus)], str(out), force=True, write_kept=str(kept), json=True)
    summary = json.loads(capsys.readouterr().out)
    assert summary["documents_removed"] == 1
    with gzip.open(kept, "rt") as f:  # compressed by its name
        assert [json.loads(line)["id"] for line in f] == ["a", "c"]
    # write_kept alone (no output directory) writes nothing else.
    alone = tmp_path / "alone.jsonl"
    neardup.dedup_files([str(corpus)], write_kept=str(alone))
    assert [json.loads(line)["id"] for line in alone.read_text().splitlines()] == ["a", "c"]
    assert capsys.readouterr().out == ""
    # Never over an input, even with force; never two outputs on one file.
    with pytest.raises(ValueError, match="is an input"):
        neardup.dedup_files([str(corpus)], str(out), force=True, write_kept=str(corpus))
    with pytest.raises(ValueError, match="same file"):
        neardup.dedup_files([str(corpus)], str(out), force=True,
                            write_kept=str(out / "keep.txt"))
    assert corpus.read_text().count("\n") == 3


def test_dedup_qualifies_shared_ids_with_the_row():
    rows = [("u1", BASE), ("u2", OTHER), ("u1", BASE), ("u3", THIRD)]
    result = neardup.dedup(rows)
    assert result.ids == ["u1@row:0", "u2", "u1@row:2", "u3"]
    assert result.remove == ["u1@row:2"]
    assert result.summary["duplicate_ids"] == 2
    # The README's filter keeps the kept u1.
    kept = [doc_id for doc_id in result.ids if doc_id not in set(result.remove)]
    assert "u1@row:0" in kept and len(kept) == 3
    assert not any("<documents>" in doc_id for doc_id in result.ids)
