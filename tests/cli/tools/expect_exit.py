"""`expect_exit.py N COMMAND...`: run COMMAND, pass its output through, succeed iff it exits N.

lit's `not` only says "failed"; niroc's contract distinguishes 1 (bad input) from 2 (usage), so
the golden tests check the exact code with this.
"""

import subprocess
import sys


def main() -> int:
    expected = int(sys.argv[1])
    completed = subprocess.run(sys.argv[2:])
    if completed.returncode != expected:
        print(
            f"expect_exit: expected exit code {expected}, got {completed.returncode}: "
            f"{' '.join(sys.argv[2:])}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
