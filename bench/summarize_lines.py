#!/usr/bin/env python3
"""Medians and ratios from bench_lines.sh's raw result lines
("name wall user sys maxrss_kb"), as a Markdown table."""
import statistics
import sys

rows = {}
for line in open(sys.argv[1]):
    name, wall, user, sys_, rss = line.split()
    rows.setdefault(name, []).append((float(wall), float(user) + float(sys_), int(rss)))
med = {k: (statistics.median(w for w, _, _ in v), statistics.median(c for _, c, _ in v),
           max(r for _, _, r in v), len(v)) for k, v in rows.items()}
sortc = med["sort-u-C"]
awk = med["mawk"]
cat = med["cat"]
print("| command | runs | wall s (median) | CPU s | peak RSS MB | wall: `LC_ALL=C sort -u` / this | CPU: mawk / this | RSS: this / mawk | wall: this / cat |")
print("|---|---|---|---|---|---|---|---|---|")
for k, (w, c, r, n) in med.items():
    print(f"| {k} | {n} | {w:.2f} | {c:.2f} | {r/1024:.0f} | {sortc[0]/w:.2f} | {awk[1]/c if c else 0:.1f} | {r/awk[2]:.2f} | {w/cat[0]:.2f} |")
