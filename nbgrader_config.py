"""nbgrader configuration: the course root is this repository.

solutions/ is nbgrader's source (instructor) folder and labs/ its release (student) folder. The settings
below are the ones tested on this course (see docs/instructor-guide.md and tests/test_nbgrader_cycle.py).
"""

import os
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearOutput,
    DeduplicateIds,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    OverwriteCells,
    OverwriteKernelspec,
)

from bytes2logits.kit.inert import InertHTMLExporter, InertOutputs
from bytes2logits.kit.labs import hidden_root
from bytes2logits.kit.nbgrade import (
    SandboxedExecute,
    SaveTrustedGrades,
    StartTrustedGrading,
    SubmittedCellMetadata,
    TrustedGrading,
)
from bytes2logits.kit.settings import EXECUTE_TIMEOUT, IGNORE_STDERR_PATTERN, IGNORED_FILES, IOPUB_TIMEOUT

ROOT = Path(__file__).resolve().parent

# Kernels started by nbgrader inherit these: the grading bridge finds the hidden suites outside
# solutions/ (files there would be copied into every release), and in-kernel pytest skips the scan of
# installed plugins.
_here = ROOT / "tests" / "hidden"
os.environ.setdefault("BYTES2LOGITS_HIDDEN_TESTS", str(_here if _here.is_dir() else hidden_root()))
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

# Exported, so that the kit's code in nbgrader's child processes (the trusted grader) acts on this same course
# (bytes2logits.kit.labs.course_root).
c.CourseDirectory.root = os.environ.setdefault("BYTES2LOGITS_COURSE_ROOT", str(ROOT))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
c.CourseDirectory.db_url = "sqlite:///" + str(Path(c.CourseDirectory.root) / "gradebook.db")
c.CourseDirectory.ignore = IGNORED_FILES

# nbgrader zip_collect LAB: files uploaded to an LMS go in downloaded/<lab>/archive/ (zips, or the notebooks
# themselves); each notebook found in them is named by student in one of two ways (docs/instructor-guide.md):
#   <student>/<lab>.ipynb                 a folder per student
#   <student>_<anything>_<lab>.ipynb      a flat export such as Canvas's (smithj_1234_5678_lab01_tokenizers.ipynb)
# with an optional "-N" that an LMS adds to a resubmitted file's name. A student id is letters, digits, "." and
# "-" (no "_": it separates the parts); in the folder layout, the folder that holds the notebook is the student.
# A file named otherwise, or after another lab, is skipped with a warning.
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?!extracted/)(?P<student_id>[A-Za-z0-9][A-Za-z0-9.\-]*)(?:/|_(?:[^/]*_)?)"
    r"(?P<file_id>lab\d\d_[a-z0-9_]+?)(?:-\d+)?\.ipynb$"
)
c.ZipCollectApp.strict = True

c.Execute.timeout = EXECUTE_TIMEOUT
c.Execute.iopub_timeout = IOPUB_TIMEOUT
c.OverwriteCells.add_missing_cells = True
c.IgnorePattern.pattern = IGNORE_STDERR_PATTERN
c.IgnorePattern.enabled = True
c.ClearSolutions.enforce_metadata = True

# nbgrader's own list, with four changes (docs/instructor-guide.md, "What a submission can do"):
# - the kernel runs in the sandbox and survives a dead or unresponsive kernel (its outputs are feedback only);
# - StartTrustedGrading / TrustedGrading score the notebook in a separate grader process (started first, so
#   that it runs while the kernel does), the submission's code in a worker sandbox of its own, and write
#   the feedback lines into the autograder cells;
# - SaveTrustedGrades takes each autograder cell's score from that grader, never from a kernel's output;
# - InertOutputs, last, makes the saved notebook inert (src/bytes2logits/kit/inert.py): outputs keep only text,
#   PNG/JPEG and sanitised HTML/markdown, the learner's markdown is sanitised, so nothing a submission wrote
#   runs where formgrader or JupyterLab shows it.
# Sanitising first drops nbgrader metadata a learner forged into their own cells (an unknown or repeated
# grade_id stopped nbgrader's OverwriteCells for the whole submission); the rest is nbgrader's own list.
c.Autograde.sanitize_preprocessors = [SubmittedCellMetadata, ClearOutput, DeduplicateIds, OverwriteKernelspec,
                                      OverwriteCells, CheckCellMetadata]
c.Autograde.autograde_preprocessors = [
    StartTrustedGrading,
    SandboxedExecute,
    TrustedGrading,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveTrustedGrades,
    AssignLatePenalties,
    CheckCellMetadata,
    InertOutputs,
]

# Feedback shows each test cell's visible asserts and the learner's teaching lines, never the hidden block
# (stock nbgrader leaves it in, upstream issues #917 and #1363). Its pages are inert twice over: InertOutputs
# first (before GetGrades adds the gradebook's scores and comments), and every page carries a strict
# Content-Security-Policy and no script (InertHTMLExporter; MathJax does not run, formulas show as TeX).
c.GenerateFeedback.preprocessors = [InertOutputs, GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.exporter_class = InertHTMLExporter
c.ClearHiddenTests.enforce_metadata = False

# Every HTML page rendered with this configuration, formgrader's view of a submission included, goes through
# InertOutputs too: a notebook autograded before it was in the list above is shown inert all the same (it runs
# once per page when a converter lists it as well).
c.HTMLExporter.preprocessors = [InertOutputs]

# A class on JupyterHub (docs/instructor-guide.md): the exchange and the course id come from the same two variables
# that deploy/jupyterhub/jupyterhub_config.py gives every single-user server, the instructor's included, so
# `nbgrader release_assignment / collect / release_feedback LAB` in the instructor's terminal use the class's
# exchange. Unset (a laptop, make check, make grade alone), nbgrader's defaults stand.
if os.environ.get("B2L_EXCHANGE_ROOT"):
    c.Exchange.root = os.environ["B2L_EXCHANGE_ROOT"]
if os.environ.get("B2L_COURSE_ID"):
    c.CourseDirectory.course_id = os.environ["B2L_COURSE_ID"]

# release_feedback releases what came through the exchange and names the students whose work was copied in by
# hand (stock nbgrader stops the whole release at the first of them).
c.ExchangeFactory.release_feedback = "bytes2logits.kit.exchange.ReleaseFeedback"
