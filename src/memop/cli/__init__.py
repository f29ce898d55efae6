"""memop's command line: ``memop`` / ``python -m memop`` (flags, the run), ``memop demo`` and the
registry of controllers it can run.
"""
