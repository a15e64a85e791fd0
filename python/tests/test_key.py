"""dedup.Key: the library's key extraction, checked against the CLI (the
records `dedup` keeps are the first of each key) and against Python models."""
import json
import subprocess

import pytest

import dedup


def first_of_each_key(records, key):
    seen = dedup.StrSet()
    return [r for r in records if seen.add(key(r))]


def cli_keep(dedup_bin, args, records):
    r = subprocess.run([dedup_bin, *args], input="\n".join(records) + "\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_csv_fields_as_the_cli(rng, dedup_bin):
    names = ["ann", "bob", "c,d", 'say "hi"']
    recs = []
    for _ in range(400):
        a, b = rng.choice(names), rng.choice(names)
        q = lambda v: '"%s"' % v.replace('"', '""') if ("," in v or '"' in v) else v
        recs.append("%s,%d,%s" % (q(a), rng.randrange(3), q(b)))
    k = dedup.Key("1,3", format="csv")
    assert first_of_each_key(recs, k) == cli_keep(dedup_bin, ["--csv", "-f", "1,3"], recs)
    # a model: the key is the tuple of the two unquoted fields
    import csv
    rows = list(csv.reader(recs))
    model = []
    seen = set()
    for r, row in zip(recs, rows):
        if (row[0], row[2]) not in seen:
            seen.add((row[0], row[2]))
            model.append(r)
    assert first_of_each_key(recs, k) == model
    hk = dedup.Key("x", format="csv", header="x,y")
    assert hk("1,2") == dedup.Key("1", format="csv")("1,2") == b"1"


def test_json_paths_and_urls_as_the_cli(rng, dedup_bin):
    recs = [json.dumps({"u": {"id": rng.choice([1, 1.0, 2, "1"])}, "n": i}) for i in range(200)]
    k = dedup.Key(format="json", json_paths=".u.id")
    assert first_of_each_key(recs, k) == cli_keep(dedup_bin, ["--json", ".u.id"], recs)
    assert k('{"u":{"id":1}}') == k('{"u":{"id":10e-1}}') != k('{"u":{"id":"1"}}')
    urls = ["HTTP://Example.com:80/a/./b?utm_source=%d&q=%d#x" % (rng.randrange(3), rng.randrange(3))
            for _ in range(200)]
    u = dedup.Key(url=True, url_drop="utm_*")
    assert first_of_each_key(urls, u) == cli_keep(
        dedup_bin, ["--url", "--url-drop-params", "utm_*"], urls)
    assert u(urls[0]).startswith(b"http://example.com/a/b?q=")


def test_records_without_a_key_and_bad_specs():
    j = dedup.Key(format="json", json_paths=".a")
    assert j.keys(['{"a":1}', "not json", "{}"])[1:] == [None, None]
    with pytest.raises(dedup.Error):
        j("not json")
    with pytest.raises(dedup.Error, match="at byte"):
        dedup.Key("1,,x-")
    with pytest.raises(dedup.Error):
        dedup.Key("nope", format="csv", header="a,b")
    with pytest.raises(TypeError, match="int"):
        dedup.Key("1")(5)
    assert dedup.Key().identity and dedup.Key()(b"whole") == b"whole"
