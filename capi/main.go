// Package main builds zloopgo's extension module (go build
// -buildmode=c-shared): the cgo adapter between CPython and the Go engine.
// The C files in this folder hold everything that touches Python; the Go
// files hold the engine's side and never touch a Python object.
package main

func main() {}
