"""memop: the Memcached operator on a small asyncio controller runtime of its own."""

from memop.runtime.client import k8simport

__version__ = "0.1.0"

# Before any memop module imports kubernetes_asyncio: only the parts memop uses, 30 MB less
# (see memop.runtime.client.k8simport).
k8simport.install()
