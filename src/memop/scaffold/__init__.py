"""Scaffolding, memop's ``kubebuilder init`` and ``kubebuilder create api``: an operator project
of one's own, from an empty folder, built the way memop's own operators are.

- ``memop init`` (:mod:`memop.scaffold.newproject`): the project (pyproject.toml with the
  ``memop.controllers`` entry point, ``src/PKG`` with its :class:`memop.Project`, tests,
  Dockerfile, README, CI script).
- ``memop create api`` (:mod:`memop.scaffold.newapi`): a kind and its controller package
  (api, desired, status, controller, definition), unit and end-to-end tests, registered in the
  project, then the manifests regenerated.
- ``memop create webhook`` (:mod:`memop.scaffold.newwebhook`): a kind's admission webhooks (a
  defaulter, a validator) and/or a conversion to a new version, with their tests, wired into
  the kind's ``DEFINITION``, then the manifests regenerated.

The templates are package data (``templates/``, rendered by :mod:`memop.scaffold.render`); the
code they make imports only memop's public names (``memop``, ``memop.runtime``'s exports, the
pytest plugin's fixtures).
"""

from __future__ import annotations

from memop.scaffold.command import main

__all__ = ["main"]
