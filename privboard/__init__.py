"""privboard for programs: the leaderboard's rows as a pandas DataFrame.

    import privboard
    rows = privboard.load_rows()   # the archive and ./results, as the site shows them
"""
from reports import load_rows

__all__ = ["load_rows"]
