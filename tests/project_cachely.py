"""A project that is not memop's, for the manifest tests: ``cachely``, which runs memop's
Memcached controller under names of its own (its namespace, image, Lease, version).

Not installed: the tests select it with ``--controller-module tests.project_cachely``, as a user
names a module of theirs.
"""

from __future__ import annotations

from memop.memcached import DEFINITION as MEMCACHED
from memop.project import Project

PROJECT = Project(
    name="cachely",
    domain="example.org",
    controllers=(MEMCACHED,),
    version="1.2.3",
    description="Memcached caches, run by an operator of its own",
    leader_election_id="cachely-lock.example.org",
    namespace="cachely-operators",
    image="registry.example.com:5000/team/cachely:1.2.3",
)
