#!/usr/bin/env python3
"""Disk per document of a store, by section of its segment files (docs/storage_format.md), and
the distribution of a document's encoded shingle set. Reads only the headers, the sketch
section's trailer and key-table headers, and the set offsets.

    /usr/bin/python3 bench/store_sections.py STORE_DIR
"""
import glob
import os
import struct
import sys


def align8(n):
    return (n + 7) & ~7


def main():
    store = sys.argv[1]
    totals = {}
    documents = 0
    set_sizes = []
    directories = 0

    def add(name, value):
        totals[name] = totals.get(name, 0) + value

    for path in sorted(glob.glob(os.path.join(store, "seg-*.ndseg"))):
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            header = f.read(128)
            (version, bits, _max_k, _tables, n, live, fps, offsets, blob, blob_size, hashes,
             index_offset, index_size, file_size) = struct.unpack_from("<IIIIQQQQQQQQQQ", header, 8)
            sketch_offset = struct.unpack_from("<Q", header, 112)[0] if version >= 3 else 0
            documents += live
            add("fingerprints", offsets - fps)
            add("record offsets", blob - offsets)
            add("ids + metadata (blob)", hashes - blob)
            add("id hashes", index_offset - hashes)
            add("Hamming index (permuted tables)", index_size)
            add("header + footer", 128 + 16)
            if sketch_offset == 0:
                continue
            f.seek(size - 16 - 96)
            trailer = f.read(96)
            bands, entries, set_blob = struct.unpack_from("<IQQ", trailer, 12)
            body_size = struct.unpack_from("<Q", trailer, 48)[0]
            add("sketch rows (hashes, seq)", entries * 32)
            add("set offsets", (entries + 1) * 8)
            add("shingle sets (Elias-Fano)", align8(entries * 40 + 8 + set_blob) - entries * 40 - 8)
            f.seek(sketch_offset + entries * 32)
            offsets_bytes = f.read((entries + 1) * 8)
            values = struct.unpack("<%dQ" % (entries + 1), offsets_bytes)
            set_sizes.extend(values[i + 1] - values[i] for i in range(entries))
            at = sketch_offset + align8(entries * 40 + 8 + set_blob)
            for table in range(bands + 1):
                f.seek(at)
                rows, key_bytes, dir_bits = struct.unpack("<QII", f.read(16))
                table_size = (16 + align8(rows * key_bytes) + align8(rows * 4) +
                              align8(((1 << dir_bits) + 1) * 4))
                add("band tables" if table < bands else "whitespace-hash table", table_size)
                directories += ((1 << dir_bits) + 1) * 4
                at += table_size
            add("sketch trailer", 96)
            if at + 96 != sketch_offset + body_size + 96:
                print(f"{path}: the key tables end at {at}, the body at "
                      f"{sketch_offset + body_size}", file=sys.stderr)
    for path in glob.glob(os.path.join(store, "wal-*.ndwal")):
        add("write-ahead log", os.path.getsize(path))
    total = sum(totals.values())
    print(f"{documents} live documents; {total} bytes in segments and log = "
          f"{total / max(documents, 1):.0f} bytes a document")
    print("| section | bytes a document | share |\n|---|---|---|")
    for name, value in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {value / max(documents, 1):.1f} | {100.0 * value / max(total, 1):.1f}% |")
    if set_sizes:
        set_sizes.sort()

        def pct(p):
            return set_sizes[min(len(set_sizes) - 1, int(p * len(set_sizes)))]
        print(f"encoded shingle set a document: mean {sum(set_sizes) / len(set_sizes):.0f} B, "
              f"p10 {pct(0.1)}, p50 {pct(0.5)}, p90 {pct(0.9)}, p99 {pct(0.99)}, max {set_sizes[-1]}")
        print(f"key-table directories (what a lookup touches first): {directories} bytes = "
              f"{directories / max(documents, 1):.1f} bytes a document")


if __name__ == "__main__":
    main()
