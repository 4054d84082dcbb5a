#!/usr/bin/env python3
"""Streaming equals batch, measured (docs/quality.md, "The service answers what dedup answers").

Streams ../shared/devpairs/docs.jsonl plus ../shared/corpus/*.jsonl (27,961 documents) through a
running `neardup serve`, in file order, one POST /v1/check a document with "add": "always", and
links each document to the duplicates it was told about. Then runs `neardup dedup` on the same file
and compares the duplicate components (clusters as sets of ids): they must be identical. Also
streams the same file through a simhash-rule store (today's /v1/check before issue 19: fingerprints
within k = 3) and scores all three per devpairs label: the share of a label's pairs whose two
documents end up in one component (recall for positive labels, false-positive rate for negative
ones). With --distractors FILE the dedup-rule store is first bulk-loaded with FILE
(`neardup index add`, e.g. 1M documents of bench/generate_distractors.py) and the stream must give
the same components among the corpus documents.

    /usr/bin/python3 bench/stream_quality.py --binary build/neardup
    /usr/bin/python3 bench/generate_distractors.py 1000000 /tmp/distractors_1m.jsonl
    /usr/bin/python3 bench/stream_quality.py --binary build/neardup \\
        --distractors /tmp/distractors_1m.jsonl --skip-simhash

Prints a Markdown table; exits 1 when the components differ. Needs ../shared (skips, saying so,
when it is absent). Standard library only.
"""
import argparse
import collections
import glob
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def components(pairs):
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    groups = collections.defaultdict(set)
    for x in parent:
        groups[find(x)].add(x)
    return {frozenset(g) for g in groups.values() if len(g) > 1}


class Server:
    """`neardup serve DIR --port 0 ...` as a child process."""

    def __init__(self, binary, store, extra):
        self.process = subprocess.Popen(
            [binary, "serve", store, "--port", "0", "--sync", "none"] + extra,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        if "127.0.0.1:" not in line:
            self.process.kill()
            raise RuntimeError("serve did not start: " + line)
        self.port = int(line.split("127.0.0.1:")[1].split()[0])
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def post(self, path, body):
        self.connection.request("POST", path, body=json.dumps(body),
                                headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        data = response.read()
        if response.status == 400 and b"no features" in data:
            return None  # a text with nothing to fingerprint: refused, as dedup skips it
        if response.status != 200:
            raise RuntimeError(f"{path}: {response.status} {data[:300]!r}")
        return json.loads(data)

    def stop(self):
        self.connection.close()
        self.process.terminate()
        self.process.wait(timeout=120)


def stream(binary, store, documents, extra, body_extra):
    """Posts every document; returns (pairs, seconds)."""
    server = Server(binary, store, extra)
    pairs = []
    start = time.time()
    try:
        for doc_id, text in documents:
            body = {"id": doc_id, "text": text, "add": "always"}
            body.update(body_extra)
            result = server.post("/v1/check", body)
            if result is None:
                continue
            for duplicate in result["duplicates"]:
                pairs.append((doc_id, duplicate["id"]))
    finally:
        seconds = time.time() - start
        server.stop()
    return pairs, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default="build/neardup")
    parser.add_argument("--shared", default=os.environ.get("NEARDUP_SHARED", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")))
    parser.add_argument("--distractors", help="JSONL bulk-loaded into the dedup store first")
    parser.add_argument("--skip-simhash", action="store_true",
                        help="do not stream through a simhash-rule store")
    parser.add_argument("--work", help="directory for the stores and outputs (default: a temp dir)")
    args = parser.parse_args()
    devpairs = os.path.join(args.shared, "devpairs")
    if not os.path.isdir(devpairs):
        print(f"stream_quality: {devpairs} not found: skipped (needs ../shared)")
        return 0
    work = args.work or tempfile.mkdtemp(prefix="neardup_stream_quality_")
    os.makedirs(work, exist_ok=True)
    corpus_file = os.path.join(work, "corpus.jsonl")
    documents, seen = [], set()
    inputs = [os.path.join(devpairs, "docs.jsonl")] + sorted(
        glob.glob(os.path.join(args.shared, "corpus", "*.jsonl")))
    with open(corpus_file, "w", encoding="utf-8") as out:
        for path in inputs:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    record = json.loads(line)
                    if record["id"] in seen:
                        sys.exit(f"stream_quality: id {record['id']} repeats; ids must be unique")
                    seen.add(record["id"])
                    documents.append((record["id"], record["text"]))
                    out.write(json.dumps({"id": record["id"], "text": record["text"]},
                                         ensure_ascii=False) + "\n")
    print(f"{len(documents)} documents from {len(inputs)} files", file=sys.stderr)

    # Batch: neardup dedup on the same file.
    out_dir = os.path.join(work, "dedup")
    shutil.rmtree(out_dir, ignore_errors=True)
    start = time.time()
    subprocess.run([args.binary, "dedup", corpus_file, "-o", out_dir, "-q"], check=True)
    dedup_seconds = time.time() - start
    batch = set()
    with open(os.path.join(out_dir, "clusters.jsonl"), encoding="utf-8") as f:
        for line in f:
            cluster = json.loads(line)
            batch.add(frozenset([cluster["kept"]["id"]] + [m["id"] for m in cluster["removed"]]))

    # Streamed through a dedup-rule store (optionally preloaded with distractors).
    store = os.path.join(work, "store_dedup")
    shutil.rmtree(store, ignore_errors=True)
    subprocess.run([args.binary, "index", "create", store], check=True,
                   stderr=subprocess.DEVNULL)
    preload_seconds = 0.0
    if args.distractors:
        start = time.time()
        subprocess.run([args.binary, "index", "add", store, args.distractors, "--sync", "none"],
                       check=True)
        preload_seconds = time.time() - start
    pairs, dedup_stream_seconds = stream(args.binary, store, documents, [], {})
    streamed = components(pairs)
    corpus_ids = set(doc_id for doc_id, _ in documents)
    streamed = {c for c in streamed}
    outside = [c for c in streamed if not c <= corpus_ids]
    identical = streamed == batch
    simhash = None
    simhash_seconds = 0.0
    if not args.skip_simhash:
        store = os.path.join(work, "store_simhash")
        shutil.rmtree(store, ignore_errors=True)
        pairs, simhash_seconds = stream(args.binary, store, documents, ["--rule", "simhash"],
                                        {"k": 3})
        simhash = components(pairs)

    # Per label.
    def same_component(comps):
        where = {}
        for index, comp in enumerate(comps):
            for x in comp:
                where[x] = index
        return lambda a, b: a in where and where.get(a) == where.get(b)

    columns = [("streamed /v1/check (dedup rule)", same_component(streamed)),
               ("neardup dedup", same_component(batch))]
    if simhash is not None:
        columns.append(("streamed /v1/check (simhash rule, k = 3)", same_component(simhash)))
    labels = collections.defaultdict(list)
    with open(os.path.join(devpairs, "pairs.tsv"), encoding="utf-8") as f:
        next(f)
        for line in f:
            fields = line.rstrip("\n").split("\t")
            labels[fields[3]].append((fields[1], fields[2]))
    print("| label | pairs | " + " | ".join(name for name, _ in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for label in sorted(labels):
        pairs_of = labels[label]
        cells = [f"{100.0 * sum(1 for a, b in pairs_of if linked(a, b)) / len(pairs_of):.1f}%"
                 for _, linked in columns]
        print(f"| {label} | {len(pairs_of)} | " + " | ".join(cells) + " |")
    print()
    print(f"components: streamed {len(streamed)} ({sum(map(len, streamed))} documents), "
          f"dedup {len(batch)} ({sum(map(len, batch))} documents): "
          f"{'IDENTICAL' if identical else 'DIFFERENT'}; components reaching outside the corpus "
          f"(distractors): {len(outside)}")
    print(f"times: dedup {dedup_seconds:.1f} s; preload {preload_seconds:.1f} s; stream (dedup "
          f"rule) {dedup_stream_seconds:.1f} s = {len(documents) / dedup_stream_seconds:.0f} "
          f"checks/s one request at a time" +
          (f"; stream (simhash rule) {simhash_seconds:.1f} s" if simhash is not None else ""))
    if not identical:
        only_stream = streamed - batch
        only_batch = batch - streamed
        print(f"only streamed: {len(only_stream)}, only dedup: {len(only_batch)}")
        for comp in list(only_stream)[:5]:
            print("  streamed:", sorted(comp)[:8])
        for comp in list(only_batch)[:5]:
            print("  dedup:   ", sorted(comp)[:8])
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if identical and not outside else 1


if __name__ == "__main__":
    sys.exit(main())
