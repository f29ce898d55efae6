"""memop's own project: the three tutorial operators, registered as any project's controllers are.

setup.cfg exposes :data:`PROJECT` in the ``memop.controllers`` entry-point group, so memop's
controllers are found, run and generated through the same path as a user's (see
:mod:`memop.project`).
"""

from __future__ import annotations

from memop import __version__, memcached, mypod, podset
from memop.project import Project

PROJECT = Project(
    name="memop",
    domain="example.com",
    controllers=(memcached.DEFINITION, podset.DEFINITION, mypod.DEFINITION),
    version=__version__,
    description="The operators of the Operator SDK and Kubebuilder tutorials, in Python asyncio",
    # memop's Lease before projects existed: a rolling upgrade must not elect a second leader.
    leader_election_id="memop-leader.cache.example.com",
    namespace="memop-system",
    image=f"memop:{__version__}",
    origin="memop.builtin",
)
