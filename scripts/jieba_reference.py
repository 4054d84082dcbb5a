#!/usr/bin/python3
"""Reference output of Python jieba for neardup's jieba parity test.

Reads JSON lines {"text": ...} from --input and writes, for each input line in order, a JSON line
{"tokens": jieba.lcut(text), "tokens_no_hmm": jieba.lcut(text, HMM=False),
 "tags": jieba.analyse.extract_tags(text, topK=K, withWeight=True)}
to --output. Everything runs in this one process. Results are cached per document in
--cache (a JSON-lines file keyed by the SHA-256 of the text, the jieba version and topK), so reruns
only compute documents not seen before.
"""
import argparse
import hashlib
import json
import logging
import os
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--cache", default="")
    parser.add_argument("--top-k", type=int, default=20)
    args = parser.parse_args()

    import jieba
    import jieba.analyse
    jieba.setLogLevel(logging.WARNING)

    salt = "v2-jieba-%s-topk-%d" % (jieba.__version__, args.top_k)
    cache = {}
    if args.cache and os.path.exists(args.cache):
        with open(args.cache, encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut short by an interrupted run
                cache[entry["key"]] = entry["result"]

    with open(args.input, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]

    computed = 0
    seconds = 0.0
    new_entries = []
    results = []
    for text in texts:
        key = hashlib.sha256((salt + "\0" + text).encode("utf-8", "surrogatepass")).hexdigest()
        result = cache.get(key)
        if result is None:
            start = time.perf_counter()
            tokens = jieba.lcut(text)
            tokens_no_hmm = jieba.lcut(text, HMM=False)
            tags = jieba.analyse.extract_tags(text, topK=args.top_k, withWeight=True)
            seconds += time.perf_counter() - start
            result = {"tokens": tokens, "tokens_no_hmm": tokens_no_hmm,
                      "tags": [[w, weight] for w, weight in tags]}
            cache[key] = result
            new_entries.append({"key": key, "result": result})
            computed += 1
        results.append(result)

    if args.cache and new_entries:
        with open(args.cache, "a", encoding="utf-8") as f:
            for entry in new_entries:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")

    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for result in results:
            f.write(json.dumps(result, ensure_ascii=False) + "\n")
    os.replace(tmp, args.output)
    print("jieba_reference: %d documents, %d computed in %.1f s, %d from cache"
          % (len(texts), computed, seconds, len(texts) - computed), file=sys.stderr)


if __name__ == "__main__":
    main()
