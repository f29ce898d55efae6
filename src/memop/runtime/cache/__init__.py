"""The cache: reflectors (list then watch) filling stores of plain dicts, label selectors, indexes
and the structure sharing of cached objects. Import names from :mod:`memop.runtime`.
"""
