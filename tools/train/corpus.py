#!/usr/bin/env python3
"""Stage 1: build the en-de parallel corpus from Debian's own translations.

Sources
  * the German gettext catalogues of the installed packages: /usr/share/locale/de/LC_MESSAGES/*.mo
  * the German catalogues inside the .debs fetched by tools/train/fetch.sh (WORK/debs, never installed):
    every */de/LC_MESSAGES/*.mo (and */de_DE/...) in the package
  * the DDTP package-description indexes Translation-en / Translation-de in /var/lib/apt/lists (fetch.sh runs
    apt-get update with Acquire::Languages en, de), aligned by Description-md5, then by line / paragraph /
    sentence where the counts agree

The .mo files are read directly (the GNU .mo format; the same pairs that `msgunfmt` prints): plural entries give
their singular pair, entries with a msgctxt keep the msgid.

Cleaning (per pair): accelerator markers removed (_ & ~ when both sides have exactly one), whitespace collapsed;
dropped when the placeholder multisets differ (printf %s/%d/%1$s/%(x)s, Qt %1, Python/.NET {0}/{name}),
markup-heavy (> 2 tags or > 25 % of the characters inside <...>), over-long (> 200 characters either side),
length ratio > 3 (characters + 5 smoothing), identical source and target, no letter in the source,
old-style "context|text" msgids. Then de-duplicated (at most MAX_PER_SRC distinct translations per source).

Split by source string with a fixed seed: dev (1,000) and test (2,000) are drawn from the sources of at least
three words; every pair whose normalised source (lower case, letters and digits only) equals a dev/test source
is kept out of train.

Writes WORK/corpus/{train,dev,test}.{en,de}, WORK/corpus/provenance.tsv (package, origin, pairs, licence) and
stats.json. Deterministic: same inputs and seed -> same files.

Usage: tools/.venv/bin/python tools/train/corpus.py [--work .train] [--seed 20261129]
"""

import argparse
import collections
import glob
import hashlib
import io
import json
import os
import random
import re
import struct
import subprocess
import sys
import tarfile
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LEN = 200
MAX_RATIO = 3.0
MAX_PER_SRC = 3
N_DEV, N_TEST = 1000, 2000


# ---------------------------------------------------------------------------------------------------- .mo reading

def read_mo(data):
    """-> list of (msgid, msgstr) (singular forms), decoded with the catalogue's charset."""
    if len(data) < 28:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic == 0x950412de else ">" if magic == 0xde120495 else None
    if end is None:
        return []
    _, n, ooff, toff = struct.unpack(end + "4I", data[4:20])
    raw = []
    for i in range(n):
        ol, oo = struct.unpack(end + "2I", data[ooff + 8 * i: ooff + 8 * i + 8])
        tl, to = struct.unpack(end + "2I", data[toff + 8 * i: toff + 8 * i + 8])
        raw.append((data[oo:oo + ol], data[to:to + tl]))
    charset = "utf-8"
    for k, v in raw:
        if k == b"":
            m = re.search(rb"charset=([-\w]+)", v)
            if m:
                charset = m.group(1).decode("ascii").lower()
    out = []
    for k, v in raw:
        if not k:
            continue
        try:
            ks, vs = k.decode(charset), v.decode(charset)
        except (UnicodeDecodeError, LookupError):
            continue
        if "\x04" in ks:  # msgctxt \x04 msgid
            ks = ks.split("\x04", 1)[1]
        ks = ks.split("\x00")[0]
        vs = vs.split("\x00")[0]
        if ks and vs:
            out.append((ks, vs))
    return out


PO_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def po_unquote(q):
    """The C-escaped body of one PO string line "..." -> text."""
    return re.sub(r'\\(.)', lambda m: PO_ESC.get(m.group(1), m.group(1)), q)


def read_po(text):
    """A gettext .po catalogue's text -> list of (msgid, msgstr) (singular forms), like read_mo: the header, fuzzy,
    obsolete (#~) and untranslated entries are left out, a msgctxt is dropped."""
    out = []
    entry, key, fuzzy = {}, None, False

    def done():  # the entry so far has its translation: a comment or a new msgctxt/msgid starts the next one
        return "msgstr" in entry or "msgstr[0]" in entry

    def flush():
        mid, mstr = entry.get("msgid", ""), entry.get("msgstr", entry.get("msgstr[0]", ""))
        if mid and mstr and not fuzzy:
            out.append((mid, mstr))

    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#~"):
            continue
        if not line or (line.startswith("#") and done()):
            if entry:
                flush()
            entry, key, fuzzy = {}, None, False
        if line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            continue
        m = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+"(.*)"$', line)
        if m:
            if m.group(1) in ("msgctxt", "msgid") and done():
                flush()
                entry, fuzzy = {}, False
            key = m.group(1)
            entry[key] = po_unquote(m.group(2))
        elif line.startswith('"') and line.endswith('"') and key:
            entry[key] += po_unquote(line[1:-1])
    if entry:
        flush()
    return out


LUA_PAIR_RE = re.compile(r'^\s*\["((?:[^"\\]|\\.)*)"\]\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def read_lua_locale(text):
    """A Lua locale table (Hedgewars' Data/Locale/de.lua: ["English"] = "Deutsch", one per line; untranslated
    entries are commented out with --) -> list of (English, German)."""
    out = []
    for line in text.splitlines():
        m = LUA_PAIR_RE.match(line)
        if m:
            s, t = po_unquote(m.group(1)), po_unquote(m.group(2))
            if s and t:
                out.append((s, t))
    return out


QM_MAGIC = bytes.fromhex("3cb86418caef9c95cd211cbf60a1bddd")


def read_qm(data):
    """A compiled Qt catalogue (.qm, as lrelease writes it; GCompris' gcompris_de.qm) -> list of (English,
    German). The file is the magic and then blocks (tag byte, big-endian length); the messages block (tag 0x69)
    is a run of fields (tag byte, then a big-endian length and bytes for the strings): 3 a translation in
    UTF-16BE (one per plural form: the first is kept; length 0xffffffff for none), 6 the source text in UTF-8,
    7 its context, 8 its comment, 5 four bytes of obsolete data, 1 the end of one message. Messages without a
    source text (an id-based catalogue) or without a translation are left out."""
    if data[:16] != QM_MAGIC:
        return []
    out, i = [], 16
    while i + 5 <= len(data):
        tag, n = data[i], struct.unpack(">I", data[i + 1:i + 5])[0]
        i += 5
        if tag == 0x69:
            j, end, src, tr = i, min(i + n, len(data)), None, []
            while j < end:
                t = data[j]
                j += 1
                if t == 1:
                    if src and tr and tr[0]:
                        out.append((src, tr[0]))
                    src, tr = None, []
                elif t == 5:
                    j += 4
                elif t in (2, 3, 6, 7, 8):
                    m = struct.unpack(">I", data[j:j + 4])[0]
                    j += 4
                    if m == 0xFFFFFFFF:
                        continue
                    b = data[j:j + m]
                    j += m
                    if t == 3:
                        tr.append(b.decode("utf-16-be", "replace"))
                    elif t == 6:
                        src = b.decode("utf-8", "replace")
                else:
                    break  # a field this reader does not know: the rest of the block cannot be framed
        i += n
    return out


def read_stamp_description(text):
    """A Tux Paint stamp description (stamps/.../NAME.txt: the English text on the first line, then one line
    per language, "de.utf8=German text") -> [(English, German)] or []."""
    lines = text.splitlines()
    if not lines:
        return []
    en = lines[0].strip()
    for line in lines[1:]:
        if line.startswith("de.utf8="):
            de = line[len("de.utf8="):].strip()
            return [(en, de)] if en and de else []
    return []


# German catalogues inside a package: gettext .mo under de/LC_MESSAGES (MO_CATALOGUE_RE, what stage 1 and
# deb_sources read by default); with GERMAN_CATALOGUE_RE also .po named de.po or *.de.po and Lua locale tables
# named de.lua under a Locale directory; with EDU_CATALOGUE_RE also compiled Qt catalogues NAME_de.qm and Tux
# Paint's stamp descriptions (stamps/.../NAME.txt)
MO_PATTERN = r"/de(_DE)?(\.UTF-8)?/LC_MESSAGES/.*\.mo"
MO_CATALOGUE_RE = re.compile(MO_PATTERN + "$")
GERMAN_PATTERN = f"{MO_PATTERN}|/(de|[^/]+\\.de)\\.po|/[Ll]ocale/de\\.lua"
GERMAN_CATALOGUE_RE = re.compile(f"({GERMAN_PATTERN})$")
EDU_CATALOGUE_RE = re.compile(f"({GERMAN_PATTERN}|/[^/]+_de\\.qm|/tuxpaint/stamps/.+\\.txt)$")


def read_catalogue(name, data):
    """A German catalogue file found by GERMAN_CATALOGUE_RE or EDU_CATALOGUE_RE -> list of (English, German)."""
    if name.endswith(".mo"):
        return read_mo(data)
    if name.endswith(".qm"):
        return read_qm(data)
    text = data.decode("utf-8", "replace")
    if name.endswith(".txt"):
        return read_stamp_description(text)
    return read_lua_locale(text) if name.endswith(".lua") else read_po(text)

# ------------------------------------------------------------------------------------------------------- cleaning

PH_RE = re.compile(
    r"%(?:\d+\$)?(?:\([^)]*\))?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?"
    r"[diouxXeEfFgGaAcspn]"
    r"|%\d+"                    # Qt %1
    r"|\{[A-Za-z_0-9.:]*\}"     # Python / .NET {0} {name}
    r"|\$\{?[A-Za-z_]\w*\}?"    # $VAR ${VAR}
)
TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>")
WS_RE = re.compile(r"\s+")
LETTER_RE = re.compile(r"[^\W\d_]")


def placeholders(s):
    ph = []
    for m in PH_RE.findall(s.replace("%%", "")):
        m = re.sub(r"^%\d+\$", "%", m)  # positional printf -> plain
        ph.append(m)
    return sorted(ph)


def strip_accel(s, t):
    for ch in "_&~":
        pat = re.compile(re.escape(ch) + r"(?=\w)")
        if ch == "&":
            pat = re.compile(r"&(?=\w)(?![a-zA-Z]+;|#\d+;)")
        if len(pat.findall(s)) == 1 and len(pat.findall(t)) == 1:
            s, t = pat.sub("", s), pat.sub("", t)
    return s, t


def norm_space(s):
    return WS_RE.sub(" ", s).strip()


def keep(s, t, max_len=MAX_LEN):
    """-> None if kept, else the reason it is dropped."""
    if s == t:
        return "identical"
    if len(s) > max_len or len(t) > max_len:
        return "long"
    if max(len(s), len(t)) + 5 > MAX_RATIO * (min(len(s), len(t)) + 5):
        return "ratio"
    if not LETTER_RE.search(s) or not LETTER_RE.search(t):
        return "noletter"
    if re.fullmatch(r"[\w\-]+\|.+", s):  # "noun|Open" style context
        return "context"
    for x in (s, t):
        tags = TAG_RE.findall(x)
        if len(tags) > 2 or sum(map(len, tags)) > 0.25 * len(x):
            return "markup"
    if placeholders(s) != placeholders(t):
        return "format"
    return None


def normkey(s):
    return "".join(ch for ch in unicodedata.normalize("NFKC", s).lower() if ch.isalnum())


def read_keys(paths):
    """The normalised sources (normkey) of the lines of every file of PATHS that exists."""
    keys = set()
    for p in paths:
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                keys.update(normkey(x.rstrip("\n")) for x in f)
    keys.discard("")
    return keys


def explode(s, t):
    """A msgid/msgstr pair with several lines -> line pairs when the counts agree, else the joined pair."""
    s_lines = [x for x in s.split("\n") if x.strip()]
    t_lines = [x for x in t.split("\n") if x.strip()]
    if len(s_lines) > 1 and len(s_lines) == len(t_lines):
        return list(zip(s_lines, t_lines))
    return [(s, t)]


SENT_RE = re.compile(r"(?<=[.!?:])\s+(?=[\"'(\[A-ZÄÖÜ0-9])")


def sent_pairs(s, t):
    ss, ts = SENT_RE.split(s), SENT_RE.split(t)
    if len(ss) > 1 and len(ss) == len(ts):
        return list(zip(ss, ts))
    return [(s, t)]


# -------------------------------------------------------------------------------------------------------- sources

def installed_owner_map():
    """/usr/share/locale/de/LC_MESSAGES file -> package, from dpkg's file lists."""
    owner = {}
    for lst in glob.glob("/var/lib/dpkg/info/*.list"):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        try:
            with open(lst, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if "/LC_MESSAGES/" in line and line.rstrip().endswith(".mo"):
                        owner[line.rstrip()] = pkg
        except OSError:
            pass
    return owner


def licence_of_copyright(text):
    if not text:
        return "unknown"
    lic = []
    for m in re.finditer(r"^License:[ \t]*(\S.*)$", text, re.M):
        v = m.group(1).strip()
        if v not in lic:
            lic.append(v)
    if lic:
        return "; ".join(lic[:6]) + ("; ..." if len(lic) > 6 else "")
    # a copyright file that is not machine-readable: the GNU licences named in its prose
    flat = re.sub(r"\s+", " ", text)
    for m in re.finditer(r"GNU (Lesser |Library )?General Public License,? (?:as published by the Free Software "
                         r"Foundation; )?(?:either )?version (\d)(.{0,60})", flat):
        v = ("L" if m.group(1) else "") + "GPL-" + m.group(2) + ("+" if "later version" in m.group(3) else "")
        if v not in lic:
            lic.append(v)
    if "origin of this software must not be misrepresented" in flat:  # the zlib licence's clause 1
        lic.append("Zlib")
    if lic:
        return "; ".join(lic)
    first = [x.strip() for x in text.splitlines() if x.strip()][:2]
    return " / ".join(first)[:160]


def installed_sources():
    owner = installed_owner_map()
    for path in sorted(glob.glob("/usr/share/locale/de/LC_MESSAGES/*.mo")):
        real = os.path.realpath(path)
        pkg = owner.get(path) or owner.get(real) or "unknown"
        with open(path, "rb") as f:
            data = f.read()
        try:
            with open(f"/usr/share/doc/{pkg}/copyright", encoding="utf-8", errors="replace") as f:
                lic = licence_of_copyright(f.read())
        except OSError:
            lic = "unknown"
        yield pkg, "installed", lic, os.path.basename(path), data


def deb_sources(debdir, catalogue_re=MO_CATALOGUE_RE):
    """-> (package, origin, licence, file name, bytes) for every German catalogue (a file whose path matches
    catalogue_re; the gettext .mo files by default) of the .deb packages in DEBDIR."""
    for deb in sorted(glob.glob(os.path.join(debdir, "*.deb"))):
        pkg = os.path.basename(deb).split("_")[0]
        try:
            tar_bytes = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], check=True,
                                       capture_output=True).stdout
        except subprocess.CalledProcessError:
            print(f"corpus: cannot read {deb}", file=sys.stderr)
            continue
        cats, lic = [], "unknown"
        with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tf:
            for m in tf:
                n = m.name
                if m.isfile() and catalogue_re.search(n):
                    cats.append((os.path.basename(n), tf.extractfile(m).read()))
                elif m.isfile() and n.endswith(f"/usr/share/doc/{pkg}/copyright"):
                    lic = licence_of_copyright(tf.extractfile(m).read().decode("utf-8", "replace"))
                elif m.issym() and n.endswith(f"/usr/share/doc/{pkg}") and lic == "unknown":
                    # doc directory linked to another package's (gcc-12-locales -> gcc-12-base)
                    try:
                        with open(f"/usr/share/doc/{m.linkname}/copyright", encoding="utf-8",
                                  errors="replace") as f:
                            lic = licence_of_copyright(f.read()) + f" (copyright of {m.linkname})"
                    except OSError:
                        lic = f"see the copyright of {m.linkname}"
        for name, data in cats:
            yield pkg, "apt-get download", lic, name, data


def read_translation_index(lang):
    text = []
    for f in sorted(glob.glob(f"/var/lib/apt/lists/*_debian_dists_bookworm_main_i18n_Translation-{lang}*")):
        text.append(subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", f], check=True,
                                   capture_output=True).stdout.decode("utf-8", "replace"))
    out = {}
    for rec in "\n".join(text).split("\n\n"):
        pkg = md5 = desc = None
        lines = rec.split("\n")
        for i, line in enumerate(lines):
            if line.startswith("Package: "):
                pkg = line[9:].strip()
            elif line.startswith("Description-md5: "):
                md5 = line[17:].strip()
            elif line.startswith(f"Description-{lang}: "):
                desc = [line.split(": ", 1)[1]] + [x for x in lines[i + 1:] if x.startswith(" ")]
                break
        if md5 and desc:
            out[md5] = (pkg, desc)
    return out


def ddtp_pairs():
    en, de = read_translation_index("en"), read_translation_index("de")
    pairs = []
    for md5, (pkg, d_de) in sorted(de.items()):
        if md5 not in en:
            continue
        d_en = en[md5][1]
        pairs.append((d_en[0], d_de[0]))

        def paras(lines):
            ps, cur = [], []
            for x in lines[1:]:
                x = x[1:]
                if x.strip() == ".":
                    if cur:
                        ps.append(cur)
                    cur = []
                else:
                    cur.append(x)
            if cur:
                ps.append(cur)
            return ps

        p_en, p_de = paras(d_en), paras(d_de)
        if len(p_en) != len(p_de):
            continue
        for a, b in zip(p_en, p_de):
            # list items (lines starting with a bullet) align line by line when the counts agree
            if len(a) == len(b) and all(re.match(r"\s*[-*+o]\s", x) for x in a + b):
                pairs.extend((re.sub(r"^\s*[-*+o]\s+", "", x), re.sub(r"^\s*[-*+o]\s+", "", y))
                             for x, y in zip(a, b))
                continue
            pairs.extend(sent_pairs(norm_space(" ".join(a)), norm_space(" ".join(b))))
    return pairs


# ----------------------------------------------------------------------------------------------------------- main

def write_splits(out_dir, splits):
    """OUT_DIR/{name}.en and {name}.de, line by line, for each name -> [(en, de), ...] of splits."""
    for name, ps in splits.items():
        with open(os.path.join(out_dir, f"{name}.en"), "w", encoding="utf-8") as fe, \
                open(os.path.join(out_dir, f"{name}.de"), "w", encoding="utf-8") as fd:
            for s, t in ps:
                fe.write(s + "\n")
                fd.write(t + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--seed", type=int, default=20261129)
    args = ap.parse_args()
    out_dir = os.path.join(args.work, "corpus")
    os.makedirs(out_dir, exist_ok=True)

    drops = collections.Counter()
    pairs = collections.OrderedDict()  # (src, tgt) -> first package
    prov = collections.OrderedDict()  # package -> [origin, licence, catalogues, pairs kept]
    raw_total = 0

    def add(pkg, origin, lic, raw):
        nonlocal raw_total
        rec = prov.setdefault(pkg, [origin, lic, 0, 0])
        for s0, t0 in raw:
            for s1, t1 in explode(s0, t0):
                raw_total += 1
                s, t = strip_accel(norm_space(s1), norm_space(t1))
                why = keep(s, t)
                if why:
                    drops[why] += 1
                    continue
                if (s, t) not in pairs:
                    pairs[(s, t)] = pkg
                    rec[3] += 1
                else:
                    drops["duplicate"] += 1

    for src in (installed_sources(), deb_sources(os.path.join(args.work, "debs"))):
        for pkg, origin, lic, name, data in src:
            prov.setdefault(pkg, [origin, lic, 0, 0])[2] += 1
            add(pkg, origin, lic, read_mo(data))
    add("ddtp", "DDTP Translation-en/-de (bookworm main)",
        "Debian package descriptions (each package's licence) and their DDTP translations", ddtp_pairs())

    # at most MAX_PER_SRC translations per source (the first ones met)
    by_src = collections.OrderedDict()
    for (s, t) in pairs:
        lst = by_src.setdefault(s, [])
        if len(lst) < MAX_PER_SRC:
            lst.append(t)
        else:
            drops["per_source_cap"] += 1

    # split by normalised source
    rng = random.Random(args.seed)
    groups = collections.OrderedDict()
    for s in by_src:
        groups.setdefault(normkey(s), []).append(s)
    keys = sorted(k for k in groups if k)
    eligible = [k for k in keys if any(len(s.split()) >= 3 for s in groups[k])]
    rng.shuffle(eligible)
    dev_keys = set(eligible[:N_DEV])
    test_keys = set(eligible[N_DEV:N_DEV + N_TEST])

    def pick(k):  # one reference per held-out source: the first source form, its first translation
        s = next(s for s in groups[k] if len(s.split()) >= 3)
        return s, by_src[s][0]

    splits = {"dev": [pick(k) for k in eligible[:N_DEV]],
              "test": [pick(k) for k in eligible[N_DEV:N_DEV + N_TEST]]}
    train = [(s, t) for s, ts in by_src.items() if normkey(s) not in dev_keys and normkey(s) not in test_keys
             for t in ts]
    rng2 = random.Random(args.seed + 1)
    rng2.shuffle(train)
    splits["train"] = train

    write_splits(out_dir, splits)
    with open(os.path.join(out_dir, "provenance.tsv"), "w", encoding="utf-8") as f:
        f.write("package\torigin\tcatalogues\tpairs_kept\tlicence\n")
        for pkg, (origin, lic, ncat, npairs) in sorted(prov.items()):
            f.write(f"{pkg}\t{origin}\t{ncat}\t{npairs}\t{lic}\n")
    stats = {"raw_pairs": raw_total, "unique_clean_pairs": len(pairs), "sources": len(by_src),
             "dropped": dict(drops), "train": len(train), "dev": N_DEV, "test": N_TEST,
             "train_en_words": sum(len(s.split()) for s, _ in train),
             "train_de_words": sum(len(t.split()) for _, t in train), "seed": args.seed}
    with open(os.path.join(out_dir, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    sha = hashlib.sha256()
    for name in ("test.en", "test.de"):
        with open(os.path.join(out_dir, name), "rb") as f:
            sha.update(f.read())
    print(json.dumps(stats, indent=2), "\ntest sha256", sha.hexdigest())


if __name__ == "__main__":
    main()
