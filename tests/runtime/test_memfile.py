"""memop.runtime.util.memfile: a path for bytes, in memory, that any open of the process reads."""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path

import pytest

from memop.runtime.util import memfile
from memop.runtime.util.memfile import memory_file
from memop.testing.tls import ServingCertificates


def test_a_memory_file_reads_back_its_bytes_lives_on_no_filesystem_and_cannot_change() -> None:
    path = memory_file(b"some bytes\n" * 1000, name="test-bytes")
    assert Path(path).read_bytes() == b"some bytes\n" * 1000
    assert os.readlink(path) == "/memfd:test-bytes (deleted)"
    assert stat.S_ISREG(os.stat(path).st_mode)
    with pytest.raises(PermissionError):  # sealed
        Path(path).write_bytes(b"other")
    assert Path(path).read_bytes() == b"some bytes\n" * 1000
    # The same bytes: the same file.
    assert memory_file(b"some bytes\n" * 1000, name="another-name") == path
    assert memory_file(b"other bytes", name="test-bytes") != path


def test_ssl_loads_a_certificate_chain_from_memory_files() -> None:
    certificates = ServingCertificates.generate()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(
        memory_file(certificates.cert_pem, name="test-tls.crt"),
        memory_file(certificates.key_pem, name="test-tls.key"),
    )
    trust = ssl.create_default_context(cafile=memory_file(certificates.ca_pem, name="test-ca.crt"))
    assert [c["subject"] for c in trust.get_ca_certs()] == [((("commonName", "memop-test-apiserver-ca"),),)]


def test_without_memory_files_a_temporary_file_only_its_owner_reads() -> None:
    path = memfile._temporary(b"secret", "test-key")
    try:
        assert Path(path).read_bytes() == b"secret"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert Path(path).name.startswith("memop-test-key-")
    finally:
        memfile._remove(path)
    assert not Path(path).exists()
