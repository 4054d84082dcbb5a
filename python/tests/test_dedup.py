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
    ({"bits": 128, "k": 20}, ["--bits", "128", "-k", "20"]),
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
    assert result.summary["skipped_by_reason"] == {"empty_text": 1, "non_string_text": 1}
    plain = neardup.dedup(["same text here please", "same text here please", "other"])
    assert plain.remove == ["1"] and plain.clusters[0]["kept"]["index"] == 0
    scored = neardup.dedup(pd.DataFrame({"id": ["p", "q"], "text": ["dup text body"] * 2,
                                         "quality": [0.1, 0.9]}), keep="field:quality")
    assert scored.keep == ["q"]


def test_dedup_errors():
    with pytest.raises(ValueError, match="--keep"):
        neardup.dedup([("a", "x")], keep="best")
    with pytest.raises(ValueError, match="-k"):
        neardup.dedup([("a", "x")], k=40)
    with pytest.raises(ValueError, match="--verify"):
        neardup.dedup([("a", "x")], verify=2)
    with pytest.raises(TypeError, match="documents"):
        neardup.dedup([42])
    with pytest.raises(FileNotFoundError):
        neardup.dedup_files(["/nonexistent/input.jsonl"])
