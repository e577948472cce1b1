"""The text layer: _pyio's TextIOWrapper (the stdlib's Python version of
the TextIOWrapper open() returns, the same algorithm) made to behave as
the C one where the two part (its checks and messages, its chunk size,
its tell() cookie, its end-of-file rule: docs/files.md, "Exact
semantics"), and the saving and restoring of its state that lets a
native call run again when the raw layer ran dry half-way.

It knows the io classes' behaviour; nothing of the raw layer's window, of
the engine or of the loop.
"""

from __future__ import annotations

import io

from .base import closed_error, ssize


def text_class():
    """_pyio's TextIOWrapper made to behave as the C one that open()
    returns (its checks and messages, and each place where the two
    implementations part: docs/files.md, "Exact semantics"), made on first
    use (importing _pyio costs)."""
    global _Text
    if _Text is not None:
        return _Text
    import _pyio

    class Text(_pyio.TextIOWrapper):
        def __init__(self, buffer, encoding, errors, newline, line_buffering):
            if isinstance(newline, str) and newline not in ("", "\n", "\r", "\r\n"):
                raise ValueError(f"illegal newline value: {newline}")
            super().__init__(buffer, encoding, errors, newline, line_buffering)

        # tell()'s cookie packed as the C TextIOWrapper packs it: start
        # position (8 bytes), decoder flags, bytes to feed, characters to
        # skip (4 bytes each), need-EOF flag (1 byte), little-endian.
        def _pack_cookie(
            self, position, dec_flags=0, bytes_to_feed=0, need_eof=False, chars_to_skip=0
        ):
            return (
                position
                | (dec_flags & 0xFFFFFFFF) << 64
                | bytes_to_feed << 96
                | chars_to_skip << 128
                | int(bool(need_eof)) << 160
            )

        def _unpack_cookie(self, bigint):
            position = bigint & 0xFFFFFFFFFFFFFFFF
            dec_flags = (bigint >> 64) & 0xFFFFFFFF
            if dec_flags >= 1 << 31:
                dec_flags -= 1 << 32
            bytes_to_feed = (bigint >> 96) & 0xFFFFFFFF
            chars_to_skip = (bigint >> 128) & 0xFFFFFFFF
            need_eof = (bigint >> 160) & 0xFF
            return position, dec_flags, bytes_to_feed, need_eof, chars_to_skip

        def _read_chunk(self):
            # The C TextIOWrapper reports the end of the file only for a
            # chunk that decoded to nothing: the last chunk, which flushes
            # what the decoder held (a lone "\r" under universal newlines,
            # a partial character), counts as data, so read(n) reads once
            # more and tell() then answers the plain position (_pyio's
            # answers a cookie that replays the flush).
            more = super()._read_chunk()
            return more or bool(self._decoded_chars)

        def _c_init(self):
            self._c_readable = self.buffer.readable()
            self._c_writable = self.buffer.writable()
            if self._c_readable:
                # the C one makes its decoder at once (a seek then sets its
                # state; _pyio's, made at the first read, would start over)
                self._get_decoder()
            self._CHUNK_SIZE = 8192  # the C TextIOWrapper's

        def _c_check(self):
            if self.buffer is None:
                raise ValueError("underlying buffer has been detached")
            if self.closed:
                raise closed_error()

        def read(self, size=-1):
            size = ssize(size)
            self._c_check()
            if not self._c_readable:
                raise io.UnsupportedOperation("not readable")
            return super().read(size)

        def readline(self, size=-1):
            size = size.__index__() if not isinstance(size, int) else size
            self._c_check()
            if not self._c_readable:
                raise io.UnsupportedOperation("not readable")
            if size == 0 and not self._decoded_chars:
                # With no decoded text at all (none read since the last
                # seek or write, or the end of the file), the C one reads
                # a chunk before it looks at the limit: the buffer's
                # position moves on. _pyio returns at once.
                if self._decoder is None:
                    self._get_decoder()
                while True:
                    if not self._read_chunk():  # the end of the file
                        self._set_decoded_chars("")
                        self._snapshot = None
                        break
                    if self._decoded_chars:
                        break
                return ""
            return super().readline(size)

        def write(self, s):
            if not isinstance(s, str):
                raise TypeError(f"write() argument must be str, not {type(s).__name__}")
            self._c_check()
            if not self._c_writable:
                raise io.UnsupportedOperation("not writable")
            return super().write(s)

        def seek(self, cookie, whence=0):
            self._c_check()
            if whence not in (0, 1, 2):
                raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
            if (
                whence == 0
                and cookie.__class__ is int
                and cookie > 0
                and self._seekable
                and cookie & 0xFFFFFFFFFFFFFFFF == 0
                and (cookie >> 64) & 0xFFFFFFFF == 0
            ):
                # the C one resets its decoder for a cookie at the start of
                # the file with no decoder flags, whatever else it carries
                # (_pyio only for the cookie 0): the newlines seen go
                self._c_reset_decoder()
            result = super().seek(cookie, whence)
            if whence != 2 and self._snapshot is None and self._decoder is not None:
                # the C one keeps a snapshot of where it sought to, the
                # start of the file included (_pyio none there): tell()
                # after next() reads it
                self._snapshot = (0, b"")
            return result

        def _c_reset_decoder(self):
            # reset(), then setstate() back: what only reset() clears goes
            # (an IncrementalNewlineDecoder's record of the newlines seen)
            decoder = self._decoder
            if decoder is not None:
                state = decoder.getstate()
                decoder.reset()
                decoder.setstate(state)

        def tell(self):
            # The C one's algorithm (Modules/_io/textio.c), which _pyio's
            # follows but for three things: with no snapshot (after next())
            # the C one answers the buffer's position where _pyio asserts
            # that no decoded text is left; it sets its decoder with
            # reset(), not setstate(), at the start of the file with no
            # flags (the newlines it records are then those of its last
            # walk); and it has no assert that its first guess of how many
            # bytes to skip is within the snapshot (after a seek to a
            # cookie it may not be: it decodes the bytes object's
            # terminating NUL, as zero bytes do here).
            self._c_check()
            if not self._seekable:
                raise io.UnsupportedOperation("underlying stream is not seekable")
            if not self._telling:
                raise OSError("telling position disabled by next() call")
            self.flush()
            position = self.buffer.tell()
            decoder = self._decoder
            if decoder is None or self._snapshot is None:
                return position
            dec_flags, next_input = self._snapshot
            start_pos = position - len(next_input)
            chars_to_skip = self._decoded_chars_used
            if chars_to_skip == 0:
                return self._pack_cookie(start_pos, dec_flags)

            def set_decoder(flags):
                if start_pos == 0 and flags == 0:
                    decoder.reset()
                else:
                    decoder.setstate((b"", flags))

            saved_state = decoder.getstate()
            try:
                skip_bytes = int(self._b2cratio * chars_to_skip)
                padded = next_input + bytes(max(0, skip_bytes - len(next_input)))
                skip_back = 1
                while skip_bytes > 0:
                    set_decoder(dec_flags)
                    n = len(decoder.decode(padded[:skip_bytes]))
                    if n <= chars_to_skip:
                        dec_buffer, flags = decoder.getstate()
                        if not dec_buffer:
                            dec_flags = flags
                            chars_to_skip -= n
                            break
                        skip_bytes -= len(dec_buffer)
                        skip_back = 1
                    else:
                        skip_bytes -= skip_back
                        skip_back *= 2
                if skip_bytes <= 0:
                    skip_bytes = 0
                    set_decoder(dec_flags)
                start_pos += skip_bytes
                if chars_to_skip == 0:
                    return self._pack_cookie(start_pos, dec_flags)
                chars_decoded = 0
                bytes_to_feed = 0
                need_eof = False
                i = skip_bytes
                while i < len(next_input):
                    chars_decoded += len(decoder.decode(next_input[i : i + 1]))
                    bytes_to_feed += 1
                    dec_buffer, flags = decoder.getstate()
                    if not dec_buffer and chars_decoded <= chars_to_skip:
                        # a safe start point
                        start_pos += bytes_to_feed
                        chars_to_skip -= chars_decoded
                        dec_flags = flags
                        bytes_to_feed = chars_decoded = 0
                    if chars_decoded >= chars_to_skip:
                        break
                    i += 1
                if i == len(next_input):
                    # not enough decoded: the end of the file gives the rest
                    chars_decoded += len(decoder.decode(b"", final=True))
                    need_eof = True
                    if chars_decoded < chars_to_skip:
                        raise OSError("can't reconstruct logical file position")
                return self._pack_cookie(
                    start_pos, dec_flags, bytes_to_feed, need_eof, chars_to_skip
                )
            finally:
                decoder.setstate(saved_state)

        def flush(self):
            self._c_check()
            return super().flush()

        def truncate(self, pos=None):
            # the C one flushes and hands pos, None included, to the
            # buffer: None is the buffer's position, not tell()'s
            self._c_check()
            self.flush()
            return self.buffer.truncate(pos)

        @property
        def newlines(self):
            # the C one: None when its decoder keeps no record (a newline
            # argument other than None and "")
            return getattr(self._decoder, "newlines", None)

        def _next_line(self):
            # next(), with the end of the file as "" (a coroutine may not
            # let StopIteration out)
            try:
                return self.__next__()
            except StopIteration:
                return ""

    _Text = Text
    return Text


_Text = None


def text_state(text):
    d = text.__dict__
    dec = d.get("_decoder")
    return (
        d.get("_decoded_chars"),
        d.get("_decoded_chars_used"),
        d.get("_snapshot"),
        d.get("_b2cratio"),
        dec,
        dec.getstate() if dec is not None else None,
    )


def set_text_state(text, state):
    chars, used, snapshot, ratio, dec, dec_state = state
    text._decoded_chars = chars
    text._decoded_chars_used = used
    text._snapshot = snapshot
    text._b2cratio = ratio
    text._decoder = dec
    if dec is not None:
        dec.setstate(dec_state)
