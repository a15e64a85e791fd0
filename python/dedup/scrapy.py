"""A Scrapy duplicate filter over libdedup (Debian's python3-scrapy, 2.8).

    # settings.py
    DUPEFILTER_CLASS = "dedup.scrapy.DupeFilter"
    DEDUP_MODE = "exact"            # or "bloom", "store", "redis"
    DEDUP_STATE_FILE = "seen.dedup" # optional; default JOBDIR/requests.dedup
    DEDUP_STORE_DIR = "seen.store"  # "store": default JOBDIR/requests.store
    DEDUP_REDIS_URL = "redis://127.0.0.1:6379"   # "redis": shared by every crawler
    DEDUP_REDIS_NAME = "scrapy"     # key prefix: one seen-set per name
    DEDUP_REDIS_TTL = 0             # seconds a request stays seen; 0 = forever
    DEDUP_BLOOM_CAPACITY = 10_000_000
    DEDUP_BLOOM_ERROR_RATE = 0.001

It keeps Scrapy's request fingerprints (crawler.request_fingerprinter, 20
bytes each) in a dedup.StrSet ("exact": certain, about 50 bytes a request
where Scrapy's own filter keeps a 40-character hex str in a Python set) or
in a dedup.Bloom ("bloom": fixed memory, ~1.44*log2(1/p) bits a request;
a false positive drops a request never seen, at about the rate asked), or
in the RocksDB store ("store": dedup.SeenSet.open_store, exact, on disk,
every decision durable when the call returns; when this build has it), or
in Redis ("redis": dedup.SeenSet.open_redis, shared by every crawler that
names the same URL and name, with a TTL if asked; a request whose reply was
lost (dedup.UNCERTAIN) is dropped and counted like a duplicate, as the
library says callers must).

State: when DEDUP_STATE_FILE (or JOBDIR) is set, the filter loads the file
when the spider opens and saves it atomically when it closes (temporary
file, fsync, rename: a crash leaves the previous state).  The file is the
CLI's format (`dedup filter info`, `dedup filter query` read it).  A state
file of the other mode, or a damaged one, stops the crawl with dedup.Error
rather than starting from nothing.

Like Scrapy's RFPDupeFilter it counts dupefilter/filtered in the stats and
logs the first filtered request (every one with DUPEFILTER_DEBUG).
"""
import logging
import os

from scrapy.utils.job import job_dir
from scrapy.utils.request import RequestFingerprinter, referer_str

import dedup

try:  # Scrapy >= 2.7
    from scrapy.dupefilters import BaseDupeFilter
except ImportError:  # pragma: no cover
    BaseDupeFilter = object

MODES = ("exact", "bloom", "store", "redis")


class DupeFilter(BaseDupeFilter):
    """Request fingerprint duplicate filter kept in libdedup."""

    def __init__(self, path=None, debug=False, *, mode="exact", capacity=10_000_000,
                 error_rate=0.001, fingerprinter=None, redis_name="scrapy", redis_ttl=0):
        if mode not in MODES:
            raise ValueError("DEDUP_MODE must be one of %s (got %r)" % (", ".join(MODES), mode))
        self.path = path
        self.mode = mode
        self.debug = debug
        self.logdupes = True
        self.fingerprinter = fingerprinter or RequestFingerprinter()
        self.logger = logging.getLogger(__name__)
        self.seen = None
        if mode == "redis":
            if not path:
                raise ValueError("DEDUP_MODE 'redis' needs DEDUP_REDIS_URL")
            if not hasattr(dedup.SeenSet, "open_redis"):
                raise ValueError("this dedup package was built without the Redis seen-set")
            self.seen = dedup.SeenSet.open_redis(path, name=redis_name, ttl=redis_ttl)
            self.logger.info("Using the Redis seen-set %r at %s (ttl %s s)", redis_name, path,
                             redis_ttl or "none")
        elif mode == "store":
            if not path:
                raise ValueError("DEDUP_MODE 'store' needs DEDUP_STORE_DIR or JOBDIR")
            if not hasattr(dedup.SeenSet, "open_store"):
                raise ValueError("this dedup package was built without the RocksDB store")
            self.seen = dedup.SeenSet.open_store(path)
            self.logger.info("Using the store %s (%d requests seen)", path, len(self.seen))
        elif path and os.path.exists(path):
            self.seen = dedup.load(path)
            want = dedup.StrSet if mode == "exact" else dedup.Bloom
            if not isinstance(self.seen, want):
                raise dedup.Error("%s: holds a %s, not the state of DEDUP_MODE %r"
                                  % (path, type(self.seen).__name__, mode))
            self.logger.info("Resuming from %s (%s, %d requests seen)", path, mode, len(self.seen))
        elif mode == "exact":
            self.seen = dedup.StrSet()
        else:
            self.seen = dedup.Bloom(capacity, error_rate)

    @classmethod
    def from_settings(cls, settings, *, fingerprinter=None):
        mode = settings.get("DEDUP_MODE", "exact")
        store = mode == "store"
        path = settings.get({"store": "DEDUP_STORE_DIR", "redis": "DEDUP_REDIS_URL"}.get(
            mode, "DEDUP_STATE_FILE"))
        if not path and mode != "redis":
            jobdir = job_dir(settings)
            name = "requests.store" if store else "requests.dedup"
            path = os.path.join(jobdir, name) if jobdir else None
        return cls(path, settings.getbool("DUPEFILTER_DEBUG"), mode=mode,
                   capacity=settings.getint("DEDUP_BLOOM_CAPACITY", 10_000_000),
                   error_rate=settings.getfloat("DEDUP_BLOOM_ERROR_RATE", 0.001),
                   fingerprinter=fingerprinter,
                   redis_name=settings.get("DEDUP_REDIS_NAME", "scrapy"),
                   redis_ttl=settings.getfloat("DEDUP_REDIS_TTL", 0))

    @classmethod
    def from_crawler(cls, crawler):
        return cls.from_settings(crawler.settings, fingerprinter=crawler.request_fingerprinter)

    def request_fingerprint(self, request):
        return self.fingerprinter.fingerprint(request)

    def request_seen(self, request):
        # add() and decide() are the library's test-and-add: one call, no
        # race between "is it there?" and "record it".
        fp = self.request_fingerprint(request)
        if self.mode == "store":
            return self.seen.decide(fp) != dedup.NEW
        if self.mode == "redis":
            if self.seen.decide(fp) != dedup.NEW:
                return True
            # the request is now in Scrapy's queue: make the key permanent
            # (with a TTL it was only reserved; see dedup/redis.h)
            self.seen.commit(fp)
            return False
        return not self.seen.add(fp)

    def open(self):
        pass

    def close(self, reason):
        if self.mode == "redis":
            self.seen.close()
        elif self.mode == "store":
            n = len(self.seen)
            self.seen.close()  # durable, and the store's lock released
            self.logger.info("Closed the store %s (%d requests seen)", self.path, n)
        elif self.path:
            self.seen.save(self.path)
            self.logger.info("Saved %d request fingerprints (%s) to %s", len(self.seen),
                             self.mode, self.path)

    def log(self, request, spider):
        if self.debug:
            msg = "Filtered duplicate request: %(request)s (referer: %(referer)s)"
            args = {"request": request, "referer": referer_str(request)}
            self.logger.debug(msg, args, extra={"spider": spider})
        elif self.logdupes:
            msg = ("Filtered duplicate request: %(request)s"
                   " - no more duplicates will be shown"
                   " (see DUPEFILTER_DEBUG to show all duplicates)")
            self.logger.debug(msg, {"request": request}, extra={"spider": spider})
            self.logdupes = False
        spider.crawler.stats.inc_value("dupefilter/filtered", spider=spider)
