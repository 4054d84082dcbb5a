"""Type stubs of neardup._neardup, the compiled core of the neardup package (pybind11)."""
from typing import Any, Callable, Dict, Iterable, List, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

Text = Union[str, bytes]
FingerprintLike = Union[int, str, Sequence[int], npt.NDArray[np.uint64]]
U64Array = npt.NDArray[np.uint64]

class Fingerprinter:
    """Text in, SimHash fingerprint out. Options are the flags of `neardup fingerprint` with '-'
    turned into '_' and the same defaults: profile ("neardup" | "yanyiwu"), tokenizer ("auto" |
    "jieba" | "icu" | "char"), shingle (2), ngram (4), weighting ("tf" | "tfidf" | "uniform"),
    top_k (0 = all), bits (64 | 128), hash ("xxh3" | "jenkins"), no_nfkc, no_casefold, no_t2s,
    no_whitespace_folding, keep_markup (= no_strip_markup), replace_invalid_utf8, idf, jieba_dir;
    threads (0 = all cores) for the batch form. Immutable and safe to share between threads;
    picklable (rebuilt from its options)."""

    def __init__(
        self,
        *,
        profile: str = ...,
        tokenizer: str = ...,
        shingle: Optional[int] = ...,
        ngram: Optional[int] = ...,
        weighting: Optional[str] = ...,
        top_k: Optional[int] = ...,
        bits: int = ...,
        hash: str = ...,
        no_nfkc: bool = ...,
        no_casefold: bool = ...,
        no_case_fold: bool = ...,
        no_t2s: bool = ...,
        no_whitespace_folding: bool = ...,
        keep_markup: bool = ...,
        no_strip_markup: bool = ...,
        replace_invalid_utf8: bool = ...,
        idf: Optional[str] = ...,
        jieba_dir: Optional[str] = ...,
        threads: int = ...,
    ) -> None: ...
    def fingerprint(self, text: Text) -> int:
        """The fingerprint as an int (64 or 128 bits). ValueError for invalid UTF-8 bytes."""
    @overload
    def fingerprint_batch(self, texts: Iterable[Text], errors: Literal["raise"] = ...) -> U64Array:
        """Fingerprints of many texts on all cores with the GIL released: uint64 array of shape
        (n,) for 64 bits, (n, 2) [hi, lo] for 128. ValueError names the first bad text."""
    @overload
    def fingerprint_batch(
        self, texts: Iterable[Text], errors: Literal["mask"]
    ) -> Tuple[U64Array, npt.NDArray[np.bool_]]:
        """As above, and a bool array of which texts could be fingerprinted (others are 0)."""
    def features(self, text: Text) -> List[Tuple[str, float]]:
        """The weighted features the fingerprint is made of, heaviest first."""
    def keywords(self, text: Text, top_k: int = 20) -> List[Tuple[str, float]]:
        """The top_k heaviest features (what `neardup keywords` prints)."""
    def distance(self, a: Text, b: Text) -> int:
        """Hamming distance of the fingerprints of two texts."""
    def _records(self, texts: Iterable[Text]) -> dict: ...
    @property
    def bits(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def options(self) -> dict: ...

def extract_tags(text: Text, top_k: int = 20, idf: str = "", jieba_dir: str = "") -> List[Tuple[str, float]]:
    """jieba.analyse.extract_tags(text, topK=top_k, withWeight=True), exactly."""

def cut(text: Text, hmm: bool = True) -> List[str]:
    """jieba.lcut(text, HMM=hmm), exactly."""

def distance(a: FingerprintLike, b: FingerprintLike) -> int:
    """Hamming distance of two fingerprints (ints, or hex / binary / "d:decimal" strings)."""

def to_hex(fingerprint: FingerprintLike, bits: int = 64) -> str:
    """16 or 32 lowercase hex digits, as the CLI prints fingerprints."""

def parse_fingerprint(text: str) -> int:
    """Parses any form the CLI prints (hex, binary, "d:decimal")."""

def default_thread_count() -> int: ...
def jaccard(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Jaccard of two sorted distinct uint32 shingle sets (see neardup.shingles)."""

def lsh_probability(jaccard: float, bands: int, rows: int) -> float:
    """P(candidate) of a pair of Jaccard similarity `jaccard`: 1 - (1 - J^rows)^bands."""

def choose_lsh_parameters(
    threshold: float, recall_at_threshold: float = ..., max_signature: int = ...
) -> Tuple[int, int]:
    """(bands, rows) `neardup dedup --threshold` uses."""

class MinHashLsh:
    """The MinHash LSH candidate stage of `neardup dedup` over the verification shingles."""

    def __init__(
        self,
        threshold: float = 0.5,
        bands: int = 0,
        rows: int = 0,
        bucket_window: int = 64,
        seed: int = ...,
        t2s: bool = True,
    ) -> None: ...
    def band_keys(
        self, texts: Iterable[Text], threads: int = 0
    ) -> Tuple[npt.NDArray[np.uint32], npt.NDArray[np.bool_]]:
        """(keys of shape (n, bands), has_keys of shape (n,)), on all cores."""
    def signature(self, text: Text) -> npt.NDArray[np.uint32]: ...
    def candidate_pairs(
        self, keys: npt.ArrayLike, has: npt.ArrayLike, threads: int = 0
    ) -> Tuple[U64Array, U64Array]:
        """Candidate pairs (a < b) of documents 0..n-1, as `neardup dedup` forms them."""
    @property
    def bands(self) -> int: ...
    @property
    def rows(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def bucket_window(self) -> int: ...
    @property
    def seed(self) -> int: ...

class HammingIndex:
    def __init__(self, bits: int = 64, indexed_k: int = 3, expected_size: float = 1e6, threads: int = 0) -> None: ...
    def add(self, ids: Any, fingerprints: Any) -> None:
        """Arrays of ids (None = 0..n-1) and fingerprints, or one id and one fingerprint."""
    def remove(self, id: int, fingerprint: FingerprintLike) -> int: ...
    def search(self, fingerprint: FingerprintLike, k: int) -> Tuple[U64Array, npt.NDArray[np.int32]]:
        """(ids, distances) of every stored fingerprint within k, by (distance, id)."""
    def search_batch(
        self, fingerprints: npt.ArrayLike, k: int
    ) -> Tuple[U64Array, U64Array, npt.NDArray[np.int32]]:
        """(query row, id, distance) of every hit, on all cores."""
    def self_join(self, k: int) -> Tuple[U64Array, U64Array, npt.NDArray[np.int32]]:
        """(a, b, distance) of every stored pair within k, a < b."""
    def compact(self) -> None: ...
    def stats(self) -> dict: ...
    def __len__(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def indexed_k(self) -> int: ...

class Store:
    def __init__(
        self,
        path: str,
        create_if_missing: bool = True,
        error_if_exists: bool = False,
        sync: str = "every",
        verify_checksums: bool = True,
        **options: Any,
    ) -> None: ...
    def add(self, id: str, fingerprint: FingerprintLike, metadata: Optional[Text] = None) -> bool: ...
    def add_batch(self, ids: Sequence[str], fingerprints: npt.ArrayLike, metadata: Optional[Iterable[Text]] = None) -> None: ...
    def search(self, fingerprint: FingerprintLike, k: int, limit: int = 0) -> List[dict]: ...
    def check_and_add(
        self, id: str, fingerprint: FingerprintLike, k: int, always_add: bool = False, metadata: Optional[Text] = None
    ) -> dict: ...
    def check(
        self, text: Text, id: Optional[str] = None, add: str = "if_new", metadata: Optional[Text] = None, k: int = 3
    ) -> dict: ...
    def check_batch(
        self,
        texts: Iterable[Text],
        ids: Optional[Sequence[str]] = None,
        add: str = "if_new",
        metadata: Optional[Iterable[Text]] = None,
        k: int = 3,
    ) -> List[dict]: ...
    @property
    def rule(self) -> str: ...
    def get(self, id: str) -> dict: ...
    def remove(self, id: str) -> None: ...
    def stats(self) -> dict: ...
    def flush(self) -> None: ...
    def compact(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...

class _Shingler:
    def __init__(self, traditional_to_simplified: bool = True) -> None: ...
    def batch(self, texts: Iterable[Text], threads: int = 0) -> List[npt.NDArray[np.uint32]]: ...

def _dedup_files(inputs: List[str], output_dir: str, options: dict,
                 memory: Dict[str, bytes] = ...) -> dict: ...
def _resolve_dedup_options(options: dict) -> dict: ...
def _write_report(path: str, directory: str, summary_json: str, clusters_jsonl: str,
                  texts: Optional[Callable[[List[Tuple[str, str]]], list]], options: dict,
                  force: bool) -> dict: ...
