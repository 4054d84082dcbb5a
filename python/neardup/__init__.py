"""neardup for Python: near-duplicate text detection with SimHash, in process.

The compiled core (``neardup._neardup``, pybind11) is the neardup C++ library itself, not a
subprocess wrapper. Options have the names of the ``neardup`` command-line flags with ``-`` turned
into ``_`` (``--top-k`` is ``top_k``, ``--no-t2s`` is ``no_t2s``, ``-k`` is ``k``) and the same
defaults. Bad input raises ``ValueError`` (or ``TypeError`` for a wrong type), file problems
``OSError`` (``FileNotFoundError`` for a missing file), each carrying the C++ message.

    import neardup
    fp = neardup.Fingerprinter()                  # the defaults of `neardup fingerprint`
    a = fp.fingerprint("some text")               # int (64 bits)
    many = fp.fingerprint_batch(texts)            # numpy uint64 array, all cores, GIL released
    result = neardup.dedup(frame)                 # pandas DataFrame with "id" and "text" columns
    result.remove                                 # ids to drop

Distributed dedup on Dask: ``neardup.dask.dedup`` (imported on first use).
"""
from __future__ import annotations

import json
import json as _json  # dedup_files has a keyword named json
import math
import os
import re
import warnings
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import _neardup
from ._neardup import (Fingerprinter, MinHashLsh, choose_lsh_parameters, cut, distance,
                       extract_tags, jaccard, lsh_probability, parse_fingerprint, to_hex)

__all__ = [
    "Fingerprinter",
    "HammingIndex",
    "Store",
    "open_store",
    "MinHashLsh",
    "lsh_probability",
    "choose_lsh_parameters",
    "DedupResult",
    "dedup",
    "dedup_files",
    "extract_tags",
    "cut",
    "distance",
    "to_hex",
    "parse_fingerprint",
    "jaccard",
    "shingles",
]

__version__ = "0.1.0"


def _indexed_k(indexed_k: Optional[int], max_k: Optional[int]) -> int:
    """indexed_k, or its old name max_k (with a DeprecationWarning); 3 when neither is given."""
    if max_k is not None:
        if indexed_k is not None:
            raise TypeError("give indexed_k or its old name max_k, not both")
        warnings.warn("max_k is an old name: use indexed_k", DeprecationWarning, stacklevel=3)
        return max_k
    return 3 if indexed_k is None else indexed_k


class HammingIndex(_neardup.HammingIndex):
    """An exact Hamming-distance index of (id, fingerprint) pairs (permuted sorted tables).

    ``HammingIndex(bits=64, indexed_k=3, expected_size=1e6, threads=0)``; searches with any
    ``k <= indexed_k`` are exact (``max_k`` is the old name of ``indexed_k``: accepted with a
    ``DeprecationWarning``). Fingerprints are NumPy ``uint64`` arrays: shape ``(n,)`` for 64 bits,
    ``(n, 2)`` ``[hi, lo]`` for 128 bits.

    - ``add(ids, fingerprints)``: arrays (``ids=None`` numbers them 0..n-1) or one id and one int.
    - ``remove(id, fingerprint) -> int``: how many stored pairs were removed.
    - ``search(fingerprint, k) -> (ids, distances)``: sorted by (distance, id).
    - ``search_batch(fingerprints, k) -> (query, ids, distances)``: one row per hit, on all cores.
    - ``self_join(k) -> (a, b, distances)``: every stored pair within k, a < b, on all cores.
    """

    def __init__(self, bits: int = 64, indexed_k: Optional[int] = None,
                 expected_size: float = 1e6, threads: int = 0, *,
                 max_k: Optional[int] = None) -> None:
        super().__init__(bits=bits, indexed_k=_indexed_k(indexed_k, max_k),
                         expected_size=expected_size, threads=threads)

    @property
    def max_k(self) -> int:
        """The old name of :attr:`indexed_k` (``DeprecationWarning``)."""
        warnings.warn("HammingIndex.max_k is an old name: use indexed_k", DeprecationWarning,
                      stacklevel=2)
        return self.indexed_k

    @classmethod
    def build(cls, fingerprints: Any, ids: Any = None, *, indexed_k: Optional[int] = None,
              bits: Optional[int] = None, threads: int = 0,
              max_k: Optional[int] = None) -> "HammingIndex":
        """An index holding ``fingerprints`` (ids default to row numbers), planned for their count."""
        import numpy as np

        indexed_k = _indexed_k(indexed_k, max_k)
        # No cast here: add() refuses floats, strings and negative values instead of wrapping them.
        array = fingerprints if isinstance(fingerprints, np.ndarray) else np.asarray(fingerprints)
        if bits is None:
            bits = 128 if array.ndim == 2 else 64
        index = cls(bits=bits, indexed_k=indexed_k, expected_size=max(float(len(array)), 1.0),
                    threads=threads)
        index.add(ids, array)
        return index


class Store(_neardup.Store):
    """The persistent, crash-safe store of ``neardup index`` / ``neardup serve``, in process.

    ``Store(path, create_if_missing=True, error_if_exists=False, sync="every",
    verify_checksums=True, **options)``; ``sync`` is ``"every"`` (fsync each write), ``"group"``
    (group commit: a write batch waits ``group_commit_ms``, 2, for more writers) or ``"none"``
    (bulk loading); ``group_commit_ms`` with another ``sync`` is a ``ValueError``. A context manager (closes on exit). The options are
    the option registry's, as the command line's: the store's own ``indexed_k`` (searches with
    ``k <= indexed_k`` use the index tables; 3 for a new store; ``max_k`` is the old name, accepted
    with a ``DeprecationWarning``),
    ``memory_budget`` ("128/fp", "640M"), ``expected_size`` (1e7), ``memtable_limit`` (65536) and
    ``wal_flush_bytes`` (64 MiB: the log size that also triggers a flush),
    and the fingerprint keywords below. Unset means the store's.

    As ``neardup index create`` does, a new store records the fingerprint options (the keywords of
    :func:`fingerprint`: ``bits``, ``tokenizer``, ``shingle``, ...; the defaults when none are
    given) in its MANIFEST, readable as ``store.fingerprint_options``. An existing store keeps the
    options it recorded: a keyword asking for another value raises ``ValueError`` naming it, since
    fingerprints made with other options are not comparable. ``bits`` unset means the store's (64
    for a new store).

    The store's duplicate rule is chosen at creation: ``rule="dedup"`` (the default) is the rule of
    ``neardup dedup`` (exact copy, whitespace-only copy, or a MinHash LSH candidate whose verified
    shingle Jaccard reaches ``threshold``, 0.5 by default; ``bands``, ``rows`` and
    ``bucket_window`` as in :func:`dedup`), applied by the same code; such a store takes texts.
    Its ``containment*`` and ``edited`` options (``edited`` 0.8 by default, 0 = off;
    ``edited_min_jaccard`` 0.45) are recorded with the rule: an existing store answers with its
    own whatever the defaults (one made with ``edited=0``, or before the reason was on by default,
    answers with it off), and a keyword giving another value raises ``ValueError``.
    ``rule="simhash"`` stores bare fingerprints and finds those within Hamming distance ``k``.

    - ``check(text, id=None, add="if_new", metadata=None, k=3)
      -> {"duplicate", "added", "replaced", "duplicates": [{"id", "fingerprint", "metadata",
      "distance", "similarity", "reason"}]}``: the rule applied to one text, atomically with the
      add; ``add`` is ``"if_new"`` (add only a text that duplicates nothing), ``"always"`` or
      ``"never"`` (a pure lookup; ``id`` may be omitted). ``reason`` is ``"exact_duplicate"``,
      ``"whitespace_duplicate"``, ``"near_duplicate"`` or ``"contained"``; ``similarity`` the verified Jaccard (``None`` in a
      simhash store).
    - ``check_batch(texts, ids=None, add="if_new", metadata=None, k=3) -> [dict, ...]``: the same
      for many texts in order, each also against the earlier added texts of the batch, as one
      atomic step.
    - simhash stores: ``add(id, fingerprint, metadata=None) -> replaced``;
      ``add_batch(ids, fingerprints)``; ``check_and_add(id, fingerprint, k, always_add=False,
      metadata=None) -> {"duplicates", "added", "replaced"}``
    - ``search(fingerprint, k, limit=0) -> [{"id", "fingerprint", "metadata", "distance"}]``;
      ``metadata`` is ``None`` when the document has none, else ``str`` (the JSON text
      ``neardup index add`` stored; ``bytes`` only for metadata given as non-UTF-8 bytes)
    - ``get(id)`` (``KeyError`` if absent), ``remove(id)``, ``flush()``, ``compact()``,
      ``close()``.
    - ``stats()``: a dict with the keys of ``GET /v1/stats`` (docs/api.md): ``documents``,
      ``segments``, ``bits``, ``indexed_k`` (the largest k the index tables serve; ``max_k`` is its
      deprecated old name, still present for one release), ``rule``, ...
    """

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_store(path: str, **options: Any) -> Store:
    """Opens (or creates) the store in directory ``path``; see :class:`Store`."""
    return Store(path, **options)


def shingles(texts: Sequence[str], *, t2s: bool = True, threads: int = 0) -> list:
    """The sorted distinct 32-bit shingle hashes dedup verifies pairs with, one array per text."""
    return _neardup._Shingler(t2s).batch(texts, threads)


# ---- dedup ---------------------------------------------------------------------------------------

# A removed document's reason (clusters.jsonl's "reason"): linked to the kept one by the pair
# rule's exact_duplicate, near_duplicate, contained or edited, or through another member.
_REASONS = ("exact_duplicate", "near_duplicate", "contained", "edited", "chained")


class DedupResult:
    """What a dedup run decided.

    - ``clusters``: list of dicts as in ``clusters.jsonl`` (``cluster``, ``size``, ``kept`` and
      ``removed`` members with ``id``, ``index`` (position in the input), ``bytes``, ``distance``,
      ``reason``, ``via``, ``distance_to_via``, ``similarity_to_via``);
    - ``keep`` / ``remove``: ids in input order; ``removed``: a bool per fingerprinted document;
    - ``summary``: the ``summary.json`` of ``neardup dedup``; ``k``: the distance used.
    - ``clusters_frame()`` / ``decisions_frame()``: the same as pandas DataFrames;
    - ``report(path)``: the self-contained HTML page of ``neardup report``.
    """

    def __init__(self, ids: List[str], index: List[int], fingerprints: List[str],
                 sizes: List[int], removed: List[bool], clusters_raw: list, k: int,
                 summary: dict, warnings: Optional[List[str]] = None,
                 locations: Optional[List[str]] = None, output: Optional[str] = None,
                 texts: Optional[Callable[[List[Tuple[str, str]]], list]] = None) -> None:
        # Where the report finds each document: its "file:line" (or row number) and, for
        # in-memory rows, a callable that returns the texts of (id, location) pairs.
        self._locations = locations if locations is not None else [str(i) for i in index]
        self._output = output
        self._texts = texts
        self.ids = ids
        self.index = index
        self.k = k
        self.summary = summary
        self.warnings = warnings or []
        self.removed = removed
        self.keep = [i for i, r in zip(ids, removed) if not r]
        self.remove = [i for i, r in zip(ids, removed) if r]
        self.clusters = []
        for number, (kept, members) in enumerate(clusters_raw):
            entry = {
                "cluster": number,
                "size": len(members) + 1,
                "kept": {"id": ids[kept], "index": index[kept], "bytes": sizes[kept],
                         "fingerprint": fingerprints[kept]},
                "removed": [],
            }
            for doc, dist, via, dist_via, sim_via, reason in members:
                member = {"id": ids[doc], "index": index[doc], "bytes": sizes[doc],
                          "distance": dist, "reason": reason, "via": ids[via],
                          "distance_to_via": dist_via}
                if sim_via is not None:
                    member["similarity_to_via"] = sim_via
                entry["removed"].append(member)
            self.clusters.append(entry)

    def __repr__(self) -> str:
        return (f"DedupResult({len(self.ids)} documents, {len(self.clusters)} clusters, "
                f"{len(self.remove)} removed, k={self.k})")

    def clusters_frame(self):
        """One row per cluster member: cluster, id, index, kept, distance, reason, via, ..."""
        return _clusters_frame(self.clusters, "index")

    def decisions_frame(self):
        """One row per fingerprinted document: id, index, keep (bool)."""
        import pandas as pd

        return pd.DataFrame({"id": self.ids, "index": self.index,
                             "keep": [not r for r in self.removed]})

    def report(self, path: Union[str, "os.PathLike[str]"], *, force: bool = False,
               **options: Any) -> dict:
        """Writes the self-contained HTML page of ``neardup report`` (the library's, in process)
        to ``path`` and returns its counts. Options as the command's flags: ``max_clusters``
        (1000), ``max_members`` (10), ``max_text_bytes`` (4000), ``max_total_text_bytes``,
        ``sample`` (50), ``seed`` (1), ``title``. Texts come from the run's input files, or for
        :func:`dedup` over rows from those rows (kept by reference); the page says which are
        unavailable. ``force`` replaces an existing file.
        """
        if self._output and os.path.isfile(os.path.join(self._output, "clusters.jsonl")):
            return _neardup._write_report(os.fspath(path), self._output, "", "", None, options,
                                          force)
        lines = []
        for cluster in self.clusters:
            entry = dict(cluster)
            entry["kept"] = dict(cluster["kept"],
                                 location=self._locations[self._position(cluster["kept"])])
            entry["removed"] = [dict(m, location=self._locations[self._position(m)])
                                for m in cluster["removed"]]
            lines.append(json.dumps(entry, ensure_ascii=False))
        clusters = "\n".join(lines) + ("\n" if lines else "")
        return _neardup._write_report(os.fspath(path), "", json.dumps(self.summary), clusters,
                                      self._texts, options, force)

    def _position(self, member: dict) -> int:
        if not hasattr(self, "_position_of"):
            self._position_of = {doc_id: i for i, doc_id in enumerate(self.ids)}
        return self._position_of[member["id"]]


def _clusters_frame(clusters: list, place: str):
    """One row per member of clusters.jsonl's entries (``place``: the member key giving its
    position, "index" in process, "location" from neardup.dask)."""
    import pandas as pd

    rows = []
    for c in clusters:
        kept = c["kept"]
        rows.append({"cluster": c["cluster"], "id": kept["id"], place: kept.get(place),
                     "kept": True, "distance": 0, "reason": "kept", "via": None,
                     "distance_to_via": None, "similarity_to_via": None})
        for m in c["removed"]:
            rows.append({"cluster": c["cluster"], "id": m["id"], place: m.get(place),
                         "kept": False, "distance": m["distance"], "reason": m["reason"],
                         "via": m["via"], "distance_to_via": m["distance_to_via"],
                         "similarity_to_via": m.get("similarity_to_via")})
    return pd.DataFrame(rows, columns=["cluster", "id", place, "kept", "distance", "reason", "via",
                                       "distance_to_via", "similarity_to_via"])


def _result_from_report(report: dict, index: List[int], output: Optional[str] = None,
                        texts: Optional[Callable] = None) -> DedupResult:
    bits = report["bits"]
    hi, lo = report["hi"], report["lo"]
    fingerprints = [to_hex((int(h) << 64) | int(l) if bits == 128 else int(l), bits)
                    for h, l in zip(hi, lo)]
    files = report["input_files"]
    locations = [files[f] + (f":{line}" if line > 0 else "") if f < len(files) else "?"
                 for f, line in zip(report["file_index"].tolist(), report["line"].tolist())]
    return DedupResult(list(report["ids"]), index, fingerprints,
                       [int(b) for b in report["bytes"]], [bool(r) for r in report["removed"]],
                       report["clusters"], report["k"], json.loads(report["summary"]),
                       report.get("warnings"), locations, output, texts)


def dedup_files(inputs: Sequence[str], output: Optional[str] = None, *, force: bool = False,
                write_kept: Optional[str] = None, json: bool = False,
                **options: Any) -> DedupResult:
    """``neardup dedup INPUT... [-o output]`` in process: the same reader, stages and outputs.

    ``output``: the directory for clusters.jsonl, keep.txt, remove.txt and summary.json (as
    ``-o``). ``force``: replace existing output files (as ``--force``; without it an existing one
    raises FileExistsError before any work). ``write_kept``: also write the inputs without the
    removed documents to this file (as ``--write-kept``; compressed by its extension .gz, .zst,
    .xz). ``json``: also print the summary as one JSON object on standard output (as ``--json``).
    No output is ever written over a file the run reads (ValueError). Other options are the flags
    of ``neardup dedup`` (see :func:`dedup`).

    ``index`` in the result is the document's line number (JSONL) minus one.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    report = _neardup._dedup_files([os.fspath(p) for p in inputs], os.fspath(output or ""),
                                   options, {}, bool(force),
                                   os.fspath(write_kept) if write_kept else "")
    if json:
        print(_json.dumps(_json.loads(report["summary"]), separators=(",", ":")), flush=True)
    index = [int(line) - 1 if line > 0 else 0 for line in report["line"]]
    return _result_from_report(report, index, os.fspath(output) if output else None)


def _rows(documents: Any, id_field: str, text_field: str,
          score_field: str) -> Iterator[Tuple[Any, Any, Any]]:
    """(id, text, score) of each input row, in order."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency of the Debian setup
        pd = None
    if pd is not None and isinstance(documents, pd.DataFrame):
        if text_field not in documents.columns:
            raise ValueError(f"text_field: the DataFrame has no column {text_field!r}")
        texts = documents[text_field].tolist()
        ids = (documents[id_field].tolist() if id_field in documents.columns
               else [str(i) for i in documents.index])
        scores = (documents[score_field].tolist() if score_field and score_field in documents.columns
                  else [None] * len(texts))
        yield from zip(ids, texts, scores)
        return
    for position, item in enumerate(documents):
        if isinstance(item, (str, bytes)):
            yield str(position), item, None
        elif isinstance(item, dict):
            yield item.get(id_field, str(position)), item.get(text_field), item.get(score_field)
        else:
            try:
                doc_id, text = item[0], item[1]
            except (TypeError, IndexError, KeyError):
                raise TypeError(f"documents[{position}]: expected (id, text), a dict or a str, "
                                f"got {type(item).__name__}") from None
            yield doc_id, text, (item[2] if len(item) > 2 else None)


def _json_id(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item"):  # numpy scalars
        return _json_id(value.item())
    return str(value)


def dedup(documents: Any, **options: Any) -> DedupResult:
    """Clusters near-duplicate documents and decides which to keep, exactly as ``neardup dedup``.

    ``documents``: a pandas DataFrame (columns ``id_field`` / ``text_field``, default ``id`` and
    ``text``; without an id column the index is the id), or an iterable of ``(id, text)`` pairs,
    dicts, or plain strings (ids ``"0"``, ``"1"``, ...). Options are the flags of ``neardup dedup``:
    ``threshold`` (shingle Jaccard of a duplicate, 0.5), ``candidates`` ("lsh+simhash" | "lsh" |
    "simhash"; the command's default), ``bands`` / ``rows`` (0 = from the threshold), ``bucket_window`` (64), ``k`` (the
    SimHash join distance, 3), ``verify`` (None = the threshold; 0 = off), ``containment`` (0.9;
    the ``contained`` reason, 0 = off), ``edited`` (0.8, 0 = off; the ``edited`` reason: unit Jaccard
    at least this, with a shingle Jaccard of at least ``edited_min_jaccard``, 0.45), ``keep`` ("first" |
    "longest" | "field:NAME"), ``bits``, ``tokenizer``, ``shingle``, ``top_k``, ``no_t2s``, ...
    ``threads`` (0 = all cores), ``temp_dir`` (where the run's unlinked temporary files go, as
    ``--temp-dir``; None = ``$TMPDIR``, else /tmp).

    Rows whose text is not a string, or is empty or only whitespace, are skipped as the command
    skips them (counted in ``summary["skipped_by_reason"]``). ``index`` in the result is the row's
    position in the input. An id shared by several rows is qualified with the row's position as
    ``"id@row:N"`` (the command's ``id@file:line``) in ``ids``, ``keep`` and ``remove``, and
    counted in ``summary["duplicate_ids"]``, so filtering on ``remove`` never drops a kept row.
    """
    resolved = _neardup._resolve_dedup_options(options)  # validates before any work
    score_field = resolved["keep_field"]
    # The rows become one JSONL buffer in memory that the library's dedup reads as an input (no
    # file): the reader's rules (skips, ids, scores) are the command's, byte for byte.
    lines = []
    for doc_id, text, score in _rows(documents, resolved["id_field"], resolved["text_field"],
                                     score_field):
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        record = {"id": _json_id(doc_id), "text": text if isinstance(text, str) else None}
        if score_field:
            record[score_field] = _json_id(score)
        lines.append(json.dumps(record, ensure_ascii=False))
    name = "<documents>.jsonl"
    buffer = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass") if lines else b""
    del lines
    opts = dict(options)
    opts["id_field"] = "id"
    opts["text_field"] = "text"
    report = _neardup._dedup_files([name], "", opts, {name: buffer})
    del buffer
    index = [int(line) - 1 for line in report["line"]]
    ids = list(report["ids"])
    prefix = name + ":"
    for i, doc_id in enumerate(ids):
        if doc_id.startswith(prefix):  # rows without an id: their position, not the input's name
            ids[i] = str(index[i])
        elif doc_id.endswith(f"@{prefix}{index[i] + 1}"):
            # A shared id, qualified like the command's id@file:line with the row's position.
            ids[i] = f"{doc_id[:-len(prefix) - len(str(index[i] + 1))]}row:{index[i]}"
    report["ids"] = ids
    place = re.compile(re.escape(prefix) + r"(\d+)")
    report["warnings"] = [place.sub(lambda m: f"row:{int(m.group(1)) - 1}", w)
                          for w in report.get("warnings") or []]
    # The report reads the texts from the rows themselves (by position), when they can be
    # indexed again: a DataFrame or a sequence, not a one-shot iterator.
    texts = None
    if _indexable(documents):
        text_field = resolved["text_field"]

        def texts(wanted: list) -> list:
            return [_text_at(documents, int(location.rsplit(":", 1)[-1]) - 1, text_field)
                    for _, location in wanted]
    return _result_from_report(report, index, None, texts)


def _indexable(documents: Any) -> bool:
    try:
        import pandas as pd
        if isinstance(documents, pd.DataFrame):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(documents, (list, tuple))


def _text_at(documents: Any, position: int, text_field: str) -> Optional[str]:
    """The text of row ``position`` as dedup() read it (None if it is not a string any more)."""
    try:
        import pandas as pd
        if isinstance(documents, pd.DataFrame):
            value = documents[text_field].iloc[position]
        else:
            item = documents[position]
            if isinstance(item, (str, bytes)):
                value = item
            elif isinstance(item, dict):
                value = item.get(text_field)
            else:
                value = item[1]
    except (IndexError, KeyError, TypeError):
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def __getattr__(name: str) -> Any:
    if name == "dask":
        import importlib

        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module 'neardup' has no attribute {name!r}")
