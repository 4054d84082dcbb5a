#!/usr/bin/env bash
# Memory-amplification attacks on `neardup serve` (issue 24), old build against new in the same
# run: for each attack the server's RSS (before, peak = VmHWM, and 3 s after the attack) and the
# /healthz latency (p50/p99/max, a fresh connection per probe, sampled every 20 ms during the
# attack; a probe with no answer in 5 s counts as 5 s).
#
#   check     8 concurrent POST /v1/check {"text": T, "k": 64, "add": "never"} on a store of
#             DOCS documents (same text, 4 KB of metadata each), on a server without a token;
#             rounds repeated for at least 5 s.
#   slowread  20 unauthenticated GET /v1/query?text=T&k=64&limit=10000, never read.
#   gzip      16 concurrent POST /v1/query with a 0.5 MB gzip body inflating to 512 MiB, no token;
#             rounds repeated for at least 5 s.
#   burst     64 clients x 40 requests (text adds with 4 KB metadata, text queries), then idle:
#             RSS 3 s after the burst (glibc arenas: the new build sets M_ARENA_MAX=2).
#
# Usage: bench/serve_attacks.sh [OLD_BINARY] [NEW_BINARY]
#   OLD_BINARY  e.g. a build of main before issue 24 (git worktree add --detach ../base <commit>)
#   NEW_BINARY  default build/neardup
#   DOCS        documents in the store (default 5000; the issue used 30000)
# Client and server share the machine (2 cores here): quote the ratios between the two builds of
# one run, not the absolute latencies.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:-}
NEW=${2:-$ROOT/build/neardup}
[[ -x "$NEW" ]] || { echo "neardup binary not found at $NEW" >&2; exit 1; }
export DOCS=${DOCS:-5000}
echo "== serve attacks: $(nproc) cores, DOCS=$DOCS"
for bin in ${OLD:+"$OLD"} "$NEW"; do
  echo "-- $bin"
  /usr/bin/python3 - "$bin" <<'PY'
import gzip, http.client, json, os, shutil, socket, subprocess, sys, tempfile, threading, time

BIN = sys.argv[1]
DOCS = int(os.environ["DOCS"])
TEXT = "the quick brown fox jumps over the lazy dog while the slow reader waits"


def start(extra=()):
    d = tempfile.mkdtemp(prefix="neardup_attack_")
    p = subprocess.Popen([BIN, "serve", os.path.join(d, "store"), "--port", "0", "--sync", "none",
                          "--poll-threads", "2", *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    port = int(line.split("127.0.0.1:")[1].split()[0])
    return p, port, d


def stop(p, d):
    p.kill()
    p.wait()
    shutil.rmtree(d, ignore_errors=True)


def mem(p, field):
    with open(f"/proc/{p.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return -1


def request(port, method, path, body=None, headers=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def load(port, n):
    meta = "m" * 4000
    for start_at in range(0, n, 1000):
        docs = [{"id": f"d{i}", "text": TEXT, "metadata": meta}
                for i in range(start_at, min(n, start_at + 1000))]
        status, body = request(port, "POST", "/v1/documents", json.dumps({"documents": docs}))
        assert status == 200, body[:200]


class Prober:
    def __init__(self, port):
        self.port, self.samples, self.stop = port, [], False
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop:
            t = time.monotonic()
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                while s.recv(65536):
                    pass
                s.close()
                self.samples.append(time.monotonic() - t)
            except OSError:
                self.samples.append(5.0)
            time.sleep(0.02)

    def finish(self):
        self.stop = True
        self.thread.join()
        s = sorted(self.samples) or [0]
        q = lambda f: s[min(len(s) - 1, int(f * len(s)))] * 1000
        return f"/healthz p50 {q(0.5):.1f} ms, p99 {q(0.99):.1f} ms, max {s[-1] * 1000:.0f} ms ({len(s)} probes)"


def attack_check():
    p, port, d = start()
    try:
        load(port, DOCS)
        before = mem(p, "VmRSS")
        probe = Prober(port)
        sizes = []
        def one():
            try:
                status, body = request(port, "POST", "/v1/check", json.dumps(
                    {"id": "probe", "text": TEXT, "k": 64, "add": "never"}), timeout=120)
                sizes.append(len(body))
            except Exception:
                sizes.append(-1)
        rounds, t0 = 0, time.monotonic()
        while rounds == 0 or time.monotonic() - t0 < 5:  # repeated for 5 s, so /healthz is probed
            ts = [threading.Thread(target=one) for _ in range(8)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            rounds += 1
        lat = probe.finish()
        peak = mem(p, "VmHWM")
        time.sleep(3)
        after = mem(p, "VmRSS")
        print(f"check    8 x /v1/check k=64 on {DOCS} docs, {rounds} rounds in 5 s or more: reply "
              f"{max(sizes)/1e6:.2f} MB each; "
              f"RSS {before} MB before, peak {peak} MB, {after} MB 3 s after; {lat}")
    finally:
        stop(p, d)


def attack_slowread():
    p, port, d = start()
    try:
        load(port, DOCS)
        before = mem(p, "VmRSS")
        probe = Prober(port)
        socks = []
        q = ("GET /v1/query?text=" + TEXT.replace(" ", "+") +
             "&k=64&limit=10000 HTTP/1.1\r\nHost: x\r\n\r\n").encode()
        for _ in range(20):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(q)
            socks.append(s)
        time.sleep(4)
        during = mem(p, "VmRSS")
        lat = probe.finish()
        peak = mem(p, "VmHWM")
        for s in socks:
            s.close()
        time.sleep(3)
        after = mem(p, "VmRSS")
        print(f"slowread 20 unread /v1/query k=64 limit=10000: RSS {before} MB before, {during} MB "
              f"while held (peak {peak} MB), {after} MB 3 s after closing; {lat}")
    finally:
        stop(p, d)


def attack_gzip():
    p, port, d = start(["--token", "t"])
    try:
        bomb = gzip.compress(b" " * (512 << 20), 9)
        before = mem(p, "VmRSS")
        probe = Prober(port)
        codes = []
        def one():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=60)
                s.sendall(b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
                          b"Content-Length: " + str(len(bomb)).encode() + b"\r\n\r\n")
                try:
                    s.sendall(bomb)
                except OSError:
                    pass
                codes.append(s.recv(64)[9:12].decode(errors="replace"))
                s.close()
            except OSError as e:
                codes.append(type(e).__name__)
        rounds, t0 = 0, time.monotonic()
        while rounds == 0 or time.monotonic() - t0 < 5:  # repeated for 5 s, so /healthz is probed
            ts = [threading.Thread(target=one) for _ in range(16)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            rounds += 1
        lat = probe.finish()
        peak = mem(p, "VmHWM")
        time.sleep(3)
        after = mem(p, "VmRSS")
        print(f"gzip     16 x {len(bomb)/1e6:.1f} MB gzip -> 512 MiB to /v1/query, {rounds} rounds: "
              f"answers "
              f"{sorted(set(codes))}; RSS {before} MB before, peak {peak} MB, {after} MB 3 s after; "
              f"{lat}")
    finally:
        stop(p, d)


def attack_burst(extra, label):
    p, port, d = start(extra)
    try:
        meta = "m" * 4000
        before = mem(p, "VmRSS")
        def client(c):
            for i in range(40):
                if i % 2 == 0:
                    request(port, "POST", "/v1/documents", json.dumps(
                        {"id": f"c{c}-{i}", "text": f"{TEXT} {c} {i}", "metadata": meta}))
                else:
                    request(port, "GET", "/v1/query?text=" + TEXT.replace(" ", "+") + "&k=3")
        ts = [threading.Thread(target=client, args=(c,)) for c in range(64)]
        t0 = time.monotonic()
        [t.start() for t in ts]
        [t.join() for t in ts]
        seconds = time.monotonic() - t0
        peak = mem(p, "VmHWM")
        time.sleep(3)
        after = mem(p, "VmRSS")
        print(f"burst    {label}: 2560 requests in {seconds:.1f} s; RSS {before} MB before, peak "
              f"{peak} MB, {after} MB idle 3 s after")
    finally:
        stop(p, d)


attack_check()
attack_slowread()
attack_gzip()
help_text = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout
if "--malloc-arenas" in help_text:
    attack_burst(["--workers", "32", "--malloc-arenas", "0"], "32 workers, glibc arenas")
    attack_burst(["--workers", "32"], "32 workers, 2 arenas (default)")
    attack_burst(["--workers", "2"], "2 workers, 2 arenas")
else:
    attack_burst(["--workers", "32"], "32 workers")
    attack_burst(["--workers", "2"], "2 workers")
PY
done
