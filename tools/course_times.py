"""Print how long each chapter takes to read and run, for the README's course map.

The estimate is deliberately simple and stated, not tuned: prose at 120 words a minute (a careful reading
of technical text), code at 15 lines a minute (reading a cell, running it, looking at its output), rounded
up to 5 minutes. A chapter's lab is not counted: its tasks are listed in its notebook.

    python tools/course_times.py            # one line per chapter: NN minutes
    python tools/course_times.py --markdown # the same as "NN min" cells, in course-map order
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
PROSE_WPM = 120
CODE_LPM = 15


def minutes(path: Path) -> int:
    """The estimated minutes to read and run one chapter notebook (see the module docstring)."""
    nb = nbformat.read(path, as_version=4)
    words = code = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            words += len(re.findall(r"\w+", cell.source))
        elif cell.cell_type == "code":
            code += sum(1 for line in cell.source.splitlines() if line.strip() and not line.strip().startswith("#"))
    return 5 * math.ceil((words / PROSE_WPM + code / CODE_LPM) / 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    total = 0
    for path in sorted((ROOT / "course").glob("[0-9][0-9]_*.ipynb")):
        m = minutes(path)
        total += m
        print(f"{path.name[:2]}  {m} min" if args.markdown else f"{path.name}: {m} minutes")
    print(f"total: {total} minutes ({total / 60:.1f} hours)")


if __name__ == "__main__":
    main()
