"""The code a run uses: the checkout's git commit, and whether its tracked files have
edits (a commit then no longer names the code)."""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def git(*args: str) -> str:
    """The output of a git command in the checkout, or "unknown" without git."""
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                             timeout=10, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def commit() -> str:
    return git("rev-parse", "HEAD")


def dirty() -> bool:
    return bool(git("status", "--porcelain", "--untracked-files=no"))
