// One WebSocket connection (github.com/gorilla/websocket) that sends a
// binary message and reads its echo, which must equal it byte for byte;
// each message carries its connection and sequence number, so an echo of
// another message, or of an earlier one, does not pass.

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/url"

	"github.com/gorilla/websocket"
)

type wsConn struct {
	conn *websocket.Conn
	id   uint32
	seq  uint32
	msg  []byte
}

func dialWS(target *url.URL, id, size int) (*wsConn, error) {
	c, _, err := websocket.DefaultDialer.Dial(target.String(), nil)
	if err != nil {
		return nil, err
	}
	msg := bytes.Repeat([]byte{'x'}, max(size, 8))[:size]
	return &wsConn{conn: c, id: uint32(id), msg: msg}, nil
}

func (w *wsConn) Close() error { return w.conn.Close() }

func (w *wsConn) roundTrip() ([]byte, error) {
	w.seq++
	if len(w.msg) >= 8 {
		binary.LittleEndian.PutUint32(w.msg[0:4], w.id)
		binary.LittleEndian.PutUint32(w.msg[4:8], w.seq)
	}
	if err := w.conn.WriteMessage(websocket.BinaryMessage, w.msg); err != nil {
		return nil, err
	}
	kind, got, err := w.conn.ReadMessage()
	if err != nil {
		return nil, err
	}
	if kind != websocket.BinaryMessage || !bytes.Equal(got, w.msg) {
		return nil, fmt.Errorf("echo of %d B differs from the message of %d B sent", len(got), len(w.msg))
	}
	return got, nil
}
