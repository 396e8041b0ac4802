"""The asset manager: pinned, offline after fetch, and loud when something is missing."""

import io
import json
import tarfile

import pytest

from bytes2logits import assets


def test_every_asset_is_pinned():
    for a in assets.ASSETS.values():
        assert len(a.archive_sha256) == 64
        assert a.files and all(len(h) == 64 for h in a.files.values()) or len(a.tree_sha256) == 64


def test_missing_asset_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("BYTES2LOGITS_CACHE", str(tmp_path))
    with pytest.raises(assets.AssetMissingError) as info:
        assets.path("smollm2")
    msg = str(info.value)
    assert "smollm2" in msg and "python -m bytes2logits.assets fetch smollm2" in msg


def test_unknown_asset(tmp_path, monkeypatch):
    monkeypatch.setenv("BYTES2LOGITS_CACHE", str(tmp_path))
    with pytest.raises(assets.AssetError, match="unknown asset 'nope'"):
        assets.path("nope")


def test_cached_assets_verify():
    """After `make test`'s set-up every asset is present and matches its pins (re-hashed here)."""
    assert assets.verify() == []
    assert assets.path("smollm2").name.endswith(".gguf")
    assert assets.path("smollm2").read_bytes()[:4] == b"GGUF"
    models = assets.path("llama-cpp-models")
    assert len(list((models / "templates").glob("*.jinja"))) >= 70
    assert (models / "ggml-vocab-gpt-2.gguf.inp").is_file()
    assert "Botchan" in assets.path("botchan").read_text(encoding="utf-8")[:5000]


def test_a_changed_file_fails_verification(tmp_path, monkeypatch):
    monkeypatch.setenv("BYTES2LOGITS_CACHE", str(tmp_path))
    a = assets.ASSETS["botchan"]
    folder = tmp_path / "botchan"
    folder.mkdir()
    (folder / "botchan.txt").write_text("not the novel")
    (folder / assets.MARKER).write_text(json.dumps({"archive_sha256": a.archive_sha256}))
    assert assets.path("botchan").is_file()  # path() trusts the marker: no hashing at run time
    problems = assets.verify(["botchan"])
    assert len(problems) == 1 and "botchan.txt" in problems[0]


def test_extraction_refuses_paths_that_escape(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        data = b"x"
        info = tarfile.TarInfo("pkg/test/../../evil.txt")
        info.size = 1
        t.addfile(info, io.BytesIO(data))
    archive = tmp_path / "pkg.tar.gz"
    archive.write_bytes(buf.getvalue())
    asset = assets.Asset(name="t", description="", requirement="", archive="pkg.tar.gz", archive_sha256="0" * 64,
                         prefix="pkg/test/", files={})
    staging = tmp_path / "out"
    staging.mkdir()
    with pytest.raises(assets.AssetError, match="unsafe path"):
        assets._extract_stream(asset, archive, staging)
    assert not (tmp_path / "evil.txt").exists()


def test_botchan_text_is_the_novel_only():
    text = assets.botchan_text()
    assert "botchan" in text[:300].lower()
    assert "\ufeff" not in text and "*** START" not in text and "*** END" not in text
    assert "Gutenberg-tm" not in text and "Gutenberg License" not in text, "the licence at the end is cut off"
    assert 200_000 < len(text) < len(assets.path("botchan").read_text(encoding="utf-8"))
