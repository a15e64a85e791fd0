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


def ratio(num, den, col):
    """Median over repetitions of num[i]/den[i] (the commands of one
    repetition ran back to back, so their ratio carries less noise)."""
    a, b = rows[num], rows[den]
    r = [x[col] / y[col] for x, y in zip(a, b) if y[col] > 0]
    return statistics.median(r) if r else float("nan")  # too fast to time: "nan"


floor = "cat-null" if "cat-null" in rows else "cat"
awk = med.get("mawk")
print("| command | runs | wall s (median) | CPU s | peak RSS MB | wall: `LC_ALL=C sort -u` / this | CPU: mawk / this | RSS: this / mawk | wall: this / `cat > /dev/null` |")
print("|---|---|---|---|---|---|---|---|---|")
for k, (w, c, r, n) in med.items():
    sortr = f"{ratio('sort-u-C', k, 0):.2f}" if "sort-u-C" in rows else "-"
    awkc = f"{ratio('mawk', k, 1):.1f}" if awk else "-"
    awkr = f"{r/awk[2]:.2f}" if awk else "-"
    print(f"| {k} | {n} | {w:.2f} | {c:.2f} | {r/1024:.0f} | {sortr} | {awkc} | {awkr} | "
          f"{ratio(k, floor, 0):.2f} |")
