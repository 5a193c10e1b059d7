"""The `entropy-lens` command of the wheel: the Rust CLI, run in this process."""

import signal
import sys


def main() -> None:
    from . import _native

    # Ctrl-C ends the command as it ends the native binary (the CLI installs its own handler where
    # it stops gracefully, as `explore` does); Python's handler would only set a flag nobody reads.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(_native.main(sys.argv[1:]))


if __name__ == "__main__":
    main()
