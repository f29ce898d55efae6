"""memop: the Memcached operator on a small asyncio controller runtime of its own."""

__version__ = "0.1.0"
