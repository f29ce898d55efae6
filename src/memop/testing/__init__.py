"""An in-memory Kubernetes API server for tests, spoken to over real HTTP (memop's envtest)."""
