"""Shared fixtures of the neardup Python tests: the CLI binary, the shared corpus, sample texts."""
import glob
import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("NEARDUP_SHARED_DIR", os.path.join(ROOT, "..", "shared"))


@pytest.fixture(scope="session")
def binary():
    path = os.environ.get("NEARDUP_BINARY", os.path.join(ROOT, "build", "neardup"))
    if not os.access(path, os.X_OK):
        pytest.skip(f"the neardup binary is not built ({path}); set NEARDUP_BINARY")
    return path


@pytest.fixture(scope="session")
def shared():
    if not os.path.isdir(os.path.join(SHARED, "devpairs")):
        pytest.skip(f"../shared is missing ({SHARED}): tests on the shared corpus skipped")
    return SHARED


@pytest.fixture(scope="session")
def devpairs_docs(shared):
    with open(os.path.join(shared, "devpairs", "docs.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="session")
def sample_texts(shared):
    """About 600 texts of every corpus file (Chinese, spam, other languages)."""
    texts = []
    for path in sorted(glob.glob(os.path.join(shared, "corpus", "*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f):
                if number >= 60:
                    break
                texts.append(json.loads(line)["text"])
    return texts


def run_cli(binary, *args, stdin=None):
    done = subprocess.run([binary, *args], input=stdin, capture_output=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"neardup {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout.decode("utf-8")


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
