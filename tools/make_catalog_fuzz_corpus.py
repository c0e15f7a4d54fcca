#!/usr/bin/env python3
"""Seed corpus for tests/fuzz/fuzz_catalog.c: catalog files (SQLite) as the
server writes them, with rows, with rows it would never write, and damaged.

    tools/make_catalog_fuzz_corpus.py tests/fuzz/corpus/catalog
"""
import os
import sqlite3
import sys
import tempfile

# The schema of src/registry/catalog.c (user_version 1).
SCHEMA = """
CREATE TABLE models (name TEXT PRIMARY KEY NOT NULL,
  desired TEXT NOT NULL CHECK (desired IN ('loaded', 'unloaded')), current TEXT, updated INTEGER NOT NULL);
CREATE TABLE versions (model TEXT NOT NULL, version TEXT NOT NULL, manifest TEXT NOT NULL, state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL, updated INTEGER NOT NULL, PRIMARY KEY (model, version));
CREATE TABLE tags (model TEXT NOT NULL, tag TEXT NOT NULL, version TEXT NOT NULL, PRIMARY KEY (model, tag));
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, time INTEGER NOT NULL, actor TEXT NOT NULL,
  action TEXT NOT NULL, target TEXT NOT NULL, outcome TEXT NOT NULL, reason TEXT NOT NULL);
CREATE INDEX events_target ON events (target, id);
PRAGMA user_version = 1;
"""
DIGEST = "sha256:" + "ab" * 32


def build(path, rows):
    db = sqlite3.connect(path)
    db.execute("PRAGMA page_size = 512")  # small files: a small corpus
    db.executescript(SCHEMA)
    for sql in rows:
        db.execute(sql)
    db.commit()
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    with open(path, "rb") as f:
        return f.read()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = {
        "empty.db": [],
        "rows.db": [
            "INSERT INTO models VALUES ('digits', 'loaded', 'v1', 0)",
            f"INSERT INTO versions VALUES ('digits', 'v1', '{DIGEST}', 'ready', '', 0, 0)",
            "INSERT INTO events (time, actor, action, target, outcome, reason) "
            "VALUES (1, 'admin', 'apply', 'digits:v1', 'ok', '')",
        ],
        "bad_rows.db": [
            "INSERT INTO models VALUES ('../etc', 'loaded', 'v1', 0)",
            "INSERT INTO versions VALUES ('../etc', 'v1', 'sha256:zz', 'exploded', '', 0, 0)",
        ],
        "bad_state.db": [
            "INSERT INTO models VALUES ('m', 'loaded', 'v1', 0)",
            "INSERT INTO versions VALUES ('m', 'v1', 'not-a-digest', 'weird', '', 0, 0)",
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, rows in cases.items():
            data = build(os.path.join(tmp, name), rows)
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
            if name == "rows.db":  # damaged: a page overwritten, and cut short
                hurt = bytearray(data)
                hurt[len(hurt) // 2:len(hurt) // 2 + 64] = b"\xff" * 64
                with open(os.path.join(out, "damaged.db"), "wb") as f:
                    f.write(bytes(hurt))
                with open(os.path.join(out, "truncated.db"), "wb") as f:
                    f.write(data[:len(data) // 3])
    with open(os.path.join(out, "not_sqlite.txt"), "wb") as f:
        f.write(b"not a database")


if __name__ == "__main__":
    main()
