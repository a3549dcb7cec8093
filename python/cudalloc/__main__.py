"""python -m cudalloc run [LAUNCHER OPTIONS] [--] PROGRAM [ARGS...]: the
cudalloc launcher, with PROGRAM run by this Python when it is a .py script or
"-m MODULE" (the interpreter of this virtual environment, not the first on PATH)."""
import os
import subprocess
import sys

from . import __version__, _native

USAGE = """usage: python -m cudalloc run [--sim SIZE] [--conf CONF] [--report PREFIX] [--] PROGRAM [ARGS...]
       python -m cudalloc --version | --help
Runs PROGRAM under the cudalloc launcher (cudalloc run, see cudalloc(1)); a PROGRAM
that is a .py script or -m MODULE runs with this Python (%s).
""" % sys.executable


def split_program(args):
    """(launcher options, program and its arguments): after "--", else from the
    first word that is not an option or an option's value."""
    if "--" in args:
        i = args.index("--")
        return args[:i], args[i + 1:]
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 1 if "=" in args[i] or args[i] in ("--help", "-h") else 2
    return args[:i], args[i:]


def main(argv):
    if not argv or argv[0] in ("--help", "-h"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    launcher = _native.launcher_path()
    if argv[0] == "--version":
        print("python -m cudalloc (cudalloc) %s" % __version__)
        if launcher:
            sys.stdout.flush()
            subprocess.call([launcher, "--version"])
        return 0
    if argv[0] != "run":
        print("cudalloc: unknown command '%s': accepted: run, --version, --help" % argv[0], file=sys.stderr)
        return 2
    if launcher is None:
        print("cudalloc: the launcher (bin/cudalloc) is not found: make install cudalloc, or put its bin/ on PATH",
              file=sys.stderr)
        return 1
    options, program = split_program(argv[1:])
    if not program:
        print(USAGE, end="", file=sys.stderr)
        return 2
    if program[0].endswith(".py") or program[0] == "-m":
        program = [sys.executable] + program
    os.execv(launcher, [launcher, "run"] + options + ["--"] + program)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
