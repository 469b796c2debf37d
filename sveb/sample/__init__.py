"""Making a build: screening, groups, states, references (the pipeline and its jobs), plans, Ray."""
