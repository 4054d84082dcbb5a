"""DedupResult.report() and DaskDedupResult.report(): the library's HTML page of a run, with the
texts read from the input files, from the rows of an in-memory run, or from a Dask frame."""
import json
import os
import re

import pandas as pd
import pytest

import neardup
from conftest import ROOT

SAMPLE = os.path.join(ROOT, "sample", "en_spamassassin.jsonl")
HOSTILE = "<script>alert(1)</script> \"><img src=x onerror=alert(2)>"


def sample_rows():
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def page_data(path):
    """The JSON the page's script renders."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    match = re.search(r'<script type="application/json" id="neardup-data">(.*?)</script>', page,
                      re.S)
    return page, json.loads(match.group(1))


def test_report_of_files_with_and_without_an_output_folder(tmp_path):
    with_folder = neardup.dedup_files([SAMPLE], output=str(tmp_path / "out"))
    counts = with_folder.report(tmp_path / "a.html")
    assert counts["clusters"] == len(with_folder.clusters) > 0
    assert counts["texts_found"] == counts["texts_wanted"] > 0
    assert counts["bytes"] == os.path.getsize(tmp_path / "a.html")
    # Without a folder: the result's own clusters, the texts from the recorded input files.
    in_memory = neardup.dedup_files([SAMPLE])
    counts = in_memory.report(str(tmp_path / "b.html"), seed=3, sample=5)
    assert counts["clusters"] == len(in_memory.clusters)
    assert counts["sample"] == 5
    assert counts["texts_found"] == counts["texts_wanted"]
    _, data = page_data(tmp_path / "b.html")
    assert len(data["clusters"]) == len(in_memory.clusters)
    assert data["seed"] == 3
    # An existing file is replaced only with force.
    with pytest.raises(FileExistsError):
        in_memory.report(tmp_path / "b.html")
    in_memory.report(tmp_path / "b.html", force=True)


def test_report_of_rows_reads_the_rows_and_escapes_them(tmp_path):
    rows = sample_rows()[:200]
    rows.append({"id": "<b>hostile</b>", "text": rows[0]["text"] + " " + HOSTILE})
    frame = pd.DataFrame(rows)
    result = neardup.dedup(frame)
    counts = result.report(tmp_path / "r.html")
    assert counts["texts_found"] == counts["texts_wanted"] > 0
    page, data = page_data(tmp_path / "r.html")
    assert "<script>alert" not in page and "<img" not in page and "<b>" not in page
    ids = {m["doc"]["id"] for c in data["clusters"] for m in c["members"]}
    assert "<b>hostile</b>" in ids
    # The same from a list of dicts; a one-shot iterator cannot be read again: no texts.
    assert neardup.dedup(rows).report(tmp_path / "l.html")["texts_found"] > 0
    once = neardup.dedup(iter(rows)).report(tmp_path / "i.html")
    assert once["texts_found"] == 0 and once["texts_note"]


def test_report_options_are_checked(tmp_path):
    result = neardup.dedup(sample_rows()[:50])
    with pytest.raises(TypeError):
        result.report(tmp_path / "x.html", max_clusters="10")
    with pytest.raises(TypeError):
        result.report(tmp_path / "x.html", no_such_option=1)
    with pytest.raises(ValueError):
        result.report(tmp_path / "x.html", sample=-1)
    with pytest.raises(ValueError):
        result.report(tmp_path / "x.html", max_text_bytes=3)


def test_dask_result_report(tmp_path):
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")
    import neardup.dask as nd

    if not hasattr(nd.DaskDedupResult, "report"):
        pytest.skip("DaskDedupResult.report() is added with the Dask rewrite (branch dask)")
    frame = pd.DataFrame(sample_rows())
    with dask.config.set(scheduler="synchronous"):
        ddf = dd.from_pandas(frame, npartitions=3)
        result = nd.dedup(ddf, output=str(tmp_path / "out"), format="jsonl")
        counts = result.report(tmp_path / "d.html")
    assert counts["clusters"] == result.summary["clusters"] > 0
    assert counts["texts_found"] == counts["texts_wanted"] > 0
    _, data = page_data(tmp_path / "d.html")
    assert len(data["clusters"]) == counts["clusters"]
