"""The set-up files agree with each other: environment.yml, pyproject.toml, Makefile, .ci/run, README."""

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def _env_pip_list() -> list[str]:
    lines = (ROOT / "environment.yml").read_text().splitlines()
    out, inside = [], False
    for line in lines:
        if re.match(r"^\s*- pip:\s*$", line):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s+- (.+?)\s*$", line)
            if not m:
                break
            out.append(m.group(1))
    return out


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    expected = [_norm(r) for r in project["dependencies"] + project["optional-dependencies"]["course"]]
    listed = _env_pip_list()
    assert listed, "environment.yml has no pip list"
    assert listed[-1] == "-e .[course]", "environment.yml should end by installing the package itself"
    assert sorted(_norm(r) for r in listed[:-1]) == sorted(expected)
    # the same Python range as pyproject's requires-python (">=3.11,<3.14" there, conda's spelling here)
    spec = project["requires-python"]
    assert re.search(rf"^\s+- python{re.escape(spec)}\s*$", (ROOT / "environment.yml").read_text(), re.M), spec


def test_pinned_course_versions():
    course = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["course"]
    pins = {r.split("==")[0]: r.split("==")[1] for r in course if "==" in r}
    assert pins["nbgrader"] == "0.9.6"
    assert pins["jupyterlab"].startswith("4.6.")
    assert pins["notebook"].startswith("7.")
    assert pins["ipywidgets"].startswith("8.1.")


def test_ci_runs_exactly_the_readme_test_command():
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not ln.strip().startswith("#") and not ln.startswith(("set ", "cd ", "export CI="))]
    assert ci[0] == "make test", "CI must run the README's test command first, unchanged"
    assert any("make smoke" in ln for ln in ci[1:]), "CI also smoke-tests the other supported Pythons"
    assert not any(ln.startswith("make test") for ln in ci[1:])
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \w+)\s*$", quick, re.M)
    assert commands == ["make lab", "make test"]


@pytest.mark.parametrize("target", ["setup", "assets", "lab", "test", "labs", "check", "grade"])
def test_makefile_targets(target):
    assert re.search(rf"^{target}:", (ROOT / "Makefile").read_text(), re.M)


def test_pre_commit_hooks_run_what_ci_runs():
    """Every hook of .pre-commit-config.yaml calls a program of the project's venv that exists, and the
    pytest hooks name test files that exist (a renamed test would otherwise make the hook a silent no-op)."""
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [h for repo in config["repos"] for h in repo["hooks"]]
    assert {h["id"] for h in hooks} >= {"ruff", "layers", "labs-up-to-date"}
    for hook in hooks:
        program, *args = hook["entry"].split()
        assert program.startswith(".venv/bin/") and (ROOT / program).exists() or not (ROOT / ".venv").exists(), hook
        for arg in args:
            if arg.startswith("tests/"):
                assert (ROOT / arg).is_file(), f"hook {hook['id']} runs {arg}, which does not exist"


def test_readme_course_map_times_are_the_tools():
    """The course map's time column is what tools/course_times.py computes from the chapters today."""
    import re
    import runpy

    minutes = runpy.run_path(str(ROOT / "tools" / "course_times.py"))["minutes"]
    readme = (ROOT / "README.md").read_text()
    rows = dict(re.findall(r"^\| (\d\d) \| \[.*?\]\(course/.*?\.ipynb\) \| (\d+) min \|", readme, re.M))
    chapters = sorted((ROOT / "course").glob("[0-9][0-9]_*.ipynb"))
    assert len(rows) == len(chapters)
    stale = {p.name[:2]: (rows[p.name[:2]], minutes(p)) for p in chapters if int(rows[p.name[:2]]) != minutes(p)}
    assert not stale, f"README times differ from tools/course_times.py (chapter: readme, tool): {stale}"
