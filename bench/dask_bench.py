#!/usr/bin/env python3
"""Dedup of N generated documents with `neardup dedup` (one process) and with neardup.dask.dedup on
a LocalCluster of 2 worker processes: both wall times, whether the answers agree, the bytes that
enter each shuffle (per document), and the peak memory of the CLI and of each Dask worker.

    PYTHONPATH=build/python /usr/bin/python3 bench/dask_bench.py 1000000
    PYTHONPATH=build/python /usr/bin/python3 bench/dask_bench.py 100000 --input /tmp/gen.jsonl

Generates the corpus with bench/generate_corpus.py unless --input is given. The CLI runs with all
cores; the cluster has 2 workers of (cores / 2) threads, so both use the same machine. Figures taken
while other work runs on the machine are noisy; the ratio of the two times is the figure to read.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("count", type=int)
    parser.add_argument("--input", help="an existing JSONL corpus (default: generate one)")
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "neardup"))
    parser.add_argument("--blocksize", type=int, default=32 << 20, help="bytes per partition")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-shuffle-bytes", action="store_true",
                        help="skip the second Dask run that measures the bytes entering each shuffle")
    args = parser.parse_args()

    import dask.dataframe as dd
    import distributed
    import psutil

    import neardup.dask as nd

    scratch = tempfile.mkdtemp(prefix="neardup-dask-bench-")
    path = args.input
    if path is None:
        path = os.path.join(scratch, "corpus.jsonl")
        start = time.time()
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "generate_corpus.py"),
                        str(args.count), path, "--corpus", os.path.join(ROOT, "..", "shared", "corpus")],
                       check=True)
        print(f"generated {args.count} documents in {time.time() - start:.1f} s -> {path}")
    size = os.path.getsize(path)

    # The command-line tool.
    out_cli = os.path.join(scratch, "cli")
    start = time.time()
    cli = subprocess.run([args.binary, "dedup", "-q", path, "-o", out_cli], check=True)
    cli_seconds = time.time() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cli_peak = usage.ru_maxrss * 1024
    cli_cpu = usage.ru_utime + usage.ru_stime
    with open(os.path.join(out_cli, "summary.json")) as f:
        cli_summary = json.load(f)
    with open(os.path.join(out_cli, "remove.txt")) as f:
        cli_remove = set(line for line in f.read().split("\n") if line)
    print(f"neardup dedup: {cli_seconds:.1f} s ({cli_cpu:.1f} CPU s), peak memory {cli_peak / 1e6:.0f} MB, "
          f"{cli_summary['documents_fingerprinted']} documents, {cli_summary['clusters']} clusters, "
          f"{len(cli_remove)} removed")

    cores = os.cpu_count() or 1
    cluster = distributed.LocalCluster(n_workers=args.workers,
                                       threads_per_worker=max(1, cores // args.workers),
                                       processes=True, dashboard_address=None, silence_logs=40)
    client = distributed.Client(cluster)
    peaks = {}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                for worker, rss in client.run(lambda: __import__("psutil").Process().memory_info().rss).items():
                    peaks[worker] = max(peaks.get(worker, 0), rss)
            except Exception:  # a worker restarting; sample again
                pass
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.time()
    ddf = dd.read_json(path, lines=True, blocksize=args.blocksize, dtype=False)[["id", "text"]]
    result = nd.dedup(ddf, output=os.path.join(scratch, "dask"))
    dask_seconds = time.time() - start
    stop.set()
    sampler.join()
    # CPU seconds of the worker processes (a worker restarted mid-run would be undercounted) and
    # of this (client) process.
    worker_cpu = client.run(lambda: sum(__import__("psutil").Process().cpu_times()[:2]))
    own = resource.getrusage(resource.RUSAGE_SELF)
    client_cpu = own.ru_utime + own.ru_stime
    shuffle_bytes = {}
    if not args.no_shuffle_bytes:
        # A second run that also sizes the rows entering each shuffle (extra passes: not timed).
        shuffle_bytes = nd.dedup(ddf, measure_shuffle=True).summary["shuffle_bytes"]
    dask_remove = result.remove  # gathered from the cluster
    client.close()
    cluster.close()
    same = (dask_remove == cli_remove
            and result.summary["clusters"] == cli_summary["clusters"]
            and result.summary["candidate_pairs"] == cli_summary["candidate_pairs"])
    n = result.summary["documents_fingerprinted"]
    print(f"neardup.dask.dedup ({args.workers} workers, {ddf.npartitions} partitions): "
          f"{dask_seconds:.1f} s, {result.summary['clusters']} clusters, {len(dask_remove)} removed, "
          f"{result.summary['component_rounds']} component rounds; same answer as the CLI: {same}")
    print(f"time ratio dask / CLI: {dask_seconds / cli_seconds:.2f}")
    dask_cpu = sum(worker_cpu.values()) + client_cpu
    print(f"CPU seconds: CLI {cli_cpu:.1f}, dask workers {sum(worker_cpu.values()):.1f} + client "
          f"{client_cpu:.1f} (ratio {dask_cpu / max(cli_cpu, 1e-9):.2f}); per document: CLI "
          f"{1e6 * cli_cpu / max(n, 1):.0f} us, dask {1e6 * dask_cpu / max(n, 1):.0f} us")
    print(f"input: {size / 1e6:.0f} MB, {size / max(n, 1):.0f} bytes per document")
    total = 0
    for name, nbytes in shuffle_bytes.items():
        total += nbytes
        print(f"  shuffle {name:<22} {nbytes / 1e6:9.1f} MB  {nbytes / max(n, 1):7.1f} bytes/document")
    if shuffle_bytes:
        print(f"  shuffle total                  {total / 1e6:9.1f} MB  {total / max(n, 1):7.1f} bytes/document")
    for worker, peak in sorted(peaks.items()):
        print(f"  worker {worker}: peak memory {peak / 1e6:.0f} MB (timed run)")
    print(json.dumps({"count": n, "cli_seconds": cli_seconds, "dask_seconds": dask_seconds,
                      "cli_cpu_seconds": cli_cpu, "worker_cpu_seconds": worker_cpu,
                      "client_cpu_seconds": client_cpu,
                      "cli_peak_bytes": cli_peak, "worker_peak_bytes": peaks,
                      "shuffle_bytes": shuffle_bytes, "same": same,
                      "component_rounds": result.summary["component_rounds"],
                      "partitions": ddf.npartitions, "input_bytes": size}))
    shutil.rmtree(scratch, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
