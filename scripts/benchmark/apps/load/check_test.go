// The answer checks against bodies the two servers give and against the
// wrong ones a broken server could give.

package main

import (
	"strings"
	"testing"
)

func mustCheck(t *testing.T, spec string) checker {
	t.Helper()
	c, err := parseCheck(spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMessage(t *testing.T) {
	c := mustCheck(t, "json")
	for _, ok := range []string{`{"message":"Hello, World!"}`, `{"message": "Hello, World!"}`} {
		if err := c.check([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{`{"message":"Hello"}`, `{"message":"Hello, World!","x":1}`, `[]`, ``} {
		if c.check([]byte(bad)) == nil {
			t.Errorf("%q passed", bad)
		}
	}
}

func TestWorlds(t *testing.T) {
	one := mustCheck(t, "world")
	if err := one.check([]byte(`{"id": 3, "randomNumber": 10000}`)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{`{"id": 0, "randomNumber": 5}`, `{"id": 3}`, `{"id": 3, "randomNumber": 10001}`, `[{"id":1,"randomNumber":1}]`} {
		if one.check([]byte(bad)) == nil {
			t.Errorf("%s passed as a World", bad)
		}
	}
	two := mustCheck(t, "worlds:2")
	if err := two.check([]byte(`[{"id":1,"randomNumber":2},{"id":9,"randomNumber":7}]`)); err != nil {
		t.Error(err)
	}
	if two.check([]byte(`[{"id":1,"randomNumber":2}]`)) == nil {
		t.Error("one World passed as two")
	}
}

func fortunesPage(rows []string) string {
	return "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\n" +
		"<tr><th>id</th><th>message</th></tr>\n" + strings.Join(rows, "\n") + "</table></body></html>"
}

var goodRows = []string{
	"<tr><td>11</td><td>&lt;script&gt;alert(&#34;This should not be displayed in a browser alert box.&#34;);&lt;/script&gt;</td></tr>",
	"<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>",
	"<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to do.</td></tr>",
	"<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&#39;t broken.</td></tr>",
	"<tr><td>8</td><td>A list is only as strong as its weakest link. — Donald Knuth</td></tr>",
	"<tr><td>0</td><td>Additional fortune added at request time.</td></tr>",
	"<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>",
	"<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>",
	"<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>",
	"<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen</td></tr>",
	"<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>",
	"<tr><td>1</td><td>fortune: No such file or directory</td></tr>",
	"<tr><td>12</td><td>フレームワークのベンチマーク</td></tr>",
}

func TestFortunes(t *testing.T) {
	c := mustCheck(t, "fortunes")
	if err := c.check([]byte(fortunesPage(goodRows))); err != nil {
		t.Fatal(err)
	}
	unsorted := append([]string{goodRows[1], goodRows[0]}, goodRows[2:]...)
	if c.check([]byte(fortunesPage(unsorted))) == nil {
		t.Error("unsorted fortunes passed")
	}
	if c.check([]byte(fortunesPage(goodRows[:12]))) == nil {
		t.Error("twelve fortunes passed")
	}
	raw := append([]string{"<tr><td>11</td><td><script>alert(1)</script></td></tr>"}, goodRows[1:]...)
	if c.check([]byte(fortunesPage(raw))) == nil {
		t.Error("an unescaped message passed")
	}
}

func TestParseCheck(t *testing.T) {
	for _, bad := range []string{"", "worlds", "worlds:0", "echo", "json:1", "nope"} {
		if _, err := parseCheck(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if c := mustCheck(t, "echo:1024"); !c.echo || c.n != 1024 {
		t.Errorf("echo:1024 gave %+v", c)
	}
}
