// Package lines is the JSON-lines loop the peer programs share: one result line per input
// line, flushed when a script's "end" line has been answered.
package lines

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Line is what Serve needs of an input line: its operation name.
type Line interface {
	OpName() string
}

// Serve reads L lines from in, answers each with step's result on out, and returns when in
// ends. A malformed line ends the program with exit status 2 and a message on stderr.
func Serve[L Line, R any](in io.Reader, out io.Writer, step func(L) R) {
	scanner := bufio.NewScanner(in)
	// A replace of a few thousand objects makes for long lines.
	scanner.Buffer(make([]byte, 0, 1<<20), 1<<30)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(line) == 0 {
			continue
		}
		var op L
		if err := json.Unmarshal(line, &op); err != nil {
			fail(w, fmt.Sprintf("bad script line %q: %v", line, err))
		}
		if err := enc.Encode(step(op)); err != nil {
			fail(w, err.Error())
		}
		// The driver waits for a script's results before sending the next one.
		if op.OpName() == "end" {
			if err := w.Flush(); err != nil {
				fail(w, err.Error())
			}
		}
	}
	if err := scanner.Err(); err != nil {
		fail(w, err.Error())
	}
	if err := w.Flush(); err != nil {
		fail(w, err.Error())
	}
}

func fail(w *bufio.Writer, msg string) {
	_ = w.Flush()
	fmt.Fprintln(os.Stderr, os.Args[0]+":", msg)
	os.Exit(2)
}
