"""neardup.dask.dedup on a LocalCluster of 2 worker processes: the same clusters and kept
documents as `neardup dedup`, on devpairs and on generated data, also when a worker is killed."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

import neardup
import neardup.dask as nd
from conftest import ROOT, write_jsonl
from test_dedup import cli_dedup, comparable

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def generated(shared, tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "gen.jsonl"
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "generate_corpus.py"), "6000",
                    str(path), "--corpus", os.path.join(shared, "corpus"), "--seed", "11"],
                   check=True, capture_output=True)
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return path, pd.DataFrame({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]})


def comparable_dask(clusters):
    # The command's "location" is file:line, the distributed one partition:row; all else is equal.
    return comparable(clusters)


def check_same(result, binary, path, out, *flags):
    clusters, remove, keep = cli_dedup(binary, path, out, *flags)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        assert result.summary["candidate_pairs"] == json.load(f)["candidate_pairs"]
    assert comparable_dask(result.clusters) == comparable(clusters)
    assert result.remove == set(remove)
    decisions = result.decisions.compute()
    assert decisions.loc[decisions["keep"], "id"].tolist() == keep
    assert decisions.loc[~decisions["keep"], "id"].tolist() == remove
    return clusters


def test_devpairs_same_as_cli(client, binary, devpairs_docs, tmp_path):
    rows = [{"id": d["id"], "text": d["text"]} for d in devpairs_docs]
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, rows)
    ddf = dd.from_pandas(pd.DataFrame(rows), npartitions=5, sort=False)
    result = nd.dedup(ddf, output=str(tmp_path / "dask"))
    clusters = check_same(result, binary, path, tmp_path / "cli")
    assert len(clusters) > 1000 and result.summary["clusters"] == len(clusters)
    with open(tmp_path / "dask" / "clusters.jsonl", encoding="utf-8") as f:
        assert len(f.readlines()) == len(clusters)
    parts = os.listdir(tmp_path / "dask" / "decisions")
    assert len(parts) == 5


@pytest.mark.parametrize("options,flags", [
    ({}, []),
    ({"k": 6, "keep": "longest", "verify": 0.5, "candidates": "simhash"},
     ["-k", "6", "--keep", "longest", "--verify", "0.5", "--candidates", "simhash"]),
    ({"threshold": 0.8, "bucket_window": 2, "candidates": "lsh"},
     ["--threshold", "0.8", "--bucket-window", "2", "--candidates", "lsh"]),
    ({"k": 3, "verify": 0}, ["-k", "3", "--verify", "0"]),
])
def test_generated_same_as_cli(client, binary, generated, tmp_path, options, flags):
    path, frame = generated
    ddf = dd.from_pandas(frame, npartitions=4, sort=False)
    result = nd.dedup(ddf, **options)
    clusters = check_same(result, binary, path, tmp_path / "cli", *flags)
    assert len(clusters) > 100


def test_bag_input(client, binary, generated, tmp_path):
    import dask.bag as db

    path, frame = generated
    head = frame.iloc[:1500]
    bag = db.from_sequence(list(zip(head["id"], head["text"])), npartitions=3)
    small = tmp_path / "small.jsonl"
    write_jsonl(small, [{"id": i, "text": t} for i, t in zip(head["id"], head["text"])])
    check_same(nd.dedup(bag), binary, small, tmp_path / "cli")


def test_a_killed_worker_does_not_change_the_result(client, binary, generated, tmp_path):
    path, frame = generated
    ddf = dd.from_pandas(frame, npartitions=8, sort=False)
    outcome = {}

    def run():
        try:
            outcome["result"] = nd.dedup(ddf)
        except BaseException as error:  # reported below
            outcome["error"] = error

    worker_pids = client.run(os.getpid)
    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.time() + 60
    while time.time() < deadline and not any(client.processing().values()):
        time.sleep(0.05)
    time.sleep(0.5)
    assert runner.is_alive(), "the run ended before a worker could be killed"
    victim = sorted(worker_pids.values())[0]
    os.kill(victim, signal.SIGKILL)
    runner.join(timeout=600)
    assert "error" not in outcome, outcome.get("error")
    check_same(outcome["result"], binary, path, tmp_path / "cli")
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()  # it really died (and was replaced)


def _popcount(x):
    return np.unpackbits(x.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)


@pytest.mark.parametrize("bits,k,blocks,t", [(64, 3, 4, 1), (64, 6, 8, 2), (64, 6, 10, 4),
                                             (64, 4, 7, 3), (128, 8, 10, 2)])
def test_candidate_keys_are_exact(bits, k, blocks, t):
    """Every pair within k comes out of exactly one bucket, whatever (blocks, t)."""
    rng = np.random.default_rng(bits + k + blocks)
    n = 600
    lo = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    hi = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True) if bits == 128 else np.zeros(n, np.uint64)
    for i in range(100, n):  # near copies of earlier rows
        j = rng.integers(0, 100)
        lo[i] = lo[j]
        hi[i] = hi[j]
        for bit in rng.choice(bits, size=rng.integers(0, k + 3), replace=False):
            if bit < 64:
                lo[i] ^= np.uint64(1) << np.uint64(bit)
            else:
                hi[i] ^= np.uint64(1) << np.uint64(bit - 64)
    rec = pd.DataFrame({"gid": np.arange(n, dtype=np.uint64), "hi": hi, "lo": lo})
    keys = nd._hamming_keys(rec, bits, blocks, t)
    # Any split of the records into shuffle partitions, as long as equal keys meet.
    parts = [keys[keys["key"] % np.uint64(3) == np.uint64(r)] for r in range(3)]
    pairs = pd.concat([nd._bucket_pairs(p, bits, blocks, t, k) for p in parts])
    got = list(zip(pairs["a"].tolist(), pairs["b"].tolist(), pairs["distance"].tolist()))
    expected = []
    for i in range(n):
        d = _popcount(lo[i + 1:] ^ lo[i]) + _popcount(hi[i + 1:] ^ hi[i])
        expected += [(i, i + 1 + int(j), int(d[j])) for j in np.nonzero(d <= k)[0]]
    assert sorted(got) == sorted(expected) and len(got) == len(set(got)) and len(expected) > 50


def test_bad_options_fail_before_any_work():
    frame = dd.from_pandas(pd.DataFrame({"id": ["a"], "text": ["x"]}), npartitions=1)
    with pytest.raises(ValueError, match="keep: expected"):
        nd.dedup(frame, keep="best")
    with pytest.raises(TypeError, match="text_field"):
        nd.dedup(frame, text_field="body")
    with pytest.raises(ValueError, match="no column"):
        nd.dedup(frame, text="body")


def _union_find_components(nodes, edges):
    parent = {n: n for n in nodes}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {n: find(n) for n in nodes}


def test_components_across_partitions_match_union_find(client):
    """The distributed components equal a plain union-find: random small clusters plus a long
    chain whose consecutive links are in different partitions and whose nodes are numbered in
    random order (the worst case for label propagation)."""
    rng = np.random.default_rng(7)
    gids = np.unique(((rng.integers(0, 40, 4000).astype(np.uint64) << np.uint64(32))
                      | rng.integers(0, 100000, 4000).astype(np.uint64)))
    order = rng.permutation(len(gids))
    chain = gids[order[:300]]
    edges = [(int(x), int(y)) for x, y in zip(chain[:-1], chain[1:])]
    rest = gids[order[300:]]
    for _ in range(1500):
        x, y = rng.choice(rest, 2, replace=False)
        edges.append((int(x), int(y)))
    edges = [(min(x, y), max(x, y)) for x, y in edges]
    frame = pd.DataFrame({"a": np.array([e[0] for e in edges], np.uint64),
                          "b": np.array([e[1] for e in edges], np.uint64),
                          "distance": np.zeros(len(edges), np.int32),
                          "similarity": np.ones(len(edges)),
                          "reason": np.full(len(edges), 3, np.uint8)})
    ddf = dd.from_pandas(frame, npartitions=13, sort=False)
    labels, _, rounds = nd._components(ddf, 11)
    got = labels.compute()
    got = dict(zip(got["node"].tolist(), got["label"].tolist()))
    nodes = {n for e in edges for n in e}
    expected = _union_find_components(nodes, edges)
    assert got == expected
    print(f"{rounds} rounds")
    assert len({got[int(n)] for n in chain}) == 1 and got[int(chain[0])] == int(chain.min())


def _chain_texts(rng, links):
    """Texts where each one shares most of its words with the next, so that document i is a
    near-duplicate of i + 1 but not of i + 2 (a chain)."""
    words = [f"w{rng.integers(0, 10**9)}" for _ in range(40 * (links + 4))]
    return [" ".join(words[40 * i:40 * i + 160]) for i in range(links + 1)]


def test_chain_across_many_partitions_same_as_cli(client, binary, generated, tmp_path):
    """A chain of pairs whose links fall in different partitions among 16: one cluster, as the
    command finds it, with every link's "via"."""
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
    result = nd.dedup(ddf, shuffle_partitions=7)
    clusters = check_same(result, binary, small, tmp_path / "cli")
    chained = [c for c in clusters if c["kept"]["id"].startswith("chain-")]
    assert len(chained) == 1 and chained[0]["size"] == len(chain)
    assert any(m["reason"] == "chained" for m in chained[0]["removed"])
    partitions = {int(m["location"].split(":")[0]) for m in
                  next(c for c in result.clusters if c["kept"]["id"].startswith("chain-"))["removed"]}
    assert len(partitions) >= 10


def test_boilerplate_weights_are_refused_not_ignored(client):
    # The weights need the whole corpus's shingle frequencies, which neardup.dask does not count
    # yet: it refuses them rather than answer differently from the command.
    ddf = dd.from_pandas(pd.DataFrame({"id": ["a", "b"], "text": ["one two three four"] * 2}),
                         npartitions=1)
    with pytest.raises(ValueError, match="boilerplate"):
        nd.dedup(ddf, boilerplate=True)
