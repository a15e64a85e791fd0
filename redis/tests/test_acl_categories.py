#!/usr/bin/python3
"""Module ACL categories (issue 40): the module registers 'bloom', 'cuckoo'
and 'dedup' and puts each BF.*, CF.* and DEDUP.* command in its family's
one, only where the server has the calls for it (RedisModule_AddACLCategory,
Redis 7.4; RedisModule_SetCommandACLCategories, 7.2).

The server here is Debian's Redis 7.0, which has neither: these tests check
that the module loads without a warning, says in its one load notice that
there are no categories, that ACL CAT and the commands' own categories are
the server's alone, and that the commands work, including for a user
granted them one by one (the way to write ACL rules on 7.0).  The branch
for a server with categories is written out below but cannot run here:
it is taken only when the server reports 7.4 or later."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from harness import expect_error, run  # noqa: E402

FAMILIES = {"bloom": "bf.", "cuckoo": "cf.", "dedup": "dedup."}
SAMPLE = {"bloom": "bf.add", "cuckoo": "cf.add", "dedup": "dedup.add"}


def has_categories(r):
    version = r.info("server")["redis_version"]
    return tuple(int(x) for x in version.split(".")[:2]) >= (7, 4)


def load_notice(srv):
    lines = [l for l in srv.log_text().splitlines() if "<dedup>" in l]
    loaded = [l for l in lines if "loaded as" in l]
    assert len(loaded) == 1, lines
    return lines, loaded[0]


def category(r, cat):
    return [c.decode() for c in r.execute_command("ACL", "CAT", cat)]


def test_categories_only_where_the_server_has_them(srv):
    r = srv.client()
    cats = [c.decode() for c in r.execute_command("ACL", "CAT")]
    lines, notice = load_notice(srv)
    if has_categories(r):  # not reached with Debian's 7.0 (see the docstring)
        assert "ACL categories: bloom, cuckoo, dedup)" in notice, notice
        for cat, prefix in FAMILIES.items():
            assert cat in cats, cats
            members = sorted(c.decode() for c in r.execute_command("ACL", "CAT", cat))
            assert members and all(m.startswith(prefix) for m in members), members
            assert SAMPLE[cat] in members, members
        return
    assert "ACL categories: none (this server has no module ACL categories)" in notice, notice
    # a warning ('#') from the module would be log noise on every start
    assert not [l for l in lines if " # " in l], lines
    for cat in SAMPLE:
        assert cat not in cats, cats
        expect_error(r.execute_command, "ACL", "CAT", cat, match="nknown category")
    # Redis 7.0 puts module commands in no category at all (not even @write
    # or @read): they are granted by name, or by +@all
    listed = set()
    for cat in cats:
        listed.update(category(r, cat))
    assert "set" in listed and not [c for c in listed if c.startswith(("bf.", "cf.", "dedup."))]


def test_commands_work_without_categories(srv):
    r = srv.client()
    assert r.execute_command("BF.ADD", "b", "x") == 1
    assert r.execute_command("BF.EXISTS", "b", "x") == 1
    assert r.execute_command("CF.ADD", "c", "x") == 1
    assert r.execute_command("CF.EXISTS", "c", "x") == 1
    assert r.execute_command("DEDUP.RESERVE", "d", 60000, 0.01, 1000) == b"OK"
    assert r.execute_command("DEDUP.ADD", "d", "x") == 1
    assert r.execute_command("DEDUP.ADD", "d", "x") == 0


def test_user_granted_commands_one_by_one(srv):
    r = srv.client()
    if not has_categories(r):
        expect_error(r.execute_command, "ACL", "SETUSER", "cat", "on", ">pw", "~*", "+@bloom",
                     match="nknown")
    r.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~app*", "+bf.add", "+bf.exists")
    try:
        u = redis.Redis(host="127.0.0.1", port=srv.port, username="app", password="pw",
                        socket_timeout=30)
        assert u.execute_command("BF.ADD", "app:b", "x") == 1
        assert u.execute_command("BF.EXISTS", "app:b", "x") == 1
        expect_error(u.execute_command, "CF.ADD", "app:c", "x", match="no permissions to run the 'cf.add'")
        expect_error(u.execute_command, "BF.RESERVE", "app:r", 0.01, 100,
                     match="no permissions to run the 'bf.reserve'")
        u.close()
    finally:
        r.execute_command("ACL", "DELUSER", "app")


if __name__ == "__main__":
    run(globals())
