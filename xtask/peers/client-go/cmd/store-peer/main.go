// Command store-peer runs store scripts (JSON lines on stdin) against client-go's Indexer and
// prints one JSON result line per input line on stdout. See ../../README.md.
package main

import (
	"os"

	"kinformer.dev/peers/client-go/internal/lines"
	"kinformer.dev/peers/client-go/internal/storepeer"
)

func main() {
	var runner storepeer.Runner
	lines.Serve(os.Stdin, os.Stdout, runner.Step)
}
