"""neardup.dask: ``neardup dedup`` on a Dask cluster, at the command's cost per document.

    import neardup.dask as nd
    result = nd.dedup_files(["shards/*.jsonl.gz"], output="out/")   # files, read by the library
    result = nd.dedup(nd.read_jsonl("shards/"), output="out/")      # the same
    result = nd.dedup(ddf, output="out/", text_field="body")        # any Dask DataFrame (or Bag)

on the current Dask client (``distributed.Client(nd.local_cluster())`` on one machine: worker
processes of one thread with :data:`DASK_SETTINGS`, Dask's runtime tuned for long library tasks).

The answer is exactly ``neardup dedup``'s on the same documents in the same order (files: the
reader's canonical order, sorted paths then line; a DataFrame: partition order, then row order):
the same clusters, kept and removed ids, the same ``clusters.jsonl``, ``keep.txt``,
``remove.txt`` and ``summary.json`` schema. Every rule (reading and skipping, ids, the pair rule,
components and keep) is the library's own code, called over arrays.

Stages (each a set of Dask tasks named ``neardup-<stage>``; a progress line per stage on standard
error unless ``progress=False``):

1. ``documents``, per input partition: the library's reader over a byte range of a file (or the
   JSONL of a DataFrame partition), then dedup's per-document pass: fingerprint, lengths, content
   and whitespace-free hashes, MinHash band keys and the narrowed shingle set, from one
   normalisation (the dedup stages' DocumentPass). The band keys (grouped by key range, sorted,
   the distinct keys in the one set codec, src/common/set_codec.h, with a bit and the row of each
   record: about 4.5 bytes per band and document), whitespace-free hashes and id hashes are
   written grouped by the shuffle partition that owns them; the per-document facts and the
   shingle sets (the same codec) stay in the partition's own file, with, when the rule's
   ``edited`` reason is on, each document's narrowed unit (word / Han character) set beside its
   shingle set.
2. ``buckets``, per shuffle partition: the LSH bucket rule over its band keys, the
   whitespace-only pairs, the SimHash join's buckets (when it runs), shared ids; the candidate
   pairs go to the partition of their first document.
3. ``pairs``, then ``verify``, per input partition: its distinct candidate pairs (counted
   first: the run's count sets the sample of rejected pairs summary.json's similarity histogram
   measures, as in the command), judged by THE pair rule
   (neardup/pair_rule.h: exact and whitespace duplicates from hashes, near_duplicate and
   contained from the shingle sets, edited from the shingle and unit sets). Of the other
   partitions' documents in these pairs only the facts the rule needs are read, and a set only
   when the pair's set sizes allow the rule's lowest accepted Jaccard.
4. ``components``: connected components of the accepted pairs (one union-find when they fit in
   one task, else min-label propagation over ``ceil(pairs / component_pairs)`` partitions, with
   the rounds reported) and the keep decision per cluster (BuildClusters).
5. ``outputs``, per input partition: its keep/remove lines, decisions and clusters, numbered in
   order of the kept document; the client joins the parts.

Intermediate data lives in files under a work directory (``output/.neardup-work``, or a temporary
directory without ``output``), never in worker memory, so a worker's peak depends on the
partition size, not on the corpus; the directory must be on storage every worker can read (a
shared file system on a multi-machine cluster; checked before any work). With ``output``, a
rerun after a crash (of the client, a worker or the machine) continues from the tasks already
finished. Only counts pass through the client.
"""
from __future__ import annotations

import fcntl
import glob
import json
import math
import mmap
import os
import shutil
import sys
import tempfile
import time
import uuid
import warnings
import weakref
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import _neardup

__all__ = ["dedup", "dedup_files", "read_jsonl", "DaskDedupResult", "DASK_SETTINGS",
           "local_cluster"]

# Work directory format version (a rerun resumes only the same version's work).
_WORK_VERSION = 2
# Output files a run writes into its output directory.
_OUTPUTS = ("clusters.jsonl", "keep.txt", "remove.txt", "summary.json", "decisions")
_WORK = ".neardup-work"
_DEFAULT_BLOCKSIZE = 32 << 20
_GZIP, _ZSTD, _XZ = b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"\xfd7zXZ\x00"
# Dask-side keywords of dedup (the others are the options of `neardup dedup`).
_LOW = np.uint64(0xFFFFFFFF)
_NONE = np.uint64(0xFFFFFFFFFFFFFFFF)


# ---- array files ---------------------------------------------------------------------------------
#
# A stage's output is a file of named 1-D arrays: b"NDA1", the header length (u32), a JSON header
# {name: [dtype, count, offset]}, then the arrays at 64-byte aligned offsets. Written to a
# temporary name and renamed into place, so a file that exists is complete; read through mmap, so
# a task reads only the slices it uses.

def _save(path: str, arrays: Dict[str, np.ndarray]) -> int:
    header, offset = {}, 0
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        header[name] = [array.dtype.str, int(array.size), offset]
        offset += (array.nbytes + 63) & ~63
    text = json.dumps(header).encode()
    start = (8 + len(text) + 63) & ~63
    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with open(tmp, "wb") as f:
        f.write(b"NDA1" + len(text).to_bytes(4, "little") + text)
        f.write(b"\0" * (start - 8 - len(text)))
        for name, array in arrays.items():
            data = np.ascontiguousarray(array)
            f.write(memoryview(data).cast("B") if data.size else b"")
            f.write(b"\0" * (((data.nbytes + 63) & ~63) - data.nbytes))
    os.replace(tmp, path)
    return start + offset


class _Arrays:
    """The arrays of a file written by _save, mapped (read on first use of each page)."""

    def __init__(self, path: str):
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._map = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""
        if self._map[:4] != b"NDA1":
            raise OSError(f"{path}: not a neardup.dask work file")
        length = int.from_bytes(self._map[4:8], "little")
        self._header = json.loads(bytes(self._map[8:8 + length]))
        self._start = (8 + length + 63) & ~63
        self.path = path

    def __contains__(self, name: str) -> bool:
        return name in self._header

    def __getitem__(self, name: str) -> np.ndarray:
        dtype, count, offset = self._header[name]
        return np.frombuffer(self._map, dtype=np.dtype(dtype), count=count,
                             offset=self._start + offset)


def _write_json(path: str, value: Any) -> None:
    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(tmp, path)


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _done(path: str) -> Optional[dict]:
    """The counts a finished task wrote last (None when it has not finished), marked resumed."""
    try:
        counts = _read_json(path)
    except (OSError, ValueError):
        return None
    if isinstance(counts, dict):
        counts["resumed"] = True
    return counts


def _blocks(offsets: np.ndarray, index: int) -> slice:
    return slice(int(offsets[index]), int(offsets[index + 1]))


# ---- inputs ----------------------------------------------------------------------------------

def _is_compressed(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(6)
    return head.startswith(_GZIP) or head.startswith(_ZSTD) or head.startswith(_XZ)


def _given(paths: Any) -> List[str]:
    """The paths named, glob patterns expanded (for the output check)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for item in paths:
        item = os.fspath(item)
        out.extend(sorted(glob.glob(item, recursive=True)) if glob.has_magic(item) else [item])
    return out


def _expand(paths: Any) -> List[str]:
    """The input files of paths, directories and glob patterns, in the reader's canonical order
    (as ``neardup dedup`` lists them)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    inputs = []
    for item in paths:
        item = os.fspath(item)
        if item == "-":
            raise ValueError("standard input cannot be read on a Dask cluster: name files")
        if glob.has_magic(item):
            matched = sorted(glob.glob(item, recursive=True))
            if not matched:
                raise FileNotFoundError(f"{item}: no file matches")
            inputs.extend(matched)
        else:
            inputs.append(item)
    if not inputs:
        raise ValueError("no input given")
    return list(_neardup._dask_expand(inputs))


def _file_partitions(files: List[str], blocksize: int, splittable: bool) -> List[dict]:
    """Partitions of the input files: byte ranges of about `blocksize` of an uncompressed JSONL
    (or, with lines=True, text) file, else the whole file. A range's exact ends (after a line
    break) and first line number are found by the ``lines`` stage."""
    parts = []
    for name in files:
        path = os.path.abspath(name)
        size = os.path.getsize(path)
        jsonl = _neardup._dask_is_jsonl(name) or splittable
        if size > blocksize and jsonl and not _is_compressed(path):
            count = math.ceil(size / blocksize)
            bounds = [size * i // count for i in range(count + 1)]
            for i in range(count):
                parts.append({"name": name, "path": path, "start": bounds[i],
                              "end": bounds[i + 1], "size": size, "split": True})
        else:
            parts.append({"name": name, "path": path, "start": 0, "end": -1, "size": size,
                          "split": False})
    return parts


def _range_lines(part: dict) -> dict:
    """The ``lines`` task: a range's ends moved to line starts, and the line breaks in it."""
    return _neardup._dask_range_lines(part["path"], part["start"], part["end"], part["size"])


class _FileSource:
    """Input files split into partitions (what read_jsonl gives dedup)."""

    def __init__(self, files: List[str], blocksize: int, fields: dict, given: List[str]):
        self.files = files
        self.given = given  # the paths and directories named (globs expanded)
        self.blocksize = blocksize
        self.fields = fields
        self.parts = _file_partitions(files, blocksize, bool(fields.get("lines")))

    def identity(self) -> list:
        out = []
        for name in self.files:
            info = os.stat(name)
            out.append([name, info.st_size, info.st_mtime_ns])
        return [out, self.blocksize]


def read_jsonl(paths: Any, *, blocksize: int = _DEFAULT_BLOCKSIZE, id_field: str = "id",
               text_field: str = "text", lines: bool = False):
    """Documents of files read by the library's reader, as a Dask DataFrame (``id``, ``text``,
    ``location``), one partition per ``blocksize`` bytes of an uncompressed JSONL file (a
    compressed or plain-text file is one partition).

    ``paths``: files, directories (read recursively) and glob patterns, in any order: files are
    read in the reader's canonical order (sorted paths, then line), as ``neardup dedup`` reads
    them. JSONL (``id_field`` / ``text_field``, dotted paths reach into nested objects), plain text
    files (one document each; ``lines=True``: one a line), gzip / zstd / xz recognised by content.
    Malformed records are skipped and counted exactly as the command skips them.

    Passed unchanged to :func:`dedup`, the files are read inside its first stage (no text moves
    through Dask); any other use computes the DataFrame (transform it freely: dedup then reads the
    transformed rows like any DataFrame).
    """
    import dask
    import dask.dataframe as dd
    import pandas as pd

    given = _given(paths)
    source = _FileSource(_expand(paths), int(blocksize),
                         {"id_field": id_field, "text_field": text_field, "lines": bool(lines)},
                         given)
    options = _reader_options(source.fields)
    meta = pd.DataFrame({"id": pd.Series(dtype=object), "text": pd.Series(dtype=object),
                         "location": pd.Series(dtype=object)})
    lines_of = [dask.delayed(_range_lines)(p) if p["split"] else None for p in source.parts]
    starts = dask.delayed(_first_lines)(lines_of)
    frames = [dask.delayed(_read_frame)(part, i, starts, options)
              for i, part in enumerate(source.parts)]
    ddf = dd.from_delayed(frames, meta=meta, verify_meta=False)
    ddf._neardup_source = source
    return ddf


def _reader_options(fields: dict) -> dict:
    options = {"id_field": fields["id_field"], "text_field": fields["text_field"]}
    if fields.get("lines"):
        options["lines"] = True
    return options


def _first_lines(ranges: list) -> list:
    """Each partition's exact range and first line number (ranges of one file are consecutive)."""
    out, line, previous = [], 1, None
    for info in ranges:
        if info is None:
            out.append(None)
            previous = None
            continue
        if previous is None or info["start"] == 0:
            line = 1
        out.append({"start": info["start"], "end": info["end"], "first_line": line})
        line += info["breaks"]
        previous = info
    return out


def _source_of(part: dict, lines: Optional[dict]) -> dict:
    source = {"name": part["name"], "path": part["path"], "data": None, "start": part["start"],
              "end": part["end"], "first_line": 1, "line_shift": 0}
    if lines is not None:
        source.update(start=lines["start"], end=lines["end"], first_line=lines["first_line"])
    return source


def _read_frame(part: dict, index: int, starts: list, options: dict):
    import pandas as pd

    got = _neardup._dask_documents(_source_of(part, starts[index]), options)
    return pd.DataFrame({"id": got["ids"], "text": got["texts"], "location": got["locations"]})


# ---- DataFrame partitions --------------------------------------------------------------------

def _frame_jsonl(frame, text_field: str, id_field: str, score_field: str) -> bytes:
    """One JSONL line per row ({"id", "text"[, score]}), read by the library's reader so rows are
    skipped and given fallback ids exactly as the command does with a file."""
    n = len(frame)
    texts = frame[text_field].tolist() if text_field in frame.columns else [None] * n
    ids = frame[id_field].tolist() if id_field in frame.columns else [None] * n
    scores = (frame[score_field].tolist() if score_field and score_field in frame.columns
              else None)
    if score_field and scores is None:
        scores = [None] * n
    return _neardup._dask_rows_jsonl(ids, texts, scores, score_field)


def _as_dataframe(data: Any, text_field: str, id_field: str):
    import dask.bag as db
    import dask.dataframe as dd
    import pandas as pd

    if isinstance(data, dd.DataFrame):
        return data
    if isinstance(data, db.Bag):
        def to_record(item):
            if isinstance(item, dict):
                return {id_field: item.get(id_field), text_field: item.get(text_field)}
            return {id_field: item[0], text_field: item[1]}

        return data.map(to_record).to_dataframe(meta={id_field: object, text_field: object})
    if isinstance(data, pd.DataFrame):
        return dd.from_pandas(data, npartitions=max(1, min(64, len(data) // 10000 + 1)), sort=False)
    raise TypeError(f"data: expected a Dask DataFrame or Bag, a pandas DataFrame, or files "
                    f"(neardup.dask.read_jsonl), got {type(data).__name__}")


# ---- the run: options, work directory, stages ------------------------------------------------

class _Run:
    """One dedup run's settings, shared by its tasks (pickled into each)."""

    def __init__(self, work: str, options: dict, resolved: dict, key: str, nparts: int,
                 dests: int, threads: int):
        self.work = work
        self.options = options          # `neardup dedup` keywords for the library
        self.resolved = resolved
        self.key = key                  # the option set's cache key for the library's engines
        self.nparts = nparts
        self.dests = dests
        self.threads = threads
        self.bits = resolved["bits"]
        # The SimHash join's design is chosen for an expected size; every task must use the same
        # one (any gives the same pairs): an estimate from the partition count.
        self.simhash_expected = float(max(1, 40_000 * nparts))
        self.bands = resolved["bands"] if resolved["use_lsh"] else 0
        self.verify = resolved["verify"]
        # The pair rule's `edited` reason on: the unit sets travel beside the shingle sets.
        self.units = self.verify > 0 and resolved["edited"] > 0
        # Boilerplate weights on: the documents' reading numbers travel beside their sets, and
        # verification reads the run's merged frequency sketch (set once it is counted).
        self.boilerplate = bool(_neardup._dask_uses_boilerplate(options))
        self.frequencies = ""

    def path(self, stage: str, name: str) -> str:
        return os.path.join(self.work, stage, name)


def _gid(partition: int, rows: np.ndarray) -> np.ndarray:
    return (np.uint64(partition) << np.uint64(32)) | rows.astype(np.uint64)


# Stage 1: documents --------------------------------------------------------------------------

def _documents_task(run: _Run, index: int, source: dict) -> dict:
    done = _done(run.path("documents", f"p{index:06d}.json"))
    if done is not None:
        return done
    got = _neardup._dask_read(source, run.options, run.key, run.dests, run.threads)
    facts = {name: got[name] for name in (
        "id_blob", "id_offsets", "line", "hi", "lo", "text_bytes", "normalized_bytes",
        "content_hash", "squeezed_hash", "score", "set_offsets", "set_codes", "set_sizes",
        *(("unit_offsets", "unit_codes") if run.units else ()),
        *(("read_index",) if run.boilerplate else ()))}
    n = len(got["hi"])
    keys = {name: got[name] for name in ("band_offsets", "band_codes", "ws_offsets", "ws_hashes",
                                         "ws_rows", "idh_offsets", "idh_hashes", "idh_rows")}
    keys["row_bits"] = np.asarray([got["row_bits"]], np.int64)
    if run.resolved["use_simhash"]:
        keys.update(_neardup._dask_hamming_records(got["hi"], got["lo"], run.bits,
                                                   run.resolved["k"], run.simhash_expected,
                                                   run.dests))
    _save(run.path("documents", f"p{index:06d}.facts"), facts)
    _save(run.path("documents", f"p{index:06d}.keys"), keys)
    counts = dict(got["counts"])
    counts["documents"] = n
    # The partition's input bytes (in memory: what the reader counts as the input's size).
    counts["input_bytes"] = len(source["data"]) if source["data"] is not None else 0
    counts["name"] = source["name"]
    counts["rows_as_lines"] = source["data"] is not None
    _write_json(run.path("documents", f"p{index:06d}.json"), counts)
    return counts


def _route(keys: np.ndarray, n: int) -> np.ndarray:
    """The shuffle partition of 64-bit keys (a mixed hash reduced to [0, n))."""
    x = keys.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return ((x >> np.uint64(33)) % np.uint64(n)).astype(np.int64)


def _offsets(dest: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n + 1, np.uint64)
    np.cumsum(np.bincount(dest, minlength=n), out=out[1:])
    return out


def _frame_documents_task(run: _Run, index: int, frame, fields: dict) -> dict:
    done = _done(run.path("documents", f"p{index:06d}.json"))
    if done is not None:
        return done
    data = _frame_jsonl(frame, fields["text_field"], fields["id_field"], fields["score_field"])
    source = {"name": str(index), "path": None, "data": data, "start": 0, "end": -1,
              "first_line": 1, "line_shift": -1}
    return _documents_task(run, index, source)


def _file_documents_task(run: _Run, index: int, part: dict, lines: Optional[dict]) -> dict:
    return _documents_task(run, index, _source_of(part, lines))


# Stage 1b: boilerplate frequencies ----------------------------------------------------------

# The frequencies are counted by one task per group of consecutive partitions, a group per
# _FREQUENCY_GROUP_BYTES of input, at most _FREQUENCY_GROUPS of them (each group's sketch, at most
# boilerplate_sketch_mb, 512 MiB by default, is written, then one task merges them): counting
# is cheap (one cache line a shingle; one document in s above four times the cap), writing and
# reading sketches is not.
_FREQUENCY_GROUPS = 8
_FREQUENCY_GROUP_BYTES = 256 << 20


def _frequency_groups(nparts: int, input_bytes: int) -> List[range]:
    groups = max(1, min(nparts, _FREQUENCY_GROUPS, input_bytes // _FREQUENCY_GROUP_BYTES))
    bounds = [nparts * g // groups for g in range(groups + 1)]
    return [range(bounds[g], bounds[g + 1]) for g in range(groups)]


def _count_frequencies_task(run: _Run, g: int, parts: range, firsts: List[int],
                            input_bytes: int) -> dict:
    """Counts the shingle frequencies of partitions `parts` as dedup's first pass counts them
    (the sketch of FrequencySketchFor(input_bytes), documents sampled by their reading number:
    firsts[p] is partition p's first)."""
    done = _done(run.path("frequencies", f"g{g:06d}.json"))
    if done is not None:
        return done
    sketch = _neardup._DaskFrequencies(run.options, input_bytes)
    for p in parts:
        facts = _Arrays(run.path("documents", f"p{p:06d}.facts"))
        sketch.add(firsts[p], facts["set_offsets"], facts["set_codes"], facts["read_index"])
    sketch.save(run.path("frequencies", f"g{g:06d}.sketch"))
    counts = {"counted_documents": sketch.counted_documents, "shingles": sketch.total,
              "sketch_bytes": sketch.memory_bytes}
    _write_json(run.path("frequencies", f"g{g:06d}.json"), counts)
    return counts


def _merge_frequencies_task(run: _Run, groups: int, input_bytes: int) -> dict:
    """The run's frequency sketch: the merge of the groups' sketches, and its boilerplate bar F."""
    done = _done(run.path("frequencies", "merged.json"))
    if done is not None:
        return done
    sketch = _neardup._DaskFrequencies(run.options, input_bytes)
    for g in range(groups):
        sketch.merge_file(run.path("frequencies", f"g{g:06d}.sketch"))
    sketch.save(run.path("frequencies", "merged.sketch"))
    counts = {"counted_documents": sketch.counted_documents, "shingles": sketch.total,
              "sketch_bytes": sketch.memory_bytes, "sample_every": sketch.sample_every,
              "documents": sketch.boilerplate_documents(run.options)}
    _write_json(run.path("frequencies", "merged.json"), counts)
    for g in range(groups):
        try:
            os.remove(run.path("frequencies", f"g{g:06d}.sketch"))
        except OSError:
            pass
    return counts


# Stage 2: buckets ----------------------------------------------------------------------------

_FROM_LSH, _FROM_SIMHASH, _WHITESPACE = 1, 2, 4


def _buckets_task(run: _Run, d: int) -> dict:
    done = _done(run.path("buckets", f"d{d:06d}.json"))
    if done is not None:
        return done
    bands = run.bands
    shuffled = {"band_keys": 0, "whitespace_keys": 0, "id_keys": 0, "simhash_keys": 0}
    ws_hashes, ws_docs, id_hashes, id_docs = [], [], [], []
    band_codes, band_offsets, row_bits = [], [], []
    sh = {"tables": [], "keys": [], "docs": [], "hi": [], "lo": []}
    for p in range(run.nparts):
        keys = _Arrays(run.path("documents", f"p{p:06d}.keys"))
        if bands:
            offsets = keys["band_offsets"]
            band_codes.append(keys["band_codes"])
            band_offsets.append(offsets)
            row_bits.append(int(keys["row_bits"][0]))
            shuffled["band_keys"] += int(offsets[(d + 1) * bands] - offsets[d * bands])
        part = _blocks(keys["ws_offsets"], d)
        ws_hashes.append(keys["ws_hashes"][part])
        ws_docs.append(_gid(p, keys["ws_rows"][part]))
        shuffled["whitespace_keys"] += (part.stop - part.start) * 12
        part = _blocks(keys["idh_offsets"], d)
        id_hashes.append(keys["idh_hashes"][part])
        id_docs.append(_gid(p, keys["idh_rows"][part]))
        shuffled["id_keys"] += (part.stop - part.start) * 12
        if "sh_offsets" in keys:
            part = _blocks(keys["sh_offsets"], d)
            if part.stop > part.start:
                sh["tables"].append(keys["sh_tables"][part])
                sh["keys"].append(keys["sh_keys"][part])
                sh["docs"].append(_gid(p, keys["sh_rows"][part]))
                sh["hi"].append(keys["sh_hi"][part])
                sh["lo"].append(keys["sh_lo"][part])
                shuffled["simhash_keys"] += (part.stop - part.start) * 30
    cat = _concat
    a_all, b_all, flags_all = [], [], []
    stats = {"records": 0, "buckets": 0, "oversized": 0, "largest": 0, "pairs_before_dedup": 0}
    if bands:
        buckets, docs = _neardup._dask_band_records(band_codes, band_offsets, row_bits,
                                                    list(range(run.nparts)), d, bands)
        a, b, counts = _neardup.stages.lsh_bucket_pairs(buckets, docs,
                                                        run.resolved["bucket_window"])
        stats = {"records": counts["records"], "buckets": counts["buckets"],
                 "oversized": counts["oversized_buckets"], "largest": counts["largest_bucket"],
                 "pairs_before_dedup": counts["bucket_pairs"]}
        del buckets, docs
        a_all.append(a), b_all.append(b), flags_all.append(np.full(len(a), _FROM_LSH, np.uint8))
    a, b = _neardup.stages.first_of_equal_hash_pairs(cat(ws_hashes, np.uint64),
                                                     cat(ws_docs, np.uint64))
    a_all.append(a), b_all.append(b), flags_all.append(np.full(len(a), _WHITESPACE, np.uint8))
    simhash_pairs = 0
    if sh["keys"]:
        a, b, _ = _neardup._dask_hamming_pairs(
            run.bits, run.resolved["k"], run.simhash_expected, cat(sh["tables"], np.uint16),
            cat(sh["keys"], np.uint64), cat(sh["docs"], np.uint64), cat(sh["hi"], np.uint64),
            cat(sh["lo"], np.uint64))
        simhash_pairs = len(a)
        a_all.append(a), b_all.append(b), flags_all.append(np.full(len(a), _FROM_SIMHASH, np.uint8))
    a, b, flags = _merge_pairs(cat(a_all, np.uint64), cat(b_all, np.uint64),
                               cat(flags_all, np.uint8))
    # Shared ids: equal hashes, then equal strings.
    shared = _shared_ids(run, cat(id_hashes, np.uint64), cat(id_docs, np.uint64))
    # Candidate pairs to the partition of their first document; shared ids to their own.
    dest = (a >> np.uint64(32)).astype(np.int64)
    sdest = (shared >> np.uint64(32)).astype(np.int64)
    _save(run.path("buckets", f"d{d:06d}.pairs"), {
        "offsets": _offsets(dest, run.nparts), "a_row": (a & _LOW).astype(np.uint32), "b": b,
        "flags": flags, "shared_offsets": _offsets(sdest, run.nparts), "shared": shared})
    counts = {"lsh": stats, "pairs": int(len(a)), "simhash_pairs": simhash_pairs,
              "shuffled": shuffled}
    _write_json(run.path("buckets", f"d{d:06d}.json"), counts)
    return counts


def _concat(arrays: list, dtype) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)


def _merge_pairs(a: np.ndarray, b: np.ndarray, flags: np.ndarray) -> tuple:
    """Distinct (a, b), sorted, each with the union of the flags of its copies."""
    if len(a) == 0:
        return a, b, flags
    order = np.lexsort((b, a))
    a, b, flags = a[order], b[order], flags[order]
    first = np.ones(len(a), bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    starts = np.flatnonzero(first)
    return a[starts], b[starts], np.bitwise_or.reduceat(flags, starts).astype(np.uint8)


def _id_of_line(line: str) -> str:
    """The id of a keep.txt / remove.txt line: as it is, or the JSON string it was written as."""
    if line.startswith('"'):
        try:
            value = json.loads(line)
        except ValueError:
            return line
        if isinstance(value, str):
            return value
    return line


def _ids_of(run: _Run, gids: np.ndarray) -> list:
    """The ids (as read, before shared ids are renamed) of documents `gids` (sorted or not)."""
    out = [None] * len(gids)
    part = (gids >> np.uint64(32)).astype(np.int64)
    for p in np.unique(part).tolist():
        where = np.flatnonzero(part == p)
        facts = _Arrays(run.path("documents", f"p{p:06d}.facts"))
        rows = (gids[where] & _LOW).astype(np.uint64)
        for i, value in zip(where.tolist(), _neardup._dask_gather_strings(
                facts["id_offsets"], facts["id_blob"], rows)):
            out[i] = value
    return out


def _shared_ids(run: _Run, hashes: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """The documents (sorted) whose id another document has too."""
    candidates, firsts = _neardup._dask_shared(hashes, docs)
    if len(candidates) == 0:
        return np.zeros(0, np.uint64)
    ids = _ids_of(run, candidates)
    groups: Dict[int, Dict[str, int]] = {}
    for first, value in zip(firsts.tolist(), ids):
        seen = groups.setdefault(first, {})
        seen[value] = seen.get(value, 0) + 1
    keep = [g for g, first, value in zip(candidates.tolist(), firsts.tolist(), ids)
            if groups[first][value] > 1]
    return np.sort(np.asarray(keep, np.uint64))


# Stage 3: verify -------------------------------------------------------------------------------

_HISTOGRAM_BINS = 100
_MEASURE_ALL = 1 << 16  # SimilarityHistogram::kMeasureAll


def _sample_level(candidate_pairs: int) -> int:
    """log2 of the histogram's rejected_sample_every for a run of `candidate_pairs` (as dedup
    chooses it): 1 in 2^level rejected pairs is measured."""
    level = 0
    while candidate_pairs // (1 << level) > _MEASURE_ALL:
        level += 1
    return level


def _bins(similarity: np.ndarray) -> np.ndarray:
    return np.clip((similarity * _HISTOGRAM_BINS + 1e-9).astype(np.int64), 0, _HISTOGRAM_BINS - 1)


def _histogram(verify: List[dict]) -> dict:
    """summary.json's similarity_histogram from the verify tasks' counts."""
    level = _sample_level(sum(c["candidate_pairs"] for c in verify))
    accepted = np.zeros(_HISTOGRAM_BINS, np.int64)
    rejected = np.zeros(_HISTOGRAM_BINS, np.int64)
    for c in verify:
        accepted += np.asarray(c["histogram"]["accepted"], np.int64)
        rejected += np.asarray(c["histogram"]["rejected"], np.int64)
    return {"accepted": accepted.tolist(), "rejected": rejected.tolist(),
            "rejected_pairs": sum(c["histogram"]["rejected_pairs"] for c in verify),
            "rejected_measured": int(rejected.sum()), "rejected_sample_every": 1 << level}


def _pairs_task(run: _Run, p: int) -> dict:
    """The distinct candidate pairs of input partition p (those routed to it by every buckets
    task), merged with their sources, and their counts: the run's count sets the histogram's
    sample before verification."""
    done = _done(run.path("verify", f"p{p:06d}.pairs.json"))
    if done is not None:
        return done
    rows, bs, flags, shared = [], [], [], []
    shuffled = {"candidate_pairs": 0, "shared_ids": 0, "verify_documents": 0}
    for d in range(run.dests):
        pairs = _Arrays(run.path("buckets", f"d{d:06d}.pairs"))
        part = _blocks(pairs["offsets"], p)
        rows.append(pairs["a_row"][part])
        bs.append(pairs["b"][part])
        flags.append(pairs["flags"][part])
        shuffled["candidate_pairs"] += (part.stop - part.start) * 13
        part = _blocks(pairs["shared_offsets"], p)
        shared.append(pairs["shared"][part])
        shuffled["shared_ids"] += (part.stop - part.start) * 8
    a, b, flags = _merge_pairs(_gid(p, _concat(rows, np.uint32)), _concat(bs, np.uint64),
                               _concat(flags, np.uint8))
    _save(run.path("verify", f"p{p:06d}.shared"), {"shared": np.sort(_concat(shared, np.uint64))})
    _save(run.path("verify", f"p{p:06d}.candidates"), {"a": a, "b": b, "flags": flags})
    counts = {"candidate_pairs": int(len(a)), "shuffled": shuffled}
    _write_json(run.path("verify", f"p{p:06d}.pairs.json"), counts)
    return counts


def _verify_task(run: _Run, p: int, doc_starts: List[int], level: int) -> dict:
    """THE pair rule over partition p's candidate pairs; the histogram's rejected pairs measured
    at sample `level` (the run's)."""
    done = _done(run.path("verify", f"p{p:06d}.json"))
    if done is not None:
        return done
    got = _Arrays(run.path("verify", f"p{p:06d}.candidates"))
    a, b, flags = np.array(got["a"]), np.array(got["b"]), np.array(got["flags"])
    shuffled = {"verify_documents": 0}
    counts = {"candidate_pairs": int(len(a)),
              "lsh_candidate_pairs": int(np.count_nonzero(flags & _FROM_LSH)),
              "simhash_candidate_pairs": int(np.count_nonzero(flags & _FROM_SIMHASH)),
              "simhash_only_candidate_pairs": 0, "simhash_only_accepted_pairs": 0}
    if run.resolved["use_lsh"]:
        counts["simhash_only_candidate_pairs"] = int(np.count_nonzero(flags == _FROM_SIMHASH))
    # The documents of the pairs: this partition's and the others' (read from their files).
    docs = np.unique(np.concatenate([a, b]))
    table = _facts_of(run, docs, ("content_hash", "text_bytes", "squeezed_hash", "set_sizes"),
                      shuffled, p)
    ia = np.searchsorted(docs, a).astype(np.uint32)
    ib = np.searchsorted(docs, b).astype(np.uint32)
    hashes = (table["content_hash"], table["text_bytes"], table["squeezed_hash"],
              table["set_sizes"])
    set_offsets = np.zeros(len(docs) + 1, np.uint64)
    set_values = np.zeros(0, np.uint32)
    units = (set_offsets, set_values) if run.units else ()
    # The run's document numbers (for the histogram's sample).
    canonical = (np.asarray(doc_starts, np.uint64)[(docs >> np.uint64(32)).astype(np.int64)] +
                 (docs & _LOW)).astype(np.uint64)
    if run.verify > 0 and len(a):
        need = _neardup._dask_needs_shingles(ia, ib, *hashes, canonical, level, run.options,
                                             run.key, run.frequencies)
        needed = np.zeros(len(docs), bool)
        needed[ia[need]] = True
        needed[ib[need]] = True
        set_offsets, set_values = _sets_of(run, docs, needed, shuffled, p)
        if run.units:
            units = _sets_of(run, docs, needed, shuffled, p, "unit_offsets", "unit_codes")
    # THE pair rule (neardup/pair_rule.h), as dedup's verification applies it.
    similarity, reason, measured, _ = _neardup._dask_verify(
        ia, ib, *hashes, set_offsets, set_values, canonical, level, run.options, run.key,
        run.threads, *(units or (None, None)), run.frequencies)
    accepted = reason != 0
    # The similarity histogram of summary.json: accepted pairs by similarity, rejected ones
    # counted and the sample of them measured, by bin.
    histogram = {"accepted": [0] * _HISTOGRAM_BINS, "rejected_pairs": 0,
                 "rejected": [0] * _HISTOGRAM_BINS}
    if run.verify > 0:
        verified = accepted & (similarity >= 0)
        histogram["accepted"] = np.bincount(_bins(similarity[verified]),
                                            minlength=_HISTOGRAM_BINS).tolist()
        histogram["rejected_pairs"] = int(np.count_nonzero(~accepted))
        histogram["rejected"] = np.bincount(_bins(measured[measured >= 0]),
                                            minlength=_HISTOGRAM_BINS).tolist()
    # The fingerprints of the accepted pairs' documents only, for their distances.
    near = np.unique(np.concatenate([a[accepted], b[accepted]]))
    fp = _facts_of(run, near, ("hi", "lo"), shuffled, p)
    ja, jb = np.searchsorted(near, a[accepted]), np.searchsorted(near, b[accepted])
    distance = _neardup._dask_distances(fp["hi"][ja], fp["lo"][ja], fp["hi"][jb], fp["lo"][jb],
                                        run.bits)
    if run.resolved["use_lsh"]:
        counts["simhash_only_accepted_pairs"] = int(np.count_nonzero(
            accepted & (flags == _FROM_SIMHASH)))
    _save(run.path("verify", f"p{p:06d}.accepted"), {
        "a": a[accepted], "b": b[accepted], "distance": distance.astype(np.int32),
        "similarity": similarity[accepted].astype(np.float64),
        "reason": reason[accepted].astype(np.uint8)})
    counts["accepted_pairs"] = int(np.count_nonzero(accepted))
    counts["histogram"] = histogram
    by_reason = np.bincount(reason[accepted], minlength=len(_neardup._REASONS))
    counts["pairs_by_reason"] = {name: int(by_reason[i])
                                 for i, name in enumerate(_neardup._REASONS) if by_reason[i]}
    counts["shuffled"] = shuffled
    _write_json(run.path("verify", f"p{p:06d}.json"), counts)
    return counts


def _facts_of(run: _Run, gids: np.ndarray, columns: Sequence[str], shuffled: Optional[dict],
              home: int) -> dict:
    """Columns of the facts of documents `gids` (sorted), read from their partitions' files;
    the bytes read from other partitions than `home` are added to shuffled["verify_documents"]."""
    out = {c: None for c in columns}
    part = (gids >> np.uint64(32)).astype(np.int64)
    bounds = np.searchsorted(part, np.arange(run.nparts + 1))
    pieces: Dict[str, list] = {c: [] for c in columns}
    for q in np.unique(part).tolist():
        rows = (gids[bounds[q]:bounds[q + 1]] & _LOW).astype(np.int64)
        facts = _Arrays(run.path("documents", f"p{q:06d}.facts"))
        for c in columns:
            values = facts[c][rows]
            pieces[c].append(values)
            if shuffled is not None and q != home:
                shuffled["verify_documents"] += values.nbytes
    for c in columns:
        dtype = {"score": np.float64, "set_sizes": np.uint32}.get(c, np.uint64)
        out[c] = _concat(pieces[c], dtype)
    return out


def _sets_of(run: _Run, gids: np.ndarray, needed: np.ndarray, shuffled: dict, home: int,
             offsets_name: str = "set_offsets", codes_name: str = "set_codes") -> tuple:
    """The narrowed shingle sets (or, with the unit columns' names, unit sets) of documents
    `gids` (sorted) where `needed` (others empty), as a CSR (offsets, values) in the order of
    gids."""
    part = (gids >> np.uint64(32)).astype(np.int64)
    bounds = np.searchsorted(part, np.arange(run.nparts + 1))
    lengths = np.zeros(len(gids), np.uint64)
    values = []
    for q in np.unique(part[needed]).tolist():
        where = np.flatnonzero(needed[bounds[q]:bounds[q + 1]]) + bounds[q]
        rows = (gids[where] & _LOW).astype(np.uint64)
        facts = _Arrays(run.path("documents", f"p{q:06d}.facts"))
        offsets, got, nbytes = _neardup._dask_gather_coded_sets(facts[offsets_name],
                                                                facts[codes_name], rows)
        lengths[where] = np.diff(offsets)
        values.append((where, offsets, got))
        if q != home:
            shuffled["verify_documents"] += nbytes
    # Partitions in ascending order, rows ascending within each: the values in gid order.
    set_offsets = np.zeros(len(gids) + 1, np.uint64)
    np.cumsum(lengths, out=set_offsets[1:])
    return set_offsets, _concat([got for _, _, got in values], np.uint32)


# Stage 4: components and the keep decision ------------------------------------------------------

def _accepted(run: _Run, p: int) -> dict:
    got = _Arrays(run.path("verify", f"p{p:06d}.accepted"))
    return {c: got[c] for c in ("a", "b", "distance", "similarity", "reason")}


def _edges_task(run: _Run, p: int, nodes_parts: int) -> dict:
    """Star edges of the accepted pairs of partition p (each document to the smallest of its
    component among these pairs, by the library's union-find) and the pairs themselves, routed to
    the node partition of their first document."""
    done = _done(run.path("components", f"e{p:06d}.json"))
    if done is not None:
        return done
    acc = _accepted(run, p)
    nodes, labels = _neardup._dask_components(acc["a"], acc["b"])
    star = nodes != labels
    ea, eb = labels[star], nodes[star]
    dest = _route(ea, nodes_parts)
    order = np.argsort(dest, kind="stable")
    bdest = _route(eb, nodes_parts)
    border = np.argsort(bdest, kind="stable")
    pdest = _route(acc["a"], nodes_parts)
    porder = np.argsort(pdest, kind="stable")
    _save(run.path("components", f"e{p:06d}.edges"), {
        "a_offsets": _offsets(dest, nodes_parts), "a_a": ea[order], "a_b": eb[order],
        "b_offsets": _offsets(bdest, nodes_parts), "b_a": ea[border], "b_b": eb[border],
        "p_offsets": _offsets(pdest, nodes_parts), "p_a": acc["a"][porder],
        "p_b": acc["b"][porder], "p_distance": acc["distance"][porder],
        "p_similarity": acc["similarity"][porder], "p_reason": acc["reason"][porder]})
    counts = {"star_edges": int(len(ea)), "shuffled": int(len(ea)) * 32 + len(acc["a"]) * 29}
    _write_json(run.path("components", f"e{p:06d}.json"), counts)
    return counts


def _gather_blocks(paths: List[str], offsets_name: str, names: Sequence[str], index: int,
                   dtypes: Sequence) -> tuple:
    pieces = {n: [] for n in names}
    nbytes = 0
    for path in paths:
        got = _Arrays(path)
        part = _blocks(got[offsets_name], index)
        for n in names:
            values = got[n][part]
            pieces[n].append(values)
            nbytes += values.nbytes
    return tuple(_concat(pieces[n], t) for n, t in zip(names, dtypes)), nbytes


def _label_round_task(run: _Run, c: int, r: int, nodes_parts: int) -> dict:
    """Round r of min-label propagation for node partition c: the labels lowered to the smallest
    offer received, then this round's messages (each edge end's label to the other end, a
    node's label's label asked for and answered, hooks from a lowered node to its old label)."""
    name = f"r{r:04d}-c{c:06d}"
    done = _done(run.path("components", name + ".json"))
    if done is not None:
        return done
    edges = [run.path("components", f"e{p:06d}.edges") for p in range(run.nparts)]
    u64 = np.uint64
    (aa, ab), na = _gather_blocks(edges, "a_offsets", ("a_a", "a_b"), c, (u64, u64))
    (ba, bb), nb = _gather_blocks(edges, "b_offsets", ("b_a", "b_b"), c, (u64, u64))
    if r == 0:
        node = np.unique(np.concatenate([aa, bb]))
        label = node.copy()
        previous = node.copy()
        changed = np.zeros(len(node), bool)
        asked_node = asked_value = np.zeros(0, u64)
        shuffled = na + nb
    else:
        state = _Arrays(run.path("components", f"r{r - 1:04d}-c{c:06d}.state"))
        node = np.array(state["node"])
        label = np.array(state["label"])
        messages = [run.path("components", f"r{r - 1:04d}-c{q:06d}.messages")
                    for q in range(nodes_parts)]
        (to, value, kind), shuffled = _gather_blocks(messages, "offsets", ("to", "value", "kind"),
                                                     c, (u64, u64, np.uint8))
        offers = kind == 0
        previous = label.copy()
        if offers.any():
            at = np.searchsorted(node, to[offers])
            np.minimum.at(label, at, value[offers])
        changed = label < previous
        asked_node, asked_value = value[~offers], to[~offers]  # (asking node, label asked about)
    pending = node != label
    lookup = lambda xs: label[np.searchsorted(node, xs)]  # noqa: E731
    to = np.concatenate([ab, ba, asked_node, previous[changed], label[pending]])
    value = np.concatenate([lookup(aa), lookup(bb), lookup(asked_value), label[changed],
                            node[pending]])
    kind = np.concatenate([np.zeros(len(to) - int(pending.sum()), np.uint8),
                           np.ones(int(pending.sum()), np.uint8)])
    dest = _route(to, nodes_parts)
    order = np.argsort(dest, kind="stable")
    _save(run.path("components", name + ".messages"), {
        "offsets": _offsets(dest, nodes_parts), "to": to[order], "value": value[order],
        "kind": kind[order]})
    _save(run.path("components", name + ".state"), {"node": node, "label": label})
    counts = {"changed": int(np.count_nonzero(changed)), "nodes": int(len(node)),
              "shuffled": int(shuffled)}
    _write_json(run.path("components", name + ".json"), counts)
    return counts


def _group_task(run: _Run, c: int, rounds: int, nodes_parts: int) -> dict:
    """The members (node, label) of node partition c and its pairs with their component's label,
    routed to the keep partition of the label."""
    done = _done(run.path("components", f"g{c:06d}.json"))
    if done is not None:
        return done
    state = _Arrays(run.path("components", f"r{rounds - 1:04d}-c{c:06d}.state"))
    node, label = np.array(state["node"]), np.array(state["label"])
    edges = [run.path("components", f"e{p:06d}.edges") for p in range(run.nparts)]
    (pa, pb, pd, ps, pr), nbytes = _gather_blocks(
        edges, "p_offsets", ("p_a", "p_b", "p_distance", "p_similarity", "p_reason"), c,
        (np.uint64, np.uint64, np.int32, np.float64, np.uint8))
    plabel = label[np.searchsorted(node, pa)] if len(pa) else np.zeros(0, np.uint64)
    ndest = _route(label, nodes_parts)
    norder = np.argsort(ndest, kind="stable")
    pdest = _route(plabel, nodes_parts)
    porder = np.argsort(pdest, kind="stable")
    _save(run.path("components", f"g{c:06d}.groups"), {
        "n_offsets": _offsets(ndest, nodes_parts), "node": node[norder],
        "p_offsets": _offsets(pdest, nodes_parts), "a": pa[porder], "b": pb[porder],
        "distance": pd[porder], "similarity": ps[porder], "reason": pr[porder]})
    counts = {"shuffled": int(nbytes)}
    _write_json(run.path("components", f"g{c:06d}.json"), counts)
    return counts


def _keep_task(run: _Run, k: int, nodes_parts: int, keep: str) -> dict:
    """The keep decision of whole clusters: BuildClusters over the members (their facts read from
    their partitions) and pairs of the components routed here. Writes each member's decision,
    grouped by the partition of its kept document (clusters) and by its own (removed)."""
    done = _done(run.path("keep", f"k{k:06d}.json"))
    if done is not None:
        return done
    u64 = np.uint64
    shuffled = 0
    if nodes_parts == 0:  # every accepted pair in this one task
        acc = [_accepted(run, p) for p in range(run.nparts)]
        a = _concat([x["a"] for x in acc], u64)
        b = _concat([x["b"] for x in acc], u64)
        distance = _concat([x["distance"] for x in acc], np.int32)
        similarity = _concat([x["similarity"] for x in acc], np.float64)
        pair_reason = _concat([x["reason"] for x in acc], np.uint8)
        nodes = np.unique(np.concatenate([a, b]))
        shuffled += len(a) * 29
    else:
        groups = [run.path("components", f"g{c:06d}.groups") for c in range(nodes_parts)]
        (nodes,), n1 = _gather_blocks(groups, "n_offsets", ("node",), k, (u64,))
        (a, b, distance, similarity, pair_reason), n2 = _gather_blocks(
            groups, "p_offsets", ("a", "b", "distance", "similarity", "reason"), k,
            (u64, u64, np.int32, np.float64, np.uint8))
        nodes = np.sort(nodes)
        shuffled += n1 + n2
    columns = ("hi", "lo", "text_bytes", "normalized_bytes", "content_hash", "score")
    facts = _facts_of(run, nodes, columns, None, -1)
    shuffled += len(nodes) * 48
    ia = np.searchsorted(nodes, a).astype(np.uint32)
    ib = np.searchsorted(nodes, b).astype(np.uint32)
    kept, via, to_kept, to_via, sim_via, reason, reasons, via_reason = _neardup._dask_clusters(
        facts["hi"], facts["lo"], run.bits, facts["text_bytes"], facts["normalized_bytes"],
        facts["content_hash"], facts["score"], ia, ib, distance, similarity, pair_reason, keep)
    inside = kept >= 0
    member = nodes[inside]
    kept_gid = nodes[kept[inside]]
    via_gid = np.where(via[inside] >= 0, nodes[np.maximum(via[inside], 0)], _NONE)
    is_kept = member == kept_gid
    # By the kept document's partition: the clusters.
    order = np.lexsort((member, kept_gid))
    kdest = (kept_gid[order] >> np.uint64(32)).astype(np.int64)
    removed = np.sort(member[~is_kept])
    rdest = (removed >> np.uint64(32)).astype(np.int64)
    _save(run.path("keep", f"k{k:06d}.members"), {
        "offsets": _offsets(kdest, run.nparts), "member": member[order],
        "kept": kept_gid[order], "via": via_gid[order],
        "distance": to_kept[inside][order].astype(np.int32),
        "distance_to_via": to_via[inside][order].astype(np.int32),
        "similarity_to_via": sim_via[inside][order].astype(np.float64),
        "reason": reason[inside][order].astype(np.uint8),
        "via_reason": via_reason[inside][order].astype(np.uint8),
        "removed_offsets": _offsets(rdest, run.nparts), "removed": removed})
    clusters_by_part = np.bincount((kept_gid[is_kept] >> np.uint64(32)).astype(np.int64),
                                   minlength=run.nparts)
    counts = {"reasons": list(reasons), "clusters": clusters_by_part.tolist(),
              "removed": int(len(removed)), "shuffled": int(shuffled)}
    _write_json(run.path("keep", f"k{k:06d}.json"), counts)
    return counts


# Stage 5: outputs ----------------------------------------------------------------------------

def _location_names(info: dict, lines: np.ndarray) -> List[str]:
    name = info["name"]
    if info.get("rows_as_lines"):
        return [f"{name}:{int(x)}" for x in lines.tolist()]
    return [f"{name}:{int(x)}" if x > 0 else name for x in lines.tolist()]


def _final_ids(run: _Run, parts_info: list, gids: np.ndarray) -> tuple:
    """Ids (shared ones renamed id@location, as the command does) and locations of `gids`."""
    ids, locations = [None] * len(gids), [None] * len(gids)
    part = (gids >> np.uint64(32)).astype(np.int64)
    for q in np.unique(part).tolist():
        where = np.flatnonzero(part == q)
        rows = (gids[where] & _LOW).astype(np.uint64)
        facts = _Arrays(run.path("documents", f"p{q:06d}.facts"))
        raw = _neardup._dask_gather_strings(facts["id_offsets"], facts["id_blob"], rows)
        locs = _location_names(parts_info[q], facts["line"][rows.astype(np.int64)])
        shared = _Arrays(run.path("verify", f"p{q:06d}.shared"))["shared"]
        renamed = np.isin(gids[where], shared)
        for i, w in enumerate(where.tolist()):
            ids[w] = f"{raw[i]}@{locs[i]}" if renamed[i] else raw[i]
            locations[w] = locs[i]
    return ids, locations


def _blob(strings: List[str]) -> tuple:
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    offsets = np.zeros(len(encoded) + 1, np.uint64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return offsets, np.frombuffer(b"".join(encoded), np.uint8)


def _outputs_task(run: _Run, p: int, parts_info: list, keep_parts: int, first_cluster: int,
                  reasons: list, fmt: str, out_dir: str) -> dict:
    done = _done(run.path("outputs", f"p{p:06d}.json"))
    if done is not None:
        return done
    info = parts_info[p]
    n = info["documents"]
    keeps = [run.path("keep", f"k{k:06d}.members") for k in range(keep_parts)]
    u64 = np.uint64
    (removed,), shuffled = _gather_blocks(keeps, "removed_offsets", ("removed",), p, (u64,))
    (member, kept, via, distance, to_via, sim_via, via_reason), nbytes = _gather_blocks(
        keeps, "offsets", ("member", "kept", "via", "distance", "distance_to_via",
                           "similarity_to_via", "via_reason"), p,
        (u64, u64, u64, np.int32, np.int32, np.float64, np.uint8))
    shuffled += nbytes
    # Each keep task numbered the reasons it met: in the run's numbering.
    codes = []
    for k, path in enumerate(keeps):
        local = _read_json(run.path("keep", f"k{k:06d}.json"))["reasons"]
        got = _Arrays(path)
        mapping = np.asarray([reasons.index(r) for r in local], np.uint8)
        codes.append(mapping[got["reason"][_blocks(got["offsets"], p)]])
    reason = _concat(codes, np.uint8)
    remove = np.zeros(n, np.uint8)
    remove[(removed & _LOW).astype(np.int64)] = 1
    # keep.txt / remove.txt parts and the decisions, in input order (shared ids named apart).
    prefix = run.path("outputs", f"p{p:06d}")
    facts = _Arrays(run.path("documents", f"p{p:06d}.facts"))
    shared = _Arrays(run.path("verify", f"p{p:06d}.shared"))["shared"]
    renamed_rows = (shared & _LOW).astype(np.uint64)
    renamed, _ = _final_ids(run, parts_info, shared)
    decisions = os.path.join(out_dir, "decisions", f"part-{p:06d}.{fmt}")
    _neardup._dask_write_id_parts(facts["id_offsets"], facts["id_blob"], remove, renamed_rows,
                                  renamed, prefix + ".keep", prefix + ".remove",
                                  decisions if fmt == "jsonl" else "")
    if fmt == "parquet":
        _write_parquet_decisions(decisions, prefix + ".keep", prefix + ".remove", remove)
    # clusters.jsonl part: the clusters whose kept document is here, in its order.
    order = np.lexsort((member, member != kept, kept))  # each cluster: kept, then the removed
    member, kept, via = member[order], kept[order], via[order]
    distance, to_via = distance[order], to_via[order]
    sim_via, reason, via_reason = sim_via[order], reason[order], via_reason[order]
    docs = np.unique(np.concatenate([member, via[via != _NONE]]))
    ids, locations = _final_ids(run, parts_info, docs)
    facts = _facts_of(run, docs, ("text_bytes", "hi", "lo"), None, -1)
    shuffled += len(docs) * 24
    is_kept = member == kept
    starts = np.flatnonzero(is_kept)
    removed_mask = ~is_kept
    index = lambda xs: np.searchsorted(docs, xs).astype(np.uint32)  # noqa: E731
    member_offsets = np.zeros(len(starts) + 1, np.uint64)
    np.cumsum(np.add.reduceat(removed_mask.astype(np.int64), starts) if len(starts) else [],
              out=member_offsets[1:])
    id_offsets, id_blob = _blob(ids)
    loc_offsets, loc_blob = _blob(locations)
    lines = _neardup._dask_cluster_lines(
        id_offsets, id_blob, loc_offsets, loc_blob, facts["text_bytes"], facts["hi"], facts["lo"],
        run.bits, np.arange(first_cluster, first_cluster + len(starts), dtype=np.uint64),
        index(member[starts]), member_offsets, index(member[removed_mask]), distance[removed_mask],
        index(via[removed_mask]), to_via[removed_mask], sim_via[removed_mask],
        reason[removed_mask], reasons, via_reason[removed_mask])
    tmp = prefix + f".clusters.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(lines)
    os.replace(tmp, prefix + ".clusters")
    counts = {"kept": int(n - remove.sum()), "removed": int(remove.sum()),
              "clusters": int(len(starts)), "shuffled": int(shuffled)}
    _write_json(run.path("outputs", f"p{p:06d}.json"), counts)
    return counts


def _write_parquet_decisions(path: str, keep_path: str, remove_path: str,
                             remove: np.ndarray) -> None:
    import pandas as pd

    kept, removed = iter(_read_ids(keep_path)), iter(_read_ids(remove_path))
    ids = [next(removed) if gone else next(kept) for gone in remove.tolist()]
    tmp = f"{path}.tmp-{os.getpid()}"
    pd.DataFrame({"id": ids, "keep": remove == 0}).to_parquet(tmp, index=False)
    os.replace(tmp, path)


def _read_ids(path: str) -> List[str]:
    with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as f:
        return f.read().split("\n")[:-1]


# ---- the client: stages in order ---------------------------------------------------------------

class _Progress:
    def __init__(self, enabled: Any):
        self.enabled = enabled
        self.start = time.time()

    def line(self, text: str) -> None:
        if callable(self.enabled):
            self.enabled(text)
        elif self.enabled:
            print(f"neardup.dask: {text}", file=sys.stderr, flush=True)


def _timed(fn, *args):
    """fn(*args), with the CPU seconds of the task's thread in "task_cpu" (with threads > 1 the
    library's helper threads are not counted). Then the memory the task freed goes back to the
    system (glibc keeps freed heap pages otherwise, and a worker's footprint would creep up with
    the number of tasks it ran)."""
    start = time.thread_time()
    result = fn(*args)
    if isinstance(result, dict) and not result.get("resumed"):
        result = dict(result, task_cpu=time.thread_time() - start)
    _trim()
    return result


def _trim() -> None:
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes

            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = None

# Dask's runtime ---------------------------------------------------------------------------------

#: The Dask settings of a dedup cluster's scheduler and workers (:func:`local_cluster` applies
#: them). Dask's defaults suit interactive work: a statistical profiler samples every task
#: thread each 10 ms, and the system monitor, the memory monitors, the event loops' tick and
#: work stealing wake every process 2 to 50 times a second. Tasks of neardup.dask run for
#: seconds in the library with Python's lock released, so none of that informs anything; on a
#: 2-worker LocalCluster it cost 0.11 CPU-seconds per second of wall time at rest (0.035 with
#: these; bench/dask_bench.py --compare-settings measures a run both ways). Only speed changes:
#: the answer is the same. A cluster started elsewhere takes them from its dask configuration
#: (YAML, or the environment: ``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False`` ...).
DASK_SETTINGS: Dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "500ms",
    "distributed.worker.memory.monitor-interval": "500ms",
    "distributed.scheduler.work-stealing-interval": "500ms",
    # Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_ set, which also pins glibc's mmap
    # threshold at 128 KiB: every growing array of a task is then a fresh mapping, faulted in
    # page by page (twice the page faults of a partition's read). Blocks up to 32 MiB come from
    # the heap instead; tasks still hand their memory back when they end (malloc_trim).
    "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": 32 << 20,
}


def local_cluster(n_workers: Optional[int] = None, *, memory_limit: Any = "auto",
                  dashboard_address: Optional[str] = None, **kwargs: Any):
    """A ``distributed.LocalCluster`` for neardup.dask: ``n_workers`` worker processes (default:
    one per core) of one thread each (the library's work holds no Python lock, so a process per
    core is the parallelism), with :data:`DASK_SETTINGS` applied and no dashboard unless
    ``dashboard_address`` is given (e.g. ``":8787"``). Other keywords go to ``LocalCluster``;
    an explicit ``threads_per_worker`` or ``processes`` is kept. Use it as ::

        with nd.local_cluster(2) as cluster, distributed.Client(cluster):
            nd.dedup_files("shards/", output="out/")
    """
    import dask
    import distributed

    kwargs.setdefault("threads_per_worker", 1)
    kwargs.setdefault("processes", True)
    kwargs.setdefault("silence_logs", 40)  # logging.ERROR: no lines per worker start
    # The scheduler and the nannies read the settings when they are made; a nanny hands its
    # configuration to its worker process.
    with dask.config.set(DASK_SETTINGS):
        return distributed.LocalCluster(n_workers=n_workers, memory_limit=memory_limit,
                                        dashboard_address=dashboard_address, **kwargs)


def _compute(name: str, token: str, calls: list) -> list:
    """Runs one stage's tasks (named neardup-<name>-<token>, i) on the current scheduler."""
    import dask

    tasks = [dask.delayed(_timed, pure=False)(fn, *args,
                                              dask_key_name=(f"neardup-{name}-{token}", i))
             for i, (fn, *args) in enumerate(calls)]
    return list(dask.compute(*tasks)) if tasks else []


def _parquet_available() -> bool:
    for module in ("pyarrow", "fastparquet"):
        try:
            __import__(module)
            return True
        except ImportError:
            pass
    return False


def _worker_facts(marker: str) -> tuple:
    """On a worker: whether it sees the work directory, and whether Dask's profiler runs."""
    import dask

    return os.path.exists(marker), bool(dask.config.get("distributed.worker.profile.enabled",
                                                        False))


def _check_workers_see(work: str, say: "_Progress") -> None:
    """With a distributed client, every worker must see the work directory. Workers running
    Dask's profiler are named on the progress line (DASK_SETTINGS turns it off)."""
    try:
        from distributed import get_client
        client = get_client()
    except (ImportError, ValueError):
        return
    marker = os.path.join(work, "visible")
    _write_json(marker, {})
    seen = client.run(_worker_facts, marker)
    missing = [w for w, (ok, _) in seen.items() if not ok]
    if missing:
        raise OSError(f"the work directory {work} is not visible on workers {missing}: give "
                      f"output= (or work_dir=) on storage every worker can read")
    profiled = sum(1 for _, profiling in seen.values() if profiling)
    if profiled:
        say.line(f"note: {profiled} of {len(seen)} workers run Dask's profiler, which costs CPU "
                 f"and informs nothing here: see neardup.dask.DASK_SETTINGS / local_cluster()")


def _prepare_output(output: str, force: bool) -> None:
    """Refuses an output directory that holds anything but an unfinished run's work, unless
    force (the previous outputs are then replaced at the end, never mixed with the new ones)."""
    if os.path.exists(output) and not os.path.isdir(output):
        raise FileExistsError(f"output: {output} exists and is not a directory")
    if not os.path.isdir(output):
        os.makedirs(output)
        return
    others = [e for e in os.listdir(output) if e != _WORK]
    if others and not force:
        raise FileExistsError(
            f"output: {output} is not empty ({', '.join(sorted(others)[:5])}"
            f"{', ...' if len(others) > 5 else ''}); give force=True to replace its outputs")


def _check_not_inputs(output: str, source: "_FileSource") -> None:
    """An output never goes over, or inside, what the run reads (as the command refuses)."""
    target = os.path.realpath(output)
    for given in source.given:
        where = os.path.realpath(given)
        if target == where or target.startswith(where.rstrip(os.sep) + os.sep):
            raise ValueError(f"output: {output} is an input or inside the input {given}")
    outputs = {os.path.join(target, name) for name in _OUTPUTS}
    for name in source.files:
        path = os.path.realpath(name)
        if path in outputs or path.startswith(os.path.join(target, "decisions") + os.sep):
            raise ValueError(f"output: {output} would write over the input {name}")


def _publish(staging: str, output: str) -> None:
    """Moves the finished outputs from `staging` into `output`, each replacing the old one
    (decisions/ as a whole directory, so no part of an earlier run stays)."""
    for name in _OUTPUTS:
        new = os.path.join(staging, name)
        target = os.path.join(output, name)
        if not os.path.exists(new):
            continue
        if os.path.isdir(new) and os.path.lexists(target):
            old = os.path.join(staging, name + ".old")
            os.replace(target, old)
            os.replace(new, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            os.replace(new, target)


def _join_parts(paths: List[str], target: str) -> None:
    tmp = target + ".tmp"
    with open(tmp, "wb") as out:
        for path in paths:
            with open(path, "rb") as part:
                shutil.copyfileobj(part, out, 1 << 20)
    os.replace(tmp, target)


def _summary(docs: list, buckets: list, verify: list, outputs: list, library: dict,
             stages: list, total: float, duplicate_ids: int, work_bytes: int,
             dask_info: dict, input_files: List[str], verifying: bool,
             frequencies: Optional[dict] = None) -> dict:
    """summary.json: the library's serializer over the run's counts (the schema of
    `neardup dedup`), plus "dask"."""
    def merged(name):
        out: Dict[str, int] = {}
        for counts in docs:
            for reason, count in counts[name].items():
                out[reason] = out.get(reason, 0) + count
        return out

    lsh = {"records": 0, "buckets": 0, "oversized": 0, "largest": 0, "pairs_before_dedup": 0}
    for counts in buckets:
        for key in lsh:
            lsh[key] = (max(lsh[key], counts["lsh"][key]) if key == "largest"
                        else lsh[key] + counts["lsh"][key])
    total_of = lambda key: sum(c[key] for c in verify)  # noqa: E731
    counts = {
        "skipped": merged("skipped"), "fallbacks": merged("fallbacks"),
        "failed": merged("failed"), "duplicate_ids": duplicate_ids,
        "text_bytes": sum(c["text_bytes"] for c in docs),
        "candidate_pairs": total_of("candidate_pairs"),
        "lsh_candidate_pairs": total_of("lsh_candidate_pairs"),
        "simhash_candidate_pairs": total_of("simhash_candidate_pairs"),
        "simhash_only_candidate_pairs": total_of("simhash_only_candidate_pairs"),
        "simhash_only_accepted_pairs": total_of("simhash_only_accepted_pairs"),
        "pairs_by_reason": {name: sum(c.get("pairs_by_reason", {}).get(name, 0) for c in verify)
                            for name in _neardup._REASONS[1:]},
        "histogram": _histogram(verify) if verifying else None,
        "lsh_buckets": lsh, "spill_bytes": work_bytes,
        "stages": [(s["stage"], s["seconds"], s["items"]) for s in stages],
        "total_seconds": total, "input_files": input_files,
        "boilerplate": None if frequencies is None else {
            "documents": frequencies["documents"], "sketch_bytes": frequencies["sketch_bytes"],
            "sample_every": frequencies["sample_every"]},
    }
    options = {k: v for k, v in library.items() if k not in ("id_field", "text_field", "lines")}
    summary = json.loads(_neardup._dask_summary_json(options, counts))
    # What the serializer counts from a report's documents, pairs and clusters.
    n = sum(c["documents"] for c in docs)
    removed = sum(c["removed"] for c in outputs)
    clusters = sum(c["clusters"] for c in outputs)
    summary["documents_read"] = n + sum(counts["failed"].values())
    summary["documents_fingerprinted"] = n
    summary["accepted_pairs"] = total_of("accepted_pairs")
    summary["clusters"] = clusters
    summary["documents_in_clusters"] = removed + clusters
    summary["documents_removed"] = removed
    summary["documents_kept"] = n - removed
    if total > 0:
        summary["documents_per_second"] = n / total
    for entry, stage in zip(summary["stages"], stages):
        entry["tasks"] = stage["tasks"]
        entry["task_cpu_seconds"] = stage["task_cpu_seconds"]
        if stage["resumed_tasks"]:
            entry["resumed_tasks"] = stage["resumed_tasks"]
    summary["dask"] = dask_info
    return summary


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def dedup(data: Any, output: Optional[str] = None, *, text_field: Optional[str] = None,
          id_field: Optional[str] = None, force: bool = False, format: str = "auto",
          work_dir: Optional[str] = None, shuffle_partitions: Optional[int] = None,
          component_pairs: int = 1_000_000, progress: Any = True, keep_work: bool = False,
          **options: Any) -> "DaskDedupResult":
    """Deduplicates ``data`` on the current Dask scheduler (a ``distributed.Client`` if one is
    active) exactly as ``neardup dedup`` does; returns a :class:`DaskDedupResult`.

    ``data``: what :func:`read_jsonl` gives (files read by the library inside the first stage), a
    list of paths / globs (the same), a Dask DataFrame, a Dask Bag of dicts or ``(id, text)``
    pairs, or a pandas DataFrame. ``text_field`` / ``id_field`` name the DataFrame columns (or
    JSONL fields), ``"text"`` / ``"id"`` by default, as in :func:`neardup.dedup`; ``text=`` and
    ``id=`` are deprecated aliases.

    ``output``: a directory for ``clusters.jsonl``, ``keep.txt``, ``remove.txt``,
    ``summary.json`` and ``decisions/`` (one part per input partition: JSONL, or Parquet with
    ``format="parquet"``, which needs pyarrow or fastparquet; ``"auto"`` picks Parquet when one is
    installed). A directory holding anything else is refused unless ``force=True``, which replaces
    the outputs once the run has finished. A run that stops (client killed, machine lost) resumes
    from its finished tasks when called again with the same data, options and output.
    Without ``output`` the files go to a temporary directory, removed with the result.

    Options are those of :func:`neardup.dedup` (``threshold``, ``candidates``, ``bands``,
    ``rows``, ``bucket_window``, ``k``, ``verify``, ``keep``, ``bits``, ``strict``, the pair
    rule's ``containment`` and ``edited`` options, ``boilerplate`` weights, fingerprint options;
    ``threads``: the library's threads inside each task, default 1, Dask's workers being the
    parallelism). ``boilerplate=True`` gives the command's answers: the shingles' document
    frequencies are counted per group of partitions (one per 256 MiB of input, at most 8) in the
    command's sketch (a quarter of the input's size, at most ``boilerplate_sketch_mb``, 512 MiB;
    above four times that much input one document in s, by its number in reading order; for a
    DataFrame the input's size is that of its partitions' JSONL) and merged, and each worker
    process holds the merged sketch while verifying (see docs/scale.md). ``shuffle_partitions``: the partitions of the candidate stage
    (default: as many as the input's); ``component_pairs``: accepted pairs one components task
    may hold (more pairs are joined by min-label propagation over several tasks);
    ``progress``: a line per stage on standard error (False: none; a callable: receives the
    lines); ``work_dir``: where the intermediate files go (default ``output/.neardup-work``, or
    a temporary directory).
    """
    if "text" in options or "id" in options:
        for old, new in (("text", "text_field"), ("id", "id_field")):
            if old in options:
                warnings.warn(f"neardup.dask.dedup: {old}= is deprecated, use {new}=",
                              DeprecationWarning, stacklevel=2)
                value = options.pop(old)
                if (text_field if new == "text_field" else id_field) is not None:
                    raise TypeError(f"give {new}= or {old}=, not both")
                if new == "text_field":
                    text_field = value
                else:
                    id_field = value
    for name in ("measure_shuffle", "lines", "temp_dir", "output_dir"):
        if name in options:
            raise TypeError(f"unexpected option {name!r}")
    text_field = "text" if text_field is None else text_field
    id_field = "id" if id_field is None else id_field
    options = dict(options)
    threads = options.pop("threads", None)
    threads = 1 if threads is None else int(threads)
    if threads < 0:
        raise ValueError("threads: expected 0 (all cores) or more")
    resolved = _neardup._resolve_dedup_options(
        {**options, "text_field": text_field, "id_field": id_field})  # validates before any work
    if format not in ("auto", "jsonl", "parquet"):
        raise ValueError('format: expected "auto", "jsonl" or "parquet"')
    if format == "parquet" and not _parquet_available():
        raise ImportError('format="parquet" needs pyarrow or fastparquet (not installed)')
    if format == "auto":
        format = "parquet" if _parquet_available() else "jsonl"
    if component_pairs < 1:
        raise ValueError("component_pairs: expected 1 or more")

    # The input.
    if isinstance(data, (str, os.PathLike)) or (isinstance(data, (list, tuple)) and data and all(
            isinstance(x, (str, os.PathLike)) for x in data)):
        data = read_jsonl(data, id_field=id_field, text_field=text_field)
    source = getattr(data, "_neardup_source", None)
    if source is not None:
        fields = source.fields
        library = {**options, "id_field": fields["id_field"], "text_field": fields["text_field"]}
        if fields.get("lines"):
            library["lines"] = True
        nparts = len(source.parts)
        identity = source.identity()
        ddf = None
    else:
        ddf = _as_dataframe(data, text_field, id_field)
        if text_field not in ddf.columns:
            raise ValueError(f"text_field: the data has no column {text_field!r}")
        library = {**options, "id_field": "id", "text_field": "text"}
        nparts = ddf.npartitions
        import dask.base

        identity = [dask.base.tokenize(ddf), text_field, id_field]
    fields = {"text_field": text_field, "id_field": id_field,
              "score_field": resolved["keep_field"]}
    dests = int(shuffle_partitions or nparts)
    if dests < 1:
        raise ValueError("shuffle_partitions: expected 1 or more")
    key = json.dumps({"version": _WORK_VERSION, "options": library, "input": identity,
                      "dests": dests, "component_pairs": component_pairs, "format": format},
                     sort_keys=True, default=str)

    # Where the work goes.
    temporary = None
    if output is not None:
        output = os.fspath(output)
        if source is not None:
            _check_not_inputs(output, source)
        _prepare_output(output, force)
        work = os.fspath(work_dir) if work_dir else os.path.join(output, _WORK)
    else:
        temporary = tempfile.mkdtemp(prefix="neardup-dask-", dir=work_dir)
        work = os.path.join(temporary, _WORK)
    os.makedirs(work, exist_ok=True)
    lock = open(os.path.join(work, "lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise RuntimeError(f"{work}: another run is using this work directory") from None
    try:
        return _run(data, ddf, source, output, temporary, work, key, library, resolved, fields,
                    nparts, dests, threads, component_pairs, format, progress, keep_work, options)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _run(data, ddf, source, output, temporary, work, key, library, resolved, fields, nparts,
         dests, threads, component_pairs, fmt, progress, keep_work, options):
    import dask.base

    started = time.time()
    say = _Progress(progress)
    run_file = os.path.join(work, "run.json")
    try:
        previous = _read_json(run_file)
    except (OSError, ValueError):
        previous = None
    if previous is not None and previous.get("key") != key:
        # Work of another input or option set: start again.
        say.line("the work directory holds another run's work: starting again")
        for entry in os.listdir(work):
            if entry not in ("lock", "run.json"):
                path = os.path.join(work, entry)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        previous = None
    elif previous is not None:
        say.line("resuming the run in " + work)
    _write_json(run_file, {"key": key})
    _check_workers_see(work, say)
    token = dask.base.tokenize(key, work)[:8]
    engines_key = json.dumps(library, sort_keys=True, default=str)
    for stage in ("documents", "frequencies", "buckets", "verify", "components", "keep",
                  "outputs"):
        os.makedirs(os.path.join(work, stage), exist_ok=True)
    staging = os.path.join(work, "out")
    os.makedirs(os.path.join(staging, "decisions"), exist_ok=True)
    stages = []

    def stage(name, calls, items_of=None):
        begin = time.time()
        results = _compute(name, token, calls)
        already = sum(1 for r in results if isinstance(r, dict) and r.get("resumed"))
        seconds = time.time() - begin
        items = items_of(results) if items_of else len(results)
        cpu = sum(r.get("task_cpu", 0.0) for r in results if isinstance(r, dict))
        stages.append({"stage": name, "seconds": seconds, "items": items, "tasks": len(calls),
                       "resumed_tasks": already, "task_cpu_seconds": cpu})
        note = f", {already} already done" if already else ""
        say.line(f"{name}: {len(calls)} tasks, {items:,} items, {seconds:.1f} s{note}")
        return results

    run = _Run(work, library, resolved, engines_key, nparts, dests, threads)

    # 1. Documents.
    if source is not None:
        ranges = [p if p["split"] else None for p in source.parts]
        if any(r is not None for r in ranges):
            got = _compute("lines", token, [(_range_lines, p) if p["split"] else (_no_lines,)
                                            for p in source.parts])
        else:
            got = [None] * len(source.parts)
        starts = _first_lines([g if p["split"] else None for g, p in zip(got, source.parts)])
        calls = [(_file_documents_task, run, i, p, starts[i]) for i, p in enumerate(source.parts)]
    else:
        calls = [(_frame_documents_task, run, i, part, fields)
                 for i, part in enumerate(ddf.to_delayed())]
    docs = stage("documents", calls, lambda r: sum(c["documents"] for c in r))
    for counts in docs:
        for message in counts["warnings"]:
            print(f"neardup: warning: {message}", file=sys.stderr)
        more = counts["warning_count"] - len(counts["warnings"])
        if more > 0:
            print(f"neardup: warning: {counts['name']}: {more} more warnings", file=sys.stderr)
    n = sum(c["documents"] for c in docs)
    if n == 0:
        raise ValueError("no document was read (every record was skipped or the input is empty)")
    # 1b. Boilerplate weights: the shingle frequencies counted as dedup counts them (the sketch
    # of the input's size, documents sampled by their number in reading order), per group of
    # partitions, merged into one sketch that verification's pair rule reads.
    frequencies = None
    if run.boilerplate:
        if source is not None:  # the reader's total_input_bytes: the files' sizes on disk
            input_bytes = 0
            for name in source.files:
                try:
                    input_bytes += os.path.getsize(name)
                except OSError:
                    pass
        else:  # the partitions' JSONL, read from memory
            input_bytes = sum(c["input_bytes"] for c in docs)
        firsts = np.concatenate([[0], np.cumsum([c["read"] for c in docs])]).tolist()
        groups = _frequency_groups(nparts, input_bytes)
        stage("frequencies", [(_count_frequencies_task, run, g, parts, firsts, input_bytes)
                              for g, parts in enumerate(groups)],
              lambda r: sum(c["counted_documents"] for c in r))
        frequencies = stage("frequency-merge",
                            [(_merge_frequencies_task, run, len(groups), input_bytes)])[0]
        run.frequencies = run.path("frequencies", "merged.sketch")
    # 2-3. Candidates and verification.
    buckets = stage("buckets", [(_buckets_task, run, d) for d in range(dests)],
                    lambda r: sum(c["pairs"] for c in r))
    doc_starts = np.concatenate([[0], np.cumsum([c["documents"] for c in docs])]).tolist()
    pairs = stage("pairs", [(_pairs_task, run, p) for p in range(nparts)],
                  lambda r: sum(c["candidate_pairs"] for c in r))
    level = _sample_level(sum(c["candidate_pairs"] for c in pairs))
    verify = stage("verify", [(_verify_task, run, p, doc_starts, level) for p in range(nparts)],
                   lambda r: sum(c["candidate_pairs"] for c in r))
    accepted = sum(c["accepted_pairs"] for c in verify)
    # 4. Components and keep.
    keep = options.get("keep", "first")
    node_parts = 0 if accepted <= component_pairs else math.ceil(accepted / component_pairs)
    rounds = 1
    component_shuffle = 0
    if node_parts:
        edges = stage("components", [(_edges_task, run, p, node_parts) for p in range(nparts)],
                      lambda r: sum(c["star_edges"] for c in r))
        component_shuffle += sum(c["shuffled"] for c in edges)
        rounds = 0
        while True:
            got = stage(f"labels-{rounds}", [(_label_round_task, run, c, rounds, node_parts)
                                             for c in range(node_parts)],
                        lambda r: sum(c["changed"] for c in r))
            component_shuffle += sum(c["shuffled"] for c in got)
            rounds += 1
            if rounds > 1 and sum(c["changed"] for c in got) == 0:
                break
        groups = stage("groups", [(_group_task, run, c, rounds, node_parts)
                                  for c in range(node_parts)])
        component_shuffle += sum(c["shuffled"] for c in groups)
        keep_parts = node_parts
    else:
        keep_parts = 1
    kept = stage("keep", [(_keep_task, run, k, node_parts, keep) for k in range(keep_parts)],
                 lambda r: sum(sum(c["clusters"]) for c in r))
    reasons = ["kept"] + sorted({r for c in kept for r in c["reasons"]} - {"kept"})
    per_part = np.sum([c["clusters"] for c in kept], axis=0) if kept else np.zeros(nparts)
    firsts = np.concatenate([[0], np.cumsum(per_part)[:-1]]).astype(np.int64).tolist()
    # 5. Outputs.
    parts_info = [{"name": c["name"], "documents": c["documents"],
                   "rows_as_lines": c["rows_as_lines"]} for c in docs]
    outs = stage("outputs", [(_outputs_task, run, p, parts_info, keep_parts, firsts[p], reasons,
                              fmt, staging) for p in range(nparts)],
                 lambda r: sum(c["clusters"] for c in r))
    prefix = os.path.join(work, "outputs")
    for name in ("clusters", "keep", "remove"):
        _join_parts([os.path.join(prefix, f"p{p:06d}.{name}") for p in range(nparts)],
                    os.path.join(staging, f"{name}.jsonl" if name == "clusters" else f"{name}.txt"))
    duplicate_ids = 0
    for p in range(nparts):
        duplicate_ids += len(_Arrays(os.path.join(work, "verify", f"p{p:06d}.shared"))["shared"])
    shuffled: Dict[str, int] = {}
    for group in (buckets, pairs, verify):
        for counts in group:
            for name, value in counts["shuffled"].items():
                shuffled[name] = shuffled.get(name, 0) + value
    shuffled["components"] = component_shuffle + sum(c["shuffled"] for c in kept)
    shuffled["outputs"] = sum(c["shuffled"] for c in outs)
    dask_info = {"partitions": nparts, "shuffle_partitions": dests,
                 "component_partitions": max(1, node_parts), "component_rounds": rounds,
                 "shuffle_bytes": shuffled,
                 "shuffle_bytes_per_document": sum(shuffled.values()) / n}
    total = time.time() - started
    summary = _summary(docs, buckets, verify, outs, library, stages, total, duplicate_ids,
                       _dir_bytes(work), dask_info, source.files if source is not None else [],
                       run.verify > 0, frequencies)
    with open(os.path.join(staging, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    say.line(f"{n:,} documents, {summary['clusters']:,} clusters, "
             f"{summary['documents_removed']:,} removed, {total:.1f} s")
    texts = _frame_texts(ddf, fields["text_field"]) if ddf is not None else None
    if output is not None:
        _publish(staging, output)
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
        return DaskDedupResult(output, summary, texts)
    result = DaskDedupResult(staging, summary, texts)
    if not keep_work:
        for stage_name in ("documents", "frequencies", "buckets", "verify", "components", "keep",
                           "outputs"):
            shutil.rmtree(os.path.join(work, stage_name), ignore_errors=True)
    weakref.finalize(result, shutil.rmtree, temporary, True)
    return result


def _no_lines():
    return None


def dedup_files(inputs: Any, output: Optional[str] = None, *, blocksize: int = _DEFAULT_BLOCKSIZE,
                id_field: str = "id", text_field: str = "text", lines: bool = False,
                **options: Any) -> "DaskDedupResult":
    """``neardup dedup INPUT... -o output`` on the Dask cluster: :func:`dedup` of
    :func:`read_jsonl` (files, directories and glob patterns)."""
    source = read_jsonl(inputs, blocksize=blocksize, id_field=id_field, text_field=text_field,
                        lines=lines)
    return dedup(source, output, id_field=id_field, text_field=text_field, **options)


# ---- result ------------------------------------------------------------------------------------

class DaskDedupResult:
    """The answer of :func:`dedup`, read from the files of the run (so it stays usable after the
    Dask client has closed).

    - ``summary``: ``summary.json`` (the command's keys, plus ``"dask"``: partitions, component
      rounds, bytes shuffled per stage);
    - ``clusters``: ``clusters.jsonl`` as a list of dicts (read when first asked for; a
      member's ``location`` is ``file:line`` for files, ``partition:row`` for a DataFrame, row
      counted from 0 in its partition); ``clusters_frame()``: one row per member as a pandas
      DataFrame;
    - ``remove`` (a set) and ``keep`` (a list, in input order): the ids of ``remove.txt`` and
      ``keep.txt``;
    - ``decisions``: a Dask DataFrame ``id, keep`` of every document, in input order;
    - ``output``: the directory holding the files;
    - ``report(path)``: the HTML page of ``neardup report`` for this run.

    Ids used by more than one document are named apart as ``id@location``, as the command does
    (``summary["duplicate_ids"]`` counts them), so filtering an input by ``remove`` never drops a
    kept document that shares an id.
    """

    def __init__(self, directory: str, summary: dict, texts=None):
        self.output = directory
        self.summary = summary
        self._clusters = None
        self._remove = None
        self._texts = texts  # (id, location) -> text of a DataFrame input (None: files)

    def _path(self, name: str) -> str:
        path = os.path.join(self.output, name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: the result's files are gone (removed, or replaced "
                                    f"by another run)")
        return path

    @property
    def clusters(self) -> list:
        if self._clusters is None:
            with open(self._path("clusters.jsonl"), encoding="utf-8") as f:
                self._clusters = [json.loads(line) for line in f]
        return self._clusters

    def _ids(self, name: str) -> List[str]:
        with open(self._path(name), encoding="utf-8", errors="surrogateescape",
                  newline="\n") as f:
            lines = f.read().split("\n")[:-1]
        # An id with a control character or a leading '"' is written as a JSON string
        # (AppendIdLine, as the command writes it).
        return [_id_of_line(line) for line in lines]

    @property
    def remove(self) -> set:
        if self._remove is None:
            self._remove = set(self._ids("remove.txt"))
        return self._remove

    @property
    def keep(self) -> List[str]:
        return self._ids("keep.txt")

    @property
    def decisions(self):
        import dask.dataframe as dd

        folder = self._path("decisions")
        parts = sorted(os.listdir(folder))
        if parts and parts[0].endswith(".parquet"):
            return dd.read_parquet([os.path.join(folder, p) for p in parts])
        import dask
        import pandas as pd

        meta = pd.DataFrame({"id": pd.Series(dtype=object), "keep": pd.Series(dtype=bool)})
        return dd.from_delayed([dask.delayed(_read_decisions)(os.path.join(folder, p))
                                for p in parts], meta=meta, verify_meta=False)

    def report(self, path: Any, *, force: bool = False, **options: Any) -> dict:
        """Writes the self-contained HTML page of ``neardup report`` for this run to ``path`` and
        returns its counts (options as the command's flags: ``max_clusters``, ``max_members``,
        ``max_text_bytes``, ``max_total_text_bytes``, ``sample``, ``seed``, ``title``). Texts
        come from the input files (read again by the library), or for a DataFrame input from
        its partitions (computed again for the rows the page shows)."""
        if not hasattr(_neardup, "_write_report"):
            raise NotImplementedError("this build of neardup has no report writer")
        return _neardup._write_report(os.fspath(path), self._path("."), "", "", self._texts,
                                      options, force)

    def clusters_frame(self):
        from . import _clusters_frame

        return _clusters_frame(self.clusters, "location")

    def __repr__(self) -> str:
        return (f"DaskDedupResult({self.summary['documents_fingerprinted']} documents, "
                f"{self.summary['clusters']} clusters, "
                f"{self.summary['documents_removed']} removed)")


def _frame_texts(ddf, text_field: str):
    """The texts of a DataFrame input by location ("partition:row"), for report()."""
    def fetch(wanted: list) -> list:
        rows: Dict[int, list] = {}
        for i, (_, location) in enumerate(wanted):
            partition, _, row = str(location).rpartition(":")
            if partition.isdigit() and row.isdigit():
                rows.setdefault(int(partition), []).append((i, int(row)))
        out: List[Optional[str]] = [None] * len(wanted)
        for partition, items in rows.items():
            if partition >= ddf.npartitions:
                continue
            frame = ddf.get_partition(partition).compute()
            texts = frame[text_field].tolist() if text_field in frame.columns else []
            for i, row in items:
                value = texts[row] if row < len(texts) else None
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                out[i] = value if isinstance(value, str) else None
        return out

    return fetch


def _read_decisions(path: str):
    import pandas as pd

    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return pd.DataFrame({"id": pd.Series([r["id"] for r in rows], dtype=object),
                         "keep": pd.Series([r["keep"] for r in rows], dtype=bool)})
