#!/usr/bin/env python3
"""Scrapy with dedup's duplicate filter, on a local site, with a resume.

    PYTHONPATH=build/python python3 examples/scrapy_dedup/crawl.py [--mode bloom]

One command: it writes a site of PAGES pages, each linking to many others
(most links are repeats), serves it with Python's http.server on 127.0.0.1
(a free port), and crawls it twice with DUPEFILTER_CLASS =
"dedup.scrapy.DupeFilter" and a JOBDIR:

  run 1 stops after --first pages (CLOSESPIDER_PAGECOUNT); Scrapy keeps its
        request queue in JOBDIR, the filter saves its state file there;
  run 2 resumes from both.

The server counts every GET: the example fails (exit 1) when a page was
fetched twice over the two runs, or when a page was never fetched.  It
prints each run's pages and dupefilter/filtered.
"""
import argparse
import collections
import http.server
import json
import os
import random
import subprocess
import sys
import tempfile
import threading


def make_site(root, pages, links, seed):
    rnd = random.Random(seed)
    for i in range(pages):
        # every page links to the next (so all are reachable) and to many others
        targets = [(i + 1) % pages] + [rnd.randrange(pages) for _ in range(links)]
        body = "".join('<a href="/p%d.html">page %d</a>\n' % (t, t) for t in targets)
        with open(os.path.join(root, "p%d.html" % i), "w") as f:
            f.write("<html><body><h1>page %d</h1>\n%s</body></html>\n" % (i, body))


def serve(root):
    """Starts http.server on a free 127.0.0.1 port; returns (server, counts)."""
    counts = collections.Counter()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def do_GET(self):
            counts[self.path] += 1
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, counts


def run_spider(url, jobdir, mode, max_pages, stats_out):
    """One crawl in this process (the Twisted reactor runs once a process)."""
    import scrapy
    from scrapy.crawler import CrawlerProcess

    class Site(scrapy.Spider):
        name = "site"

        def start_requests(self):
            # through the filter too (Scrapy's default skips it for start
            # URLs), so a resumed run does not fetch the start page again
            yield scrapy.Request(url, dont_filter=False)

        def parse(self, response):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.parse)

    settings = {
        "DUPEFILTER_CLASS": "dedup.scrapy.DupeFilter",
        "DEDUP_MODE": mode,
        "DEDUP_BLOOM_CAPACITY": 100000,
        "DEDUP_BLOOM_ERROR_RATE": 1e-6,
        "JOBDIR": jobdir,
        "CONCURRENT_REQUESTS": 1,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "DEBUG",
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    }
    if max_pages:
        settings["CLOSESPIDER_PAGECOUNT"] = max_pages
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Site)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    with open(stats_out, "w") as f:
        json.dump({k: stats.get(k, 0) for k in ("response_received_count",
                                               "dupefilter/filtered", "finish_reason")}, f)


def demo(args):
    with tempfile.TemporaryDirectory() as tmp:
        site = os.path.join(tmp, "site")
        os.mkdir(site)
        make_site(site, args.pages, args.links, args.seed)
        server, counts = serve(site)
        url = "http://127.0.0.1:%d/p0.html" % server.server_address[1]
        jobdir = os.path.join(tmp, "job")
        runs = []
        for n, limit in ((1, args.first), (2, 0)):
            before = sum(counts.values())
            stats_out = os.path.join(tmp, "stats%d.json" % n)
            cmd = [sys.executable, os.path.abspath(__file__), "spider", url, jobdir,
                   "--mode", args.mode, "--max-pages", str(limit), "--stats", stats_out]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                sys.stderr.write(r.stderr)
                print("run %d failed (exit %d)" % (n, r.returncode))
                return 1
            with open(stats_out) as f:
                st = json.load(f)
            fetched = sum(counts.values()) - before
            runs.append(fetched)
            print("run %d: %d pages fetched, %d requests filtered as duplicates (%s)"
                  % (n, fetched, st["dupefilter/filtered"], st["finish_reason"]))
            for line in r.stderr.splitlines():
                if "[dedup.scrapy]" in line:
                    print("   ", line.split("] ", 1)[-1])
        server.shutdown()
        state = os.path.join(jobdir, "requests.dedup")
        twice = sorted(p for p, c in counts.items() if c > 1)
        missing = args.pages - len(counts)
        print("state file %s: %d bytes; pages fetched %d of %d, twice: %d"
              % (os.path.basename(state), os.path.getsize(state), len(counts), args.pages,
                 len(twice)))
        if twice or missing or runs[1] == 0:
            print("FAILED: fetched twice %s, never fetched %d" % (twice[:5], missing))
            return 1
        print("OK: the second run resumed; no page was fetched twice")
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    sp = sub.add_parser("spider")
    sp.add_argument("url")
    sp.add_argument("jobdir")
    sp.add_argument("--mode", default="exact")
    sp.add_argument("--max-pages", type=int, default=0)
    sp.add_argument("--stats", required=True)
    for p in (ap,):
        p.add_argument("--mode", default="exact", choices=["exact", "bloom"])
        p.add_argument("--pages", type=int, default=200)
        p.add_argument("--links", type=int, default=30)
        p.add_argument("--first", type=int, default=60, help="pages in run 1")
        p.add_argument("--seed", type=int,
                       default=int(os.environ.get("DEDUP_TEST_SEED") or random.randrange(1, 2**31)))
    args = ap.parse_args()
    if args.cmd == "spider":
        run_spider(args.url, args.jobdir, args.mode, args.max_pages, args.stats)
        return 0
    print("seed %d (DEDUP_TEST_SEED)" % args.seed)
    return demo(args)


if __name__ == "__main__":
    sys.exit(main())
