#!/usr/bin/env python3
"""Ours against the peer, row by row, from Google Benchmark JSON files (--benchmark_out=FILE.json, with
--benchmark_repetitions=N: medians). Pairs BM_<Name>/<row> with BM_<Peer>_<Name>/<row> and prints both rates and
their ratio, and the ISA context the benchmark recorded.

Usage: benchmarks/ratios.py [--peer Onednn] [--counter GFLOP/s] FILE.json [FILE.json ...]
Several files (runs of the same binary) give one column of ratios per run and their median."""
import json
import re
import statistics
import sys


def rows(path, peer, counter):
    with open(path) as f:
        data = json.load(f)
    ctx = data.get("context", {})
    ours, theirs = {}, {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = re.sub(r"(/real_time)?(_median)?$", "", b.get("run_name", b["name"]))
        value = b.get(counter)
        if value is None:
            continue
        m = re.match(r"BM_" + peer + r"_(.*)$", name)
        if m:
            theirs["BM_" + m.group(1)] = value
        else:
            ours[name] = value
    return ctx, {k: (ours[k], theirs[k]) for k in ours if k in theirs}


def main(argv):
    peer, counter, files = "Onednn", "GFLOP/s", []
    it = iter(argv)
    for a in it:
        if a == "--peer":
            peer = next(it)
        elif a == "--counter":
            counter = next(it)
        else:
            files.append(a)
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    runs = [rows(f, peer, counter) for f in files]
    ctx = runs[0][0]
    # tilebsp_isa: what the benchmark's own file was compiled for; tilebsp_ops_kernels: the operators' kernel set
    # that ran (TILEBSP_ISA caps it to the best set the library has at or below the cap: generic when a build lacks
    # the capped set).
    print("tilebsp ISA: %s, operators' kernels: %s, host: %s (%s), peer: %s" % (
        ctx.get("tilebsp_isa", "?"), ctx.get("tilebsp_ops_kernels", "?"), ctx.get("host_isa", "?"),
        ctx.get("cpu_model", "?"), ctx.get("peer_isa", "?")))
    names = sorted(runs[0][1])
    print("| row | ours / %s (%s, last run) | ratio per run | median |" % (peer, counter))
    print("|---|---|---|---|")
    worst = None
    for n in names:
        ratios = [r[1][n][0] / r[1][n][1] for r in runs if n in r[1]]
        o, t = runs[-1][1][n]
        med = statistics.median(ratios)
        worst = med if worst is None else min(worst, med)
        print("| %s | %.0f / %.0f | %s | %s%.2f%s |" % (n[3:], o, t, ", ".join("%.2f" % x for x in ratios),
                                                        "**" if med < 1 else "", med, "**" if med < 1 else ""))
    if worst is not None:
        print("lowest median ratio: %.2f" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
