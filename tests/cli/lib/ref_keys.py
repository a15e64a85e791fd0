#!/usr/bin/env python3
"""Reference model of dedup's keys from fields, CSV records and headers, for
tests/cli/keys.sh: Python's csv module (strict) reads the records, a dict
keeps the first occurrence of every key.

  ref_keys.py gen SEED N [hostile]    a random CSV file on stdout
  ref_keys.py ref [OPTIONS] FILE...   the expected output on stdout, exit
                                      status 1 where dedup fails (fail mode)
OPTIONS: --csv --header -f SPEC -d C -i --trim --on-bad-key MODE -D (repeats),
-m SIZE (no effect on the output), --keep last, --nrec (print the number of
records written but the header, instead of them)
"""
import csv, random, sys

SPACE = " \t\r\n\v\f"
FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def gen(seed, n, hostile):
    rnd = random.Random(seed)
    pool = ["", "a", "A", "b", " a ", "x,y", 'q"q', '""', "line\nbreak", "cr\r\nlf", "\x00",
            "z\x00z", "é", "1", "01", " ", "tab\tin", ",", '"', "A ", "a,b"]
    users = [str(i) for i in range(8)]
    out = []
    out.append(["user", "ad", "ts", "note"])
    for i in range(n):
        row = [rnd.choice(users), rnd.choice(pool + ["ad1", "ad2"]), str(i), rnd.choice(pool)]
        if rnd.random() < 0.2:
            row = row[:rnd.randrange(0, 4)]  # short rows, empty rows
        out.append(row)
    text = []
    for row in out:
        quote_all = rnd.random() < 0.3
        line = []
        for f in row:
            # bare \r outside quotes is not CSV Python reads: such fields are quoted
            if quote_all or any(c in f for c in ',"\n\r') or (f.strip() != f and rnd.random() < 0.5):
                line.append('"' + f.replace('"', '""') + '"')
            else:
                line.append(f)
        text.append(",".join(line) + rnd.choice(["\n", "\n", "\r\n"]))
        if hostile and rnd.random() < 0.05:
            text.append(rnd.choice(['"ab"cd,e\n', 'x,"y"z\n', '"a""b"x,"c\nd"\n']))
    if hostile and rnd.random() < 0.5:
        text.append('"open,' + rnd.choice(["", "x\n", "y\r\n"]))
    elif rnd.random() < 0.5 and text:
        text[-1] = text[-1].rstrip("\r\n")
    sys.stdout.buffer.write("".join(text).encode("latin-1"))


def split_lines(data):
    lines, start = [], 0
    while start < len(data):
        e = data.find("\n", start)
        e = len(data) if e < 0 else e + 1
        lines.append(data[start:e])
        start = e
    return lines


def records_csv(data, delim):
    """(raw text, fields or None when malformed, complete) for each record.
    Records end where Python's lenient reader ends them (text after a closing
    quote goes on as unquoted text); a record is malformed when the strict
    reader refuses it."""
    it = iter(split_lines(data))
    taken = []

    def feed():
        for l in it:
            taken.append(l)
            yield l
    rd = csv.reader(feed(), delimiter=delim, strict=False)
    while True:
        taken.clear()
        try:
            row = next(rd)
        except StopIteration:
            return
        raw = "".join(taken)
        complete = raw.endswith("\n")
        try:
            rows = list(csv.reader(split_lines(raw), delimiter=delim, strict=True))
            assert len(rows) == 1 and rows[0] == row, (raw, rows, row)
        except csv.Error as e:
            row = None
            if "unexpected end" in str(e):
                complete = False
        yield raw, row, complete


def records_plain(data, delim):
    start = 0
    while start < len(data):
        e = data.find("\n", start)
        if e < 0:
            raw = data[start:] 
            yield raw, raw.split(delim), False
            return
        raw = data[start:e + 1]
        yield raw, raw[:-1].split(delim), True
        start = e + 1


def parse_spec(spec, names):
    items = []
    for it in spec.split(","):
        if all(c.isdigit() or c == "-" for c in it):
            if "-" in it:
                a, b = it.split("-", 1)
                items.append((int(a) if a else 1, int(b) if b else None))
            else:
                items.append((int(it), int(it)))
        else:
            if it not in names:
                return None, it
            i = names.index(it) + 1
            items.append((i, i))
    return items, None


def norm(v, o):
    if o["trim"]:
        v = v.strip(SPACE)
    if o["icase"]:
        v = v.translate(FOLD)
    return v


def key_of(fields, o, items, csvfmt):
    if items is None:  # whole record
        return ("T",) + tuple(norm(f, o) for f in fields)
    if len(items) == 1 and items[0][0] == items[0][1]:
        i = items[0][0]
        return ("S", norm(fields[i - 1] if i <= len(fields) else "", o))
    out = []
    for lo, hi in items:
        top = len(fields) if hi is None else hi
        for i in range(lo, top + 1):
            out.append(norm(fields[i - 1] if i <= len(fields) else "", o))
    return ("T",) + tuple(out)


def ref(argv):
    o = {"csv": False, "header": False, "spec": None, "delim": None, "icase": False,
         "trim": False, "bad": "fail", "dups": False, "last": False}
    files = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--csv": o["csv"] = True
        elif a == "--header": o["header"] = True
        elif a == "-f": i += 1; o["spec"] = argv[i]
        elif a == "-d": i += 1; o["delim"] = argv[i]
        elif a == "-i": o["icase"] = True
        elif a == "--trim": o["trim"] = True
        elif a == "--on-bad-key": i += 1; o["bad"] = argv[i]
        elif a == "-D": o["dups"] = True
        elif a == "--keep": i += 1; o["last"] = argv[i] == "last"
        elif a == "-m": i += 1
        elif a == "--nrec": o["nrec"] = True
        else: files.append(a)
        i += 1
    delim = o["delim"] or ("," if o["csv"] else "\t")
    out = []
    seen = set()
    items = None
    header = None
    rc = 0
    lasts = []
    for fn in files:
        data = open(fn, "rb").read().decode("latin-1")
        recs = (records_csv if o["csv"] else records_plain)(data, delim)
        first = True
        for raw, fields, complete in recs:
            text = raw if complete else raw + "\n"
            if o["header"] and first:
                first = False
                if header is None:
                    header = text
                    if o["spec"]:
                        if fields is None:
                            return 2
                        hf = list(fields)
                        if hf and not o["csv"] and hf[-1].endswith("\r"):
                            hf[-1] = hf[-1][:-1]
                        items, missing = parse_spec(o["spec"], hf)
                        if missing is not None:
                            return 2
                    out.append(header)
                continue
            first = False
            if header is None and o["spec"] and items is None:
                items, _ = parse_spec(o["spec"], [])
            if fields is None:
                if o["bad"] == "fail":
                    sys.stdout.buffer.write("".join(out).encode("latin-1"))
                    return 1
                if o["bad"] == "keep" and o["last"]:
                    lasts.append((("BAD", len(lasts)), text))  # written where it stands
                elif o["bad"] == "keep":
                    out.append(text)
                continue
            if o["csv"] and not fields:
                fields = []
            k = key_of(fields, o, items, o["csv"]) if (o["spec"] or o["csv"]) else ("R", raw[:-1] if complete else raw)
            if o["last"]:
                lasts.append((k, text))
                continue
            if k not in seen:
                seen.add(k)
                if not o["dups"]:
                    out.append(text)
            elif o["dups"]:
                out.append(text)
    if o["last"]:
        final = {k: i for i, (k, _) in enumerate(lasts)}
        out += [t for i, (k, t) in enumerate(lasts) if final[k] == i]
    if o.get("nrec"):  # the count of records written, the header left out
        print(len(out) - (header is not None))
        return rc
    sys.stdout.buffer.write("".join(out).encode("latin-1"))
    return rc


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(int(sys.argv[2]), int(sys.argv[3]), len(sys.argv) > 4)
    else:
        sys.exit(ref(sys.argv[2:]))
