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
