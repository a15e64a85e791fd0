"""dedup.scrapy.DupeFilter against Scrapy 2.8's own filter contract."""
import logging
import os
import subprocess
import sys

import pytest

scrapy = pytest.importorskip("scrapy")
from scrapy import Request  # noqa: E402
from scrapy.dupefilters import RFPDupeFilter  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

import dedup  # noqa: E402
from dedup.scrapy import DupeFilter  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "scrapy_dedup", "crawl.py")


def crawler(**settings):
    settings.setdefault("REQUEST_FINGERPRINTER_IMPLEMENTATION", "2.7")
    return get_crawler(scrapy.Spider, settings)


HAVE_STORE = hasattr(dedup.SeenSet, "open_store")


@pytest.mark.parametrize("mode", ["exact", "bloom"] + (["store"] if HAVE_STORE else []))
def test_same_answers_as_scrapys_filter(mode, rng, tmp_path):
    c = crawler(DEDUP_MODE=mode, DEDUP_BLOOM_CAPACITY=10000, DEDUP_BLOOM_ERROR_RATE=1e-6,
                JOBDIR=str(tmp_path))
    ours = DupeFilter.from_crawler(c)
    theirs = RFPDupeFilter.from_crawler(c)
    urls = ["http://example.com/p%d?x=%d" % (rng.randrange(500), rng.randrange(3))
            for _ in range(3000)]
    reqs = [Request(u, method=rng.choice(["GET", "POST"])) for u in urls]
    for r in reqs:
        assert ours.request_seen(r) == theirs.request_seen(r), r
    ours.close("finished")
    if mode == "store":  # a second run remembers every request, from disk
        again = DupeFilter.from_crawler(c)
        assert all(again.request_seen(r) for r in reqs[:200])
        assert not again.request_seen(Request("http://example.com/never"))
        again.close("finished")


def test_from_settings_state_file_and_stats(tmp_path, caplog):
    path = str(tmp_path / "seen.dedup")
    c = crawler(DEDUP_STATE_FILE=path)
    spider = c._create_spider("s")
    f = DupeFilter.from_settings(c.settings, fingerprinter=c.request_fingerprinter)
    assert f.request_seen(Request("http://a/1")) is False
    assert f.request_seen(Request("http://a/1")) is True
    with caplog.at_level(logging.DEBUG, logger="dedup.scrapy"):
        f.log(Request("http://a/1"), spider)
        f.log(Request("http://a/1"), spider)
    assert c.stats.get_value("dupefilter/filtered") == 2
    shown = [r for r in caplog.records if "Filtered duplicate request" in r.getMessage()]
    assert len(shown) == 1 and "no more duplicates will be shown" in shown[0].getMessage()
    assert not os.path.exists(path)
    f.close("finished")
    assert isinstance(dedup.load(path), dedup.StrSet)
    # the next run resumes from the file
    g = DupeFilter.from_crawler(c)
    assert g.request_seen(Request("http://a/1")) is True
    assert g.request_seen(Request("http://a/2")) is False
    # a state of the other mode is refused, not silently replaced
    with pytest.raises(dedup.Error, match="DEDUP_MODE"):
        DupeFilter.from_crawler(crawler(DEDUP_STATE_FILE=path, DEDUP_MODE="bloom"))
    # a damaged state stops the crawl
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) - 3)
    with pytest.raises(dedup.Error, match="truncated"):
        DupeFilter.from_crawler(c)


def test_jobdir_and_debug(tmp_path):
    c = crawler(JOBDIR=str(tmp_path), DUPEFILTER_DEBUG=True, DEDUP_MODE="bloom")
    f = DupeFilter.from_crawler(c)
    assert f.debug and f.path == str(tmp_path / "requests.dedup")
    f.request_seen(Request("http://a/"))
    f.close("finished")
    assert isinstance(dedup.load(f.path), dedup.Bloom)
    with pytest.raises(ValueError, match="DEDUP_MODE"):
        DupeFilter.from_crawler(crawler(DEDUP_MODE="redis"))


def test_example_crawl_and_resume():
    r = subprocess.run([sys.executable, EXAMPLE, "--pages", "80", "--first", "25"],
                       capture_output=True, text=True, timeout=150)
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0
    assert "OK: the second run resumed; no page was fetched twice" in r.stdout
    assert "Resuming from" in r.stdout


def test_redis_mode_shared_by_two_crawlers(redis_url, rng):
    c = crawler(DEDUP_MODE="redis", DEDUP_REDIS_URL=redis_url, DEDUP_REDIS_NAME="crawl",
                DEDUP_REDIS_TTL=60)
    a, b = DupeFilter.from_crawler(c), DupeFilter.from_settings(
        c.settings, fingerprinter=c.request_fingerprinter)
    theirs = RFPDupeFilter.from_crawler(c)
    reqs = [Request("http://example.com/%d" % rng.randrange(300)) for _ in range(1000)]
    for i, r in enumerate(reqs):
        ours = (a if i % 2 else b).request_seen(r)  # two crawlers, one history
        assert ours == theirs.request_seen(r), r
    a.close("finished")
    b.close("finished")
    again = DupeFilter.from_crawler(c)
    assert all(again.request_seen(r) for r in reqs)
    again.close("finished")
