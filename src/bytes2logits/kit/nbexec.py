"""Notebook execution that survives a dead or unresponsive kernel.

Stock nbgrader 0.9.6 gives up on the whole notebook when the kernel dies (``os._exit``, a segfault, out
of memory) or stops answering (a loop that swallows ``KeyboardInterrupt`` ignores the interrupt nbgrader
sends at the time limit): every grade becomes None and ``autograde`` exits 1. :class:`RobustExecute`
instead records an error in the cell that broke the kernel, starts a fresh kernel, silently re-runs the
earlier non-test cells so that definitions and imports exist again, and goes on with the next cell. The
cell that broke scores 0 and every other cell is graded as usual.

Errors a learner meets in their feedback are said in words, not as tracebacks: a cell stopped at its time
limit (nbgrader leaves a ``KeyboardInterrupt`` traceback and a ``CellTimeoutError``) becomes one line with
the limit in seconds and the usual cause, and a stub's bare ``NotImplementedError`` becomes "not written yet".

It is registered for autograding in ``nbgrader_config.py`` and used by ``python -m bytes2logits check``,
so a learner's local check and the class's autograde behave the same.
"""

from __future__ import annotations

import copy

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute

from .grading import NOT_WRITTEN

__all__ = ["RobustExecute"]


def _error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"{ename}: {evalue}"])


def time_limit_output(seconds) -> NotebookNode:
    """The error a learner sees for a cell stopped at its time limit (instead of two tracebacks)."""
    return _error_output("TimeLimit", f"this cell was stopped after its time limit of {seconds:g} s. The usual "
                         "cause is an endless loop (a while loop whose condition never changes, or a "
                         "recursion that never ends); a very slow algorithm is the other one")


def words_for_errors(cell, timed_out: float | None = None) -> None:
    """Replace the tracebacks of a time-limit stop and of an unwritten stub in ``cell``'s outputs by words."""
    outputs = list(cell.get("outputs", []))
    if timed_out is not None:
        kept = [o for o in outputs if not (o.get("output_type") == "error"
                                            and o.get("ename") in ("KeyboardInterrupt", "CellTimeoutError"))]
        if len(kept) != len(outputs) or not any(o.get("output_type") == "error" for o in kept):
            outputs = kept + [time_limit_output(timed_out)]
    for i, o in enumerate(outputs):
        if o.get("output_type") == "error" and o.get("ename") == "NotImplementedError":
            outputs[i] = _error_output("NotImplementedError", NOT_WRITTEN)
    cell.outputs = outputs


OUTPUT_CAP = 200_000  # characters of output one cell may keep (a flood of output is cut, not stored)
# Seconds a cell interrupted at its time limit has to report back. A kernel that honours the interrupt does
# so in milliseconds; one that swallows it never does, and waiting the full iopub timeout (20 s) for it only
# slows the class down. Either way the cell scores 0 and, if the kernel stays silent, a fresh one runs the rest.
INTERRUPT_GRACE = 3


class RobustExecute(Execute):
    """nbgrader's ``Execute`` preprocessor, plus recovery from a dead or unresponsive kernel.

    It also caps each cell's output at :data:`OUTPUT_CAP` characters as it arrives (nbgrader's
    ``LimitOutput`` counts lines, so one line of a gigabyte would otherwise be kept whole).
    """

    def preprocess(self, nb, resources=None, km=None):
        self._broken_cells: set[int] = set()
        self._gave_up = False
        self._output_chars: dict[int, int] = {}
        return super().preprocess(nb, resources, km)

    def output(self, outs, msg, display_id, cell_index):
        kind = msg.get("msg_type")
        if kind in ("stream", "display_data", "execute_result", "update_display_data", "error"):
            content = msg.get("content", {})
            size = len(content.get("text", "")) if kind == "stream" else len(repr(content))
            used = self._output_chars.get(cell_index, 0)
            left = OUTPUT_CAP - used
            if left <= 0:
                return None
            self._output_chars[cell_index] = used + size
            if size > left:
                if kind != "stream":
                    return None
                content["text"] = content["text"][:left] + f"\n... output cut at {OUTPUT_CAP} characters ...\n"
        return super().output(outs, msg, display_id, cell_index)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return super().preprocess_cell(cell, resources, index)
        if self._gave_up:
            cell.outputs = [_error_output("KernelUnavailable", "the kernel could not be restarted; not run")]
            return cell, self.resources
        iopub_timeout = self.iopub_timeout
        self._timed_out = None
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            words_for_errors(cell, self._timed_out)
            return cell, resources
        except DeadKernelError:
            reason = ("KernelDied", "the kernel died while running this cell (os._exit, a crash, or out of "
                      "memory); a fresh kernel ran the rest of the notebook")
        except CellTimeoutError:
            reason = ("KernelUnresponsive", f"this cell did not stop within its time limit of {self.timeout} s, "
                      "even when interrupted (an endless loop that catches KeyboardInterrupt is the usual "
                      "cause); a fresh kernel ran the rest of the notebook")
        finally:
            self.iopub_timeout = iopub_timeout
        self.log.warning("cell %d: %s; restarting the kernel", index, reason[0])
        cell.outputs = list(cell.get("outputs", [])) + [_error_output(*reason)]
        self._broken_cells.add(index)
        self._restart_and_replay(index)
        return cell, self.resources

    async def _async_handle_timeout(self, timeout, cell=None):
        # The cell ran out of time and is about to be interrupted: give the kernel INTERRUPT_GRACE seconds
        # (not the full iopub timeout) to say it stopped. preprocess_cell restores the setting.
        self.iopub_timeout = min(self.iopub_timeout, INTERRUPT_GRACE)
        self._timed_out = timeout
        return await super()._async_handle_timeout(timeout, cell)

    def _restart_and_replay(self, upto: int) -> None:
        """Start a new kernel and re-run cells ``0..upto-1`` that define things (not tests, not breakers)."""
        graceful = self.shutdown_kernel
        self.shutdown_kernel = "immediate"  # it is dead or ignores requests: asking it to stop only waits
        try:
            self._cleanup_kernel()
        except Exception as e:  # noqa: BLE001 - the old kernel may be half dead; a new one is what matters
            self.log.warning("cleaning up the old kernel failed: %s", e)
        finally:
            self.shutdown_kernel = graceful
        try:
            self.km = self.create_kernel_manager()
            self.start_new_kernel()
            self.start_new_kernel_client()
            for j, earlier in enumerate(self.nb.cells[:upto]):
                if earlier.cell_type != "code" or j in self._broken_cells:
                    continue
                if earlier.get("metadata", {}).get("nbgrader", {}).get("grade"):
                    continue
                scratch = copy.deepcopy(earlier)
                super().preprocess_cell(scratch, self.resources, j)  # outputs of the first run are kept
        except Exception as e:  # noqa: BLE001
            self.log.error("could not restore a working kernel: %s", e)
            self._gave_up = True
