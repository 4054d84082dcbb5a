#!/usr/bin/env python3
"""`neardup report` in a real browser: headless Chromium (Debian's chromium + chromium-driver,
driven by Debian's python3-selenium) opens the report of the bundled sample/ run from disk and of
a small hostile corpus, and checks that

- the page loads with no console error and fetches nothing (no network request at all);
- the DOM shows the same cluster count as clusters.jsonl, and with every cluster on one page the
  cluster cards are exactly the clusters of clusters.jsonl;
- documents holding <script>alert(1)</script> and "><img src=x onerror=...> render as text (the
  literal characters are on the page, no element was injected) and no script of theirs runs;
- a screenshot of each page is saved under the build folder for people to look at.

Exits 77 (ctest's skip code), saying why, when Chromium, ChromeDriver or Selenium is missing.

    python3 tests/report_browser_test.py --neardup build/neardup --out build/report_browser_test
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# The hostile documents: markup in texts and ids, near-duplicate pairs so that they appear in
# clusters, in diffs and in the sample.
SCRIPT_TEXT = "<script>alert(1)</script>"
IMG_TEXT = "\"><img src=x onerror=\"alert(2)\">"
BASE = ("The committee met on Tuesday to review the annual budget and agreed to fund the new "
        "library wing, the bicycle lanes on the river road and a study of the old harbour. ")


def hostile_corpus(path):
    docs = [
        {"id": "plain-1", "text": BASE * 3 + SCRIPT_TEXT},
        {"id": "plain-2", "text": BASE * 3 + SCRIPT_TEXT + " " + IMG_TEXT},
        {"id": "<b>id-markup</b>", "text": IMG_TEXT + " " + BASE * 3},
        {"id": "</script><script>alert(3)</script>", "text": BASE * 3 + " <!-- comment"},
        {"id": "other", "text": "Nothing alike here at all, a different text entirely. " * 5},
    ]
    with open(path, "w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps(doc) + "\n")


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result


def make_report(neardup, inputs, folder):
    run([neardup, "dedup", *inputs, "-o", folder, "--force", "-q"])
    report = os.path.join(folder, "report.html")
    run([neardup, "report", folder, "-o", report, "--force", "-q"])
    with open(os.path.join(folder, "clusters.jsonl"), encoding="utf-8") as f:
        clusters = [json.loads(line) for line in f if line.strip()]
    return report, clusters


def browser():
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("python3-selenium")
    if missing:
        print("SKIPPED: the browser test needs " + ", ".join(missing) +
              " (Debian: apt-get install chromium chromium-driver python3-selenium; "
              "scripts/setup.sh --with-tests installs them)")
        sys.exit(SKIP)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="neardup-chromium-")
    # Flags that keep Chromium off the network (this machine's network is closed) and fast.
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--window-size=1400,1800", "--user-data-dir=" + profile):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    # Every page starts with alert/confirm/prompt recorded instead of shown, so a script that the
    # corpus smuggled in would leave a trace (DevTools scripts are not subject to the page's CSP).
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
        window.__alerts = [];
        for (const name of ['alert', 'confirm', 'prompt']) {
          window[name] = function (message) { window.__alerts.push(name + ':' + message); };
        }"""})
    return driver, profile


def load(driver, path):
    """Opens `path` and returns the console messages of this page only."""
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get("file://" + os.path.abspath(path))
    for _ in range(100):
        if driver.execute_script("return document.readyState") == "complete":
            break
        time.sleep(0.05)
    time.sleep(0.2)  # messages logged right after the load event
    return driver.get_log("browser")


def check(condition, message, failures):
    print(("ok: " if condition else "FAIL: ") + message)
    if not condition:
        failures.append(message)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--neardup", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sample = [os.path.join(SOURCE, "sample", name)
              for name in ("en_spamassassin.jsonl", "zh_poetry.jsonl")]
    sample_report, sample_clusters = make_report(args.neardup, sample,
                                                 os.path.join(args.out, "sample"))
    hostile_input = os.path.join(args.out, "hostile.jsonl")
    hostile_corpus(hostile_input)
    hostile_report, hostile_clusters = make_report(args.neardup, [hostile_input],
                                                   os.path.join(args.out, "hostile"))

    driver, profile = browser()
    failures = []
    try:
        start = time.time()
        # Probe: the alert hook sees a script that runs.
        driver.get("data:text/html,<p>probe</p>")
        driver.execute_script("alert('probe')")
        check(driver.execute_script("return window.__alerts") == ["alert:probe"],
              "the alert hook records a script's alert (the probe)", failures)

        logs = load(driver, sample_report)
        errors = [entry for entry in logs if entry["level"] == "SEVERE"]
        check(not errors, f"sample report: no console errors {errors[:3]}", failures)
        check(driver.execute_script("return performance.getEntriesByType('resource').length") == 0,
              "sample report: no network request", failures)
        shown = driver.execute_script(
            "return document.getElementById('cluster-count').textContent").replace(",", "")
        check(shown == str(len(sample_clusters)),
              f"sample report: DOM cluster count {shown} = clusters.jsonl's {len(sample_clusters)}",
              failures)
        driver.save_screenshot(os.path.join(args.out, "report_sample.png"))
        driver.execute_script("""
            const select = document.getElementById('page-size');
            select.value = '0';
            select.dispatchEvent(new Event('change'));""")
        cards = driver.execute_script(
            "return Array.from(document.querySelectorAll('#cluster-list article.cluster'))"
            ".map(c => Number(c.dataset.cluster))")
        check(sorted(cards) == sorted(c["cluster"] for c in sample_clusters),
              f"sample report: {len(cards)} cluster cards, one per clusters.jsonl line", failures)
        members = driver.execute_script(
            "return document.querySelectorAll('#cluster-list .member').length")
        check(members == sum(min(len(c["removed"]), 100) for c in sample_clusters),
              f"sample report: {members} removed members listed", failures)
        diffs = driver.execute_script("return document.querySelectorAll('#cluster-list .diff-pair').length")
        check(diffs > 0, f"sample report: {diffs} side-by-side diffs rendered", failures)
        sample_entries = driver.execute_script("return document.querySelectorAll('.sample-entry').length")
        check(sample_entries == min(50, sum(len(c["removed"]) for c in sample_clusters)),
              f"sample report: {sample_entries} documents in the review sample", failures)

        logs = load(driver, hostile_report)
        errors = [entry for entry in logs if entry["level"] == "SEVERE"]
        check(not errors, f"hostile report: no console errors {errors[:3]}", failures)
        check(len(hostile_clusters) >= 1, "hostile corpus: its near-duplicates form a cluster",
              failures)
        alerts = driver.execute_script("return window.__alerts")
        check(alerts == [], f"hostile report: no script of the corpus ran (alerts: {alerts})",
              failures)
        check(driver.execute_script("return document.querySelectorAll('img').length") == 0,
              "hostile report: no <img> element was injected", failures)
        check(driver.execute_script("return document.scripts.length") == 2,
              "hostile report: only the page's own two script elements", failures)
        check(driver.execute_script("return document.querySelectorAll('b').length") == 0,
              "hostile report: the id <b>id-markup</b> is text, not markup", failures)
        body = driver.execute_script("return document.body.innerText")
        for literal in (SCRIPT_TEXT, IMG_TEXT, "<b>id-markup</b>",
                        "</script><script>alert(3)</script>"):
            check(literal in body, f"hostile report: {literal!r} is shown as text", failures)
        driver.execute_script("window.scrollTo(0, document.getElementById('clusters').offsetTop)")
        driver.save_screenshot(os.path.join(args.out, "report_hostile.png"))
        print(f"browser checks took {time.time() - start:.1f} s; screenshots: "
              f"{os.path.join(args.out, 'report_sample.png')}, "
              f"{os.path.join(args.out, 'report_hostile.png')}")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
