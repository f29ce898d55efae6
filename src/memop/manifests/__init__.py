"""Manifest generation from the controllers' definitions: CRDs, RBAC, the OLM bundle,
dashboards and alerts (``memop manifests``).
"""
