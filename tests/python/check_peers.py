# SPDX-License-Identifier: GPL-2.0
"""The assertions of tests/host.d/53-bench-peers on what
bench_peers.py --small --json wrote and printed, as TAP.

    check_peers.py PEERS.JSON TABLE
"""
import json
import sys

from bench_peers import ROWS

TENSORS = (16, 200, 16)
PINNED_PEERS = ("fst+lock", "runai+lock", "st+lock")
PLAIN_PEERS = ("fst", "runai")


def checks(doc, table):
    """(ok, description) of every assertion."""
    cks = doc["checkpoints"]
    yield len(cks) == 3, "three checkpoints (large, many, sharded)"
    for ck, n in zip(cks, TENSORS):
        rows = ck["rows"]
        name = ck["label"]
        missing = [r for r, _, _ in ROWS if r not in rows]
        yield not missing, "%s: every loader measured %s" % (name, missing)
        for r, s in ((r, v["summary"]) for r, v in rows.items()):
            yield "error" not in s and s["failed_runs"] == 0, \
                "%s: %s ran (%s)" % (name, r, s.get("error", "no error"))
            if "error" in s:
                continue
            if r != "fio":
                yield s["check"] == "ok" and s["tensors"] == n, \
                    "%s: %s gave all %d tensors, each equal to " \
                    "safetensors' (%s, %s)" % (name, r, n, s["check"],
                                               s["tensors"])
            if r in PINNED_PEERS:
                yield s["locked"] == 1.0, "%s: %s locked (%s)" % (
                    name, r, s["locked"])
            if r in PLAIN_PEERS:
                yield s["locked"] == 0.0, "%s: %s not locked (%s)" % (
                    name, r, s["locked"])
        reg = rows["pinmem"]["summary"].get("registered")
        yield reg is not None and 0.0 <= reg <= 1.0, \
            "%s: pinmem's registered share read from the double (%s)" % (
                name, reg)
    for _, what, _ in ROWS:
        yield sum(line.lstrip().startswith(what) for line in table) == 3, \
            "the table has a row '%s' per checkpoint" % what
    yield any(line.startswith("ratios of medians") for line in table), \
        "the table ends with the ratios"


def main():
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    with open(sys.argv[2]) as f:
        table = f.read().splitlines()
    n = bad = 0
    for ok, what in checks(doc, table):
        n += 1
        bad += not ok
        print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
    print("1..%d" % n)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
