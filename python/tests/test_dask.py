"""neardup.dask on a LocalCluster of 2 worker processes: the same clusters and kept documents as
`neardup dedup` (byte for byte from files), on devpairs and on generated data, also when a worker
or the client is killed; outputs refused or replaced as the command does."""
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pandas as pd
import pytest

import neardup.dask as nd
from neardup import _neardup
from conftest import ROOT, run_cli, write_jsonl
from test_dedup import cli_dedup, comparable

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

# summary.json keys whose values depend on how the run went, not on the answer.
_RUN_KEYS = {"stages", "total_seconds", "documents_per_second", "spill", "dask"}


@pytest.fixture(scope="module")
def client():
    # The cluster a user gets from neardup.dask (DASK_SETTINGS applied); the tests below that
    # make their own LocalCluster run on Dask's default settings.
    cluster = nd.local_cluster(2)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def test_local_cluster_applies_the_settings(client):
    import dask

    def facts():
        return (dask.config.get("distributed.worker.profile.enabled"),
                dask.config.get("distributed.admin.tick.interval"),
                os.environ.get("MALLOC_MMAP_THRESHOLD_"))

    got = list(client.run(facts).values())
    assert len(got) == 2
    for profile, tick, mmap_threshold in got:
        assert profile is False
        assert tick == nd.DASK_SETTINGS["distributed.admin.tick.interval"]
        assert mmap_threshold == str(32 << 20)
    assert list(client.nthreads().values()) == [1, 1]
    # The client's own configuration is left as it was.
    assert dask.config.get("distributed.worker.profile.enabled") is True


def test_workers_running_the_profiler_are_named(tmp_path):
    frame = pd.DataFrame({"id": ["a", "b"], "text": ["one text " * 9, "one text " * 9]})
    lines = []
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster):
        result = nd.dedup(dd.from_pandas(frame, npartitions=1), progress=lines.append)
    assert result.remove == {"b"}
    assert any(line.startswith("note: 1 of 1 workers run Dask's profiler") for line in lines)


@pytest.fixture(scope="module")
def generated(shared, tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "gen.jsonl"
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "generate_corpus.py"), "6000",
                    str(path), "--corpus", os.path.join(shared, "corpus"), "--seed", "11"],
                   check=True, capture_output=True)
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return path, pd.DataFrame({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]})


def check_same(result, binary, path, out, *flags):
    clusters, remove, keep = cli_dedup(binary, path, out, *flags)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    for key in summary:
        if key not in _RUN_KEYS and key != "inputs":  # a DataFrame input has no files
            assert result.summary[key] == summary[key], key
    assert comparable(result.clusters) == comparable(clusters)
    assert result.remove == set(remove)
    assert result.keep == keep
    decisions = result.decisions.compute()
    assert decisions.loc[decisions["keep"], "id"].tolist() == keep
    assert decisions.loc[~decisions["keep"], "id"].tolist() == remove
    return clusters


def same_files(dask_dir, cli_dir):
    for name in ("clusters.jsonl", "keep.txt", "remove.txt"):
        with open(os.path.join(dask_dir, name), "rb") as a, open(os.path.join(cli_dir, name),
                                                                 "rb") as b:
            assert a.read() == b.read(), name


def test_devpairs_same_as_cli(client, binary, devpairs_docs, tmp_path):
    rows = [{"id": d["id"], "text": d["text"]} for d in devpairs_docs]
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, rows)
    ddf = dd.from_pandas(pd.DataFrame(rows), npartitions=5, sort=False)
    result = nd.dedup(ddf, output=str(tmp_path / "dask"), progress=False)
    clusters = check_same(result, binary, path, tmp_path / "cli")
    assert len(clusters) > 1000 and result.summary["clusters"] == len(clusters)
    with open(tmp_path / "dask" / "clusters.jsonl", encoding="utf-8") as f:
        assert len(f.readlines()) == len(clusters)
    assert sorted(os.listdir(tmp_path / "dask")) == sorted(
        ["clusters.jsonl", "keep.txt", "remove.txt", "summary.json", "decisions"])
    assert len(os.listdir(tmp_path / "dask" / "decisions")) == 5


@pytest.mark.parametrize("options,flags", [
    ({}, []),
    ({"edited": 0}, ["--edited", "0"]),  # the `edited` reason off (on by default)
    ({"k": 6, "keep": "longest", "verify": 0.5, "candidates": "simhash"},
     ["-k", "6", "--keep", "longest", "--verify", "0.5", "--candidates", "simhash"]),
    ({"threshold": 0.8, "bucket_window": 2, "candidates": "lsh"},
     ["--threshold", "0.8", "--bucket-window", "2", "--candidates", "lsh"]),
    ({"k": 3, "verify": 0, "candidates": "lsh+simhash"},
     ["-k", "3", "--verify", "0", "--candidates", "lsh+simhash"]),
    # The edited reason (68 edited pairs here; 2 with the SimHash candidates alone, whose sets
    # and unit sets come from a second cut of the texts).
    ({"edited": 0.7, "threshold": 0.6}, ["--edited", "0.7", "--threshold", "0.6"]),
    ({"edited": 0.7, "threshold": 0.6, "candidates": "simhash", "k": 8},
     ["--edited", "0.7", "--threshold", "0.6", "--candidates", "simhash", "-k", "8"]),
])
def test_generated_same_as_cli(client, binary, generated, tmp_path, options, flags):
    path, frame = generated
    ddf = dd.from_pandas(frame, npartitions=4, sort=False)
    result = nd.dedup(ddf, progress=False, **options)
    clusters = check_same(result, binary, path, tmp_path / "cli", *flags)
    assert len(clusters) > 100


def _corpus_files(directory, frame):
    """The generated rows over three files (one gzip-compressed) plus records the reader skips,
    falls back on or renames: the same inputs for the command and for Dask."""
    rows = [{"id": i, "text": t} for i, t in zip(frame["id"], frame["text"])]
    os.makedirs(directory / "more", exist_ok=True)
    first = directory / "a.jsonl"
    with open(first, "w", encoding="utf-8") as f:
        f.write("\ufeff")  # a byte-order mark, ignored at a file's start
        for row in rows[:2500]:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        f.write("{not json\n\n")
        f.write(json.dumps({"text": rows[0]["text"]}) + "\n")  # no id: its location
        f.write(json.dumps({"id": rows[1]["id"], "text": "shared id, other text " * 20}) + "\n")
        f.write(json.dumps({"id": "blank", "text": "   "}) + "\n")
    with gzip.open(directory / "more" / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        for row in rows[2500:4000]:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(directory / "more" / "c.jsonl", "w", encoding="utf-8") as f:
        for row in rows[4000:]:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        f.write(json.dumps({"id": 17, "text": rows[5]["text"]}) + "\n")  # a numeric id
    return [str(first), str(directory / "more")]


def test_files_same_as_cli_byte_for_byte(client, binary, generated, tmp_path):
    """dedup_files reads the files with the library's reader (byte ranges of the plain files, the
    compressed one whole): the command's files, byte for byte, and its summary's counts."""
    _, frame = generated
    inputs = _corpus_files(tmp_path / "in", frame)
    result = nd.dedup_files(inputs, str(tmp_path / "dask"), blocksize=1 << 20, progress=False)
    assert result.summary["dask"]["partitions"] >= 6  # files cut into byte ranges
    done = subprocess.run([binary, "dedup", "-q", *inputs, "-o", str(tmp_path / "cli")],
                          capture_output=True, check=True)
    same_files(tmp_path / "dask", tmp_path / "cli")
    with open(tmp_path / "cli" / "summary.json", encoding="utf-8") as f:
        summary = json.load(f)
    assert list(result.summary)[:len(summary)] == list(summary)  # the same schema, in order
    for key in summary:
        if key not in _RUN_KEYS:
            assert result.summary[key] == summary[key], key
    assert summary["records_skipped"] >= 2 and summary["duplicate_ids"] >= 2
    assert summary["fallbacks_by_reason"] == {"missing_id": 1}
    assert b"invalid JSON" in done.stderr
    # read_jsonl gives the same documents as a DataFrame, and dedup of that DataFrame (no longer
    # the files: its rows) gives the same clusters.
    ddf = nd.read_jsonl(inputs, blocksize=1 << 20)
    rows = ddf.compute()
    assert len(rows) == summary["documents_read"]
    assert rows["location"].iloc[0] == inputs[0] + ":1"
    again = nd.dedup(ddf[["id", "text"]], progress=False)
    assert again.summary["clusters"] == summary["clusters"]


def test_shared_ids_are_named_apart(client, binary, tmp_path):
    """Ids used twice become id@location, as in the command, and are counted: removing the
    removed ids never drops the kept document of the same id."""
    text = "the same words in the same order make an exact copy " * 5
    rows = [{"id": "u1", "text": text}, {"id": "u2", "text": "another text entirely " * 8},
            {"id": "u1", "text": text}, {"id": "u3", "text": "a third unrelated document " * 8}]
    # Ids with a control character or a leading '"' are written as JSON strings, as the command
    # writes them, and read back as they were.
    odd = "another exact copy, of a different text, in several words " * 4
    rows += [{"id": "tab\there", "text": odd}, {"id": '"q\nl', "text": odd}]
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, rows)
    result = nd.dedup_files([str(path)], str(tmp_path / "dask"), progress=False)
    _, remove, keep = cli_dedup(binary, path, tmp_path / "cli")
    same_files(tmp_path / "dask", tmp_path / "cli")
    with open(tmp_path / "dask" / "remove.txt", encoding="utf-8") as f:
        assert '"\\"q\\nl"\n' in f.read()
    assert result.remove == {f"u1@{path}:3", '"q\nl'} and result.keep[0] == f"u1@{path}:1"
    assert "tab\there" in result.keep
    assert result.summary["duplicate_ids"] == 2
    # A DataFrame's shared ids are named apart by partition:row.
    ddf = dd.from_pandas(pd.DataFrame(rows[:4]), npartitions=2, sort=False)
    result = nd.dedup(ddf, progress=False)
    assert result.remove == {"u1@1:0"} and result.keep == ["u1@0:0", "u2", "u3"]


def test_contained_pairs_same_as_cli(client, binary, tmp_path):
    """THE pair rule's reasons: a text inside a longer one (containment 1, Jaccard 2/3 below the
    0.8 threshold) is `contained`, as in the command, and clusters.jsonl says so (via_reason)."""
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(5000)]
    rows = []
    for i in range(6):
        base = " ".join(rng.choice(words, 80))
        rows.append({"id": f"short-{i}", "text": base})
        rows.append({"id": f"long-{i}", "text": base + " " + " ".join(rng.choice(words, 40))})
        rows.append({"id": f"other-{i}", "text": " ".join(rng.choice(words, 90))})
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, rows)
    result = nd.dedup_files([str(path)], str(tmp_path / "dask"), threshold=0.8, progress=False)
    _, remove, keep = cli_dedup(binary, path, tmp_path / "cli", "--threshold", "0.8")
    same_files(tmp_path / "dask", tmp_path / "cli")
    assert result.summary["accepted_pairs_by_reason"]["contained"] == 6
    assert {m["via_reason"] for c in result.clusters for m in c["removed"]} == {"contained"}
    with open(tmp_path / "cli" / "summary.json", encoding="utf-8") as f:
        cli = json.load(f)
    assert result.summary["accepted_pairs_by_reason"] == cli["accepted_pairs_by_reason"]
    assert result.summary["pair_rule"] == cli["pair_rule"]


def test_edited_pairs_same_as_cli(client, binary, tmp_path):
    """THE pair rule's `edited` reason (issue 25): copies with every tenth word replaced (shingle
    Jaccard about 0.54, below the 0.6 threshold; word-set Jaccard about 0.82) are `edited` with
    edited=0.7, as in the command: the same files byte for byte and the same summary; without
    the reason they are no duplicates."""
    rng = np.random.default_rng(25)
    words = [f"w{i}" for i in range(20000)]
    rows = []
    for i in range(8):
        base = list(rng.choice(words, 300, replace=False))
        copy = [f"x{i}_{j}" if j % 10 == 5 else w for j, w in enumerate(base)]
        rows.append({"id": f"base-{i}", "text": " ".join(base)})
        rows.append({"id": f"other-{i}", "text": " ".join(rng.choice(words, 250))})
        rows.append({"id": f"copy-{i}", "text": " ".join(copy)})
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, rows)
    result = nd.dedup_files([str(path)], str(tmp_path / "dask"), threshold=0.6, edited=0.7,
                            progress=False)
    cli_dedup(binary, path, tmp_path / "cli", "--threshold", "0.6", "--edited", "0.7")
    same_files(tmp_path / "dask", tmp_path / "cli")
    with open(tmp_path / "cli" / "summary.json", encoding="utf-8") as f:
        cli = json.load(f)
    for key in cli:
        if key not in _RUN_KEYS:
            assert result.summary[key] == cli[key], key
    by_reason = result.summary["accepted_pairs_by_reason"]
    assert by_reason["edited"] == 8 and sum(by_reason.values()) == 8
    assert result.remove == {f"copy-{i}" for i in range(8)}
    assert {m["via_reason"] for c in result.clusters for m in c["removed"]} == {"edited"}
    # The reason off (the default): none of them is a duplicate, in Dask as in the command.
    off = nd.dedup_files([str(path)], str(tmp_path / "off"), threshold=0.6, progress=False)
    assert off.remove == set() and sum(off.summary["accepted_pairs_by_reason"].values()) == 0


def test_bag_input(client, binary, generated, tmp_path):
    import dask.bag as db

    path, frame = generated
    head = frame.iloc[:1500]
    bag = db.from_sequence(list(zip(head["id"], head["text"])), npartitions=3)
    small = tmp_path / "small.jsonl"
    write_jsonl(small, [{"id": i, "text": t} for i, t in zip(head["id"], head["text"])])
    check_same(nd.dedup(bag, progress=False), binary, small, tmp_path / "cli")


def test_output_refused_unless_force_and_then_replaced(client, generated, tmp_path):
    _, frame = generated
    ddf = dd.from_pandas(frame.iloc[:2000], npartitions=3, sort=False)
    out = tmp_path / "out"
    first = nd.dedup(ddf, str(out), progress=False)
    with pytest.raises(FileExistsError, match="force=True"):
        nd.dedup(ddf, str(out), progress=False)
    stale = out / "decisions" / "part-000999.jsonl"
    stale.write_text('{"id": "stale", "keep": true}\n')
    again = nd.dedup(dd.from_pandas(frame.iloc[:2000], npartitions=2, sort=False), str(out),
                     force=True, progress=False)
    assert sorted(os.listdir(out / "decisions")) == ["part-000000.jsonl", "part-000001.jsonl"]
    assert again.remove == first.remove and not os.path.exists(out / ".neardup-work")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        nd.dedup(ddf, str(tmp_path / "other"), progress=False)
    # Outputs inside what the run reads are refused, as the command refuses them.
    (tmp_path / "in").mkdir()
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": "a", "text": "some text here " * 5}])
    with pytest.raises(ValueError, match="input"):
        nd.dedup_files([str(tmp_path / "in")], str(tmp_path / "in" / "out"), progress=False)
    assert not (tmp_path / "in" / "out").exists()


def _template_files(directory):
    """Pages of 8 sites, each page a site's header and footer (boilerplate: 60 to 70 pages of a
    site share them) around a short body of its own; long articles copied into another site's
    template, or copied with every tenth word replaced; over three files, with records the
    reader skips and one it cannot fingerprint (markup only), so that reading numbers and
    document numbers differ."""
    rng = np.random.default_rng(2025)
    words = [f"w{i}" for i in range(30000)]
    sites = [(" ".join(rng.choice(words, 60)), " ".join(rng.choice(words, 50)))
             for _ in range(8)]
    rows = []
    for i in range(520):
        header, footer = sites[i % 8]
        rows.append({"id": f"page-{i}", "text": f"{header} {' '.join(rng.choice(words, 12))} "
                                                f"{footer}"})
        if i % 13 == 0:  # an article, and its copy in another site's template
            body = list(rng.choice(words, 400))
            rows.append({"id": f"article-{i}", "text": f"{header} {' '.join(body)} {footer}"})
            other_header, other_footer = sites[(i + 3) % 8]
            rows.append({"id": f"moved-{i}",
                         "text": f"{other_header} {' '.join(body)} {other_footer}"})
            edited = [f"e{i}_{j}" if j % 10 == 4 else w for j, w in enumerate(body)]
            rows.append({"id": f"edited-{i}", "text": f"{header} {' '.join(edited)} {footer}"})
    paths = [directory / "a.jsonl", directory / "b.jsonl", directory / "c.jsonl"]
    os.makedirs(directory, exist_ok=True)
    cut = [0, len(rows) // 3, 2 * len(rows) // 3, len(rows)]
    for f, path in enumerate(paths):
        with open(path, "wb") as out:
            for row in rows[cut[f]:cut[f + 1]]:
                out.write(json.dumps(row).encode() + b"\n")
                if len(row["id"]) == 8 and row["id"].endswith("7"):
                    out.write(b"{not json\n")  # skipped
            if f == 1:  # skipped, and a document without features (read, not fingerprinted)
                out.write(b'{"id": "bad", "text": "caf\xe9 ' + b"x " * 40 + b'"}\n')
                out.write(b'{"id": "markup", "text": "<b></b> <i> </i>"}\n')
    return [str(p) for p in paths]


@pytest.mark.parametrize("options,flags", [
    ({"edited": 0}, ["--edited", "0"]),  # the weights alone
    ({}, []),  # with the default `edited` reason (0.8): the batch-cleaning rule for crawls
])
def test_boilerplate_same_as_cli(client, binary, tmp_path, monkeypatch, options, flags):
    """Boilerplate weights (issue 25): Dask counts the shingle frequencies per group of
    partitions, as the command counts them over the whole input (the same sketch, documents
    sampled by their reading number), merges the sketches and verifies with the same weighted
    pair rule: the command's files byte for byte and its summary, boilerplate fields included."""
    inputs = _template_files(tmp_path / "in")
    monkeypatch.setattr(nd, "_FREQUENCY_GROUP_BYTES", 1)  # as many groups as allowed: 8
    result = nd.dedup_files(inputs, str(tmp_path / "dask"), blocksize=16 << 10,
                            boilerplate=True, progress=False, **options)
    assert result.summary["dask"]["partitions"] >= 9  # several partial sketches merged
    stages = {s["stage"]: s for s in result.summary["stages"]}
    assert stages["frequencies"]["tasks"] == 8 and stages["frequency-merge"]["tasks"] == 1
    run_cli(binary, "dedup", "-q", *inputs, "-o", str(tmp_path / "cli"), "--boilerplate", *flags)
    same_files(tmp_path / "dask", tmp_path / "cli")
    with open(tmp_path / "cli" / "summary.json", encoding="utf-8") as f:
        cli = json.load(f)
    for key in cli:
        if key not in _RUN_KEYS:
            assert result.summary[key] == cli[key], key
    assert cli["pair_rule"]["boilerplate"] is True
    assert cli["pair_rule"]["boilerplate_min_documents"] >= 20
    assert cli["pair_rule"]["frequency_sketch_mb"] > 0
    assert cli["documents_read"] > cli["documents_fingerprinted"]  # the markup one
    assert cli["records_skipped"] > 0
    assert [s["stage"] for s in result.summary["stages"]][1:3] == ["frequencies",
                                                                  "frequency-merge"]
    removed = result.remove
    assert {f"moved-{i}" for i in range(0, 520, 13)} <= removed  # copies in another template
    assert {f"edited-{i}" for i in range(0, 520, 13)} <= removed
    pages = {f"page-{i}" for i in range(520)}
    if result.summary["pair_rule"]["edited_threshold"] > 0:
        assert result.summary["pair_rule"]["edited_threshold"] == 0.8
        # Sibling pages are 110 template words and 12 of their own: their word multisets are
        # 82 % the same, so `edited` (unweighted by design) takes them, as the command does.
        assert result.summary["accepted_pairs_by_reason"]["edited"] > 0
        return
    assert len(removed & pages) < 10
    # Without the weights, pages that share only their site's template are duplicates: the
    # weights changed the answer, in Dask as in the command.
    plain = nd.dedup_files(inputs, str(tmp_path / "plain"), blocksize=16 << 10, progress=False,
                           **options)
    assert plain.summary["pair_rule"]["boilerplate"] is False
    assert len(plain.remove & pages) > 100


def test_boilerplate_dataframe_same_as_python(client, tmp_path):
    """A DataFrame with boilerplate weights: the input's size is its partitions' JSONL (the
    sketch's size comes from it, as neardup.dedup's from its one JSONL buffer); the same
    answer as neardup.dedup on the same rows."""
    import neardup

    rows = []
    for path in _template_files(tmp_path / "in"):
        with open(path, "rb") as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    frame = pd.DataFrame(rows)
    got = nd.dedup(dd.from_pandas(frame, npartitions=5, sort=False), boilerplate=True,
                   progress=False)
    ref = neardup.dedup(list(zip(frame["id"], frame["text"])), boilerplate=True)
    assert got.summary["pair_rule"] == ref.summary["pair_rule"]
    assert got.summary["pair_rule"]["boilerplate"] is True
    assert got.remove == set(ref.remove) and len(got.remove) > 40


def test_boilerplate_sketch_sampled_by_reading_number(tmp_path):
    """Above four times boilerplate_sketch_mb of input dedup counts one document in s
    (FrequencySketchFor; 16 MiB here, so above 64 MiB): the Dask sketch
    counts a partition's documents by their reading number in the whole input (its first plus
    read_index, which counts a document that cannot be fingerprinted too), so the partitions'
    sketches merge into the sketch of one count over all documents, sampled alike."""
    rng = np.random.default_rng(3)
    texts = [" ".join(f"w{x}" for x in rng.integers(0, 900, 60)) for _ in range(90)]
    lines = [json.dumps({"id": f"d{i}", "text": t}).encode() for i, t in enumerate(texts)]
    lines.insert(33, b'{"id": "markup", "text": "<b></b> <i> </i>"}')  # read, not fingerprinted
    options = {"boilerplate": True, "boilerplate_sketch_mb": 16}
    key = json.dumps(options)

    def read(chunk, name):
        source = {"name": name, "path": None, "data": b"\n".join(chunk) + b"\n", "start": 0,
                  "end": -1, "first_line": 1, "line_shift": -1}
        return _neardup._dask_read(source, options, key, 1, 1)

    whole, parts = read(lines, "all"), [read(lines[:50], "p0"), read(lines[50:], "p1")]
    assert whole["counts"]["read"] == 91 and whole["counts"]["documents"] == 90
    assert parts[0]["counts"]["read"] == 50 and parts[0]["read_index"][-1] == 49

    def sketch(got, first, every_bytes):
        s = _neardup._DaskFrequencies(options, every_bytes)
        s.add(first, got["set_offsets"], got["set_codes"], got["read_index"])
        return s

    for input_bytes, every in ((1 << 20, 1), (200 << 20, 4)):
        one = sketch(whole, 0, input_bytes)
        assert one.sample_every == every
        assert one.counted_documents == len([i for i in range(91) if i % every == 0 and i != 33])
        merged = sketch(parts[0], 0, input_bytes)
        sketch(parts[1], 50, input_bytes).save(str(tmp_path / "p1"))
        merged.merge_file(str(tmp_path / "p1"))
        one.save(str(tmp_path / "one"))
        merged.save(str(tmp_path / "merged"))
        assert (tmp_path / "one").read_bytes() == (tmp_path / "merged").read_bytes()
        assert merged.counted_documents == one.counted_documents
        # Counted from the wrong first number, the partition's sample differs.
        if every > 1:
            shifted = sketch(parts[0], 0, input_bytes)
            sketch(parts[1], 51, input_bytes).save(str(tmp_path / "p1"))
            shifted.merge_file(str(tmp_path / "p1"))
            shifted.save(str(tmp_path / "shifted"))
            assert (tmp_path / "shifted").read_bytes() != (tmp_path / "one").read_bytes()
    assert _neardup._DaskFrequencies(options, 200 << 20).memory_bytes == 16 << 20  # the cap
    assert _neardup._DaskFrequencies({"boilerplate": True}, 200 << 20).memory_bytes == 64 << 20
    assert _neardup._DaskFrequencies({"boilerplate": True}, 200 << 20).sample_every == 1
    with pytest.raises(ValueError, match="read_index"):
        _neardup._DaskFrequencies(options, 1 << 20).add(
            0, whole["set_offsets"], whole["set_codes"], whole["read_index"][:-1])


def test_options_checked_before_any_work(tmp_path):
    frame = dd.from_pandas(pd.DataFrame({"id": ["a"], "text": ["x"]}), npartitions=1)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="keep: expected"):
        nd.dedup(frame, str(out), keep="best")
    with pytest.raises(ValueError, match="no column"):
        nd.dedup(frame, str(out), text_field="body")
    with pytest.raises(ValueError, match="format"):
        nd.dedup(frame, str(out), format="csv")
    with pytest.raises(ValueError, match="threads"):
        nd.dedup(frame, str(out), threads=-1)
    if not nd._parquet_available():
        with pytest.raises(ImportError, match="pyarrow"):
            nd.dedup(frame, str(out), format="parquet")
    assert not out.exists()
    with pytest.raises(FileNotFoundError, match="no file matches"):
        nd.read_jsonl(str(tmp_path / "nothing-*.jsonl"))
    with pytest.raises(TypeError):
        nd.dedup(42)


def test_text_and_id_are_deprecated_aliases(client, tmp_path):
    frame = pd.DataFrame({"key": ["a", "b"], "body": ["one text " * 9, "one text " * 9]})
    with pytest.warns(DeprecationWarning, match="text_field"):
        result = nd.dedup(dd.from_pandas(frame, npartitions=1), text="body", id="key",
                          progress=False)
    assert result.remove == {"b"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nd.dedup(dd.from_pandas(frame, npartitions=1), text_field="body",
                        id_field="key", progress=False).remove == {"b"}


_CLOSED = """
import json
import dask
import dask.dataframe as dd
import distributed
import pandas as pd
import neardup.dask as nd
frame = pd.DataFrame({"id": ["a", "b", "c"],
                      "text": ["one text " * 9, "other " * 9, "one text " * 9]})
cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                   dashboard_address=None)
client = distributed.Client(cluster)
result = nd.dedup(dd.from_pandas(frame, npartitions=2), progress=False)
client.close()
cluster.close()
with dask.config.set(scheduler="sync"):
    decisions = result.decisions.compute()["keep"].tolist()
print(json.dumps([sorted(result.remove), result.keep, result.clusters[0]["kept"]["id"],
                  decisions]))
"""


def test_result_usable_after_its_client_closed():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", _CLOSED], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["c"], ["a", "b"], "a", [True, True, False]]


def test_a_killed_worker_does_not_change_the_result(client, binary, generated, tmp_path):
    path, frame = generated
    # Four copies of the corpus (ids made distinct): the first stage lasts long enough to be
    # caught running.
    rows = pd.concat([frame.assign(id=frame["id"] + f"-{i}") for i in range(4)],
                     ignore_index=True)
    path = tmp_path / "four.jsonl"
    write_jsonl(path, rows.to_dict("records"))
    ddf = dd.from_pandas(rows, npartitions=16, sort=False)
    outcome = {}

    def run():
        try:
            outcome["result"] = nd.dedup(ddf, progress=False)
        except BaseException as error:  # reported below
            outcome["error"] = error

    worker_pids = client.run(os.getpid)
    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.time() + 60
    busy = []
    while time.time() < deadline and not busy:
        busy = [w for w, tasks in client.processing().items()
                if any("neardup-documents" in str(t) for t in tasks)]
        time.sleep(0.01)
    assert busy, "the run ended before a worker could be killed"
    victim = worker_pids[busy[0]]  # killed while it runs a task of the first stage
    os.kill(victim, signal.SIGKILL)
    runner.join(timeout=600)
    assert "error" not in outcome, outcome.get("error")
    check_same(outcome["result"], binary, path, tmp_path / "cli")
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()  # it really died (and was replaced)


_CLIENT = """
import sys
import distributed
import neardup.dask as nd
client = distributed.Client(sys.argv[1])
nd.dedup_files([sys.argv[2]], sys.argv[3], blocksize=1 << 20)
"""


def test_a_killed_client_resumes_from_the_finished_stages(client, binary, generated, tmp_path):
    """A client killed after the first stage: the rerun with the same output reads the finished
    tasks' files instead of running them again, and gives the command's answer."""
    path, _ = generated
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.Popen([sys.executable, "-c", _CLIENT, client.scheduler.address,
                              str(path), str(out)], stderr=subprocess.PIPE, env=env, text=True)
    try:
        seen = []
        for line in child.stderr:
            seen.append(line)
            if line.startswith("neardup.dask: documents:"):
                break
        assert any(s.startswith("neardup.dask: documents:") for s in seen), "".join(seen)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert os.path.isdir(out / ".neardup-work") and not os.path.exists(out / "summary.json")
    lines = []
    result = nd.dedup_files([str(path)], str(out), blocksize=1 << 20, progress=lines.append)
    assert any(s.startswith("resuming") for s in lines), lines
    first = next(s for s in result.summary["stages"] if s["stage"] == "documents")
    assert first["resumed_tasks"] == first["tasks"] > 1
    _, remove, keep = cli_dedup(binary, path, tmp_path / "cli")
    same_files(out, tmp_path / "cli")


def test_array_calls_reject_inconsistent_arrays():
    """The array-level calls check every index against its array (a damaged work file gives an
    error, never a read out of bounds)."""
    from neardup import _neardup as m

    u64 = lambda *xs: np.array(xs, np.uint64)  # noqa: E731
    with pytest.raises(ValueError):
        m._dask_gather_strings(u64(0, 99), np.zeros(3, np.uint8), u64(0))
    with pytest.raises(ValueError):
        m._dask_gather_coded_sets(u64(0, 99), np.zeros(3, np.uint8), u64(0))
    with pytest.raises(OSError, match="does not decode"):
        m._dask_gather_coded_sets(u64(0, 3), np.array([200, 200, 200], np.uint8), u64(0))
    # A band-key block (one partition, one band) that does not decode: an error, not a read.
    with pytest.raises(OSError, match="does not decode"):
        m._dask_band_records([np.array([5, 1, 0], np.uint8)], [u64(0, 3)], [4], [0], 0, 1)
    with pytest.raises(ValueError):
        m._dask_band_records([np.zeros(3, np.uint8)], [u64(0, 3)], [40], [0], 0, 1)
    # The default rule: its `edited` reason is on, so the calls take the documents' unit sets too
    # (empty here: no pair is `edited`), and refuse to go without them.
    opts = {"threshold": 0.5}
    no_units = {"unit_offsets": u64(0, 0, 0), "unit_values": np.zeros(0, np.uint32)}
    with pytest.raises(ValueError, match="unit_offsets and unit_values"):
        m._dask_verify(np.array([0], np.uint32), np.array([1], np.uint32), u64(1, 2), u64(3, 3),
                       u64(7, 8), np.array([1, 1], np.uint32), u64(0, 1, 2),
                       np.array([1, 5], np.uint32), u64(0, 1), 0, opts, "t")
    with pytest.raises(ValueError):  # a pair names document 5 of 2
        m._dask_verify(np.array([0], np.uint32), np.array([5], np.uint32), u64(1, 2), u64(3, 3),
                       u64(7, 8), np.array([1, 1], np.uint32), u64(0, 0, 0),
                       np.zeros(0, np.uint32), u64(0, 1), 0, opts, "t", **no_units)
    with pytest.raises(ValueError):  # set offsets beyond the values
        m._dask_verify(np.array([0], np.uint32), np.array([1], np.uint32), u64(1, 2), u64(3, 3),
                       u64(7, 8), np.array([1, 1], np.uint32), u64(0, 9, 9),
                       np.zeros(2, np.uint32), u64(0, 1), 0, opts, "t", **no_units)
    with pytest.raises(ValueError):  # unit offsets beyond the values
        m._dask_verify(np.array([0], np.uint32), np.array([1], np.uint32), u64(1, 2), u64(3, 3),
                       u64(7, 8), np.array([1, 1], np.uint32), u64(0, 1, 2),
                       np.array([1, 5], np.uint32), u64(0, 1), 0, opts, "t",
                       unit_offsets=u64(0, 9, 9), unit_values=np.zeros(2, np.uint32))
    with pytest.raises(ValueError):  # a pair reason that is none
        m._dask_clusters(u64(1, 2), u64(1, 2), 64, u64(3, 3), u64(3, 3), u64(1, 2),
                         np.zeros(2), np.array([0], np.uint32), np.array([1], np.uint32),
                         np.zeros(1, np.int32), np.ones(1), np.zeros(1, np.uint8), "first")
    # The rule's answer: identical sets are near duplicates (Jaccard 1), equal hashes exact ones.
    similarity, reason = m._dask_verify(
        np.array([0, 0], np.uint32), np.array([1, 2], np.uint32), u64(1, 2, 1), u64(3, 3, 3),
        u64(7, 8, 7), np.array([2, 2, 2], np.uint32), u64(0, 2, 4, 6),
        np.array([1, 5, 1, 5, 1, 5], np.uint32), u64(0, 1, 2), 0, opts, "t",
        unit_offsets=u64(0, 0, 0, 0), unit_values=np.zeros(0, np.uint32))[:2]
    assert [m._REASONS[r] for r in reason] == ["near_duplicate", "exact_duplicate"]
    assert similarity.tolist() == [1.0, 1.0]
    # A rejected pair is measured (its exact Jaccard, for summary.json's histogram) when in the
    # sample: at level 0, every one.
    similarity, reason, measured, _ = m._dask_verify(
        np.array([0], np.uint32), np.array([1], np.uint32), u64(1, 2), u64(3, 3), u64(7, 8),
        np.array([2, 2], np.uint32), u64(0, 2, 4), np.array([1, 5, 1, 6], np.uint32), u64(0, 1),
        0, opts, "t", **no_units)
    assert reason.tolist() == [0] and measured.tolist() == [1 / 3]
    with pytest.raises(ValueError):
        m._dask_write_id_parts(u64(0, 50), np.zeros(2, np.uint8), np.zeros(1, np.uint8),
                               u64(), [], "/nonexistent/k", "/nonexistent/r", "")
    with pytest.raises(TypeError):
        m._dask_gather_strings(["a"], np.zeros(3, np.uint8), u64(0))


def test_range_lines_moves_ends_to_line_starts_and_counts_breaks(tmp_path):
    from neardup import _neardup

    data = b"".join(b"x" * (i * 7919 % 300) + b"\n" for i in range(4000)) + b"no final break"
    path = tmp_path / "lines.jsonl"
    path.write_bytes(data)
    size = len(data)

    def line_start(position):
        if position <= 0:
            return 0
        if position >= size:
            return size
        at = data.find(b"\n", position - 1)
        return size if at < 0 else at + 1

    for start, end in [(0, size), (0, 1), (1, 2), (5000, 90000), (size - 3, size), (size, size),
                       (0, 0), (12345, 12346), (300000, 600000)]:
        s, e = line_start(start), line_start(end)
        got = _neardup._dask_range_lines(str(path), start, end, size)
        assert got == {"start": s, "end": e, "breaks": data[s:e].count(b"\n")}, (start, end)
    with pytest.raises(OSError, match="cannot open"):
        _neardup._dask_range_lines(str(tmp_path / "missing"), 0, 10, 10)


def test_dataframe_rows_become_the_jsonl_the_reader_reads():
    """A DataFrame partition's cells as JSON values: what json.dumps writes for the same Python
    values (NaN, NA and None as null), and text that is not UTF-8 kept invalid so the reader
    skips it as it would in a file."""
    from neardup import _neardup as m

    ids = [None, 3, np.int64(7), 2.5, np.float32(1.0), float("nan"), True, pd.NA, "a\"b\n"]
    texts = ["x"] * len(ids)
    lines = m._dask_rows_jsonl(ids, texts, None, "").decode("utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == [
        None, 3, 7, 2.5, 1.0, None, True, None, "a\"b\n"]
    got = m._dask_rows_jsonl(["k"], ["caf\u00e9 \x01 \u4e2d"], [np.float64(0.5)], "score")
    assert json.loads(got) == {"id": "k", "text": "caf\u00e9 \x01 \u4e2d", "score": 0.5}
    for bad in ("lone \udc80 surrogate", b"bytes \xff"):
        line = m._dask_rows_jsonl(["k"], [bad], None, "")
        with pytest.raises(UnicodeDecodeError):
            line.decode("utf-8")
    ok = m._dask_rows_jsonl(["k"], [b"ok bytes"], None, "")
    assert ok == b'{"id":"k","text":"ok bytes"}\n'


def _chain_texts(rng, links):
    """Texts where each one shares most of its words with the next, so that document i is a
    near-duplicate of i + 1 but not of i + 2 (a chain)."""
    words = [f"w{rng.integers(0, 10**9)}" for _ in range(40 * (links + 4))]
    return [" ".join(words[40 * i:40 * i + 160]) for i in range(links + 1)]


@pytest.mark.parametrize("component_pairs", [1_000_000, 40])
def test_chain_across_many_partitions_same_as_cli(client, binary, generated, tmp_path,
                                                  component_pairs):
    """A chain of pairs whose links fall in different partitions among 16: one cluster, as the
    command finds it, with every link's "via"; with component_pairs=40 the components are found
    by min-label propagation over many tasks (rounds reported)."""
    path, frame = generated
    rng = np.random.default_rng(3)
    chain = _chain_texts(rng, 40)
    rows = [{"id": i, "text": t} for i, t in zip(frame["id"][:1600], frame["text"][:1600])]
    # Chain member j goes at row 100 * j % 1600 + j, so consecutive members are 100 rows apart
    # (a different partition of 100 rows each).
    for j, text in enumerate(chain):
        rows.insert(min(len(rows), (100 * j) % 1600 + j), {"id": f"chain-{j}", "text": text})
    small = tmp_path / "chain.jsonl"
    write_jsonl(small, rows)
    ddf = dd.from_pandas(pd.DataFrame(rows), npartitions=16, sort=False)
    result = nd.dedup(ddf, shuffle_partitions=7, component_pairs=component_pairs,
                      progress=False)
    clusters = check_same(result, binary, small, tmp_path / "cli")
    chained = [c for c in clusters if c["kept"]["id"].startswith("chain-")]
    assert len(chained) == 1 and chained[0]["size"] == len(chain)
    assert any(m["reason"] == "chained" for m in chained[0]["removed"])
    cluster = next(c for c in result.clusters if c["kept"]["id"].startswith("chain-"))
    partitions = {int(m["location"].split(":")[0]) for m in cluster["removed"]}
    assert len(partitions) >= 10
    info = result.summary["dask"]
    if component_pairs == 40:
        assert info["component_partitions"] > 5 and info["component_rounds"] > 2
    else:
        assert info["component_partitions"] == 1


@pytest.mark.skipif(not os.environ.get("NEARDUP_LARGE_TESTS"),
                    reason="large (minutes): set NEARDUP_LARGE_TESTS=1; NEARDUP_DASK_CORPUS may "
                           "name a JSONL corpus of 1M+ documents, else one is generated")
def test_worker_memory_does_not_grow_with_the_corpus(shared):
    """A worker's peak at 100,000 and at 1,000,000 documents, same partition size: within 25 %
    (bench/dask_bench.py --scaling, which exits non-zero otherwise)."""
    args = [sys.executable, os.path.join(ROOT, "bench", "dask_bench.py"), "--scaling", "100000",
            "1000000", "--quiet", "--idle-seconds", "0"]
    if os.environ.get("NEARDUP_DASK_CORPUS"):
        args += ["--input", os.environ["NEARDUP_DASK_CORPUS"]]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), NEARDUP_SHARED_DIR=shared)
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
