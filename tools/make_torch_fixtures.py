#!/usr/bin/env python3
# Regenerate:  tools/setup_venv.sh && tools/.venv/bin/python tools/make_torch_fixtures.py
"""pytorch_model.bin fixtures for model/wf_torch.c, written by torch.save itself.

Writes tests/data/torch/ (see its README.md) and tests/fuzz/corpus/torch/ (seeds:
small state dicts of views in both layouts and pickle protocols 2 and 4, a ZIP64
rewrite, bare pickles for fuzz_torch's 'W' mode, five of the files to refuse):

  <name>.zip.bin     torch.save(state_dict, f)  (the zip layout, torch >= 1.6)
  <name>.legacy.bin  torch.save(state_dict, f, _use_new_zipfile_serialization=False)

of MarianMTModel.from_pretrained(<model dir>).state_dict(), as transformers'
save_pretrained(safe_serialization=False) wrote pytorch_model.bin: every key of
the module, tied weights (shared, embed_tokens, lm_head) as several tensors on
one storage, the sinusoidal position tables included. Each tensor present in the
model's model.safetensors is checked here equal in bits to it.

Also:
  marian_tied_f16.views.bin  the same state dict with views torch.save keeps as
                             views: one weight transposed twice (strides (1, n)),
                             the layer norms' weights and biases slices of one
                             storage (offsets).
  marian_tied_bf16.zip64.bin the zip archive rewritten by Python's zipfile with
                             force_zip64=True, then its central directory
                             rewritten with every size and offset in a ZIP64
                             extra field and ZIP64 end records (zipfile writes
                             those only past 4 GiB).
  refuse/*.bin               files the reader must refuse (pickles that call
                             os.system, builtins.eval, torch.storage._load_from_bytes,
                             an opcode torch.save never writes, a tensor past its
                             storage, a storage record shorter than declared, an
                             int64 tensor, a huge declared string, memo index and
                             element count); tests/test_torch.c names the reason
                             each must give.
"""

import collections
import io
import os
import pickle
import shutil
import struct
import sys
import zipfile

import torch
import transformers
from safetensors.torch import load_file
from transformers import MarianMTModel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
OUT = os.path.join(DATA, "torch")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "torch")

# (source model directory under tests/data, name, layouts)
MODELS = [
    ("text/marian_en_de", "marian_en_de", ["zip"]),
    ("text/marian_sep", "marian_sep", ["legacy"]),
    ("fixtures/marian_tied_f16", "marian_tied_f16", ["zip", "legacy"]),
    ("fixtures/marian_tied_bf16", "marian_tied_bf16", ["zip", "legacy"]),
]


def state_dict(src):
    d = os.path.join(DATA, src)
    sd = MarianMTModel.from_pretrained(d).state_dict()
    st = load_file(os.path.join(d, "model.safetensors"))
    for k, v in st.items():
        assert k in sd, (src, k)
        a, b = sd[k].contiguous(), v
        assert a.dtype == b.dtype and a.shape == b.shape, (src, k)
        assert torch.equal(a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8)), (src, k)
    return sd


def save(obj, path, layout, **kw):
    legacy = layout == "legacy"
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy, **kw)


def views(sd):
    """Views of the same values: non-contiguous, offset and expanded tensors."""
    out = collections.OrderedDict(sd)
    out._metadata = sd._metadata
    w = "model.encoder.layers.0.fc1.weight"
    out[w] = sd[w].t().contiguous().t()  # strides (1, rows)
    assert not out[w].is_contiguous() and torch.equal(out[w], sd[w])
    ln = [k for k in sd if "layer_norm" in k]
    flat = torch.cat([sd[k].reshape(-1) for k in ln])
    at = 0
    for k in ln:  # slices of one storage: offsets
        n = sd[k].numel()
        out[k] = flat[at : at + n].view(sd[k].shape)
        at += n
    assert out[ln[1]].storage_offset() > 0
    return out


def rewrite_zip64(src, dst):
    """torch's archive with ZIP64 records everywhere (sizes and offsets in the
    extra fields, 0xffffffff in their 32-bit places, ZIP64 end records)."""
    zin = zipfile.ZipFile(src)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for info in zin.infolist():
            with z.open(zipfile.ZipInfo(info.filename, info.date_time), "w", force_zip64=True) as f:
                f.write(zin.read(info))
    raw = buf.getvalue()
    # the central directory again, every entry's sizes and offset in its zip64 extra
    z = zipfile.ZipFile(io.BytesIO(raw))
    cd = b""
    for info in z.infolist():
        name = info.filename.encode()
        extra = struct.pack("<HHQQQ", 1, 24, info.file_size, info.compress_size, info.header_offset)
        cd += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\1\2", 45, 45, 0, 0,
                          0, 0, info.CRC, 0xFFFFFFFF, 0xFFFFFFFF, len(name), len(extra),
                          0, 0, 0, 0, 0xFFFFFFFF) + name + extra
    start = z.start_dir
    body = raw[:start]
    n = len(z.infolist())
    z64 = struct.pack("<4sQHHIIQQQQ", b"PK\6\6", 44, 45, 45, 0, 0, n, n, len(cd), start)
    loc = struct.pack("<4sIQI", b"PK\6\7", 0, start + len(cd), 1)
    eocd = struct.pack("<4sHHHHIIH", b"PK\5\6", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(dst, "wb") as f:
        f.write(body + cd + z64 + loc + eocd)
    # Python's reader takes it, and torch's
    with zipfile.ZipFile(dst) as z:
        assert z.testzip() is None
    a, b = torch.load(src), torch.load(dst)
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    return dst


# --- files to refuse: torch's layouts around pickles torch.save never writes ---


class Storage:
    """Pickled as torch's persistent id ('storage', type, key, 'cpu', numel)."""

    def __init__(self, key, data, kind=torch.FloatStorage, numel=None, size=4):
        self.key, self.data, self.kind = key, data, kind
        self.numel = len(data) // size if numel is None else numel


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class Call:
    """Pickles as fn(*args): what a hostile file makes pickle.load run."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.kind, obj.key, "cpu", obj.numel)
        return None


def dumps(obj, protocol=2):
    f = io.BytesIO()
    Pickler(f, protocol=protocol).dump(obj)
    return f.getvalue()


def storages_of(obj, found):
    if isinstance(obj, Storage):
        found[obj.key] = obj
    elif isinstance(obj, Tensor):
        storages_of(obj.args[0], found)
    elif isinstance(obj, dict):
        for v in obj.values():
            storages_of(v, found)
    return found


def torch_zip(path, pkl, storages):
    """torch.save's zip layout around a pickle we wrote (names as torch's)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        def put(name, data):  # a fixed time: the same bytes every run
            z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
        put("archive/data.pkl", pkl)
        put("archive/byteorder", "little")
        for key, data in storages.items():
            put(f"archive/data/{key}", data)
        put("archive/version", "3\n")


def torch_legacy(path, pkl, storages, elsize=4):
    """_legacy_save's stream around a pickle we wrote."""
    out = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2)
    out += pickle.dumps(1001, protocol=2)
    out += pickle.dumps({"protocol_version": 1001, "little_endian": True,
                         "type_sizes": {"short": 2, "int": 4, "long": 4}}, protocol=2)
    out += pkl + pickle.dumps(sorted(storages), protocol=2)
    for key in sorted(storages):
        out += struct.pack("<q", len(storages[key]) // elsize) + storages[key]
    with open(path, "wb") as f:
        f.write(out)


def refuse_files(d):
    os.makedirs(d, exist_ok=True)
    s = Storage("0", struct.pack("<10f", *range(10)))
    ok = Tensor(s, 0, (2, 5), (5, 1))

    def both(name, obj, legacy=False, protocol=2):
        pkl = dumps(obj, protocol)
        st = {k: v.data for k, v in storages_of(obj, {}).items()}
        torch_zip(os.path.join(d, name + ".bin"), pkl, st)
        if legacy:
            torch_legacy(os.path.join(d, name + ".legacy.bin"), pkl, st)

    both("os_system", {"a": ok, "b": Call(os.system, "touch /tmp/td_torch_pwned")}, legacy=True)
    both("eval", {"a": Call(eval, "__import__('os').system('true')")})
    both("eval_proto4", {"a": Call(eval, "1")}, protocol=4)  # STACK_GLOBAL
    both("load_from_bytes", {"a": Call(torch.storage._load_from_bytes, b"x")})
    both("float_opcode", {"a": ok, "b": 1.5})  # BINFLOAT
    both("not_a_tensor", {"a": ok, "b": 3})
    both("past_storage", {"a": Tensor(s, 3, (2, 4), (4, 1))})  # elements 3..10 of 0..9
    both("strided_past", {"a": Tensor(s, 0, (2, 4), (1, 3))})  # last 0 + 1 + 9 = 10
    short = Storage("0", struct.pack("<10f", *range(10)), numel=16)  # 40 bytes, 64 declared
    pkl = dumps({"a": Tensor(short, 0, (16,), (1,))})
    torch_zip(os.path.join(d, "record_short.bin"), pkl, {"0": short.data})
    longs = Storage("1", struct.pack("<4q", 1, 2, 3, 4), kind=torch.LongStorage, size=8)
    both("int64", {"a": ok, "position_ids": Tensor(longs, 0, (4,), (1,))})
    huge = Storage("0", b"", numel=1 << 61)
    both("huge_numel", {"a": Tensor(huge, 0, (1 << 61,), (1,))})
    # hand-assembled pickles (torch's header bytes around them are valid)
    hand = {
        "huge_string": b"\x80\x02X\xf0\xff\xff\xffabc",  # BINUNICODE of 4 GiB - 16 bytes
        "huge_memo": b"\x80\x02}r\xff\xff\xff\xff.",  # LONG_BINPUT 2^32 - 1
        "deep_marks": b"\x80\x02" + b"(" * 1000 + b".",
        "no_stop": b"\x80\x02}q\x00(X\x01\x00\x00\x00a",
        "setitems_list": b"\x80\x02](K\x01K\x02u.",
    }
    for name, pkl in hand.items():
        torch_zip(os.path.join(d, name + ".bin"), pkl, {})


def fuzz_seeds(d):
    """Small torch files (and bare pickles, 'W' + data.pkl, which the target
    wraps in a zip holding storages 0..3 of 4096 bytes)."""
    os.makedirs(d, exist_ok=True)
    g = torch.Generator().manual_seed(1)
    base = torch.randn(4, 6, generator=g)
    sd = collections.OrderedDict()
    sd["a.weight"] = base
    sd["a.tied"] = base  # the same tensor twice
    sd["b.t"] = base.t()  # strides (1, 6) on a's storage
    sd["c.slice"] = base.view(-1)[5:11]  # offset 5
    sd["d.half"] = torch.randn(3, 2, generator=g).half()
    sd["e.bf16"] = torch.randn(5, generator=g).bfloat16()
    sd["f.scalar"] = torch.tensor(2.5)
    sd["g.empty"] = torch.zeros(0, 3)
    sd["h.expand"] = torch.ones(1, 3).expand(4, 3)
    for layout in ("zip", "legacy"):
        save(sd, os.path.join(d, f"seed_{layout}.bin"), layout)
        save(sd, os.path.join(d, f"seed_{layout}_proto4.bin"), layout, pickle_protocol=4)
    rewrite_zip64(os.path.join(d, "seed_zip.bin"), os.path.join(d, "seed_zip64.bin"))
    with zipfile.ZipFile(os.path.join(d, "seed_zip.bin")) as z:
        pkl = z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])
    with open(os.path.join(d, "wrap_state_dict"), "wb") as f:
        f.write(b"W" + pkl)
    s0 = Storage("0", bytes(4096))
    s1 = Storage("1", bytes(4096), kind=torch.HalfStorage, size=2)
    small = {"x": Tensor(s0, 3, (4, 5), (5, 1)), "y": Tensor(s1, 0, (8, 8), (1, 8)),
             "z": Tensor(s0, 0, (2,), (0,))}
    for proto in (2, 4):
        with open(os.path.join(d, f"wrap_views_p{proto}"), "wb") as f:
            f.write(b"W" + dumps(small, proto))


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    for src, name, layouts in MODELS:
        sd = state_dict(src)
        for layout in layouts:
            save(sd, os.path.join(OUT, f"{name}.{layout}.bin"), layout)
    sd = state_dict("fixtures/marian_tied_f16")
    v = views(sd)
    save(v, os.path.join(OUT, "marian_tied_f16.views.bin"), "zip")
    rewrite_zip64(os.path.join(OUT, "marian_tied_bf16.zip.bin"),
                  os.path.join(OUT, "marian_tied_bf16.zip64.bin"))
    refuse_files(os.path.join(OUT, "refuse"))
    fuzz_seeds(CORPUS)
    for name in ("os_system", "os_system.legacy", "eval_proto4", "past_storage", "int64"):
        shutil.copy(os.path.join(OUT, "refuse", name + ".bin"),
                    os.path.join(CORPUS, f"refuse_{name}.bin"))
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
