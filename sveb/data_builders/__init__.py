"""Problems: the shared vocabulary of every problem builder and dataset reader in this package.

problems.py: the problem record (`make_problem`), its id and train/test split, the errors (`SkipRow` for a row
that cannot become a problem, `SourceError`), the domains, and `Source`, the description of one public dataset.
Beside it, importing only this vocabulary (and each other downward):
  number, math, science, general, programming   one module per domain:
      HUB_ID, HUB_CONFIG, HUB_SPLIT             the dataset the paper's code used (written there only)
      builtin(n, seed, split) -> list[dict]     offline procedural problems (seeds: a stratified partition)
      from_record(rec) -> dict                  one row of the dataset's own schema -> problem dict
                                                (raise SkipRow("reason") to skip it)
      prompt(problem) -> list[dict]             chat messages for the policy
  seeds                                         seeds as a stratified partition of a source (slots, draws)
  boxed, rows                                   text helpers the domains and readers share
  gsm8k, math500, arc, gpqa, mmlu, mbpp, humaneval, paper, hista
                                                dataset readers: each defines `SOURCE = Source(...)` (or
                                                `SOURCES = [...]`); adding a dataset is adding one such file
  files, fields, load, look                     reading rows (files, hub), --field mappings, `--source`
                                                resolution and `load_problems`, `sveb ls sources` and `sveb ls problems`
"""

from sveb.data_builders.problems import (
    Domain,
    SkipRow,
    Source,
    SourceError,
    __getattr__,
    declared,
    domain_module,
    make_problem,
    normalise_question,
    problem_id,
    sample_builtin,
    split_of,
)
