"""nbgrader's exchange, with one change: ``release_feedback`` skips work that never came through it.

``nbgrader release_feedback LAB`` puts each student's feedback page into the exchange, named by a hash of
the secret that ``nbgrader submit`` wrote beside the submission (``submission_secret.txt``, next to
``timestamp.txt``). Work that was copied into ``submitted/`` by hand or by ``zip_collect`` has no secret,
and stock nbgrader stops the whole release at the first such student with a ``FileNotFoundError``: nobody
gets feedback. :class:`ReleaseFeedback` releases every page that can be released, and names each student
it skipped (their page is in ``feedback/<student>/<lab>/``, to hand out another way).
``nbgrader_config.py`` selects it through ``ExchangeFactory.release_feedback``.
"""

from __future__ import annotations

import glob
import os

from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback

__all__ = ["ReleaseFeedback"]

EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


class ReleaseFeedback(ExchangeReleaseFeedback):
    """``release_feedback`` that skips, and names, the students whose work did not come through the exchange."""

    def copy_files(self):
        hand_copied = []
        for page in sorted(glob.glob(os.path.join(self.src_path, "*.html"))):
            folder = os.path.dirname(page)
            if not all(os.path.isfile(os.path.join(folder, name)) for name in EXCHANGE_FILES):
                # feedback/<student>/<lab>/<notebook>.html
                hand_copied.append(os.path.basename(os.path.dirname(folder)))
        hand_copied = sorted(set(hand_copied))
        for student in hand_copied:
            self.log.warning("Not releasing feedback for '%s': the submission did not come through the exchange "
                             "(no %s); hand out %s yourself", student, " or ".join(EXCHANGE_FILES),
                             os.path.join(self.coursedir.feedback_directory, student,
                                          self.coursedir.assignment_id))
        before = self.coursedir.student_id_exclude
        excluded = [s for s in (before or "").split(",") if s] + hand_copied
        self.coursedir.student_id_exclude = ",".join(excluded)
        try:
            super().copy_files()
        finally:
            self.coursedir.student_id_exclude = before
