"""Command line: ``python -m bytes2logits COMMAND``.

Engine: ``chat`` (talk to a GGUF model), ``tokenize TEXT``, ``inspect FILE.gguf``.
Course kit: ``start LAB`` (your own copy of a lab), ``check NOTEBOOK`` (grade a lab), ``build-labs``
(regenerate solutions/ and labs/), ``grade`` (run the nbgrader cycle for a class), ``site`` (build the static
course site).
"""

from __future__ import annotations

import os
import sys

USAGE = """usage: python -m bytes2logits COMMAND [ARGS]

engine:
  chat [options]         chat with a GGUF model (default: SmolLM2-135M-Instruct); -p PROMPT for one shot
  tokenize [options] TEXT  print the token ids of TEXT as JSON (--special parses <|im_start|> etc.)
  inspect FILE.gguf      print a GGUF file's metadata and tensor table

course kit (each acts on --root DIR, else the course folder around the current directory):
  start LAB              copy lab LAB (lab01 or lab01_tokenizers) to work/LAB/, your own git-ignored copy
  check [NOTEBOOK] [--lab LAB]  grade a lab notebook with its hidden suite (exit 0 on full marks);
                         with --lab alone: your copy in work/ if you started one, else the release
  build-labs [--lab LAB] [--force]  regenerate the generated cells of solutions/ and the labs/
                         release (refuses to overwrite cells edited by hand unless --force)
  grade [options]        run the nbgrader cycle for a class (see docs/instructor-guide.md)
  site [options]         build the static course site (executed chapters, lab pages) into build/site/html
  check-service [options]  (instructors) grade a class's checks over HTTP: check NOTEBOOK --service URL
  postgres start|stop|url --data DIR  a PostgreSQL server for the gradebook (start prints its --db URL)
"""


def main(argv: list[str] | None = None) -> int:
    """Run one command; when its output goes to a reader that stops early (``| head``), exit quietly.

    A closed pipe is handled here, as an exception, rather than by restoring SIGPIPE's default action: that
    action kills the whole process at the next write to any closed pipe or socket, and a command run inside
    another program (a test worker, a notebook's kernel) once took that program down with it.
    """
    try:
        code = _dispatch(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Nothing more can be written; point stdout at /dev/null so that the interpreter's own flush at
        # exit does not raise again, and exit as a Unix tool killed by SIGPIPE does (128 + 13).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141


def _dispatch(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd in ("chat", "tokenize", "inspect"):
        from .engine import cli

        return getattr(cli, f"{cmd}_main")(rest)
    if cmd == "start":
        from .kit.workspace import main as start_main

        return start_main(rest)
    if cmd == "check":
        from .kit.check import main as check_main

        return check_main(rest)
    if cmd == "build-labs":
        from .kit.build import main as build_main

        return build_main(rest)
    if cmd == "grade":
        from .kit.classroom import main as grade_main

        return grade_main(rest)
    if cmd == "site":
        from .kit.site import main as site_main

        return site_main(rest)
    if cmd == "check-service":
        from .kit.checkservice import main as service_main

        return service_main(rest)
    if cmd == "postgres":
        from .kit.gradebook import main as postgres_main

        return postgres_main(rest)
    print(f"unknown command {cmd!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
