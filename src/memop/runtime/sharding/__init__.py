"""Sharded list and watch (Kubernetes v1.36's alpha ``ShardedListAndWatch``): the hash and the
``shardSelector`` a replica sends so the API server hands it only its share of the objects.

:mod:`memop.runtime.sharding.selector` has the pieces a client needs (the server's FNV-1a hash,
hash ranges, rendering a selector, checking a hash against ranges); the in-memory API server's
parser of selectors (:mod:`memop.testing.apiserver.sharding`) uses the same hash.
"""
