"""Describing a custom resource's API: its CRD (crdgen), the API server's validation wording,
status conditions, and the permissions a controller needs.
"""
