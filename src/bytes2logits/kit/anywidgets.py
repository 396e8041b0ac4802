"""Course widgets that run the same front-end code in JupyterLab and on the static course site.

A :class:`CourseWidget` is an `anywidget <https://anywidget.dev>`_: its view is one ES module in
``kit/web/`` (``export default { render({ model, el }) }``) that reads and writes the widget's synced traits.
In JupyterLab the kernel holds the model. For pages with no kernel (the course site, nbconvert's HTML) the
widget's mime bundle also carries ``text/html``: a ``div.b2l-anywidget`` naming the module, the traits as
JSON, and a static view for readers without JavaScript. ``kit/web/static_host.js`` turns every such div into
the live widget, with an in-page model in place of the kernel's. JupyterLab prefers the widget view, so the
HTML is only used where no kernel is.
"""

from __future__ import annotations

import html
import json
import unicodedata
from pathlib import Path

import anywidget
import traitlets

from .widgets import utf8_table_html

__all__ = ["WEB", "CourseWidget", "static_html", "MergeStepper", "Utf8Explorer", "utf8_explorer"]

#: The folder of the widgets' ES modules (and of ``static_host.js``); a site copies all of it.
WEB = Path(__file__).resolve().parent / "web"


def static_html(module: str, state: dict, fallback: str = "") -> str:
    """The kernel-free form of a widget: ``module``'s name, ``state`` as JSON, and ``fallback`` HTML.

    ``static_host.js`` renders ``module`` (``kit/web/<module>.js``) into the div with ``state`` as its model;
    without JavaScript the reader sees ``fallback``. The JSON is made safe inside ``<script>`` (``</`` is
    written ``<\\/``, which JSON reads back as ``</``).

    >>> "data-module=\\"merge_stepper\\"" in static_html("merge_stepper", {"step": 0})
    True
    """
    if not module.isidentifier():
        raise ValueError(f"widget module name must be an identifier, got {module!r}")
    payload = json.dumps(state, ensure_ascii=False).replace("</", "<\\/").replace("<!--", "<\\!--")
    return (f'<div class="b2l-anywidget" data-module="{html.escape(module)}">'
            f'<script type="application/json" class="b2l-state">{payload}</script>'
            f'<div class="b2l-fallback">{fallback}</div></div>')


class CourseWidget(anywidget.AnyWidget):
    """Base of the course's anywidgets: set ``module`` (the ES module's name in ``kit/web/``) in a subclass.

    ``static_traits`` lists the synced traits a kernel-free page needs; :meth:`fallback_html` is what a reader
    without JavaScript sees (the first view, rendered in Python).
    """

    module: str = ""
    static_traits: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        if cls.__dict__.get("module"):  # before anywidget's hook, which reads the file named by _esm
            cls._esm = WEB / f"{cls.module}.js"
        super().__init_subclass__(**kwargs)

    def fallback_html(self) -> str:
        """The static view for readers without JavaScript (override)."""
        return ""

    def static_state(self) -> dict:
        """The traits of :attr:`static_traits`, as JSON-ready values."""
        return {name: getattr(self, name) for name in self.static_traits}

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/html"] = static_html(self.module, self.static_state(), self.fallback_html())
        return bundle


class MergeStepper(CourseWidget):
    """Back, slider and next over pre-rendered frames: chapter 03's merge stepper (``web/merge_stepper.js``).

    ``frames`` holds one HTML frame per training step (:func:`bytes2logits.lessons.merge_stepper.step_html`
    of each step of ``bpe_trace``: the trace stays the one source of the steps), ``step`` the 0-based frame
    shown. Setting ``step`` from Python moves the view; clicking moves ``step``.
    """

    module = "merge_stepper"
    static_traits = ("frames", "step")
    frames = traitlets.List(traitlets.Unicode()).tag(sync=True)
    step = traitlets.Int(0).tag(sync=True)

    @traitlets.validate("step")
    def _step_in_range(self, proposal):
        value, n = proposal["value"], len(self.frames)
        if n and not 0 <= value < n:
            raise traitlets.TraitError(f"step must be in 0..{n - 1} (there are {n} frames), got {value}")
        return value

    def fallback_html(self) -> str:
        """The first frame, with a line saying that stepping needs JavaScript."""
        if not self.frames:
            return "<i>nothing to merge</i>"
        return (f"<p><i>step 1 of {len(self.frames)} (the stepper needs JavaScript)</i></p>"
                f"{self.frames[self.step]}")


class Utf8Explorer(CourseWidget):
    """Chapter 01's text box: characters → UTF-8 bytes → ids, updated as you type (``web/utf8_explorer.js``).

    The browser encodes what is typed (``TextEncoder``); ``names`` maps ``"U+XXXX"`` to the Unicode name of
    each code point of ``text``, kept current from Python's :mod:`unicodedata` while a kernel runs.
    """

    module = "utf8_explorer"
    static_traits = ("text", "names")
    text = traitlets.Unicode("").tag(sync=True)
    names = traitlets.Dict().tag(sync=True)

    def __init__(self, text: str = "", **kwargs):
        super().__init__(text=text, **kwargs)
        self._name_all()

    @traitlets.observe("text")
    def _on_text(self, change):
        self._name_all()

    def _name_all(self) -> None:
        names = {f"U+{ord(ch):04X}": unicodedata.name(ch, "<unnamed>") for ch in self.text}
        if names != self.names:
            self.names = names

    def fallback_html(self) -> str:
        """The table of :func:`bytes2logits.kit.widgets.utf8_table_html` for the current text."""
        return utf8_table_html(self.text)


def utf8_explorer(initial: str = "héllo 🙂") -> Utf8Explorer:
    """A text box: type anything and see characters → UTF-8 bytes → ids, updated as you type.

    The same view runs in JupyterLab and, with no kernel, on the course site (:class:`Utf8Explorer`).
    """
    return Utf8Explorer(initial)
