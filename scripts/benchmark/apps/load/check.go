// What every answer of an application row must be before its time counts:
// TechEmpower's rules for its test types, checked on each body (a JSON
// message, one World, N Worlds, the fortunes page), or an echo equal to
// what was sent. It knows bodies, not connections or timing.

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
)

const checkKinds = "json, world, worlds:N, fortunes, echo:N"

// worldRows is the size of TechEmpower's World table: ids and random
// numbers are both in 1..worldRows.
const worldRows = 10000

type checker struct {
	kind  string
	n     int  // worlds:N, echo:N
	echo  bool // a WebSocket echo (the payload is compared where it is sent)
	check func([]byte) error
}

func parseCheck(spec string) (checker, error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	n := 0
	if hasArg {
		v, err := strconv.Atoi(arg)
		if err != nil || v < 1 {
			return checker{}, fmt.Errorf("-check %s: N must be a positive number", spec)
		}
		n = v
	}
	c := checker{kind: kind, n: n}
	switch {
	case kind == "json" && !hasArg:
		c.check = checkMessage
	case kind == "world" && !hasArg:
		c.check = checkOneWorld
	case kind == "worlds" && hasArg:
		c.check = func(b []byte) error { return checkWorlds(b, n) }
	case kind == "fortunes" && !hasArg:
		c.check = checkFortunes
	case kind == "echo" && hasArg:
		c.echo = true
	default:
		return checker{}, fmt.Errorf("-check %q: want one of %s", spec, checkKinds)
	}
	return c, nil
}

func checkMessage(body []byte) error {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("not JSON: %v: %.80q", err, body)
	}
	if len(doc) != 1 || doc["message"] != "Hello, World!" {
		return fmt.Errorf("not the message: %.80q", body)
	}
	return nil
}

// world is one row of the World table as a body shows it; the pointers
// tell a missing key from a zero.
type world struct {
	ID           *int `json:"id"`
	RandomNumber *int `json:"randomNumber"`
}

func (w world) valid() error {
	if w.ID == nil || w.RandomNumber == nil {
		return fmt.Errorf("a World without id or randomNumber")
	}
	if *w.ID < 1 || *w.ID > worldRows || *w.RandomNumber < 1 || *w.RandomNumber > worldRows {
		return fmt.Errorf("a World out of range: id %d, randomNumber %d", *w.ID, *w.RandomNumber)
	}
	return nil
}

func checkOneWorld(body []byte) error {
	var w world
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("not a World: %v: %.80q", err, body)
	}
	return w.valid()
}

func checkWorlds(body []byte, n int) error {
	var ws []world
	if err := json.Unmarshal(body, &ws); err != nil {
		return fmt.Errorf("not a list of Worlds: %v: %.80q", err, body)
	}
	if len(ws) != n {
		return fmt.Errorf("%d Worlds, not %d", len(ws), n)
	}
	for _, w := range ws {
		if err := w.valid(); err != nil {
			return err
		}
	}
	return nil
}

// The fortunes page: the table's twelve rows plus the one added at request
// time, sorted by message, each message escaped.
const (
	fortuneRows    = 13
	addedFortune   = "Additional fortune added at request time."
	scriptFortune  = `<script>alert("This should not be displayed in a browser alert box.");</script>`
	fortunesHeader = "<tr><th>id</th><th>message</th></tr>"
)

var fortuneRow = regexp.MustCompile(`<tr><td>(\d+)</td><td>([^<]*)</td></tr>`)

func checkFortunes(body []byte) error {
	page := string(bytes.Join(bytes.Fields(body), nil)) // whitespace between tags is free
	if !strings.Contains(page, strings.ReplaceAll(fortunesHeader, " ", "")) {
		return fmt.Errorf("no fortunes table header: %.120q", body)
	}
	if strings.Contains(string(body), "<script>") {
		return fmt.Errorf("a message is not escaped")
	}
	rows := fortuneRow.FindAllStringSubmatch(string(body), -1)
	if len(rows) != fortuneRows {
		return fmt.Errorf("%d fortunes, not %d", len(rows), fortuneRows)
	}
	seen := map[string]bool{}
	prev := ""
	for _, row := range rows {
		msg := html.UnescapeString(row[2])
		if msg < prev {
			return fmt.Errorf("fortunes not sorted: %q after %q", msg, prev)
		}
		prev = msg
		seen[msg] = true
	}
	for _, want := range []string{addedFortune, scriptFortune} {
		if !seen[want] {
			return fmt.Errorf("fortune %q missing", want)
		}
	}
	return nil
}
