"""``python -m bytes2logits start LAB`` (``make start LAB=lab03``): a learner's own copy of a lab.

Learners who edit ``labs/`` inside the git checkout lose work two ways: ``git pull`` conflicts with their
edits, and an instructor's ``make labs`` regenerates the release over them. ``start`` copies the release's
folder to ``work/<lab>/``, which git ignores and nothing in the course writes to; ``make check LAB=...``
then grades that copy. Starting a lab that was already started changes nothing and says where the copy is.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from .labs import Lab, command_root, course_root, find_lab

__all__ = ["main", "start"]


def start(lab: Lab, root: Path | None = None) -> tuple[Path, bool]:
    """Copy ``labs/<lab>/`` to ``work/<lab>/`` unless that copy exists; return (its notebook, created)."""
    root = root or course_root()
    release = lab.release_notebook(root).parent
    target = root / "work" / lab.name
    notebook = target / f"{lab.name}.ipynb"
    if notebook.exists():
        return notebook, False
    if not release.is_dir():
        raise FileNotFoundError(f"the release of {lab.name} is missing ({release}); an instructor builds it "
                                "with make labs")
    target.parent.mkdir(exist_ok=True)
    shutil.copytree(release, target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return notebook, True


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bytes2logits start",
                                     description="Copy a lab's release to work/<lab>/, your own git-ignored copy.")
    parser.add_argument("lab", help="lab01, 1 or lab01_tokenizers")
    parser.add_argument("--root", default=None,
                        help="the course folder (default: the course folder around the current directory)")
    args = parser.parse_args(argv)
    try:
        root = command_root(args.root)
        lab = find_lab(args.lab)
        notebook, created = start(lab, root)
    except (KeyError, RuntimeError, FileNotFoundError) as e:
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    rel = notebook.relative_to(root)
    if created:
        print(f"your copy of {lab.name} is {rel}: work there (git ignores work/, and make labs never touches it)")
    else:
        print(f"{lab.name} was started already: your copy is {rel} (left as it is; delete it to start over)")
    print(f"grade it with: make check LAB={lab.name[:5]}")
    return 0
