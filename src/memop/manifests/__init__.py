"""Manifest generation from a project's controllers (``memop manifests``): memop's own
``manifests/`` and any project's are the same code's output.

- :mod:`~memop.manifests.command`: the ``memop manifests`` command (which project, which files);
- :mod:`~memop.manifests.target`: what the files are generated for (the project, the command
  named in every header) and how they are written;
- :mod:`~memop.manifests.layout`: every file of ``manifests/``, from
  :mod:`~memop.manifests.crds` (CRDs, samples), :mod:`~memop.manifests.rbac` (permissions and
  roles), :mod:`~memop.manifests.manager` (the operator's Deployment and neighbours),
  :mod:`~memop.manifests.monitoring` (dashboard, alert rules) and
  :mod:`~memop.manifests.overlays` (the kustomize installs);
- :mod:`~memop.manifests.olm`: the Operator Lifecycle Manager bundle.
"""
