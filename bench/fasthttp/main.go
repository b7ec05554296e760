// Command fasthttp serves a file's bytes as application/json with
// valyala/fasthttp: the baseline docs/http-pipelining.md compares
// ctibridge's HTTP stack with. A module of its own, so that the product
// never depends on fasthttp.
//
//	cd bench/fasthttp && go run . -addr 127.0.0.1:8083 -body /tmp/ext100.json
package main

import (
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8083", "listen address")
	file := flag.String("body", "", "file whose bytes every request gets")
	flag.Parse()
	body, err := os.ReadFile(*file)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "fasthttp: %d bytes on %s\n", len(body), *addr)
	log.Fatal(fasthttp.ListenAndServe(*addr, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}))
}
