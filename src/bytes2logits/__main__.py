"""Command line: ``python -m bytes2logits COMMAND``.

Commands: ``check NOTEBOOK`` (grade a lab), ``build-labs`` (regenerate solutions/ and labs/),
``grade`` (run the nbgrader cycle for a class).
"""

from __future__ import annotations

import sys

USAGE = """usage: python -m bytes2logits COMMAND [ARGS]

commands:
  check NOTEBOOK.ipynb   grade a copy of a lab notebook with its hidden suite (exit 0 on full marks)
  build-labs             regenerate the generated cells of solutions/ and the labs/ release
  grade [options]        run the nbgrader cycle for a class (see docs/instructor-guide.md)
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "check":
        from .kit.check import main as check_main

        return check_main(rest)
    if cmd == "build-labs":
        from .kit.build import main as build_main

        return build_main()
    if cmd == "grade":
        from .kit.classroom import main as grade_main

        return grade_main(rest)
    print(f"unknown command {cmd!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
