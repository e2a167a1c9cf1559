"""The publish byte scanner (`apexrl.publish.redact`) called directly: each credential
shape, the glued-to-a-word rule, known values (split, base64, escaped), UTF-16 without a
BOM (a known secret at the very end of a UTF-16BE file), binary masking and archives.
Fast on purpose: `make mutate MODULES=redact` runs these against every mutant."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
import zipfile

import pytest

from apexrl import secrets
from apexrl.publish import redact
from apexrl.publish.redact import Redactor

HF = "hf_QrStUvWxYzAbCdEfGhIjKlMnOpQrStUvWx"
KNOWN = "q8Zr2LmN4pX7vB1cWt"  # no credential shape: found only as a known value

SHAPES = {
    "private-key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    "aws-access-key-id": "AKIAIOSFODNN7EXAMPLE",
    "hf-token": HF,
    "anthropic-key": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
    "openai-key": "sk-proj-abcdefghijklmnopqrstuvwxyz",
    "github-token": "ghp_abcdefghijklmnopqrstuvwxyzabcdefghij",
    "google-api-key": "AIzaSyabcdefghijklmnopqrstuvwxyz_-abcde",
    "slack-token": "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "jwt": "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhYmMifQ.c2lnbmF0dXJlZ29lc2hlcmU",
}


@pytest.fixture(autouse=True)
def _no_env_secrets(monkeypatch):
    for key in secrets.SECRET_ENV_KEYS:
        monkeypatch.delenv(key, raising=False)


def _red(s: str, **kw) -> tuple[str, list[tuple[str, str, int]]]:
    r = Redactor(**kw)
    out = r.text(s, "w")
    return out, [(f.where, f.kind, f.count) for f in r.findings]


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_each_shape_is_replaced_whole(kind):
    token = SHAPES[kind]
    out, found = _red(f"a {token} b")
    assert out == f"a [REDACTED:{kind}] b"
    assert found == [("w", kind, 1)]


def test_aws_secret_keeps_its_key_name_and_needs_40_characters():
    v = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    for text in (f"aws_secret_access_key={v}", f'"AWS_SECRET_ACCESS_KEY": "{v}"',
                 f"awssecretaccesskey : '{v}'"):  # fmt: skip
        out, found = _red(text)
        assert out == text.replace(v, "[REDACTED:aws-secret-access-key]")
        assert found == [("w", "aws-secret-access-key", 1)]
    for text in (f"aws_secret_access_key={v}X", f"aws_secret_access_key={v[:-1]}",
                 f"xaws_secret_access_key={v}"):  # fmt: skip
        assert _red(text)[0] == text


def test_bearer_and_access_key_edges():
    assert _red("Authorization: bearer abcdefghij0123456789")[0] == (
        "Authorization: [REDACTED:bearer-token]"
    )
    assert _red("bearer short")[0] == "bearer short"
    assert _red("xbearer abcdefghij0123456789")[0] == "xbearer abcdefghij0123456789"
    assert _red("AKIAIOSFODNN7EXAMPLEX")[0] == "AKIAIOSFODNN7EXAMPLEX"
    assert _red("AKIAIOSFODNN7EXAMPL")[0] == "AKIAIOSFODNN7EXAMPL"
    assert _red("AIzaSyabcdefghijklmnopqrstuvwxyz_-abcd")[0].startswith("AIza")  # 34: none


def test_glued_tokens_count_only_when_random_looking():
    assert _red(f"MYKEY_{HF}")[0] == "MYKEY_[REDACTED:hf-token]"  # mixed case: a token
    words = "pdf_extract_all_text_from_document_pages risk-adjusted-return-on-capital-x"
    assert _red(words) == (words, [])
    # digits in two places or more, beside mixed case, for shapes other than Hub tokens
    assert _red("xsk-proj-Abcdefghijklmnopqrstuvwx")[0] == "xsk-proj-Abcdefghijklmnopqrstuvwx"
    assert _red("xsk-proj-Abcdefgh1ijklmnop2qrstuvwx")[0] == "x[REDACTED:openai-key]"
    assert _red("xhf_abcdefghijklmnopqrstuvwxyzabcdefgh")[0].startswith("xhf_")  # lower only
    assert _red("xhf_abcdefghijklmnopqrstuvwxyzabcdefgH")[0] == "x[REDACTED:hf-token]"
    assert redact._random_looking("abcdefghijklmnoP", digits=False)
    assert not redact._random_looking("abcdefghijklmnP", digits=False)  # 15: too short
    assert not redact._random_looking("ABCDEFGHIJKLMNOP", digits=False)
    assert not redact._random_looking("abcdefghijklmnop", digits=False)
    assert not redact._random_looking("abcdefghijklmnoP1", digits=True)
    assert redact._random_looking("abcdefgh1ijklmnoP2", digits=True)
    assert not redact._random_looking("ab-cdefgh-ijklmnoP", digits=False)  # no run of 16


def test_known_values_split_escaped_and_in_base64(monkeypatch):
    monkeypatch.setenv("FMP_API_KEY", KNOWN)
    assert _red(f"x{KNOWN}y") == ("x[REDACTED:env:FMP_API_KEY]y", [("w", "env:FMP_API_KEY", 1)])
    for split in (f"{KNOWN[:5]}\n{KNOWN[5:]}", f"{KNOWN[:5]}\r\n  > {KNOWN[5:]}",
                  f"{KNOWN[:5]}\\n{KNOWN[5:]}", f"{KNOWN[:5]}\\r\\n# {KNOWN[5:]}",
                  f"{KNOWN[:5]}\r{KNOWN[5:9]}\n{KNOWN[9:]}"):  # fmt: skip
        assert _red(f"[{split}]")[0] == "[[REDACTED:env:FMP_API_KEY]]", split
    assert _red(f"{KNOWN[:5]}\n\n{KNOWN[5:]}")[0].startswith(KNOWN[:5])  # two breaks: no
    for k in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            b64 = enc(bytes(k) + b"user:" + KNOWN.encode() + b"!").decode()
            out, found = _red(b64)
            assert found == [("w", "env:FMP_API_KEY:base64", 1)], (k, b64)
    frags = redact.base64_fragments(KNOWN.encode())
    assert frags == {
        "cThacjJMbU40cFg3dkIxY1d0",
        "xOFpyMkxtTjRwWDd2QjFjV3",
        "E4WnIyTG1ONHBYN3ZCMWNXd",
    }
    slashes = redact.base64_fragments(b"\xfb\xff\xbf" * 4)  # '+' and '/' in base64
    assert {f for f in slashes if "/" in f} and {f for f in slashes if "_" in f}
    assert len(slashes) == 6
    assert redact.base64_fragments(b"abc") == set()  # too short to tell from chance
    # a value known by the caller, values too short to scan, longest value first
    assert _red("pw=hunter22 long", extra_values={"DB": "hunter22"})[0] == (
        "pw=[REDACTED:env:DB] long"
    )
    assert _red("abc12 hunter", extra_values={"S": "abc12", "T": ""})[0] == "abc12 hunter"
    out, _ = _red("k=abcdef-123456", extra_values={"A": "abcdef", "B": "abcdef-123456"})
    assert out == "k=[REDACTED:env:B]"
    monkeypatch.setenv("HF_TOKEN", "short")
    assert _red("short")[0] == "short"
    assert _red("", extra_values={"A": "abcdef"}) == ("", [])


def test_a_known_value_in_base64_is_found_only_from_8_characters(monkeypatch):
    monkeypatch.setenv("FMP_API_KEY", "abc123x")  # 7: scanned plain, not in base64
    assert _red(base64.b64encode(b"--abc123x--").decode())[1] == []
    assert _red("abc123x")[0] == "[REDACTED:env:FMP_API_KEY]"


@pytest.mark.parametrize("prefix", ["\\n", "\\t", "\\r", "\\u000a", "\\x0a", '\\"', "\\\\n"])
def test_escapes_are_boundaries(prefix):
    token = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"
    out, found = _red(f"ok{prefix}{token}")
    assert token not in out and found == [("w", "slack-token", 1)]


def test_unescaping_maps_back_to_raw_offsets():
    u = redact._Unescaped('a\\nb\\u00e9c\\\\d\\"e')
    assert u.text == 'a\nb\u00e9c\\d"e'
    assert [u.raw(p) for p in range(len(u.text) + 1)] == [0, 1, 3, 4, 10, 11, 13, 14, 16, 17]
    assert redact._unescape_one("\\x41") == "A" and redact._unescape_one("\\/") == "/"
    assert redact._unescape_one("\\b") == "\b" and redact._unescape_one("\\f") == "\f"
    assert redact._unescape_one("\\v") == "\v" and redact._unescape_one("\\'") == "'"
    assert redact._Unescaped("plain").text == "plain"


def test_escaped_levels_are_bounded(monkeypatch):
    token = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"
    nested = f"ok\n{token}"
    for _ in range(3):
        nested = json.dumps(nested)
    assert token not in _red(nested)[0]  # three levels: decoded
    monkeypatch.setattr(redact, "MAX_ESCAPE_DEPTH", 0)
    assert _red(json.dumps(f"ok\n{token}"))[1] == []  # the level cap holds


def test_obj_redacts_keys_and_values_of_any_depth():
    r = Redactor()
    o = {HF: [1, {"k": (HF, None)}], "n": 2.5, 7: "x"}
    assert r.obj(o, "o") == {
        "[REDACTED:hf-token]": [1, {"k": ["[REDACTED:hf-token]", None]}], "n": 2.5, 7: "x"
    }  # fmt: skip
    assert r.total == 2 and r.findings[0].count == 2
    r.note("o", "token-ids-withheld")
    assert r.total == 3
    assert [(f.where, f.kind) for f in r.findings] == [
        ("o", "hf-token"), ("o", "token-ids-withheld")
    ]  # fmt: skip


def test_a_marker_is_not_redacted_twice():
    r = Redactor()
    once = r.text(f"a {HF}", "w")
    assert r.text(once, "w") == once and r.total == 1


def test_text_files_by_encoding():
    r = Redactor()
    assert r.bytes_text(f"k={HF}\n".encode(), "u8") == b"k=[REDACTED:hf-token]\n"
    assert r.bytes_text(f"clé={HF}".encode("latin-1"), "l1") == "clé=[REDACTED:hf-token]".encode(
        "latin-1"
    )
    for codec in ("utf-16", "utf-16-le", "utf-16-be"):
        bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}.get(codec, b"")
        data = bom + f"k={HF}".encode(codec)
        out = r.bytes_text(data, codec)
        assert out[: len(bom) or 2] == data[: len(bom) or 2]
        assert (
            HF.encode(codec.replace("utf-16", "utf-16-le") if codec == "utf-16" else codec)
            not in out
        )
    clean = b"nothing here\n"
    assert r.bytes_text(clean, "c") is clean
    assert r.scanned["text"] >= 5


def test_utf16_without_a_bom_is_masked_in_place(monkeypatch):
    monkeypatch.setenv("FMP_API_KEY", KNOWN)
    r = Redactor()
    for codec in ("utf-16-le", "utf-16-be"):
        for lead in ("", "x", "a log line\n"):
            data = (lead + KNOWN).encode(codec)  # the secret's last unit ends the file
            out = r.bytes_text(data, codec)
            assert len(out) == len(data) and KNOWN.encode(codec) not in out
            units = out.replace(b"\x00", b"")
            assert KNOWN[1:-1].encode() not in units and units.endswith(b"*" * len(KNOWN) * 2)
            kept = out.replace(b"\x00", b"").replace(b"*", b"")
            assert kept == lead.encode()  # the rest is kept
    odd = b"x" + ("pad " + KNOWN).encode("utf-16-le")  # shifted by one byte
    assert KNOWN.encode("utf-16-le") not in r.bytes_text(odd, "odd")
    short = "ab".encode("utf-16-le") + b"\x00" * 4  # runs under 8 units are not text
    assert r.bytes_text(short, "s") == short
    assert r.scanned["binary"] >= 7


def test_binary_is_masked_keeping_its_layout():
    r = Redactor()
    data = b"\x00\x01" + f"k={HF}".encode() + b"\x00\xff"
    out = r.bytes_text(data, "bin")
    assert out == b"\x00\x01k=" + b"*" * len(HF) + b"\x00\xff"
    assert [(f.where, f.kind) for f in r.findings] == [("bin", "hf-token")]
    assert r.bytes_text(b"\x00clean\x00", "b2") == b"\x00clean\x00"


def _zip(members: dict[str, bytes], how: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", how) as z:
        for name, body in members.items():
            z.writestr(name, body)
    return buf.getvalue()


def test_archives_are_rebuilt_with_their_members_redacted():
    from apexrl.artifacts.archive_write import Entry, bytes_entry, gzip_bytes, tar_bytes

    r = Redactor()
    z = _zip({"a/env.sh": f"export T={HF}\n".encode(), "a/ok.txt": b"fine", "d/": b""})
    out = r.bytes_text(z, "z.bin")
    with zipfile.ZipFile(io.BytesIO(out)) as zf:
        assert zf.read("a/env.sh") == b"export T=[REDACTED:hf-token]\n"
        assert zf.read("a/ok.txt") == b"fine"
    assert [(f.where, f.kind) for f in r.findings] == [("z.bin:a/env.sh", "hf-token")]
    clean = _zip({"x.txt": b"fine"})
    assert r.bytes_text(clean, "c.zip") is clean
    tar = tar_bytes([bytes_entry("t/run.sh", f"T={HF}".encode(), executable=True),
                     Entry("t/link", "symlink", linkname="run.sh")])  # fmt: skip
    out = r.bytes_text(gzip_bytes(tar), "t.tgz")
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(out))) as tf:
        assert tf.extractfile("t/run.sh").read() == b"T=[REDACTED:hf-token]"
        assert tf.getmember("t/run.sh").mode & 0o100
        assert tf.getmember("t/link").issym() and tf.getmember("t/link").linkname == "run.sh"
    assert ("t.tgz:gunzip:t/run.sh", "hf-token") in [(f.where, f.kind) for f in r.findings]
    plain = tar_bytes([bytes_entry("ok.txt", b"fine")])
    assert r.bytes_text(plain, "p.tar") is plain
    assert r.bytes_text(gzip_bytes(plain), "p.tgz") == gzip_bytes(plain)
    assert r.scanned["office/zip"] >= 4


def test_nesting_stops_at_the_depth_limit_and_bad_archives_are_binary():
    r = Redactor()
    inner = _zip({"env": f"T={HF}".encode()}, zipfile.ZIP_STORED)
    for _ in range(redact.MAX_DEPTH):
        inner = _zip({"nested.zip": inner}, zipfile.ZIP_STORED)
    out = r.bytes_text(inner, "deep.zip")  # past the limit: its bytes scanned as binary
    assert HF.encode() not in out and b"*" * len(HF) in out
    where = "deep.zip:nested.zip:nested.zip:nested.zip"
    assert (where, "hf-token") in [(f.where, f.kind) for f in r.findings]
    broken = b"PK\x03\x04" + f"garbage {HF}".encode()
    assert r.bytes_text(broken, "bad.zip") == b"PK\x03\x04garbage [REDACTED:hf-token]"  # text
    bad_gz = b"\x1f\x8b" + f"not gzip {HF}".encode()
    assert HF.encode() not in r.bytes_text(bad_gz, "bad.gz")
    fake_tar = bytes(257) + b"ustar" + f" {HF}".encode()
    assert HF.encode() not in r.bytes_text(fake_tar, "bad.tar")


# --- what mutation testing found untested (make mutate MODULES=redact) -------------------


def test_counts_per_finding_and_two_hits_in_one_string():
    r = Redactor()
    assert r.text(f"a {HF} b {HF} c", "w") == "a [REDACTED:hf-token] b [REDACTED:hf-token] c"
    r.note("w", "token-ids-withheld")
    r.note("w", "token-ids-withheld")
    out = r.bytes_text(b"\x00" + HF.encode() + b"\x00" + HF.encode(), "bin")
    assert out == b"\x00" + b"*" * len(HF) + b"\x00" + b"*" * len(HF)
    assert [(f.where, f.kind, f.count) for f in r.findings] == [
        ("bin", "hf-token", 2), ("w", "hf-token", 2), ("w", "token-ids-withheld", 2)
    ]  # fmt: skip
    assert r.total == 6


def test_values_of_exactly_six_characters_are_known(monkeypatch):
    monkeypatch.setenv("FMP_API_KEY", "k9x2m4")
    assert _red("v=k9x2m4.")[0] == "v=[REDACTED:env:FMP_API_KEY]."
    monkeypatch.delenv("FMP_API_KEY")
    assert _red("v=p3q8r1.", extra_values={"X": "p3q8r1"})[0] == "v=[REDACTED:env:X]."
    assert redact.base64_fragments(b"abcdef") == {"YWJjZGVm"}  # 8 characters: kept


def test_a_match_ending_in_an_escape_at_the_very_end(monkeypatch):
    out, _ = _red("k=q8Zr2LmN4pX7\\/", extra_values={"K": "q8Zr2LmN4pX7/"})
    assert out == "k=[REDACTED:env:K]"


def test_utf16_with_a_bom_is_redacted_as_text_and_scanned_counted():
    r = Redactor()
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        out = r.bytes_text(bom + f"k={HF}".encode(codec), f"f.{codec}")
        assert out == bom + "k=[REDACTED:hf-token]".encode(codec)
    assert [f.where for f in r.findings] == ["f.utf-16-be", "f.utf-16-le"]
    assert dict(r.scanned) == {"text": 2}
    bad = b"\xff\xfe" + "k=".encode("utf-16-le") + b"\x00\xd8" + f"{HF}".encode("utf-16-le")
    out = r.bytes_text(bad, "bad")  # a lone surrogate: not UTF-16 after all, masked
    assert isinstance(out, bytes) and len(out) == len(bad) and HF.encode("utf-16-le") not in out
    assert dict(r.scanned) == {"text": 2, "binary": 1}
    r.bytes_text(b"plain", "p")
    assert dict(r.scanned) == {"text": 3, "binary": 1}


def test_a_nul_only_past_the_first_8192_bytes_is_text():
    r = Redactor()
    data = b"x" * 8192 + b"\x00" + f" {HF}".encode()
    assert r.bytes_text(data, "t").endswith(b" [REDACTED:hf-token]")
    data = b"x" * 8191 + b"\x00" + f" {HF}".encode()
    assert r.bytes_text(data, "b").endswith(b" " + b"*" * len(HF))


def test_archive_size_limits_at_their_boundary(monkeypatch):
    r = Redactor()
    z = _zip({"env": f"T={HF}".encode()}, zipfile.ZIP_STORED)
    monkeypatch.setattr(redact, "MAX_ARCHIVE_BYTES", len(z))  # at the limit: an archive
    with zipfile.ZipFile(io.BytesIO(r.bytes_text(z, "z"))) as zf:
        assert zf.read("env") == b"T=[REDACTED:hf-token]"
    monkeypatch.setattr(redact, "MAX_ARCHIVE_BYTES", len(z) - 1)  # over: binary
    assert b"[REDACTED" not in r.bytes_text(z, "z") and HF.encode() not in r.bytes_text(z, "z")
    body = f"T={HF}\n".encode() * 60  # compresses well: the zip is smaller than its members
    big = _zip({"env": body})
    assert len(big) < len(body)
    monkeypatch.setattr(redact, "MAX_ARCHIVE_BYTES", len(body))  # members' sum at the limit
    assert b"[REDACTED" in zipfile.ZipFile(io.BytesIO(r.bytes_text(big, "b"))).read("env")
    monkeypatch.setattr(redact, "MAX_ARCHIVE_BYTES", len(body) - 1)  # over: as it is
    assert r.bytes_text(big, "b") == big


def test_unchanged_archives_are_returned_as_they_are():
    from apexrl.artifacts.archive_write import bytes_entry, gzip_bytes, tar_bytes

    gz = gzip_bytes(b"nothing secret")
    assert Redactor().bytes_text(gz, "g") is gz
    r = Redactor()
    tar = tar_bytes([bytes_entry("a", f"T={HF}".encode()), bytes_entry("b", b"clean")])
    out = r.bytes_text(tar, "t")  # the first member changed, the last did not
    with tarfile.open(fileobj=io.BytesIO(out)) as tf:
        assert tf.extractfile("a").read() == b"T=[REDACTED:hf-token]"
        assert tf.extractfile("b").read() == b"clean"
    assert dict(r.scanned) == {"office/zip": 1, "text": 2}


def test_tar_members_keep_their_executable_bit_only():
    from apexrl.artifacts.archive_write import bytes_entry, tar_bytes

    tar = tar_bytes([bytes_entry("run.sh", f"T={HF}".encode(), executable=True),
                     bytes_entry("notes.txt", f"T={HF}".encode())])  # fmt: skip
    raw = bytearray(tar)
    # others-execute only (0o645) on notes.txt: not executable for its owner
    hdr = raw.index(b"notes.txt")
    raw[hdr + 100 : hdr + 108] = b"0000645\x00"
    raw[hdr + 148 : hdr + 156] = b"        "
    raw[hdr + 148 : hdr + 155] = f"{sum(raw[hdr : hdr + 512]):06o}\x00".encode()
    out = Redactor().bytes_text(bytes(raw), "t")
    with tarfile.open(fileobj=io.BytesIO(out)) as tf:
        assert tf.getmember("run.sh").mode & 0o100
        assert not tf.getmember("notes.txt").mode & 0o100


def test_nesting_depth_is_restored_after_each_archive():
    r = Redactor()
    inner = _zip({"env": f"T={HF}".encode()}, zipfile.ZIP_STORED)
    for _ in range(redact.MAX_DEPTH - 1):
        inner = _zip({"nested.zip": inner}, zipfile.ZIP_STORED)

    def innermost(data: bytes) -> bytes:
        while True:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                if "env" in zf.namelist():
                    return zf.read("env")
                data = zf.read("nested.zip")

    for _ in range(3):  # the same redactor, one archive after another: the same depth
        assert innermost(r.bytes_text(inner, "z")) == b"T=[REDACTED:hf-token]"
    deeper = _zip({"nested.zip": inner}, zipfile.ZIP_STORED)
    for _ in range(2):  # one level past the limit: masked in place (stored: visible here)
        out = r.bytes_text(deeper, "d")
        assert HF.encode() not in out and b"*" * len(HF) in out and b"[REDACTED" not in out


def test_a_word_before_a_token_does_not_hide_the_token():
    words = "xhf_abcdefghijklmnopqrstuvwxyzabcdefgh"  # glued and lower case: a word
    assert _red(f"{words} then {HF}")[0] == f"{words} then [REDACTED:hf-token]"


def test_escapes_are_read_three_levels_deep_and_no_deeper():
    token = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"
    nested = f"ok\n{token}"
    for level in range(1, 6):
        nested = json.dumps(nested)
        found = _red(nested)[1]
        assert (found != []) is (level <= redact.MAX_ESCAPE_DEPTH), level


def test_a_known_value_holding_an_escape_sequence_itself():
    """Raw matches stay when a string is also read decoded: a password with a literal
    backslash-n in it decodes to something else."""
    assert _red("pw=ab\\ncd1234;", extra_values={"P": "ab\\ncd1234"})[0] == "pw=[REDACTED:env:P];"


def test_overlapping_matches_the_longest_wins():
    """A known value that is the first part of a token: the whole token goes, not the
    part the value covers (the rest of the token would be published)."""
    out, found = _red(f"t={HF}.", extra_values={"K": HF[:12]})
    assert out == "t=[REDACTED:hf-token]." and found == [("w", "hf-token", 1)]
    out, _ = _red(f"t={KNOWN}{HF}", extra_values={"K": KNOWN})  # adjacent: both
    assert out == "t=[REDACTED:env:K][REDACTED:hf-token]"


def test_base64_of_known_values_from_eight_characters_whatever_their_order():
    v8 = "Zq8r2LmN"
    b64 = base64.b64encode(b"x:" + v8.encode() + b"!").decode()
    assert _red(b64, extra_values={"V": v8})[1] == [("w", "env:V:base64", 1)]
    long_b64 = base64.b64encode(b"x:" + KNOWN.encode() + b"!").decode()
    found = _red(long_b64, extra_values={"S": "abc123x", "L": KNOWN})[1]
    assert found == [("w", "env:L:base64", 1)]  # a short value first stops nothing


def test_a_gzip_inflating_past_the_archive_limit_is_not_inflated(monkeypatch):
    """A gzip member is inflated only up to the scanner's own archive limit (plus the
    room for tar headers), not gunzip's general 2 GiB: past it, its bytes are scanned as
    binary (the limit scaled down here; the content compresses about 90:1, within the
    ratio limit, so the total is what stops it)."""
    from apexrl.artifacts.archive_write import gzip_bytes

    monkeypatch.setattr(redact, "MAX_ARCHIVE_BYTES", 1 << 20)  # 1 MiB + 64 MiB of room
    block = bytes(range(256)) * 4 + bytes(100 * 1024)
    big = f"T={HF}\n".encode() + block * (70 * 1024 * 1024 // len(block))  # ~70 MiB
    gz = gzip_bytes(big)
    assert len(gz) < 1 << 20 and len(big) > 65 * 1024 * 1024
    r = Redactor()
    assert r.bytes_text(gz, "big.gz") == gz  # not inflated: scanned as binary
    assert r.scanned["office/zip"] == 0 and r.scanned["binary"] == 1
    small = gzip_bytes(big[: 8 * 1024 * 1024])  # within the limit: inflated and redacted
    out = r.bytes_text(small, "small.gz")
    assert HF.encode() not in gzip.decompress(out) and r.scanned["office/zip"] == 1
