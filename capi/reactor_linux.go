// The reactor's name on Linux, for build_info().
package main

const reactorName = "epoll"
