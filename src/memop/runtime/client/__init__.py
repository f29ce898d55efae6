"""The Kubernetes client: requests as plain dicts, kubeconfig, typed errors, resources, reachability,
and the raw watch stream. Import names from :mod:`memop.runtime`; the modules here are private.
"""
