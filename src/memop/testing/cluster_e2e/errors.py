"""The one error of the cluster e2e steps."""

from __future__ import annotations


class ClusterE2EError(AssertionError):
    """A step of the install that failed (an AssertionError, so pytest shows it as a failure);
    the message says which step and what the cluster or the tool said."""
