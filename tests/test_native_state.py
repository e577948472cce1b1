"""The transports' and the TLS protocol's native methods find their module
state in the instance (capi/zl.h: zl_state_of_native), kept there on the
first native call: these pin that the ways an instance comes to be or
changes class leave nothing a program sees different from asyncio, and that
a TLS protocol over a transport of the program's own (no native base, so
no such field) is served as asyncio serves it. Dual-run. It knows the
transports' public surface and asyncio's private _start_tls_compatible;
nothing of the adapter's layout."""

import asyncio
import socket
import sys

import pytest
from helpers import SCRIPT_FACTORIES, check, run_script


class Collect(asyncio.DatagramProtocol):
    def __init__(self):
        self.got = []
        self.arrived = asyncio.Event()

    def datagram_received(self, data, addr):
        self.got.append((data, addr))
        self.arrived.set()


def test_a_transport_whose_class_became_a_subclass_serves_datagrams(loop):
    async def main():
        transport, proto = await loop.create_datagram_endpoint(Collect, local_addr=("127.0.0.1", 0))
        # a program's subclass of the loop's class, set before any native
        # call: the state is found through it and kept
        transport.__class__ = type("ProgramsTransport", (type(transport),), {})
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind(("127.0.0.1", 0))
        peer.settimeout(5)
        try:
            peer.sendto(b"ping", transport.get_extra_info("sockname"))
            await asyncio.wait_for(proto.arrived.wait(), 5)
            transport.sendto(b"pong", peer.getsockname())
            return proto.got, peer.recvfrom(100)[0], type(transport).__name__
        finally:
            peer.close()
            transport.close()

    got, echoed, name = loop.run_until_complete(main())
    assert [data for data, _ in got] == [b"ping"]
    assert echoed == b"pong"
    assert name == "ProgramsTransport"


def test_a_stream_transport_whose_class_became_a_subclass_serves_reads_and_writes(loop):
    async def main():
        ours, theirs = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=ours)
        writer.transport.__class__ = type("Programs", (type(writer.transport),), {})
        theirs.sendall(b"ping\n")
        line = await asyncio.wait_for(reader.readline(), 5)
        writer.write(b"pong\n")
        await writer.drain()
        theirs.settimeout(5)
        echoed = theirs.recv(100)
        closing = writer.transport.is_closing()
        writer.close()
        theirs.close()
        return line, echoed, closing

    assert loop.run_until_complete(main()) == (b"ping\n", b"pong\n", False)


def test_a_transport_cannot_take_a_class_of_another_layout(loop):
    async def main():
        transport, _ = await loop.create_datagram_endpoint(Collect, local_addr=("127.0.0.1", 0))
        try:
            with pytest.raises(TypeError, match="object layout differs"):
                transport.__class__ = type("Plain", (), {})
            # still served: an unchanged class
            return transport.is_closing()
        finally:
            transport.close()

    assert loop.run_until_complete(main()) is False


def test_no_class_of_python_slots_takes_the_place_of_a_native_base():
    """A class defined in Python on the same asyncio base, of the same size
    (one slot where the native base keeps its state pointer), is refused
    both ways by __class__ assignment: its slot would read the pointer as
    an object, or the pointer the slot's object. zloopgo only: asyncio has
    no native base."""
    from asyncio import transports

    from zloopgo import _engine

    for native in (
        _engine.StreamFastPaths,
        _engine.DatagramFastPaths,
        _engine.TLSTransportFastPaths,
    ):
        ours = type("Ours", (native,), {})
        theirs = type(
            "Theirs",
            (transports._FlowControlMixin,),
            {"__slots__": ("x", "__dict__", "__weakref__")},
        )
        assert ours.__basicsize__ == theirs.__basicsize__
        for made, other in ((ours, theirs), (theirs, ours)):
            obj = object.__new__(made)
            with pytest.raises(TypeError, match="object layout differs"):
                obj.__class__ = other


@pytest.mark.parametrize("method", ["is_closing", "sendto", "_read_ready"])
def test_an_instance_made_by_object_new_fails_as_asyncios(loop, method):
    """object.__new__ leaves every attribute unset (and the native state
    not yet kept): a native method then fails as asyncio's Python one does."""

    async def main():
        transport, _ = await loop.create_datagram_endpoint(Collect, local_addr=("127.0.0.1", 0))
        transport.close()
        return type(transport)

    cls = loop.run_until_complete(main())
    bare = object.__new__(cls)
    args = (b"x", ("127.0.0.1", 9)) if method == "sendto" else ()
    with pytest.raises(AttributeError):
        getattr(bare, method)(*args)
    bare._sock = None  # what __del__ reads (zloopgo's slot shadows asyncio's class attribute)


# A TLS client whose plain transport is a class of the program's own that
# hands everything to the loop's transport: the TLS protocol's transport is
# then that wrapper, which has no native base. It echoes a line with an
# asyncio TLS server.
TLS_OVER_A_PROGRAMS_TRANSPORT = """
import ssl
import trustme

ca = trustme.CA()
server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ca.issue_cert("localhost").configure_cert(server_ctx)
client_ctx = ssl.create_default_context()
ca.configure_trust(client_ctx)


class Wrapper(asyncio.Transport):
    _start_tls_compatible = True

    def __init__(self, inner):
        super().__init__()
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def set_protocol(self, protocol):
        self._inner.set_protocol(protocol)

    def get_protocol(self):
        return self._inner.get_protocol()

    def write(self, data):
        self._inner.write(data)

    def is_closing(self):
        return self._inner.is_closing()

    def close(self):
        self._inner.close()

    def pause_reading(self):
        self._inner.pause_reading()

    def resume_reading(self):
        self._inner.resume_reading()

    def get_extra_info(self, name, default=None):
        return self._inner.get_extra_info(name, default)


async def serve(reader, writer):
    writer.write(await reader.readline())
    await writer.drain()
    await reader.read()  # open until the client closes: the echo's read has no EOF with it
    writer.close()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    protocol = writer.transport.get_protocol()
    wrapped = await loop.start_tls(
        Wrapper(writer.transport), protocol, client_ctx, server_hostname="localhost"
    )
    writer._transport = wrapped
    writer.write(b"ping\\n")
    print("echoed", await asyncio.wait_for(reader.readline(), 10))
    wrapped.close()
    server.close()
    await server.wait_closed()


loop = factory()
loop.run_until_complete(main())
loop.close()
"""


@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_tls_over_a_transport_of_the_programs_own(loop_name):
    check(run_script(loop_name, TLS_OVER_A_PROGRAMS_TRANSPORT), "echoed b'ping\\n'")


# A class that puts a property where the native methods read a field: a
# program's subclass, or a class changed after a native method ran. asyncio
# reads the property (its fields are attributes); the native methods read
# a field's slot only while its name still resolves to that slot
# (capi/zl.h: zl_layout_direct).
class ClosingSays(asyncio.Protocol):
    pass


def _stream_pair(loop):
    async def make():
        ours, theirs = socket.socketpair()
        transport, _ = await loop.create_connection(ClosingSays, sock=ours)
        return transport, theirs

    return loop.run_until_complete(make())


def test_a_subclass_property_over_a_field_is_what_is_closing_reads(loop):
    transport, theirs = _stream_pair(loop)
    try:
        assert transport.is_closing() is False
        transport.__class__ = type(
            "SaysClosing", (type(transport),), {"_closing": property(lambda self: True)}
        )
        assert transport.is_closing() is True
    finally:
        transport.__class__ = type(transport).__mro__[1]
        transport.close()
        theirs.close()
        loop.run_until_complete(asyncio.sleep(0))


def test_a_property_put_on_the_class_after_a_native_call_is_read(loop):
    transport, theirs = _stream_pair(loop)
    subclass = type("Later", (type(transport),), {})
    transport.__class__ = subclass
    try:
        assert transport.is_closing() is False  # the native read, through the slot
        subclass._closing = property(lambda self: "from the property")
        assert transport.is_closing() == "from the property"
        del subclass._closing
        assert transport.is_closing() is False
    finally:
        transport.__class__ = subclass.__mro__[1]
        transport.close()
        theirs.close()
        loop.run_until_complete(asyncio.sleep(0))


def test_a_datagram_transport_reads_a_property_over_conn_lost(loop):
    """A connected transport's sendto with _conn_lost a read-only property
    that says the connection was lost: asyncio counts the send by
    assigning it, which raises."""

    async def main():
        server, _ = await loop.create_datagram_endpoint(Collect, local_addr=("127.0.0.1", 0))
        transport, _ = await loop.create_datagram_endpoint(
            Collect, remote_addr=server.get_extra_info("sockname")
        )
        own = type(transport)
        transport.__class__ = type("Lost", (own,), {"_conn_lost": property(lambda self: 1)})
        try:
            with pytest.raises(AttributeError):
                transport.sendto(b"x")
        finally:
            transport.__class__ = own
            transport.close()
            server.close()

    loop.run_until_complete(main())


def test_a_tls_transport_reads_a_property_over_closed(loop):
    server_ctx, client_ctx = _tls_contexts()

    async def main():
        server = await loop.create_server(ClosingSays, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        transport, _ = await loop.create_connection(
            ClosingSays, "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        own = type(transport)
        try:
            assert transport.is_closing() is False
            transport.__class__ = type("Closed", (own,), {"_closed": property(lambda self: True)})
            return transport.is_closing()
        finally:
            transport.__class__ = own
            transport.close()
            server.close()
            await server.wait_closed()

    assert loop.run_until_complete(main()) is True


def _tls_contexts():
    import ssl

    import trustme

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    return server_ctx, client_ctx


def test_object_new_makes_a_tls_protocol_as_asyncios(loop):
    """object.__new__ of the loop's SSLProtocol class (what a program may
    do to make one without __init__): asyncio's makes one, whose methods
    then miss their attributes."""
    from asyncio import sslproto

    from zloopgo import _tls

    cls = _tls.SSLProtocol if type(loop).__module__.startswith("zloopgo") else sslproto.SSLProtocol
    bare = object.__new__(cls)
    if sys.version_info >= (3, 11):
        with pytest.raises(AttributeError, match="_state"):
            bare._do_read()
    else:  # 3.10's SSLProtocol: the one before asyncio's rewrite, no _do_read
        with pytest.raises(AttributeError, match="_sslpipe"):
            bare.data_received(b"x")
