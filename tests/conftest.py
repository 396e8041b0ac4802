"""Project-wide test options.

``--impl`` chooses what the hidden lab suites run against: ``reference`` (the package, the default) or
the path of a lab notebook (a solution, a release stub, or a learner's copy).
"""


def pytest_addoption(parser):
    parser.addoption("--impl", dest="b2l_impl", default=None, metavar="reference|NOTEBOOK.ipynb",
                     help="implementation the hidden suites under tests/hidden/ run against")


# Test files that take minutes, longest first. `make test` hands whole files to pytest-xdist workers in
# collection order (--dist loadfile); collecting these first starts each worker on one of them at once,
# instead of leaving one worker alone with the longest file at the end. Measured with --durations.
# (Serial run on 2 cores: parity 440 s, the nbgrader cycle 350 s, labs 200 s, chapters 150 s, model 70 s.)
LONG_FILES = ("test_parity.py", "test_nbgrader_cycle.py", "test_labs.py", "test_course_notebooks.py",
              "test_model.py", "test_gguf.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept otherwise
