#!/usr/bin/env python3
"""Baseline for the SyncThroughput benchmark: a straightforward Python sync of a Link-header feed.

    python3 sync_baseline.py URL DATABASE

Follows RFC 8288 `Link: <...>; rel="next"` pages from URL (requests.Session: one keep-alive
connection, gzip like syncd) and inserts each page into SQLite (WAL, synchronous=NORMAL, as
SQLiteFeedStore) in one transaction together with its cursor, keyed by (feed, id) so a repeated
page adds nothing. Prints one JSON line: {"items": N, "pages": P, "seconds": S} where S runs from
the first request to the last commit (interpreter start-up excluded).
"""
import json
import sqlite3
import sys
import time

try:
    import requests
except ImportError:  # the benchmark checks this before running; say so clearly when run by hand
    sys.stderr.write("sync_baseline.py needs the 'requests' package: python3 -m pip install requests\n")
    sys.exit(3)

MAX_PAGES = 100_000  # bound on the request loop


def main():
    url, path = sys.argv[1], sys.argv[2]
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS item (feed TEXT NOT NULL, id TEXT NOT NULL, payload BLOB NOT NULL, "
               "position INTEGER NOT NULL, PRIMARY KEY (feed, id))")
    db.execute("CREATE TABLE IF NOT EXISTS cursor (feed TEXT PRIMARY KEY, older TEXT)")
    session = requests.Session()
    items = pages = 0
    position = 0
    start = time.monotonic()
    while url and pages < MAX_PAGES:
        response = session.get(url, headers={"Accept": "application/json"}, timeout=30)
        response.raise_for_status()
        page = response.json()
        url = response.links.get("next", {}).get("url")
        db.execute("BEGIN")
        rows = []
        for item in page:
            position -= 1
            rows.append(("bulk", str(item["id"]), json.dumps(item).encode(), position))
        cursor = db.executemany("INSERT OR IGNORE INTO item (feed, id, payload, position) VALUES (?, ?, ?, ?)", rows)
        db.execute("INSERT OR REPLACE INTO cursor (feed, older) VALUES (?, ?)", ("bulk", url))
        db.execute("COMMIT")
        items += cursor.rowcount
        pages += 1
    seconds = time.monotonic() - start
    stored = db.execute("SELECT COUNT(*) FROM item").fetchone()[0]
    print(json.dumps({"items": stored, "inserted": items, "pages": pages, "seconds": seconds}))


if __name__ == "__main__":
    main()
