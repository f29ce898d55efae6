"""The generic controller runtime: client, watches, cache, workqueue, controllers, manager.

Nothing in this package knows about memcached; an operator is built on top of it.
"""
