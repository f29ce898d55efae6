#!/usr/bin/env python3
"""A stand-in for memcached, for a cluster that cannot pull the memcached image: accepts the
flags memop's Deployment passes (--memory-limit, --port/-p, -o, -v), listens on the port
(11211 by default) and answers memcached's text protocol for get, set, delete, version,
stats and quit, keeping items in memory. Not memcached: no eviction, no expiry."""

import argparse
import asyncio
import signal

items: dict[bytes, tuple[bytes, bytes]] = {}


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while line := await reader.readline():
            words = line.split()
            if not words:
                continue
            command = words[0]
            if command == b"set" and len(words) >= 5:
                data = await reader.readexactly(int(words[4]) + 2)
                items[words[1]] = (words[2], data[:-2])
                writer.write(b"STORED\r\n")
            elif command in (b"get", b"gets"):
                for key in words[1:]:
                    if key in items:
                        flags, value = items[key]
                        writer.write(b"VALUE %s %s %d\r\n%s\r\n" % (key, flags, len(value), value))
                writer.write(b"END\r\n")
            elif command == b"delete" and len(words) >= 2:
                writer.write(b"DELETED\r\n" if items.pop(words[1], None) else b"NOT_FOUND\r\n")
            elif command == b"version":
                writer.write(b"VERSION 1.6.26-standin\r\n")
            elif command == b"stats":
                writer.write(b"STAT curr_items %d\r\nEND\r\n" % len(items))
            elif command == b"quit":
                break
            else:
                writer.write(b"ERROR\r\n")
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser(prog="memcached")
    parser.add_argument("--memory-limit", "-m", default="64")
    parser.add_argument("--port", "-p", type=int, default=11211)
    parser.add_argument("-o", action="append", default=[])
    parser.add_argument("-v", action="count", default=0)
    options = parser.parse_args()
    server = await asyncio.start_server(serve, "0.0.0.0", options.port)
    print(f"memcached stand-in on :{options.port}, memory limit {options.memory_limit} MiB", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


asyncio.run(main())
