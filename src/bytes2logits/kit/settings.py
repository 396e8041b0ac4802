"""Grading settings shared by ``nbgrader_config.py`` and ``python -m bytes2logits check``.

One place, so that a learner's local check and the class's autograde apply the same limits.
"""

# Seconds one cell may run before it is interrupted (it then scores 0). The slowest honest lab cell
# takes a few seconds on a 2-core laptop; hidden suites with speed gates stay well inside this.
EXECUTE_TIMEOUT = 60

# Seconds to wait for a cell's last output after its reply (nbclient's default of 4 s is too short on a
# loaded 2-core machine).
IOPUB_TIMEOUT = 20

# stderr output matching this is dropped before scoring: a Python warning printed by a learner's
# function must not cost the task (nbgrader scores any stderr output 0).
IGNORE_STDERR_PATTERN = r"(?m)^.*\b\w*Warning: |^\s*warnings\.warn\("

# Files a submission may contain that must never shadow the test machinery.
IGNORED_FILES = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "pytest.py", "conftest.py",
                 "sitecustomize.py", "usercustomize.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"]

# Characters of code (every code cell's source) a submission may hold. A lab's own notebook holds about 30 000;
# one cell of megabytes costs the similarity check and the feedback page's highlighting gigabytes of memory
# before any time limit applies. A notebook over this is not graded, with a line that says why.
MAX_CODE_CHARS = 500_000
