"""Views of scores: the leaderboard, the report, plots, the static site, Table 4."""
