#!/usr/bin/env python3
"""neardup.dask with and without boilerplate weights, back to back on the same cluster and input
(default: ../shared/corpus/*.jsonl and ../shared/devpairs/docs.jsonl, needs ../shared): the CPU
seconds of the workers and the client (each process's own user + system time), wall time, the
frequency stages' share, and whether each Dask run wrote the files of `neardup dedup` with the
same options (byte for byte). Same-run ratios are the figures to read on a busy machine.

    PYTHONPATH=build/python /usr/bin/python3 bench/dask_boilerplate_bench.py
    PYTHONPATH=build/python /usr/bin/python3 bench/dask_boilerplate_bench.py --edited 0
"""
import argparse
import glob
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SHARED = os.path.abspath(os.path.join(ROOT, "..", "shared"))


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def same_files(a, b):
    for name in ("clusters.jsonl", "keep.txt", "remove.txt"):
        with open(os.path.join(a, name), "rb") as x, open(os.path.join(b, name), "rb") as y:
            if x.read() != y.read():
                return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inputs", nargs="*", help="JSONL files (default: ../shared's)")
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "neardup"))
    parser.add_argument("--blocksize", type=int, default=8 << 20, help="bytes per partition")
    parser.add_argument("--edited", type=float, default=None,
                        help="edited=S for both runs (0: off; default: the rule's default, 0.8)")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs (alternating)")
    args = parser.parse_args()
    inputs = args.inputs
    if not inputs:
        if not os.path.isdir(os.path.join(SHARED, "corpus")):
            print(f"skipped: {SHARED} is absent", file=sys.stderr)
            return 0
        inputs = sorted(glob.glob(os.path.join(SHARED, "corpus", "*.jsonl")))
        inputs.append(os.path.join(SHARED, "devpairs", "docs.jsonl"))
    import distributed

    import neardup.dask as nd

    extra = {"edited": args.edited} if args.edited is not None else {}
    flags = ["--edited", str(args.edited)] if args.edited is not None else []
    size = sum(os.path.getsize(p) for p in inputs)
    print(f"{len(inputs)} files, {size / 1e6:.1f} MB, blocksize {args.blocksize >> 20} MiB, "
          f"options {extra or 'default'}")
    cluster = nd.local_cluster(2)
    totals = {False: [], True: []}
    with distributed.Client(cluster) as client, tempfile.TemporaryDirectory() as scratch:
        for r in range(args.repeat):
            for boilerplate in (False, True):
                out = os.path.join(scratch, f"dask-{boilerplate}-{r}")
                workers = sum(client.run(cpu_seconds).values())
                client_cpu, wall = cpu_seconds(), time.time()
                result = nd.dedup_files(inputs, out, blocksize=args.blocksize,
                                        boilerplate=boilerplate, progress=False, **extra)
                wall = time.time() - wall
                cpu = (sum(client.run(cpu_seconds).values()) - workers +
                       cpu_seconds() - client_cpu)
                stages = {s["stage"]: s for s in result.summary["stages"]}
                freq = sum(stages[n]["task_cpu_seconds"] for n in ("frequencies",
                                                                   "frequency-merge")
                           if n in stages)
                verify = stages["verify"]["task_cpu_seconds"]
                cli = os.path.join(scratch, f"cli-{boilerplate}-{r}")
                subprocess.run([args.binary, "dedup", "-q", *inputs, "-o", cli, *flags,
                                *(["--boilerplate"] if boilerplate else [])], check=True)
                rule = result.summary["pair_rule"]
                print(f"boilerplate={boilerplate}: CPU {cpu:.1f} s (workers + client), wall "
                      f"{wall:.1f} s, frequency tasks {freq:.2f} CPU-s, verify tasks "
                      f"{verify:.2f} CPU-s, {result.summary['documents_removed']} removed, "
                      f"F {rule.get('boilerplate_min_documents', '-')}, sketch "
                      f"{rule.get('frequency_sketch_mb', 0):.2f} MB, same files as the "
                      f"command: {same_files(out, cli)}", flush=True)
                totals[boilerplate].append(cpu)
    cluster.close()
    ratio = sum(totals[True]) / sum(totals[False])
    print(f"CPU with / without boilerplate weights (same run): {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
