"""A leaderboard of result bundles, every score recomputed here from the estimates and the build's references.

A board is a folder:
  board.json             the builds it scores against (content hash -> folder), besides any under builds/
  builds/<name>/         exports placed in the board (found by their manifest's content hash)
  bundles/<key>/         accepted bundles, as submitted (bundle.json, estimates.parquet)
  scored/<key>.json      the board's score rows of each bundle (never the submitter's)
  scores.parquet, .csv   every row, with paired Δ vs grpo and Holm verdicts per (build, protocol) table
A bundle's key hashes its estimates and identity, so adding it twice changes nothing. What is recomputed of a
bundle before it is accepted: check.py; its format: bundle.py; the pooled tables and verdicts: pool.py; adding:
accept.py; the folder: folder.py; the scores table: scores.py.
"""

from sveb.board.accept import add, add_all
from sveb.board.folder import BoardError, bundles, known_builds, known_handles, register
from sveb.board.scores import rebuild, rows
