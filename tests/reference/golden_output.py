"""What the golden scripts beside this file do with the text they compute: print it, or
with `--check FILE` compare it with the committed FILE (exit 1 when they differ)."""
import sys


def emit(text):
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with open(sys.argv[2]) as f:
            if f.read() != text:
                sys.exit(f"{sys.argv[2]} is not what {sys.argv[0]} computes: regenerate it (see its docstring)")
        return
    sys.stdout.write(text)
