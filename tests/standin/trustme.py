"""A stand-in for trustme where trustme cannot be installed: the
free-threaded CPython 3.13t, where its dependency cryptography does not
build (cffi refuses 3.13t; pyca/cryptography supports free threading from
3.14t). scripts/test's ft stage puts this folder on such a venv's path (a
.pth file), so that the tests' `import trustme`, in pytest and in the
child interpreters they start, finds it; nothing else imports it.

It makes what trustme makes, a throwaway CA and leaf certificates signed by
it (P-256 keys, the names as subjectAltName), with the `openssl` command
line, and offers the part of trustme's API that the tests use:
`CA()`, `CA.issue_cert(*names)`, `CA.configure_trust(ctx)`, `CA.cert_pem`,
`LeafCert.configure_cert(ctx)` and `LeafCert.private_key_and_cert_chain_pem`,
each blob with `bytes()` and `write_to_path()`. It does not know trustme's
other options (key types, intermediates, client-certificate helpers).
"""

import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading

__all__ = ["CA", "Blob", "LeafCert"]

_CURVE = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


def _openssl(*args, cwd):
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("tests/standin/trustme.py needs the openssl command on PATH")
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class Blob:
    """PEM bytes, as trustme's Blob gives them."""

    def __init__(self, data):
        self._data = data

    def bytes(self):
        return self._data

    def write_to_path(self, path, append=False):
        with open(path, "ab" if append else "wb") as f:
            f.write(self._data)


class LeafCert:
    def __init__(self, key_pem, cert_pem, ca_pem):
        self.private_key_pem = Blob(key_pem)
        self.cert_chain_pems = [Blob(cert_pem)]
        self.private_key_and_cert_chain_pem = Blob(key_pem + cert_pem)
        self._ca_pem = ca_pem

    def configure_cert(self, ctx):
        # load_cert_chain reads files only: the pair goes through one
        with tempfile.TemporaryDirectory() as where:
            path = os.path.join(where, "leaf.pem")
            self.private_key_and_cert_chain_pem.write_to_path(path)
            ctx.load_cert_chain(path)


class CA:
    def __init__(self):
        with tempfile.TemporaryDirectory() as where:
            _openssl(
                "req", "-x509", *_CURVE, "-keyout", "ca.key", "-out", "ca.pem",
                "-days", "3650", "-subj", "/O=zloopgo test stand-in CA",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                cwd=where,
            )  # fmt: skip
            self._key_pem = _read(os.path.join(where, "ca.key"))
            self.cert_pem = Blob(_read(os.path.join(where, "ca.pem")))
        self._serial = 1

    def issue_cert(self, *names):
        if not names:
            raise ValueError("issue_cert needs at least one name")
        alt = []
        for name in names:
            try:
                alt.append("IP:" + str(ipaddress.ip_address(name)))
            except ValueError:
                alt.append(("email:" if "@" in name else "DNS:") + name)
        self._serial += 1
        with tempfile.TemporaryDirectory() as where:
            with open(os.path.join(where, "ca.key"), "wb") as f:
                f.write(self._key_pem)
            self.cert_pem.write_to_path(os.path.join(where, "ca.pem"))
            with open(os.path.join(where, "leaf.ext"), "w") as f:
                f.write(
                    "basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature,keyEncipherment\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n"
                    f"subjectAltName={','.join(alt)}\n"
                )
            _openssl(
                "req", "-new", *_CURVE, "-keyout", "leaf.key", "-out", "leaf.csr",
                "-subj", "/O=zloopgo test stand-in leaf",
                cwd=where,
            )  # fmt: skip
            _openssl(
                "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-set_serial", str(self._serial), "-days", "3650",
                "-extfile", "leaf.ext", "-out", "leaf.pem",
                cwd=where,
            )  # fmt: skip
            return LeafCert(
                _read(os.path.join(where, "leaf.key")),
                _read(os.path.join(where, "leaf.pem")),
                self.cert_pem.bytes(),
            )

    def configure_trust(self, ctx):
        ctx.load_verify_locations(cadata=self.cert_pem.bytes().decode("ascii"))


def _selftest():
    """A handshake between a server and a client context it configured."""
    ca = CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    a, b = socket.socketpair()
    with a, b:
        done = []
        t = threading.Thread(target=lambda: done.append(server.wrap_socket(a, server_side=True)))
        t.start()
        c = client.wrap_socket(b, server_hostname="localhost")
        t.join()
        return c.version()


if __name__ == "__main__":
    print(_selftest())
