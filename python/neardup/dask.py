"""neardup.dask: the stages of ``neardup dedup`` as Dask tasks, for corpora past one machine.

``dedup(data, text="text", id="id", output=None, **options)`` takes a Dask DataFrame (or a Dask
Bag of dicts or ``(id, text)`` pairs) and gives exactly the clusters and kept documents that
``neardup dedup`` gives on the same rows in the same order (partition order, then row order, is
the canonical order the command's ties are broken by):

1. per partition: fingerprint (the library's Fingerprinter, all cores of the worker), the text
   length, the content hash and the whitespace-free hash of every document, and the MinHash LSH
   band keys of its verification shingles (neardup/minhash_lsh.h, the library's MinHashLsh);
2. per partition: candidate keys of three kinds: the LSH band keys (band, key); for the SimHash
   join, pigeonhole keys (two fingerprints within Hamming distance k differ in at most k of
   ``blocks = k + t`` bit blocks, so they agree on at least t of them: each document emits one
   key per t-subset of blocks, the subset and its block values hashed); the whitespace-free hash;
3. shuffle by key; per bucket: the LSH bucket rule (the bucket's documents sorted, each paired
   with the next ``bucket_window``, the library's BucketPairs), the pairs within k (each reported
   once, by the subset of its first t agreeing blocks), and for equal whitespace-free hashes each
   document with the first one;
4. distinct pairs (a pre-verified whitespace pair wins, as in the command);
5. verification: the documents of unverified pairs are looked up per partition and only their
   shingles leave the partition; pairs are joined with both documents' facts and shingle sets and
   scored with the shingle Jaccard (exact duplicates score 1); pairs below ``verify`` are dropped;
6. connected components across partitions: min-label propagation with hooking and pointer
   jumping over the accepted pairs, one shuffle of messages per round (``_components``);
7. the keep decision per cluster: members (with their facts) and pairs grouped by component, the
   library's BuildClusters over each group where it lands; clusters numbered in order of their
   kept document by a count per input partition;
8. the keep/remove decision of every document, per input partition, written to JSONL (or Parquet
   when pyarrow or fastparquet is installed), and clusters.jsonl written per partition and joined.

Only counts (a few per partition) and the verification stage's list of unverified document
numbers pass through the client; ``result.clusters`` and ``result.remove`` gather the answer
there only when asked for.

The candidate stages are those of ``neardup dedup`` (``candidates``: "lsh+simhash", "lsh" or
"simhash", the command's default when not given), with the same parameters (``threshold``, ``bands``, ``rows``, ``bucket_window``,
``k``). Every stage is a pure function of its inputs, so a worker lost mid-run only makes Dask
recompute its tasks; the answer does not change.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from math import comb
from typing import Any, Dict, Optional

import numpy as np
import pandas as pd

from . import _neardup, to_hex

__all__ = ["dedup", "plan_blocks", "DaskDedupResult"]

# The options of the pair rule (verification) among dedup's keywords.
_RULE_OPTIONS = {"threshold", "verify", "containment", "containment_min_shingles",
                 "containment_min_ratio"}
_FINGERPRINT_OPTIONS = {
    "profile", "tokenizer", "shingle", "ngram", "weighting", "top_k", "bits", "hash", "no_nfkc",
    "no_casefold", "no_case_fold", "no_t2s", "no_whitespace_folding", "keep_markup",
    "no_strip_markup", "replace_invalid_utf8", "idf", "jieba_dir",
}

_LSH: Dict[tuple, Any] = {}


def _lsh(params: tuple) -> Any:
    engine = _LSH.get(params)
    if engine is None:
        engine = _LSH[params] = _neardup.MinHashLsh(*params)
    return engine

_ASCII_WHITESPACE = " \t\n\r\f\v"

# Per-process caches of engines built from option dicts (workers reuse them across tasks).
_FINGERPRINTERS: Dict[str, Any] = {}
_SHINGLERS: Dict[bool, Any] = {}


def _fingerprinter(options: dict) -> Any:
    key = json.dumps(options, sort_keys=True)
    engine = _FINGERPRINTERS.get(key)
    if engine is None:
        engine = _FINGERPRINTERS[key] = _neardup.Fingerprinter(**options)
    return engine


def _shingler(t2s: bool) -> Any:
    engine = _SHINGLERS.get(t2s)
    if engine is None:
        engine = _SHINGLERS[t2s] = _neardup._Shingler(t2s)
    return engine


def plan_blocks(n: int, k: int, bits: int = 64) -> tuple:
    """(blocks, t) for the candidate keys of n documents at distance k: the cheapest of
    blocks = k + t, t = 1..6, by an estimate of key records (shuffle) plus comparisons in buckets
    of n / 2^(t * bits / blocks) random fingerprints."""
    if k == 0:
        return 1, 1
    best = None
    for t in range(1, 7):
        blocks = k + t
        if blocks > bits:
            break
        keys = comb(blocks, t)
        if keys > 256:
            break
        key_bits = t * (bits // blocks)
        bucket = max(1.0, n / 2.0 ** key_bits)
        cost = n * keys * 8.0 + keys * (2.0 ** key_bits) * bucket * bucket / 2.0
        if best is None or cost < best[0]:
            best = (cost, blocks, t)
    return best[1], best[2]


# ---- stage 1: records per partition --------------------------------------------------------------

_RECORD_COLUMNS = {
    "gid": "u8", "id": "O", "hi": "u8", "lo": "u8", "bytes": "u8", "normalized_bytes": "u8",
    "content_hash": "u8",
    "squeezed_hash": "u8", "score": "f8",
}


_LSH_META = {"bucket": "u8", "gid": "u8"}


def _records(frame: pd.DataFrame, partition: int, text: str, id: str, score_field: str,
             fingerprint_options: dict, lsh_params: Optional[tuple],
             keep_longest: bool = False) -> tuple:
    """The dedup record of every readable document of one partition (skips as the reader does),
    and its LSH records (bucket = band << 32 | band key, document) when the LSH stage runs."""
    texts = frame[text].tolist() if text in frame.columns else [None] * len(frame)
    ids = frame[id].tolist() if id in frame.columns else [None] * len(frame)
    scores = (frame[score_field].tolist() if score_field and score_field in frame.columns
              else [None] * len(frame))
    rows, kept_texts = [], []
    for row, value in enumerate(texts):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                continue  # invalid UTF-8: skipped
        if not isinstance(value, str) or value.strip(_ASCII_WHITESPACE) == "":
            continue  # missing, non-string, empty or blank text: skipped
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            continue  # lone surrogates cannot be UTF-8: skipped
        rows.append(row)
        kept_texts.append(value)
    engine = _fingerprinter(fingerprint_options)
    rec = engine._records(kept_texts, normalized=keep_longest)
    ok = rec["ok"]
    rows = np.asarray(rows, dtype=np.uint64)[ok]
    out_ids = []
    for row in rows.tolist():
        value = ids[row]
        out_ids.append(_id_text(value, partition, row))
    score_values = []
    for row in rows.tolist():
        value = scores[row]
        score_values.append(float(value) if isinstance(value, (int, float, np.number))
                            and not isinstance(value, bool) and math.isfinite(float(value))
                            else math.nan)
    gids = (np.uint64(partition) << np.uint64(32)) | rows
    records = pd.DataFrame({
        "gid": gids,
        "id": pd.Series(out_ids, dtype=object),
        "hi": rec["hi"][ok], "lo": rec["lo"][ok], "bytes": rec["bytes"][ok],
        "normalized_bytes": rec["normalized_bytes"][ok],
        "content_hash": rec["content_hash"][ok], "squeezed_hash": rec["squeezed_hash"][ok],
        "score": np.asarray(score_values, dtype=np.float64),
    })
    if lsh_params is None:
        return records, pd.DataFrame({c: pd.Series(dtype=t) for c, t in _LSH_META.items()})
    ok_texts = [t for t, good in zip(kept_texts, ok.tolist()) if good]
    keys, has = _lsh(lsh_params).band_keys(ok_texts) if ok_texts else \
        (np.zeros((0, lsh_params[1] or 1), np.uint32), np.zeros(0, bool))
    keys = keys[has]
    bands = keys.shape[1]
    band = np.tile(np.arange(bands, dtype=np.uint64), len(keys))
    buckets = (band << np.uint64(32)) | keys.reshape(-1).astype(np.uint64)
    lsh = pd.DataFrame({"bucket": buckets, "gid": np.repeat(gids[has], bands)})
    return records, lsh


def _lsh_pairs(frame: pd.DataFrame, window: int) -> pd.DataFrame:
    a, b = _neardup._lsh_bucket_pairs(frame["bucket"].to_numpy(np.uint64),
                                      frame["gid"].to_numpy(np.uint64), window)
    return pd.DataFrame({"a": a, "b": b, "distance": np.full(len(a), -1, np.int32),
                         "similarity": np.full(len(a), -1.0),
                         "reason": np.full(len(a), _NEAR_DUPLICATE, np.uint8)})


def _id_text(value: Any, partition: int, row: int) -> str:
    """The id as the command prints it: strings as they are, integers in decimal."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (bool, np.bool_)) or value is None:
        return f"{partition}:{row}"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            return f"{partition}:{row}"
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return str(value)


# ---- stages 2-4: candidate keys, buckets, distinct pairs -----------------------------------------

_KEY_META = {"key": "u8", "combo": "u4", "gid": "u8", "hi": "u8", "lo": "u8"}
# reason: the pair rule's DuplicateReason (neardup/pair_rule.h; _neardup._REASONS): 2 whitespace,
# 3 near_duplicate (also for pairs not yet verified, or when verification is off), 4 contained.
_PAIR_META = {"a": "u8", "b": "u8", "distance": "i4", "similarity": "f8", "reason": "u1"}
_WHITESPACE, _NEAR_DUPLICATE = 2, 3


def _hamming_keys(rec: pd.DataFrame, bits: int, blocks: int, t: int) -> pd.DataFrame:
    hi = rec["hi"].to_numpy(np.uint64)
    lo = rec["lo"].to_numpy(np.uint64)
    rows, combos, keys = _neardup._hamming_keys(hi, lo, bits, blocks, t)
    rows = rows.astype(np.int64)
    return pd.DataFrame({"key": keys, "combo": combos, "gid": rec["gid"].to_numpy(np.uint64)[rows],
                         "hi": hi[rows], "lo": lo[rows]})


def _bucket_pairs(keys: pd.DataFrame, bits: int, blocks: int, t: int, k: int) -> pd.DataFrame:
    a, b, d = _neardup._hamming_bucket_pairs(
        keys["key"].to_numpy(np.uint64), keys["combo"].to_numpy(np.uint32),
        keys["gid"].to_numpy(np.uint64), keys["hi"].to_numpy(np.uint64),
        keys["lo"].to_numpy(np.uint64), bits, blocks, t, k)
    return pd.DataFrame({"a": a, "b": b, "distance": d, "similarity": np.full(len(a), -1.0),
                         "reason": np.full(len(a), _NEAR_DUPLICATE, np.uint8)})


def _squeezed_keys(rec: pd.DataFrame) -> pd.DataFrame:
    return rec[["squeezed_hash", "gid", "hi", "lo"]]


def _squeezed_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """Each document paired with the first (smallest number) of equal whitespace-free hash."""
    if len(frame) == 0:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _PAIR_META.items()})
    frame = frame.sort_values(["squeezed_hash", "gid"], kind="stable")
    first = frame.groupby("squeezed_hash", sort=False).transform("first")
    others = frame["gid"].to_numpy(np.uint64) != first["gid"].to_numpy(np.uint64)
    a = first["gid"].to_numpy(np.uint64)[others]
    b = frame["gid"].to_numpy(np.uint64)[others]
    x = first["lo"].to_numpy(np.uint64)[others] ^ frame["lo"].to_numpy(np.uint64)[others]
    y = first["hi"].to_numpy(np.uint64)[others] ^ frame["hi"].to_numpy(np.uint64)[others]
    distance = _popcount(x) + _popcount(y)
    return pd.DataFrame({"a": a, "b": b, "distance": distance.astype(np.int32),
                         "similarity": np.ones(len(a)),
                         "reason": np.full(len(a), _WHITESPACE, np.uint8)})


def _popcount(values: np.ndarray) -> np.ndarray:
    bytes_view = values.astype("<u8").view(np.uint8).reshape(-1, 8)
    return np.unpackbits(bytes_view, axis=1).sum(axis=1).astype(np.int64)


def _distinct_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """One entry per (a, b); a pre-verified (similarity 1) entry wins, as in the command."""
    frame = frame.sort_values(["a", "b", "similarity"], ascending=[True, True, False],
                              kind="stable")
    return frame.drop_duplicates(["a", "b"], keep="first")


# ---- stage 5: verification ----------------------------------------------------------------------

def _shingle_rows(frame: pd.DataFrame, needed_rows: np.ndarray, partition: int, text: str,
                  t2s: bool) -> pd.DataFrame:
    """Shingle sets (as bytes of sorted uint32) of the needed rows of one partition only."""
    texts = frame[text].tolist()
    chosen = [texts[int(r)] for r in needed_rows]
    chosen = [t.decode("utf-8") if isinstance(t, bytes) else t for t in chosen]
    sets = _shingler(t2s).batch(chosen) if chosen else []
    return pd.DataFrame({
        "gid": (np.uint64(partition) << np.uint64(32)) | needed_rows.astype(np.uint64),
        "shingles": pd.Series([s.astype(np.uint32).tobytes() for s in sets], dtype=object),
    })


def _score_pairs(frame: pd.DataFrame, verify: bool, rule_options: dict) -> pd.DataFrame:
    """Distance of every joined pair and, when verifying, the pair rule's decision
    (neardup/pair_rule.h, the command's one implementation): its reason and similarity; a
    rejected pair gets similarity -2."""
    x = frame["lo_a"].to_numpy(np.uint64) ^ frame["lo_b"].to_numpy(np.uint64)
    y = frame["hi_a"].to_numpy(np.uint64) ^ frame["hi_b"].to_numpy(np.uint64)
    distance = (_popcount(x) + _popcount(y)).astype(np.int32)
    similarity = np.full(len(frame), -1.0)
    reason = np.full(len(frame), _NEAR_DUPLICATE, np.uint8)
    if verify and len(frame):
        # Whitespace-only copies were paired (and scored) by their whitespace-free hash already:
        # each side's hash here is its own document number, so the rule never matches them again.
        facts = {side: np.stack([frame[f"content_hash_{side}"].to_numpy(np.uint64),
                                 frame[f"bytes_{side}"].to_numpy(np.uint64),
                                 frame[side].to_numpy(np.uint64)], axis=1)
                 for side in ("a", "b")}
        # The shingle sets travel as bytes of sorted uint32; the library reads them as they are.
        decided = _neardup._decide_pairs(facts["a"], frame["shingles_a"].tolist(), facts["b"],
                                         frame["shingles_b"].tolist(), rule_options, None, 0)
        reason = np.asarray(decided["reason"], np.uint8)
        similarity = np.where(reason > 0, np.asarray(decided["similarity"], np.float64), -2.0)
    return pd.DataFrame({"a": frame["a"].to_numpy(np.uint64), "b": frame["b"].to_numpy(np.uint64),
                         "distance": distance, "similarity": similarity.astype(np.float64),
                         "reason": reason})


# ---- result -------------------------------------------------------------------------------------

class DaskDedupResult:
    """The answer of :func:`dedup`.

    - ``clusters``: a list of dicts like ``neardup dedup``'s ``clusters.jsonl`` (``location`` is
      ``"partition:row"``), gathered from the cluster when first asked for;
      ``clusters_frame()`` one row per member as a pandas DataFrame;
    - ``members``: the same as a Dask DataFrame, one row per document of a cluster (``cluster``,
      ``kept``, ``reason``, ``via``, ...), partitioned by the input partition of the kept document;
    - ``decisions``: a Dask DataFrame ``id, partition, row, keep`` of every document;
    - ``remove``: the removed ids (a set, gathered when first asked for); ``summary``: counts and
      the parameters used;
    - ``output``: the directory written, when one was given.
    """

    def __init__(self, members, decisions, summary, output, bits):
        self.members = members
        self.decisions = decisions
        self.summary = summary
        self.output = output
        self._bits = bits
        self._clusters = None
        self._remove = None

    @property
    def clusters(self) -> list:
        if self._clusters is None:
            self._clusters = _gather_clusters(self.members, self._bits)
        return self._clusters

    @property
    def remove(self) -> set:
        if self._remove is None:
            removed = self.members[~self.members["kept"]]["id"].compute()
            self._remove = set(removed.tolist())
        return self._remove

    def __repr__(self) -> str:
        return (f"DaskDedupResult({self.summary['documents_fingerprinted']} documents, "
                f"{self.summary['clusters']} clusters, "
                f"{self.summary['documents_removed']} removed, "
                f"k={self.summary['k']})")

    def clusters_frame(self) -> pd.DataFrame:
        rows = []
        for c in self.clusters:
            rows.append({"cluster": c["cluster"], "id": c["kept"]["id"], "kept": True,
                         "distance": 0, "reason": "kept", "via": None, "distance_to_via": None,
                         "similarity_to_via": None})
            for m in c["removed"]:
                rows.append({"cluster": c["cluster"], "id": m["id"], "kept": False,
                             "distance": m["distance"], "reason": m["reason"], "via": m["via"],
                             "distance_to_via": m["distance_to_via"],
                             "similarity_to_via": m.get("similarity_to_via")})
        return pd.DataFrame(rows, columns=["cluster", "id", "kept", "distance", "reason", "via",
                                           "distance_to_via", "similarity_to_via"])


def _in_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """values[i] in sorted_set, by binary search."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def _select(rec: pd.DataFrame, members: np.ndarray) -> pd.DataFrame:
    return rec[_in_sorted(rec["gid"].to_numpy(np.uint64), members)]


def _decide(rec: pd.DataFrame, removed: pd.DataFrame) -> pd.DataFrame:
    """Keep or remove every document of one input partition; ``removed`` holds the removed gids
    of that same partition."""
    gid = rec["gid"].to_numpy(np.uint64)
    gone = np.sort(removed["gid"].to_numpy(np.uint64))
    return pd.DataFrame({
        "id": rec["id"].to_numpy(object),
        "partition": (gid >> np.uint64(32)).astype(np.int64),
        "row": (gid & np.uint64(0xFFFFFFFF)).astype(np.int64),
        "keep": ~_in_sorted(gid, gone),
    })


# ---- stage 6: components and the keep decision, as Dask tasks ------------------------------------
#
# Frames are routed with explicit partition numbers (a "_partitions" column) so that two frames
# routed by the same key are co-partitioned and can be combined partition by partition:
# - by node: a mixing hash of the document number (gid) modulo the partition count;
# - by input partition: gid >> 32, the partition the document was read from (aligned with `rec`).

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_EDGE_META = {"a": "u8", "b": "u8", "distance": "i4", "similarity": "f8", "reason": "u1"}
_LABEL_META = {"node": "u8", "label": "u8"}
_MESSAGE_META = {"node": "u8", "value": "u8", "kind": "i1"}
_MEMBER_META = {
    "gid": "u8", "comp": "u8", "id": "O", "hi": "u8", "lo": "u8", "bytes": "u8",
    "normalized_bytes": "u8", "content_hash": "u8", "score": "f8",
}
_RESULT_META = {
    "gid": "u8", "id": "O", "kept_gid": "u8", "is_kept": "bool", "bytes": "u8", "hi": "u8",
    "lo": "u8", "distance": "i4", "via": "O", "distance_to_via": "i4", "similarity_to_via": "f8",
    "reason": "O",
}


def _node_partition(values: np.ndarray, nparts: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        mixed = values.astype(np.uint64) * _GOLDEN
    return ((mixed >> np.uint64(33)) % np.uint64(nparts)).astype(np.int64)


def _with_route(frame: pd.DataFrame, column: str, nparts: int, by_input: bool) -> pd.DataFrame:
    values = frame[column].to_numpy(np.uint64)
    route = ((values >> np.uint64(32)).astype(np.int64) if by_input
             else _node_partition(values, nparts))
    return frame.assign(_partitions=route)


def _drop_route(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="_partitions").reset_index(drop=True)


def _shuffle_method() -> str:
    """Dask's configured shuffle ("shuffle" in dask.config: "tasks", or "p2p" on newer Dask),
    else the task-based shuffle (the only one that works across processes on Dask 2022.12)."""
    import dask

    return dask.config.get("shuffle", None) or "tasks"


def _rearrange(frame, column: str, nparts: int, meta: dict, by_input: bool = False):
    """``frame`` moved so that partition i holds the rows whose ``column`` routes to i."""
    from dask.dataframe.shuffle import rearrange_by_column

    routed = frame.map_partitions(_with_route, column, nparts, by_input,
                                  meta={**meta, "_partitions": "i8"})
    moved = rearrange_by_column(routed, "_partitions", npartitions=nparts,
                                shuffle=_shuffle_method(), ignore_index=True)
    return moved.map_partitions(_drop_route, meta=meta)


def _lookup(labels: pd.DataFrame, nodes: np.ndarray) -> np.ndarray:
    """The label of each of ``nodes`` (all present in ``labels``, which is sorted by node)."""
    return labels["label"].to_numpy(np.uint64)[
        np.searchsorted(labels["node"].to_numpy(np.uint64), nodes)]


def _initial_labels(by_a: pd.DataFrame, by_b: pd.DataFrame) -> pd.DataFrame:
    nodes = np.unique(np.concatenate([by_a["a"].to_numpy(np.uint64),
                                      by_b["b"].to_numpy(np.uint64)]))
    return pd.DataFrame({"node": nodes, "label": nodes, "previous": nodes,
                         "changed": np.zeros(len(nodes), bool)})


def _messages(by_a: pd.DataFrame, by_b: pd.DataFrame, labels: pd.DataFrame,
              requests: pd.DataFrame, nparts: int) -> pd.DataFrame:
    """One round's outgoing messages of one node partition, routed to their destination:
    kind 0, "node may take label value": each edge end's label sent to the other end, the
    answers to pointer-jumping requests (the label of a node's label), and hooks (a node whose
    label fell from l to m offers m to l); kind 1, the requests of this partition's nodes whose
    label is another node (sent to that node's partition)."""
    a = by_a["a"].to_numpy(np.uint64)
    b = by_b["b"].to_numpy(np.uint64)
    asked = requests["value"].to_numpy(np.uint64)
    node = labels["node"].to_numpy(np.uint64)
    label = labels["label"].to_numpy(np.uint64)
    pending = node != label
    changed = labels["changed"].to_numpy(bool)
    to = np.concatenate([by_a["b"].to_numpy(np.uint64), by_b["a"].to_numpy(np.uint64),
                         requests["node"].to_numpy(np.uint64),
                         labels["previous"].to_numpy(np.uint64)[changed], label[pending]])
    value = np.concatenate([_lookup(labels, a), _lookup(labels, b), _lookup(labels, asked),
                            label[changed], node[pending]])
    kind = np.concatenate([np.zeros(len(to) - int(pending.sum()), np.int8),
                           np.ones(int(pending.sum()), np.int8)])
    return pd.DataFrame({"node": to, "value": value, "kind": kind,
                         "_partitions": _node_partition(to, nparts)})


def _apply_messages(labels: pd.DataFrame, incoming: pd.DataFrame) -> pd.DataFrame:
    """Each node's label lowered to the smallest label offered to it; ``changed`` marks those
    lowered, ``previous`` is the label before."""
    offers = incoming[incoming["kind"] == 0]
    node = labels["node"].to_numpy(np.uint64)
    label = labels["label"].to_numpy(np.uint64).copy()
    if len(offers):
        at = np.searchsorted(node, offers["node"].to_numpy(np.uint64))
        best = label.copy()
        np.minimum.at(best, at, offers["value"].to_numpy(np.uint64))
        changed = best < label
        label = best
    else:
        changed = np.zeros(len(node), bool)
    return pd.DataFrame({"node": node, "label": label,
                         "previous": labels["label"].to_numpy(np.uint64), "changed": changed})


def _requests(incoming: pd.DataFrame) -> pd.DataFrame:
    """The pointer-jumping requests received: (asking node, the label it asks about)."""
    asked = incoming[incoming["kind"] == 1]
    return pd.DataFrame({"node": asked["value"].to_numpy(np.uint64),
                         "value": asked["node"].to_numpy(np.uint64)})


def _components(edges, nparts: int, measure: Optional[dict] = None):
    """The connected component of every document that an accepted pair touches, as a Dask
    DataFrame (node, label) partitioned by node, label = the component's smallest document number
    (so the component of the command's canonical first document), the edges partitioned by
    their first end, and the number of rounds run. ``measure``: a dict that receives the in-memory
    bytes of the rows entering its shuffles (edges, and the messages of all rounds).

    Min-label propagation with hooking and pointer jumping: every round, each edge end offers its
    label to the other end, each node is offered its label's label (asked for the round before),
    and a node whose label fell from l to m offers m to l; a node takes the smallest offer.
    Labels are always members of the node's component and only decrease; when a round changes
    nothing every edge joins equal labels, so each component carries one label, its smallest
    member's (which never changes). One shuffle of messages per round; in the runs measured
    (docs/scale.md) the rounds grew with the logarithm of the longest chain, not with the number
    of partitions."""
    import dask
    import dask.dataframe as dd

    edges = edges[list(_EDGE_META)]
    by_a = _rearrange(edges, "a", nparts, _EDGE_META)
    by_b = _rearrange(edges[["a", "b"]], "b", nparts, {"a": "u8", "b": "u8"})
    by_a, by_b = dask.persist(by_a, by_b)
    if measure is not None:
        measure["component_edges"] = _nbytes(edges) + _nbytes(edges[["a", "b"]])
        measure["component_messages"] = 0
    state_meta = {**_LABEL_META, "previous": "u8", "changed": "bool"}
    labels = dd.map_partitions(_initial_labels, by_a, by_b, meta=state_meta,
                               align_dataframes=False)
    requests = labels.map_partitions(lambda f: pd.DataFrame({"node": pd.Series(dtype="u8"),
                                                             "value": pd.Series(dtype="u8")}),
                                     meta={"node": "u8", "value": "u8"})
    labels, requests = dask.persist(labels, requests)
    from dask.dataframe.shuffle import rearrange_by_column

    rounds = 0
    while True:
        rounds += 1
        outgoing = dd.map_partitions(_messages, by_a, by_b, labels, requests, nparts,
                                     meta={**_MESSAGE_META, "_partitions": "i8"},
                                     align_dataframes=False)
        incoming = rearrange_by_column(outgoing, "_partitions", npartitions=nparts,
                                       shuffle=_shuffle_method(), ignore_index=True)
        incoming = incoming.map_partitions(_drop_route, meta=_MESSAGE_META).persist()
        if measure is not None:
            measure["component_messages"] += _nbytes(incoming)
        updated = dd.map_partitions(_apply_messages, labels, incoming, meta=state_meta,
                                    align_dataframes=False)
        requests = incoming.map_partitions(_requests, meta={"node": "u8", "value": "u8"})
        updated, requests = dask.persist(updated, requests)
        changed = int(updated["changed"].sum().compute())
        labels = updated
        if changed == 0:
            return labels[["node", "label"]], by_a, rounds


def _member_facts(rec: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """The dedup records of one input partition's documents that are in a component, with their
    component."""
    labels = labels.sort_values("node")
    gid = rec["gid"].to_numpy(np.uint64)
    inside = _in_sorted(gid, labels["node"].to_numpy(np.uint64))
    chosen = rec[inside]
    return chosen[["gid"]].assign(comp=_lookup(labels, gid[inside])).join(
        chosen.drop(columns="gid"))[list(_MEMBER_META)].reset_index(drop=True)


def _edge_components(by_a: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    return by_a.assign(comp=_lookup(labels, by_a["a"].to_numpy(np.uint64)))


def _keep_per_cluster(members: pd.DataFrame, edges: pd.DataFrame, bits: int,
                      keep: str) -> pd.DataFrame:
    """The library's BuildClusters over the whole clusters of one cluster partition (all their
    members and pairs are here), documents numbered in canonical (gid) order: which member is
    kept and, for each removed one, the neighbour that linked it."""
    if len(members) == 0:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _RESULT_META.items()})
    members = members.sort_values("gid").reset_index(drop=True)
    gid = members["gid"].to_numpy(np.uint64)
    edges = edges.sort_values(["a", "b"])
    a = np.searchsorted(gid, edges["a"].to_numpy(np.uint64)).astype(np.uint32)
    b = np.searchsorted(gid, edges["b"].to_numpy(np.uint64)).astype(np.uint32)
    raw = _neardup._clusters(members["hi"].to_numpy(np.uint64), members["lo"].to_numpy(np.uint64),
                             bits, members["bytes"].to_numpy(np.uint64),
                             members["normalized_bytes"].to_numpy(np.uint64),
                             members["content_hash"].to_numpy(np.uint64),
                             members["score"].to_numpy(np.float64), a, b,
                             edges["distance"].to_numpy(np.int32),
                             edges["similarity"].to_numpy(np.float64), keep,
                             edges["reason"].to_numpy(np.uint8))
    ids = members["id"].tolist()
    n = len(members)
    kept_of = np.zeros(n, np.int64)
    is_kept = np.zeros(n, bool)
    distance = np.zeros(n, np.int32)
    via = [None] * n
    distance_to_via = np.zeros(n, np.int32)
    similarity_to_via = np.full(n, -1.0)
    reason = ["kept"] * n
    for kept, removed_members in raw:
        kept_of[kept] = kept
        is_kept[kept] = True
        for doc, dist, through, dist_via, sim_via, why in removed_members:
            kept_of[doc] = kept
            distance[doc] = dist
            via[doc] = ids[through]
            distance_to_via[doc] = dist_via
            similarity_to_via[doc] = sim_via
            reason[doc] = why
    return pd.DataFrame({
        "gid": gid, "id": members["id"].to_numpy(object), "kept_gid": gid[kept_of],
        "is_kept": is_kept, "bytes": members["bytes"].to_numpy(np.uint64),
        "hi": members["hi"].to_numpy(np.uint64), "lo": members["lo"].to_numpy(np.uint64),
        "distance": distance, "via": pd.Series(via, dtype=object),
        "distance_to_via": distance_to_via, "similarity_to_via": similarity_to_via,
        "reason": pd.Series(reason, dtype=object),
    })


def _cluster_members(rec, labels, by_a, nparts: int, bits: int, keep: str,
                     measure: Optional[dict] = None):
    """One row per document of a cluster (kept or removed, and why), as a Dask DataFrame:
    members and pairs are grouped by component, each group decided where it lands."""
    import dask.dataframe as dd

    labels_by_input = _rearrange(labels, "node", rec.npartitions, _LABEL_META, by_input=True)
    facts = dd.map_partitions(_member_facts, rec, labels_by_input, meta=_MEMBER_META,
                              align_dataframes=False)
    edges = dd.map_partitions(_edge_components, by_a, labels,
                              meta={**_EDGE_META, "comp": "u8"}, align_dataframes=False)
    if measure is not None:
        measure["keep_decision"] = _nbytes(labels) + _nbytes(facts) + _nbytes(edges)
    facts = _rearrange(facts, "comp", nparts, _MEMBER_META)
    edges = _rearrange(edges, "comp", nparts, {**_EDGE_META, "comp": "u8"})
    return dd.map_partitions(_keep_per_cluster, facts, edges, bits, keep, meta=_RESULT_META,
                             align_dataframes=False)


_NUMBERED_META = {**_RESULT_META, "cluster": "i8"}


def _number_clusters(rows: pd.DataFrame, first: int) -> pd.DataFrame:
    """The rows of the clusters whose kept documents are in one input partition, in output order
    (kept document, then its removed members in canonical order), clusters numbered from
    ``first`` (the clusters of the earlier partitions)."""
    rows = rows.sort_values(["kept_gid", "is_kept", "gid"], ascending=[True, False, True],
                            kind="stable").reset_index(drop=True)
    kept = rows["is_kept"].to_numpy(bool)
    return rows.assign(cluster=first + np.cumsum(kept) - 1)


def _cluster_entries(rows: pd.DataFrame, bits: int) -> list:
    """clusters.jsonl's entries of some numbered rows (whole clusters, in output order)."""
    entries = []
    entry = None

    def location(g):
        return f"{g >> 32}:{g & 0xFFFFFFFF}"

    for row in rows.itertuples(index=False):
        gid = int(row.gid)
        if row.is_kept:
            fp = (int(row.hi) << 64) | int(row.lo) if bits == 128 else int(row.lo)
            entry = {"cluster": int(row.cluster), "size": 1,
                     "kept": {"id": row.id, "location": location(gid), "bytes": int(row.bytes),
                              "fingerprint": to_hex(fp, bits)},
                     "removed": []}
            entries.append(entry)
            continue
        member = {"id": row.id, "location": location(gid), "bytes": int(row.bytes),
                  "distance": int(row.distance), "reason": row.reason, "via": row.via,
                  "distance_to_via": int(row.distance_to_via)}
        if row.similarity_to_via >= 0:
            member["similarity_to_via"] = float(row.similarity_to_via)
        entry["removed"].append(member)
        entry["size"] += 1
    return entries


def _write_cluster_part(rows: pd.DataFrame, path: str, bits: int) -> int:
    with open(path, "w", encoding="utf-8") as f:
        for entry in _cluster_entries(rows, bits):
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return len(rows)


_MEMBERS_META = {
    "cluster": "i8", "id": "O", "kept": "bool", "partition": "i8", "row": "i8", "bytes": "u8",
    "distance": "i4", "reason": "O", "via": "O", "distance_to_via": "i4",
    "similarity_to_via": "f8", "kept_partition": "i8", "kept_row": "i8", "hi": "u8", "lo": "u8",
}


def _members_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """The public form of numbered rows (DaskDedupResult.members)."""
    gid = rows["gid"].to_numpy(np.uint64)
    kept_gid = rows["kept_gid"].to_numpy(np.uint64)
    low = np.uint64(0xFFFFFFFF)
    return pd.DataFrame({
        "cluster": rows["cluster"].to_numpy(np.int64), "id": rows["id"].to_numpy(object),
        "kept": rows["is_kept"].to_numpy(bool),
        "partition": (gid >> np.uint64(32)).astype(np.int64), "row": (gid & low).astype(np.int64),
        "bytes": rows["bytes"].to_numpy(np.uint64), "distance": rows["distance"].to_numpy(np.int32),
        "reason": rows["reason"].to_numpy(object), "via": rows["via"].to_numpy(object),
        "distance_to_via": rows["distance_to_via"].to_numpy(np.int32),
        "similarity_to_via": rows["similarity_to_via"].to_numpy(np.float64),
        "kept_partition": (kept_gid >> np.uint64(32)).astype(np.int64),
        "kept_row": (kept_gid & low).astype(np.int64),
        "hi": rows["hi"].to_numpy(np.uint64), "lo": rows["lo"].to_numpy(np.uint64),
    })


def _entries_of_members(frame: pd.DataFrame, bits: int) -> list:
    gid = ((frame["partition"].to_numpy(np.uint64) << np.uint64(32))
           | frame["row"].to_numpy(np.uint64))
    return _cluster_entries(frame.assign(gid=gid, is_kept=frame["kept"].to_numpy(bool)), bits)


def _gather_clusters(members, bits: int) -> list:
    """All clusters as clusters.jsonl's entries, on the client (the output list)."""
    import dask

    out = []
    for entries in dask.compute(*[dask.delayed(_entries_of_members)(p, bits)
                                  for p in members.to_delayed()]):
        out.extend(entries)
    return out


def _as_dataframe(data: Any, text: str, id: str):
    import dask.bag as db
    import dask.dataframe as dd

    if isinstance(data, dd.DataFrame):
        return data
    if isinstance(data, db.Bag):
        def to_record(item):
            if isinstance(item, dict):
                return {id: item.get(id), text: item.get(text)}
            return {id: item[0], text: item[1]}

        return data.map(to_record).to_dataframe(meta={id: object, text: object})
    if isinstance(data, pd.DataFrame):
        return dd.from_pandas(data, npartitions=max(1, min(64, len(data) // 10000 + 1)), sort=False)
    raise TypeError("data: expected a Dask DataFrame or Bag (or a pandas DataFrame)")


def _write_table(frame, directory: str, name: str, fmt: str) -> str:
    path = os.path.join(directory, name)
    if fmt == "parquet":
        frame.to_parquet(path, write_index=False)
    else:
        os.makedirs(path, exist_ok=True)
        frame.to_json(os.path.join(path, "part-*.jsonl"), orient="records", lines=True,
                      force_ascii=False)
    return path


def _parquet_available() -> bool:
    for module in ("pyarrow", "fastparquet"):
        try:
            __import__(module)
            return True
        except ImportError:
            pass
    return False


def _nbytes(frame) -> int:
    """In-memory size of a Dask DataFrame's rows (what a shuffle of it moves, before pickling)."""
    sizes = frame.map_partitions(
        lambda df: pd.Series([int(df.memory_usage(deep=True, index=False).sum())]),
        meta=(None, "i8"))
    return int(sizes.sum().compute())


def dedup(data: Any, text: str = "text", id: str = "id", output: Optional[str] = None,
          format: str = "auto", shuffle_partitions: Optional[int] = None,
          measure_shuffle: bool = False, **options: Any) -> DaskDedupResult:
    """Runs ``neardup dedup``'s stages on the current Dask scheduler (a ``distributed.Client`` if
    one is active). Options are those of :func:`neardup.dedup` (``threshold``, ``candidates``,
    ``bands``, ``rows``, ``bucket_window``, ``k``, ``verify``, ``keep``, ``bits``, fingerprint
    options); ``text`` / ``id`` name the columns. ``output``: a directory for
    ``clusters.jsonl``, ``summary.json`` and ``decisions/`` (JSONL parts, or Parquet with
    ``format="parquet"``; ``"auto"`` picks Parquet when pyarrow/fastparquet is installed).
    ``measure_shuffle``: also record in ``summary["shuffle_bytes"]`` the in-memory bytes of the
    rows entering each shuffle (costs extra passes; for benchmarks).
    """
    import dask
    import dask.dataframe as dd

    for name in ("id_field", "text_field", "strict"):
        if name in options:
            raise TypeError(f"unexpected option '{name}' (use text= / id=)")
    resolved = _neardup._resolve_dedup_options(options)  # validates before any work
    if options.get("boilerplate"):
        raise ValueError("boilerplate=True is not supported by neardup.dask yet (its weights "
                         "need the whole corpus's shingle frequencies); use neardup.dedup_files")
    if format not in ("auto", "jsonl", "parquet"):
        raise ValueError('format: expected "auto", "jsonl" or "parquet"')
    if format == "auto":
        format = "parquet" if _parquet_available() else "jsonl"
    bits = resolved["bits"]
    fingerprint_options = {k: v for k, v in options.items() if k in _FINGERPRINT_OPTIONS}
    score_field = resolved["keep_field"]
    keep = options.get("keep", "first")

    ddf = _as_dataframe(data, text, id)
    if text not in ddf.columns:
        raise ValueError(f"text: the data has no column {text!r}")
    nparts = ddf.npartitions
    shuffle_partitions = shuffle_partitions or nparts

    # Stage 1: records (and LSH band keys) per partition, kept in the cluster's memory.
    lsh_params = ((resolved["threshold"], resolved["bands"], resolved["rows"],
                   resolved["bucket_window"], resolved["seed"], resolved["t2s"])
                  if resolved["use_lsh"] else None)
    parts = ddf.to_delayed()
    both = [dask.delayed(_records, nout=2)(p, i, text, id, score_field, fingerprint_options,
                                           lsh_params, keep == "longest")
            for i, p in enumerate(parts)]
    rec = dd.from_delayed([b[0] for b in both], meta=_RECORD_COLUMNS, verify_meta=False)
    lsh_records = dd.from_delayed([b[1] for b in both], meta=_LSH_META, verify_meta=False)
    rec, lsh_records = dask.persist(rec, lsh_records)
    count = len(rec)
    k = resolved["k"]
    blocks, t = plan_blocks(count, k, bits)

    # Stages 2-4: keys, shuffle by key, pairs per bucket, distinct pairs.
    shuffled = {}
    sources = []
    if resolved["use_lsh"]:
        shuffled["lsh_band_keys"] = lsh_records
        sources.append(lsh_records.shuffle("bucket", npartitions=shuffle_partitions)
                       .map_partitions(_lsh_pairs, resolved["bucket_window"], meta=_PAIR_META))
    if resolved["use_simhash"]:
        keys = rec.map_partitions(_hamming_keys, bits, blocks, t, meta=_KEY_META)
        shuffled["simhash_keys"] = keys
        sources.append(keys.shuffle("key", npartitions=shuffle_partitions).map_partitions(
            _bucket_pairs, bits, blocks, t, k, meta=_PAIR_META))
    squeezed = rec.map_partitions(_squeezed_keys,
                                  meta={"squeezed_hash": "u8", "gid": "u8", "hi": "u8", "lo": "u8"})
    sources.append(squeezed.shuffle("squeezed_hash", npartitions=shuffle_partitions)
                   .map_partitions(_squeezed_pairs, meta=_PAIR_META))
    shuffled["whitespace_keys"] = squeezed
    candidates = dd.concat(sources)
    shuffled["candidate_pairs"] = candidates
    candidates = candidates.shuffle("a", npartitions=shuffle_partitions).map_partitions(
        _distinct_pairs, meta=_PAIR_META).persist()
    candidate_count = len(candidates)

    # Stage 5: distances and verification, fetching only the documents of unverified pairs.
    verify = resolved["verify"]
    unverified = candidates[candidates["similarity"] < 0]
    needed = dd.concat([unverified["a"], unverified["b"]]).unique().compute().to_numpy(np.uint64)
    needed.sort()
    # Only the documents of unverified pairs move: their facts, and their shingles when verifying.
    info = rec.map_partitions(_select, dask.delayed(needed), meta=_RECORD_COLUMNS)[
        ["gid", "hi", "lo", "bytes", "content_hash"]]
    if verify > 0:
        by_partition = {}
        if len(needed):
            part_of = (needed >> np.uint64(32)).astype(np.int64)
            rows = (needed & np.uint64(0xFFFFFFFF)).astype(np.int64)
            for p in np.unique(part_of).tolist():
                by_partition[p] = rows[part_of == p]
        shingle_parts = [dask.delayed(_shingle_rows)(parts[p], by_partition[p], p, text,
                                                     resolved["t2s"])
                         for p in sorted(by_partition)]
        if shingle_parts:
            shingles = dd.from_delayed(shingle_parts, meta={"gid": "u8", "shingles": "O"},
                                       verify_meta=False)
            info = info.merge(shingles, on="gid", how="left")
        else:
            info = info.assign(shingles=b"")
    shuffled["verify_pairs_x2"] = unverified
    shuffled["verify_documents_x2"] = info
    scored = unverified
    for side in ("a", "b"):
        renamed = info.rename(columns={c: f"{c}_{side}" for c in info.columns})
        scored = scored.merge(renamed, left_on=side, right_on=f"gid_{side}", how="left")
    rule_options = {k: v for k, v in options.items() if k in _RULE_OPTIONS}
    scored = scored.map_partitions(_score_pairs, verify > 0, rule_options, meta=_PAIR_META)
    accepted = dd.concat([candidates[candidates["similarity"] >= 0], scored])
    if verify > 0:
        accepted = accepted[accepted["similarity"] >= 0]
    accepted = accepted.persist()
    accepted_count = len(accepted)

    # Stage 6: connected components across partitions (min-label propagation, distributed), then
    # the keep decision per cluster (a groupby over the cluster id), then per input partition.
    cluster_partitions = shuffle_partitions
    component_bytes = {} if measure_shuffle else None
    labels, by_a, rounds = _components(accepted, cluster_partitions, component_bytes)
    members = _cluster_members(rec, labels, by_a, cluster_partitions, bits, keep,
                               component_bytes).persist()
    removed_rows = members[~members["is_kept"]][["gid"]]
    removed_by_input = _rearrange(removed_rows, "gid", nparts, {"gid": "u8"}, by_input=True)
    decisions = dd.map_partitions(_decide, rec, removed_by_input,
                                  meta={"id": "O", "partition": "i8", "row": "i8", "keep": "bool"},
                                  align_dataframes=False)
    # Clusters are numbered in order of their kept document: grouped by the kept document's input
    # partition, each partition numbers its own from the count of the partitions before it (only
    # two counts per partition reach the client).
    by_kept = _rearrange(members, "kept_gid", nparts, _RESULT_META, by_input=True).persist()
    per_part = by_kept.map_partitions(
        lambda f: pd.Series([int(f["is_kept"].sum()), int((~f["is_kept"]).sum())]),
        meta=(None, "i8")).compute().to_numpy().reshape(-1, 2)
    firsts = np.concatenate([[0], np.cumsum(per_part[:, 0])[:-1]]).astype(np.int64).tolist()
    numbered = dd.from_delayed(
        [dask.delayed(_number_clusters)(p, first)
         for p, first in zip(by_kept.to_delayed(), firsts)],
        meta=_NUMBERED_META, verify_meta=False).persist()
    cluster_members = numbered.map_partitions(_members_frame, meta=_MEMBERS_META)
    cluster_count = int(per_part[:, 0].sum())
    removed_count = int(per_part[:, 1].sum())
    summary = {
        "documents_fingerprinted": count,
        "candidate_pairs": candidate_count,
        "accepted_pairs": accepted_count,
        "clusters": cluster_count,
        "documents_removed": removed_count,
        "documents_kept": count - removed_count,
        "candidates": ("lsh+simhash" if resolved["use_lsh"] and resolved["use_simhash"]
                       else "lsh" if resolved["use_lsh"] else "simhash"),
        "lsh": ({"threshold": resolved["threshold"], "bands": resolved["bands"],
                 "rows": resolved["rows"], "bucket_window": resolved["bucket_window"]}
                if resolved["use_lsh"] else None),
        "k": k if resolved["use_simhash"] else -1,
        "simhash_keys": ({"blocks": blocks, "agreeing_blocks": t,
                          "keys_per_document": comb(blocks, t)}
                         if resolved["use_simhash"] else None),
        "bits": bits,
        "verify": verify,
        "keep": keep,
        "partitions": nparts,
        "component_rounds": rounds,
    }
    if measure_shuffle:
        summary["shuffle_bytes"] = {name: _nbytes(frame) * (2 if name.endswith("_x2") else 1)
                                    for name, frame in shuffled.items()}
        # The keep decision's shuffles: labels to the input partitions, members' facts and pairs
        # by component (above), removed numbers to their partitions, members by kept document.
        component_bytes["keep_decision"] += _nbytes(removed_rows) + _nbytes(members)
        summary["shuffle_bytes"].update(component_bytes)
    if output:
        os.makedirs(output, exist_ok=True)
        # Each partition's clusters are written where they are, then joined in order.
        parts_dir = os.path.join(output, ".clusters-parts")
        os.makedirs(parts_dir, exist_ok=True)
        paths = [os.path.join(parts_dir, f"part-{i:06d}.jsonl") for i in range(nparts)]
        dask.compute(*[dask.delayed(_write_cluster_part)(p, path, bits)
                       for p, path in zip(numbered.to_delayed(), paths)])
        with open(os.path.join(output, "clusters.jsonl"), "wb") as out:
            for path in paths:
                with open(path, "rb") as part:
                    shutil.copyfileobj(part, out, 1 << 20)
                os.remove(path)
        os.rmdir(parts_dir)
        with open(os.path.join(output, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
        _write_table(decisions, output, "decisions", format)
    return DaskDedupResult(cluster_members, decisions, summary, output, bits)
