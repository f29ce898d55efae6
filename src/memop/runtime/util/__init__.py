"""Small building blocks with no Kubernetes in them: clocks, backoff, token buckets, ending tasks."""
