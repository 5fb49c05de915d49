// Command fifo-peer runs queue scripts (JSON lines on stdin) against client-go's DeltaFIFO and
// RealFIFO and prints one JSON result line per input line on stdout. See ../../README.md.
package main

import (
	"os"

	"kinformer.dev/peers/client-go/internal/fifopeer"
	"kinformer.dev/peers/client-go/internal/lines"
)

func main() {
	var runner fifopeer.Runner
	lines.Serve(os.Stdin, os.Stdout, runner.Step)
}
