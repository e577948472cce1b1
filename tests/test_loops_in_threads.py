"""Loops in several threads at once, each receiving a checksummed stream:
no loop's bytes reach another's reader, whatever the collector does in
between. A collection may run Python code that releases the GIL (here a
gc.callbacks hook that sleeps, with a collection on every allocation)
while a read is being handed to a StreamReader; another thread's loop
then reads too. zloopgo received into one buffer for the whole process,
so that other read could overwrite bytes not yet copied out (issue 19,
row 5). Each loop now has its own. Dual-run, in a fresh interpreter."""

import pytest
from helpers import SCRIPT_FACTORIES, check, run_script


@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_streams_in_several_threads_with_a_collector_that_sleeps(loop_name):
    proc = run_script(
        loop_name,
        """
        import gc, hashlib, random

        THREADS = 4
        TOTAL = 2 * 1024 * 1024

        def payload(seed):
            rng = random.Random(seed)
            return rng.randbytes(TOTAL)

        def feed(sock, data, seed):
            # chunks below the size of a large read, so every read goes
            # through the loop's receive buffer
            rng = random.Random(seed)
            view = memoryview(data)
            while view:
                n = rng.randint(1, 60000)
                sock.sendall(view[:n])
                view = view[n:]
                if rng.random() < 0.3:
                    time.sleep(0)
            sock.close()

        async def receive(sock):
            reader, writer = await asyncio.open_connection(sock=sock)
            digest = hashlib.sha256()
            while chunk := await reader.read(65536):
                digest.update(chunk)
            writer.close()
            return digest.hexdigest()

        results = {}

        def run(i):
            ours, theirs = socket.socketpair()
            data = payload(i)
            feeder = threading.Thread(target=feed, args=(theirs, data, i))
            loop = factory()
            try:
                feeder.start()
                digest = loop.run_until_complete(receive(ours))
                results[i] = digest == hashlib.sha256(data).hexdigest()
            finally:
                loop.close()
                feeder.join()

        gc.set_threshold(1)
        gc.callbacks.append(lambda phase, info: time.sleep(0.00001))
        threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("intact", [results.get(i) for i in range(THREADS)])
        """,
        timeout=240,
    )
    check(proc, "intact [True, True, True, True]")


@pytest.mark.parametrize("loop_name", sorted(SCRIPT_FACTORIES))
def test_a_read_run_by_the_collector_while_another_is_handed_on(loop_name):
    # The same hazard made certain: the collector reads another loop's
    # transport (a gc callback) while loop A hands a read to its
    # StreamReader. Neither read may see the other's bytes. A collection
    # on every other allocation makes the collector run at arbitrary
    # points, but how many of them fall inside a hand-on depends on what
    # the Python version allocates there (3.15's StreamReader.read takes
    # its bytes with bytearray.take_bytes() and no longer makes a
    # memoryview per read, so far fewer collections run while A
    # receives). So the reader's waiter also collects when it is woken:
    # waking it is the middle of the hand-on (after the bytes are
    # appended to the reader's buffer, before the loop lets go of them),
    # on every loop and version.
    proc = run_script(
        loop_name,
        """
        import gc

        class Recorder(asyncio.Protocol):
            def __init__(self):
                self.got = bytearray()

            def data_received(self, data):
                self.got += data

        loop_b = factory()
        b, peer_b = socket.socketpair()
        b.setblocking(False)
        tb, recorder = loop_b.run_until_complete(loop_b.connect_accepted_socket(Recorder, b))
        peer_b.setblocking(False)

        reads = [0]
        handing_on = [False]
        reads_while_handing_on = [0]

        def read_b(phase, info):
            if phase == "start" and not getattr(read_b, "busy", False):
                read_b.busy = True
                try:
                    try:
                        peer_b.send(b"B" * 1000)
                    except BlockingIOError:
                        pass
                    tb._read_ready()
                    reads[0] += 1
                    reads_while_handing_on[0] += handing_on[0]
                finally:
                    read_b.busy = False

        class CollectingWhenWoken(asyncio.Future):
            # StreamReader._wakeup_waiter (or zloopgo's native hand-on,
            # which does what it does) calls set_result on the waiter
            # the reader made with loop.create_future()
            def set_result(self, result):
                handing_on[0] = reader_has_data()
                try:
                    gc.collect(0)
                finally:
                    handing_on[0] = False
                super().set_result(result)

        readers = []

        def reader_has_data():
            return bool(readers) and len(readers[0]._buffer) > 0

        async def receive(sock, total):
            reader, writer = await asyncio.open_connection(sock=sock)
            readers.append(reader)
            got = bytearray()
            while len(got) < total:
                got += await reader.read(65536)
            writer.close()
            return got

        a, peer_a = socket.socketpair()
        TOTAL = 4_000_000

        def feed():
            for _ in range(TOTAL // 1000):
                peer_a.sendall(b"A" * 1000)

        feeder = threading.Thread(target=feed)
        feeder.start()
        loop_a = factory()
        loop_a.create_future = lambda: CollectingWhenWoken(loop=loop_a)
        gc.set_threshold(1)
        gc.callbacks.append(read_b)
        try:
            got = loop_a.run_until_complete(receive(a, TOTAL))
        finally:
            gc.callbacks.remove(read_b)
            gc.set_threshold(700)
        feeder.join()
        # for a failure's message: all of them, and those while handing on
        print("collector reads", reads[0], reads_while_handing_on[0], file=sys.stderr)
        print("reads by the collector while a read was handed on", reads_while_handing_on[0] > 0)
        print("A intact", got == b"A" * TOTAL)
        print("B intact", set(recorder.got) == {ord("B")})
        loop_a.close()
        tb.close()
        loop_b.run_until_complete(asyncio.sleep(0))
        loop_b.close()
        """,
        timeout=240,
    )
    check(
        proc,
        "reads by the collector while a read was handed on True",
        "A intact True",
        "B intact True",
    )
