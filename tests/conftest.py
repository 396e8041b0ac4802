"""Project-wide test options.

``--impl`` chooses what the hidden lab suites run against: ``reference`` (the package, the default) or
the path of a lab notebook (a solution, a release stub, or a learner's copy).
"""


def pytest_addoption(parser):
    parser.addoption("--impl", dest="b2l_impl", default=None, metavar="reference|NOTEBOOK.ipynb",
                     help="implementation the hidden suites under tests/hidden/ run against")
