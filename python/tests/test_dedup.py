"""neardup.dedup in process: the same clusters, keep and remove lists as `neardup dedup`."""
import json
import os

import pandas as pd
import pytest

import neardup
from conftest import run_cli, write_jsonl


def cli_dedup(binary, path, out, *flags):
    run_cli(binary, "dedup", "-q", str(path), "-o", str(out), *flags)
    with open(os.path.join(out, "clusters.jsonl"), encoding="utf-8") as f:
        clusters = [json.loads(line) for line in f]
    with open(os.path.join(out, "remove.txt"), encoding="utf-8") as f:
        remove = f.read().split("\n")
    with open(os.path.join(out, "keep.txt"), encoding="utf-8") as f:
        keep = f.read().split("\n")
    return clusters, [r for r in remove if r], [k for k in keep if k]


def comparable(clusters):
    out = []
    for c in clusters:
        out.append((c["cluster"], c["kept"]["id"], c["kept"]["bytes"], c["kept"]["fingerprint"],
                    [(m["id"], m["distance"], m["reason"], m["via"], m["distance_to_via"],
                      round(m.get("similarity_to_via", -1), 12)) for m in c["removed"]]))
    return out


@pytest.mark.parametrize("options,flags", [
    ({}, []),
    ({"k": 6, "verify": 0.6, "keep": "longest"}, ["-k", "6", "--verify", "0.6", "--keep", "longest"]),
    ({"bits": 128, "k": 12, "candidates": "simhash", "verify": 0.4},
     ["--bits", "128", "-k", "12", "--candidates", "simhash", "--verify", "0.4"]),
    ({"threshold": 0.7, "candidates": "lsh", "bucket_window": 4},
     ["--threshold", "0.7", "--candidates", "lsh", "--bucket-window", "4"]),
])
def test_dataframe_dedup_matches_cli(binary, devpairs_docs, tmp_path, options, flags):
    rows = [{"id": d["id"], "text": d["text"]} for d in devpairs_docs]
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, rows)
    clusters, remove, keep = cli_dedup(binary, path, tmp_path / "out", *flags)
    result = neardup.dedup(pd.DataFrame(rows), **options)
    assert comparable(result.clusters) == comparable(clusters)
    assert result.remove == remove and result.keep == keep
    assert len(result.clusters) > 100
    with open(tmp_path / "out" / "summary.json", encoding="utf-8") as f:
        summary = json.load(f)
    assert result.summary["candidate_pairs"] == summary["candidate_pairs"]
    frame = result.clusters_frame()
    assert frame["kept"].sum() == len(clusters)
    assert set(frame.loc[~frame["kept"], "id"]) == set(remove)
    decisions = result.decisions_frame()
    assert decisions.loc[~decisions["keep"], "id"].tolist() == remove


def test_dedup_files_is_the_command(binary, shared, tmp_path):
    path = os.path.join(shared, "devpairs", "docs.jsonl")
    clusters, remove, _ = cli_dedup(binary, path, tmp_path / "cli")
    result = neardup.dedup_files([path], output=str(tmp_path / "py"))
    assert comparable(result.clusters) == comparable(clusters) and result.remove == remove
    with open(tmp_path / "py" / "clusters.jsonl", encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == clusters


def test_iterables_and_skips():
    docs = [("a", "one two three four five six seven"), ("b", "one two three four five six seven"),
            ("c", "   "), ("d", None), ("e", "something else entirely, nothing alike at all")]
    result = neardup.dedup(docs)
    assert result.remove == ["b"] and result.keep == ["a", "e"]
    assert result.clusters[0]["removed"][0]["reason"] == "exact_duplicate"
    assert result.summary["skipped_by_reason"] == {"empty_text": 1, "missing_text": 1}
    plain = neardup.dedup(["same text here please", "same text here please", "other"])
    assert plain.remove == ["1"] and plain.clusters[0]["kept"]["index"] == 0
    scored = neardup.dedup(pd.DataFrame({"id": ["p", "q"], "text": ["dup text body"] * 2,
                                         "quality": [0.1, 0.9]}), keep="field:quality")
    assert scored.keep == ["q"]


def test_unverified_pairs_have_no_similarity():
    """Without verification (SimHash candidates, verify=0) a pair has no similarity: a removed
    member has no "similarity_to_via" (not -1), and the clusters frame holds None; a verified run
    carries the pair rule's similarity."""
    body = ("the quick brown fox jumps over the lazy dog near the river bank today and then it "
            "runs far away into the green forest where nobody can see it any more ") * 3
    docs = [("a", body), ("b", body + " again"), ("c", "nothing like the others at all, no")]
    unverified = neardup.dedup(docs, candidates="simhash", verify=0, k=8)
    assert unverified.remove == ["b"]
    member = unverified.clusters[0]["removed"][0]
    assert "similarity_to_via" not in member
    assert unverified.clusters_frame()["similarity_to_via"].isna().all()
    verified = neardup.dedup(docs)
    assert verified.remove == ["b"]
    assert 0.5 <= verified.clusters[0]["removed"][0]["similarity_to_via"] <= 1


def test_in_memory_dedup_writes_no_file(binary, devpairs_docs, tmp_path, monkeypatch):
    """neardup.dedup hands the rows to the library in memory: no file is opened or created, and
    the answer is the command's."""
    import builtins
    import tempfile

    rows = [{"id": d["id"], "text": d["text"]} for d in devpairs_docs[:3000]]
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, rows)
    clusters, remove, keep = cli_dedup(binary, path, tmp_path / "out")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def no_files(*args, **kwargs):
        raise AssertionError(f"neardup.dedup opened a file: {args}")

    monkeypatch.setattr(builtins, "open", no_files)
    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_files)
    monkeypatch.setattr(tempfile, "mkstemp", no_files)
    result = neardup.dedup(pd.DataFrame(rows))
    monkeypatch.undo()
    assert os.listdir(scratch) == []
    assert comparable(result.clusters) == comparable(clusters) and len(clusters) > 100
    assert result.remove == remove and result.keep == keep


def test_temp_dir_is_where_the_run_spills(devpairs_docs, tmp_path, monkeypatch):
    """temp_dir is --temp-dir: the run's temporary files go there (unlinked, so it stays empty)
    instead of $TMPDIR, with the same answer; a missing directory is an error naming it."""
    import pathlib

    rows = [{"id": d["id"], "text": d["text"]} for d in devpairs_docs[:2000]]
    expected = neardup.dedup(pd.DataFrame(rows))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # $TMPDIR points nowhere: the run works only if it uses temp_dir.
    monkeypatch.setenv("TMPDIR", str(tmp_path / "no-such-tmpdir"))
    with pytest.raises(Exception, match="no-such-tmpdir"):
        neardup.dedup(pd.DataFrame(rows))
    for where in (str(scratch), pathlib.Path(scratch)):
        result = neardup.dedup(pd.DataFrame(rows), temp_dir=where)
        assert comparable(result.clusters) == comparable(expected.clusters)
        assert result.remove == expected.remove and len(result.clusters) > 50
        assert result.summary["spill"]["enabled"] and result.summary["spill"]["peak_mb"] > 0
        assert os.listdir(scratch) == []
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, rows)
    assert neardup.dedup_files([str(path)], temp_dir=scratch).remove == expected.remove
    with pytest.raises(Exception, match="missing-dir"):
        neardup.dedup(pd.DataFrame(rows), temp_dir=str(tmp_path / "missing-dir"))


def test_unencodable_text_is_skipped_not_raised():
    result = neardup.dedup([("a", "same words in this text"), ("b", "lone \ud800 surrogate"),
                            ("c", "same words in this text")])
    assert result.remove == ["c"] and result.summary["skipped_by_reason"] == {"invalid_utf8": 1}


def test_dedup_errors():
    with pytest.raises(ValueError, match="keep: expected"):
        neardup.dedup([("a", "x")], keep="best")
    # Errors name the Python keywords, never the command-line flags.
    with pytest.raises(ValueError, match="^k must be in") as error:
        neardup.dedup([("a", "x")], k=40)
    assert "--" not in str(error.value)
    with pytest.raises(ValueError, match="^threshold must be in") as error:
        neardup.dedup([("a", "x")], threshold=1.5)
    assert "--" not in str(error.value)
    with pytest.raises(ValueError, match="candidates"):
        neardup.dedup([("a", "x")], candidates="all")
    with pytest.raises(ValueError, match="^verify must be in") as error:
        neardup.dedup([("a", "x")], verify=2)
    assert "--" not in str(error.value)
    with pytest.raises(TypeError, match="documents"):
        neardup.dedup([42])
    with pytest.raises(FileNotFoundError):
        neardup.dedup_files(["/nonexistent/input.jsonl"])


def test_lsh_stage_binding(devpairs_docs):
    """The candidate stage on its own: parameters, band keys, candidate pairs, the S-curve."""
    lsh = neardup.MinHashLsh(threshold=0.5)
    assert (lsh.bands, lsh.rows) == neardup.choose_lsh_parameters(0.5)
    assert neardup.lsh_probability(0.5, lsh.bands, lsh.rows) >= 0.98
    assert neardup.lsh_probability(0.1, lsh.bands, lsh.rows) < 0.05
    texts = [d["text"] for d in devpairs_docs[:800]]
    keys, has = lsh.band_keys(texts)
    assert keys.shape == (800, lsh.bands) and keys.dtype.name == "uint32" and has.all()
    a, b = lsh.candidate_pairs(keys, has)
    assert len(a) > 50 and (a < b).all()
    # Pairs sharing a band, recomputed from the keys; the window (64) never binds on 800 texts
    # unless a bucket is larger, so every recomputed pair must be found.
    expected = set()
    for band in range(lsh.bands):
        buckets = {}
        for i in range(800):
            buckets.setdefault(keys[i, band], []).append(i)
        for members in buckets.values():
            if len(members) <= 65:
                expected.update((x, y) for n, x in enumerate(members) for y in members[n + 1:])
    assert expected <= set(zip(a.tolist(), b.tolist()))
    same = lsh.band_keys([texts[0], texts[0]])[0]
    assert (same[0] == same[1]).all()
    assert len(lsh.signature(texts[0])) == lsh.bands * lsh.rows
    with pytest.raises(ValueError):
        neardup.MinHashLsh(threshold=1.5)


def test_max_distance_is_a_deprecated_alias_of_k():
    docs = [("a", "one two three four five six"), ("b", "one two three four five six")]
    with pytest.warns(DeprecationWarning, match="use k"):
        old = neardup.dedup(docs, max_distance=2, candidates="simhash")
    assert old.k == neardup.dedup(docs, k=2, candidates="simhash").k == 2 and old.remove == ["b"]


def test_texts_without_features_are_counted_the_same_by_cli_and_python(binary, tmp_path):
    # Markup or whitespace only: nothing to fingerprint. Not duplicates of each other (they used to
    # share the all-zero fingerprint), but counted as "no_features" by the CLI and Python alike.
    docs = [("a", "some real words in here"), ("b", "<b></b>"), ("c", "<script>x</script>"),
            ("d", "some real words in here"), ("e", "<i> </i>")]
    result = neardup.dedup(docs)
    assert result.summary["fingerprint_failures_by_code"] == {"no_features": 3}
    assert result.remove == ["d"] and result.keep == ["a"]
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"id": i, "text": t} for i, t in docs])
    _, remove, keep = cli_dedup(binary, path, tmp_path / "cli")
    assert (remove, keep) == (result.remove, result.keep)
    with open(tmp_path / "cli" / "summary.json", encoding="utf-8") as f:
        assert json.load(f)["fingerprint_failures_by_code"] == {"no_features": 3}


def _edited_pair():
    """A 300-word text and a copy with one word in eight replaced: shingle Jaccard ~0.48 (below
    the default threshold), word sets ~0.8 alike."""
    import random
    rng = random.Random(5)
    vocabulary = ["w%d" % i for i in range(2000)]
    words = [rng.choice(vocabulary) for _ in range(300)]
    copy = list(words)
    for i in range(5, 285, 8):
        copy[i] = "edit%d" % i
    return " ".join(words), " ".join(copy)


def test_edited_keyword_finds_a_lightly_edited_copy():
    base, copy = _edited_pair()
    other = " ".join("v%d" % i for i in range(300))
    docs = [("base", base), ("copy", copy), ("other", other)]
    assert neardup.dedup(docs, edited=0).remove == []
    # The default (0.8): the words are a little less alike than that.
    default = neardup.dedup(docs)
    assert default.summary["pair_rule"]["edited_threshold"] == 0.8
    assert default.remove == []
    result = neardup.dedup(docs, edited=0.7)
    assert result.remove == ["copy"]
    member = result.clusters[0]["removed"][0]
    assert member["reason"] == "edited" and member["reason"] in neardup._REASONS
    assert 0.7 <= member["similarity_to_via"] <= 1
    assert result.summary["accepted_pairs_by_reason"]["edited"] == 1
    assert result.summary["pair_rule"]["edited_threshold"] == 0.7
    assert result.summary["pair_rule"]["edited_min_jaccard"] == 0.45
    # The shingle floor: above the pair's shingle Jaccard, the reason no longer applies.
    assert neardup.dedup(docs, edited=0.7, edited_min_jaccard=0.6).remove == []
    with pytest.raises(ValueError, match="^edited_min_jaccard") as error:
        neardup.dedup(docs, edited=0.7, edited_min_jaccard=0)
    assert "--" not in str(error.value)
    with pytest.raises(ValueError, match="^edited must be in"):
        neardup.dedup(docs, edited=1.5)


def test_decide_pairs_with_unit_sets():
    """The private rule bindings Dask builds on: _document_facts gives the unit sets, and
    _decide_pairs applies `edited` only when they are given."""
    from neardup import _neardup
    base, copy = _edited_pair()
    facts = _neardup._document_facts([base, copy])
    assert len(facts["units"]) == 2 and len(facts["units"][0]) > 100
    assert _neardup._REASONS[5] == "edited"
    left = (facts["hashes"][:1], facts["sets"][:1])
    right = (facts["hashes"][1:], facts["sets"][1:])
    plain = _neardup._decide_pairs(*left, *right, options={"edited": 0.7})
    assert plain["reason"][0] == 0
    decided = _neardup._decide_pairs(*left, *right, options={"edited": 0.7},
                                     left_units=facts["units"][:1],
                                     right_units=facts["units"][1:])
    assert decided["reason"][0] == 5
    assert 0.45 <= decided["jaccard"][0] < 0.5
    assert decided["unit_jaccard"][0] == decided["similarity"][0] >= 0.7
    # The unit sets are the 20-bit ones every front end compares (ShingleSimilarity::kUnitBits),
    # sorted and distinct, and the unit Jaccard is theirs.
    a, b = (set(int(v) for v in units) for units in facts["units"])
    for units in facts["units"]:
        assert int(units.max()) < 1 << 20 and len(set(units.tolist())) == len(units)
        assert units.tolist() == sorted(units.tolist())
    assert decided["unit_jaccard"][0] == len(a & b) / len(a | b)
    with pytest.raises(ValueError, match="left_units"):
        _neardup._decide_pairs(*left, *right, left_units=[], right_units=facts["units"][1:])
    with pytest.raises(TypeError, match="right_units"):
        _neardup._decide_pairs(*left, *right, left_units=facts["units"][:1], right_units=7)
