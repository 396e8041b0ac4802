"""Every chapter executes headless, top to bottom, without errors, in under a minute."""

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "course").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_chapters():
    assert CHAPTERS, "course/ holds no chapter notebooks"


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_executes_quickly(path):
    # These machines are noisy (chapter 08 once took 137 s against its usual 16 s, cause unknown), so a
    # chapter over budget gets one more run; the budget holds when one of the two runs meets it.
    times = []
    for _ in range(2):
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        client = NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute()
        times.append(time.perf_counter() - start)
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: {errors[0].ename}: {errors[0].evalue}"
        if times[-1] < 60:
            break
    assert min(times) < 60, f"{path.name} took {', '.join(f'{t:.1f}' for t in times)} s (budget: 60 s on 2 cores)"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_links_to_existing_files(path):
    import re

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for target in re.findall(r"\]\(([^)#]+?\.ipynb)\)", cell.source):
                assert (path.parent / target).resolve().is_file(), f"{path.name} links to missing {target}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_table_row_has_its_headers_cells(path):
    """A bare ``|`` inside a code span in a table row (``|x − x̂|``, ``<|im_end|>``) starts a new cell in
    JupyterLab and on the site alike: it must be written ``\\|``. markdown-it (the site's parser) reads each
    table; every row must have as many cells as the header."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown" or "|" not in cell.source:
            continue
        tokens = md.parse(cell.source)
        header, row, lines = None, 0, None
        for tok in tokens:
            if tok.type == "thead_open":
                header = None
            elif tok.type == "tr_open":
                row, lines = 0, tok.map
            elif tok.type in ("th_open", "td_open"):
                row += 1
            elif tok.type == "tr_close":
                if header is None:
                    header = row
                # markdown-it pads short rows and drops the extra cells of long ones: compare the source too
                text = cell.source.splitlines()[lines[0]]
                n = len([c for c in text.replace("\\|", "").strip().strip("|").split("|")])
                assert n == header, (f"{path.name}, markdown cell {i}: a table row has {n} cells, its header "
                                     f"{header}: escape a | inside code as \\| ({text.strip()[:100]})")
