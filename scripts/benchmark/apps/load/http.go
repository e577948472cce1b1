// One HTTP/1.1 keep-alive connection that sends a GET and reads its
// answer (Content-Length or chunked), as little code and allocation per
// request as a client can have, so that the server's CPU saturates first.
// It knows HTTP framing; what a body must be is check.go's.

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
)

type httpConn struct {
	conn    net.Conn
	in      *bufio.Reader
	request []byte
	body    []byte // the last answer's body, reused
}

func dialHTTP(target *url.URL) (*httpConn, error) {
	c, err := net.Dial("tcp", target.Host)
	if err != nil {
		return nil, err
	}
	path := target.RequestURI()
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: appload\r\n\r\n", path, target.Host)
	return &httpConn{conn: c, in: bufio.NewReaderSize(c, 64<<10), request: []byte(req)}, nil
}

func (h *httpConn) Close() error { return h.conn.Close() }

// roundTrip sends the request and returns the answer's body once its
// status is 200 and the connection stays open.
func (h *httpConn) roundTrip() ([]byte, error) {
	if _, err := h.conn.Write(h.request); err != nil {
		return nil, err
	}
	status, err := h.in.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("reading the status line: %w", err)
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return nil, fmt.Errorf("status %q", bytes.TrimSpace(status))
	}
	length, chunked := -1, false
	for {
		line, err := h.in.ReadSlice('\n')
		if err != nil {
			return nil, fmt.Errorf("reading the headers: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return nil, fmt.Errorf("header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("content-length")):
			length, err = strconv.Atoi(string(value))
			if err != nil || length < 0 {
				return nil, fmt.Errorf("content-length %q", value)
			}
		case bytes.EqualFold(name, []byte("transfer-encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("connection")):
			if bytes.EqualFold(value, []byte("close")) {
				return nil, fmt.Errorf("the server closes the connection")
			}
		}
	}
	h.body = h.body[:0]
	switch {
	case chunked:
		return h.readChunks()
	case length >= 0:
		h.body = grow(h.body, length)
		if _, err := io.ReadFull(h.in, h.body); err != nil {
			return nil, fmt.Errorf("reading the body: %w", err)
		}
		return h.body, nil
	default:
		return nil, fmt.Errorf("an answer with neither content-length nor chunks")
	}
}

func (h *httpConn) readChunks() ([]byte, error) {
	for {
		line, err := h.in.ReadSlice('\n')
		if err != nil {
			return nil, fmt.Errorf("reading a chunk size: %w", err)
		}
		sizeText, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(";"))
		size, err := strconv.ParseInt(string(sizeText), 16, 32)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("chunk size %q", line)
		}
		if size > 0 {
			start := len(h.body)
			h.body = grow(h.body, start+int(size))
			if _, err := io.ReadFull(h.in, h.body[start:]); err != nil {
				return nil, fmt.Errorf("reading a chunk: %w", err)
			}
		}
		// the CRLF after a chunk, or the (empty) trailer after the last one
		if _, err := h.in.ReadSlice('\n'); err != nil {
			return nil, fmt.Errorf("reading past a chunk: %w", err)
		}
		if size == 0 {
			return h.body, nil
		}
	}
}

// grow returns b with length n, reusing its storage when it is large enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	out := make([]byte, n, n+n/2)
	copy(out, b)
	return out
}
