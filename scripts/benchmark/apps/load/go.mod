module github.com/zloopgo/zloopgo/scripts/benchmark/apps/load

go 1.26.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/gorilla/websocket v1.5.3
)
