#!/usr/bin/env python3
"""`neardup dedup` (one process) and neardup.dask (neardup.dask.local_cluster: 2 worker processes
of 1 thread, DASK_SETTINGS) side by side on the same N generated documents: wall and CPU time
(the Dask figure counts each process once by its own user + system time: the workers, and the
client's process, which also holds the LocalCluster's scheduler and nannies), peak memory (the
CLI's, and each worker's sampled every 0.2 s by a process not counted), bytes shuffled per
document, component rounds, and whether the outputs are the same files. --compare-settings runs
the Dask side a second time on Dask's default settings, right after.

    PYTHONPATH=build/python /usr/bin/python3 bench/dask_bench.py 1000000
    PYTHONPATH=build/python /usr/bin/python3 bench/dask_bench.py --input planted_1m.jsonl \\
        --compare-settings                   # also on Dask's defaults: same-run ratio
    PYTHONPATH=build/python /usr/bin/python3 bench/dask_bench.py 100000 --input /tmp/planted.jsonl
    PYTHONPATH=build/python /usr/bin/python3 bench/dask_bench.py --scaling 100000 1000000 \\
        --input /tmp/planted_1m.jsonl        # worker peak at two sizes, same partition size

The corpus is bench/generate_distractors.py --dup-rate 0.1 (the planted corpus of
bench/dedup_bench.sh: distinct originals and 10 % planted copies) unless --input is given;
--generator overlapping uses bench/generate_corpus.py (originals that share long passages). The
Dask run reads the file with neardup.dask.read_jsonl (--dataframe: dask.dataframe.read_json, then
dedup of that DataFrame). The machine's load is printed before and after each run: CPU seconds
and same-run ratios are the figures to read on a busy machine. Needs ../shared/corpus to
generate a corpus.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def generate(count, path, generator, shared):
    script = "generate_distractors.py" if generator == "planted" else "generate_corpus.py"
    extra = ["--dup-rate", "0.1"] if generator == "planted" else []
    start = time.time()
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), str(count), path,
                    "--corpus", os.path.join(shared, "corpus"), *extra], check=True)
    print(f"generated {count} documents in {time.time() - start:.1f} s -> {path}")


def run_cli(binary, path, out, threads):
    """The command, timed with its own rusage (os.wait4), not its siblings'."""
    start = time.time()
    args = [binary, "dedup", "-q", path, "-o", out]
    if threads:
        args += ["-j", str(threads)]
    child = subprocess.Popen(args)
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"neardup dedup failed ({status})")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    return {"seconds": time.time() - start, "cpu": usage.ru_utime + usage.ru_stime,
            "peak": usage.ru_maxrss * 1024, "summary": summary}


def sample_peaks(pids, connection):
    """In a process of its own (so its CPU is not counted as the client's): the peak resident
    memory of each worker process (and its children), sampled every 0.2 s until told to stop."""
    import psutil

    processes = {pid: psutil.Process(pid) for pid in pids}
    peaks = {pid: 0 for pid in pids}
    while not connection.poll(0.2):
        for pid, process in processes.items():
            try:
                rss = process.memory_info().rss
                rss += sum(c.memory_info().rss for c in process.children(recursive=True))
                peaks[pid] = max(peaks[pid], rss)
            except Exception:  # a worker restarting: sample again
                pass
    connection.send(peaks)


class Sampler:
    def __init__(self, pids):
        import multiprocessing

        self.connection, theirs = multiprocessing.Pipe()
        self.process = multiprocessing.get_context("spawn").Process(
            target=sample_peaks, args=(pids, theirs), daemon=True)
        self.process.start()

    def finish(self):
        self.connection.send("stop")
        peaks = self.connection.recv()
        self.process.join()
        return peaks


def cpu_of(processes):
    total = 0.0
    for p in processes:
        try:
            times = p.cpu_times()
            total += times.user + times.system
        except Exception:
            pass
    return total


def run_dask(path, out, args, settings="neardup"):
    import dask.dataframe as dd
    import distributed
    import psutil

    import neardup.dask as nd

    if settings == "neardup":  # what a user of neardup.dask gets: nd.local_cluster
        cluster = nd.local_cluster(args.workers, memory_limit=args.memory_limit)
    else:  # Dask's own defaults (the profiler on, ...)
        cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                           processes=True, dashboard_address=None,
                                           silence_logs=40, memory_limit=args.memory_limit)
    client = distributed.Client(cluster)
    try:
        worker_pids = list(client.run(os.getpid).values())
        # A LocalCluster's nannies (and its scheduler) live in this process, the workers' parent:
        # their CPU is the client's. Each process is counted once, by its own user + system time
        # (not its reaped children's: the memory sampler below is one).
        others = {psutil.Process(pid).ppid() for pid in worker_pids} - {os.getpid()}
        processes = [psutil.Process(pid) for pid in worker_pids + sorted(others)]
        own = psutil.Process()
        # Dask's own runtime (event loops, heartbeats, the workers' profiler and memory monitor)
        # costs CPU whether tasks run or not: measured on the idle cluster first.
        idle = 0.0
        if args.idle_seconds > 0:
            time.sleep(1)
            before = cpu_of(processes) + sum(own.cpu_times()[:2])
            time.sleep(args.idle_seconds)
            idle = (cpu_of(processes) + sum(own.cpu_times()[:2]) - before) / args.idle_seconds
        before = cpu_of(processes)
        own_before = sum(own.cpu_times()[:2])
        sampler = Sampler(worker_pids)
        start = time.time()
        if args.dataframe:
            data = dd.read_json(path, lines=True, blocksize=args.blocksize, dtype=False)[
                ["id", "text"]]
        else:
            data = nd.read_jsonl(path, blocksize=args.blocksize)
        result = nd.dedup(data, out, progress=not args.quiet)
        seconds = time.time() - start
        peaks = sampler.finish()
        worker_cpu = cpu_of(processes) - before
        client_cpu = sum(own.cpu_times()[:2]) - own_before
    finally:
        client.close()
        cluster.close()
    return {"seconds": seconds, "worker_cpu": worker_cpu, "client_cpu": client_cpu,
            "cpu": worker_cpu + client_cpu, "peaks": peaks, "summary": result.summary,
            "idle_rate": idle}


def same_files(a, b):
    for name in ("clusters.jsonl", "keep.txt", "remove.txt"):
        with open(os.path.join(a, name), "rb") as x, open(os.path.join(b, name), "rb") as y:
            if x.read() != y.read():
                return False
    return True


def dask_only(path, args, scratch):
    """The Dask run alone (a corpus too large to also run the CLI on the time at hand)."""
    print(f"load before Dask: {load()}")
    dask = run_dask(path, os.path.join(scratch, "dask"), args)
    print(f"load after: {load()}")
    summary = dask["summary"]
    info = summary["dask"]
    n = summary["documents_fingerprinted"]
    tasks_cpu = sum(stage.get("task_cpu_seconds", 0) for stage in summary["stages"])
    total = sum(info["shuffle_bytes"].values())
    print(f"neardup.dask ({args.workers} workers x 1 thread, {info['partitions']} partitions): "
          f"{n} documents, {summary['clusters']} clusters, {summary['documents_removed']} removed, "
          f"{dask['seconds']:.1f} s, CPU {dask['cpu']:.1f} s (workers {dask['worker_cpu']:.1f} + "
          f"client {dask['client_cpu']:.1f}; in neardup's tasks {tasks_cpu:.1f}), "
          f"{info['component_rounds']} component round(s) over {info['component_partitions']} "
          f"partition(s), shuffle {total / n:.1f} bytes/document")
    for stage in summary["stages"]:
        print(f"  stage {stage['stage']:<12} {stage['seconds']:7.1f} s wall, "
              f"{stage.get('task_cpu_seconds', 0):7.1f} CPU s in its tasks "
              f"({stage['tasks']} tasks)")
    for name, nbytes in sorted(info["shuffle_bytes"].items()):
        print(f"  shuffle {name:<20} {nbytes / 1e6:9.1f} MB  {nbytes / n:7.1f} bytes/document")
    for pid, peak in sorted(dask["peaks"].items()):
        print(f"  worker {pid}: peak memory {peak / 1e6:.0f} MB")
    return True


def compare(path, args, scratch):
    out_cli = os.path.join(scratch, "cli")
    out_dask = os.path.join(scratch, "dask")
    print(f"load before the CLI: {load()}")
    cli = run_cli(args.binary, path, out_cli, args.cli_threads)
    n = cli["summary"]["documents_fingerprinted"]
    print(f"neardup dedup: {cli['seconds']:.1f} s, {cli['cpu']:.1f} CPU s, peak memory "
          f"{cli['peak'] / 1e6:.0f} MB, {n} documents, {cli['summary']['clusters']} clusters, "
          f"{cli['summary']['documents_removed']} removed")
    print(f"load before Dask: {load()}")
    dask = run_dask(path, out_dask, args)
    print(f"load after: {load()}")
    summary = dask["summary"]
    info = summary["dask"]
    same = same_files(out_cli, out_dask) if not args.dataframe else None
    counts_same = all(summary[k] == cli["summary"][k] for k in (
        "documents_fingerprinted", "candidate_pairs", "accepted_pairs", "clusters",
        "documents_removed", "accepted_pairs_by_reason", "similarity_histogram"))
    print(f"neardup.dask ({args.workers} workers x 1 thread, {info['partitions']} partitions of "
          f"{args.blocksize >> 20} MB): {dask['seconds']:.1f} s, {summary['clusters']} clusters, "
          f"{summary['documents_removed']} removed, {info['component_rounds']} component "
          f"round(s) over {info['component_partitions']} partition(s)")
    print(f"same files as the CLI (clusters.jsonl, keep.txt, remove.txt): {same}; "
          f"same counts: {counts_same}")
    print(f"wall time ratio dask / CLI: {dask['seconds'] / cli['seconds']:.2f}")
    print(f"CPU seconds: CLI {cli['cpu']:.1f}; dask workers {dask['worker_cpu']:.1f} + client "
          f"{dask['client_cpu']:.1f} = {dask['cpu']:.1f} (ratio {dask['cpu'] / cli['cpu']:.2f}); "
          f"per document: CLI {1e6 * cli['cpu'] / n:.0f} us, dask {1e6 * dask['cpu'] / n:.0f} us")
    total = 0
    for name, nbytes in sorted(info["shuffle_bytes"].items()):
        total += nbytes
        print(f"  shuffle {name:<20} {nbytes / 1e6:9.1f} MB  {nbytes / n:7.1f} bytes/document")
    print(f"  shuffle total                {total / 1e6:9.1f} MB  {total / n:7.1f} bytes/document")
    tasks_cpu = sum(stage.get("task_cpu_seconds", 0) for stage in summary["stages"])
    print(f"  of which in neardup's tasks: {tasks_cpu:.1f} CPU s (ratio to the CLI "
          f"{tasks_cpu / cli['cpu']:.2f}); Dask's runtime at rest: {dask['idle_rate']:.3f} CPU s "
          f"per second (x {dask['seconds']:.0f} s = {dask['idle_rate'] * dask['seconds']:.1f} s)")
    for stage in summary["stages"]:
        print(f"  stage {stage['stage']:<12} {stage['seconds']:7.1f} s wall, "
              f"{stage.get('task_cpu_seconds', 0):7.1f} CPU s in its tasks "
              f"({stage['tasks']} tasks)")
    for pid, peak in sorted(dask["peaks"].items()):
        print(f"  worker {pid}: peak memory {peak / 1e6:.0f} MB")
    other = None
    if args.compare_settings:
        # The same run on a cluster with Dask's default settings, right after (same load).
        shutil.rmtree(out_dask, ignore_errors=True)
        print(f"load before Dask (Dask's default settings): {load()}")
        other = run_dask(path, out_dask, args, settings="dask")
        other_tasks = sum(s.get("task_cpu_seconds", 0) for s in other["summary"]["stages"])
        print(f"with Dask's default settings: {other['seconds']:.1f} s, CPU workers "
              f"{other['worker_cpu']:.1f} + client {other['client_cpu']:.1f} = "
              f"{other['cpu']:.1f} (ratio to the CLI {other['cpu'] / cli['cpu']:.2f}; "
              f"neardup's settings / Dask's {dask['cpu'] / other['cpu']:.3f}); in neardup's "
              f"tasks {other_tasks:.1f}; at rest {other['idle_rate']:.3f} CPU s per second")
        if not args.dataframe and not same_files(out_cli, out_dask):
            print("the run with Dask's default settings gave other files")
            same = False
    print(json.dumps({"count": n, "cli_seconds": cli["seconds"], "dask_seconds": dask["seconds"],
                      "cli_cpu_seconds": cli["cpu"], "worker_cpu_seconds": dask["worker_cpu"],
                      "client_cpu_seconds": dask["client_cpu"], "cli_peak_bytes": cli["peak"],
                      "worker_peak_bytes": list(dask["peaks"].values()),
                      "shuffle_bytes": info["shuffle_bytes"], "same_files": same,
                      "same_counts": counts_same, "component_rounds": info["component_rounds"],
                      "partitions": info["partitions"],
                      "dask_defaults_cpu_seconds": other["cpu"] if other else None}))
    return counts_same and same is not False


def scaling(path, args, scratch):
    """The workers' peak memory at two corpus sizes with the same partition size."""
    small, large = args.scaling
    peaks = {}
    for count in (small, large):
        head = os.path.join(scratch, f"head_{count}.jsonl")
        with open(path, "rb") as src, open(head, "wb") as dst:
            for number, line in enumerate(src):
                if number >= count:
                    break
                dst.write(line)
        print(f"load before {count}: {load()}")
        got = run_dask(head, os.path.join(scratch, f"dask_{count}"), args)
        peaks[count] = max(got["peaks"].values())
        print(f"{count} documents: {got['seconds']:.1f} s, {got['cpu']:.1f} CPU s, "
              f"{got['summary']['dask']['partitions']} partitions, worker peaks "
              f"{', '.join(f'{p / 1e6:.0f} MB' for p in got['peaks'].values())}")
        os.remove(head)
        shutil.rmtree(os.path.join(scratch, f"dask_{count}"), ignore_errors=True)
    change = peaks[large] / peaks[small] - 1
    print(f"worker peak {peaks[small] / 1e6:.0f} MB at {small}, {peaks[large] / 1e6:.0f} MB at "
          f"{large}: {100 * change:+.1f} % (aim: within 25 %)")
    return abs(change) < 0.25


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("count", type=int, nargs="?", default=100000)
    parser.add_argument("--input", help="an existing JSONL corpus (default: generate one)")
    parser.add_argument("--generator", choices=("planted", "overlapping"), default="planted")
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "neardup"))
    parser.add_argument("--blocksize", type=int, default=32 << 20, help="bytes per partition")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="auto", help="per worker (Dask's memory_limit)")
    parser.add_argument("--cli-threads", type=int, default=0, help="-j of the CLI (0: all cores)")
    parser.add_argument("--dataframe", action="store_true",
                        help="read with dask.dataframe.read_json instead of read_jsonl")
    parser.add_argument("--scaling", type=int, nargs=2, metavar=("SMALL", "LARGE"),
                        help="compare the workers' peak memory at two sizes (first lines of the "
                             "input)")
    parser.add_argument("--compare-settings", action="store_true",
                        help="also run Dask with its default settings (profiler on, ...) instead "
                             "of neardup.dask.DASK_SETTINGS, right after")
    parser.add_argument("--no-cli", action="store_true",
                        help="run only the Dask side (the 10M figure)")
    parser.add_argument("--scratch", help="directory for the outputs (default: a temporary one)")
    parser.add_argument("--quiet", action="store_true", help="no Dask progress lines")
    parser.add_argument("--idle-seconds", type=float, default=10,
                        help="seconds the idle cluster's CPU is measured before the run (0: no)")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="neardup-dask-bench-", dir=args.scratch)
    try:
        path = args.input
        if path is None:
            shared = os.environ.get("NEARDUP_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
            if not os.path.isdir(os.path.join(shared, "corpus")):
                print(f"skipped: {shared}/corpus is missing (give --input)")
                return 0
            path = os.path.join(scratch, "corpus.jsonl")
            generate(max(args.count, *(args.scaling or [0])), path, args.generator, shared)
        if args.scaling:
            return 0 if scaling(path, args, scratch) else 1
        if args.no_cli:
            return 0 if dask_only(path, args, scratch) else 1
        return 0 if compare(path, args, scratch) else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
