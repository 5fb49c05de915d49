// Command kinformer-runc is the Docker runtime `cargo xtask kind-image` registers on a host whose
// root lacks CAP_SYS_RESOURCE (some VMs and sandboxes): kind runs every node --privileged, and
// `docker exec --privileged` into it, which ask runc for every capability, and runc then fails
// with "unable to apply caps: operation not permitted". Before `create` and `run` it removes
// the capabilities the host cannot grant from the bundle's config.json, before `exec` from the
// process file; then it execs runc with the same arguments. Every other call goes to runc
// untouched.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// runc is what this wrapper hands every call to.
const runc = "/usr/bin/runc"

// dropped are the capabilities removed from a container's sets.
var dropped = map[string]bool{"CAP_SYS_RESOURCE": true}

func main() {
	args := os.Args[1:]
	call := parse(args)
	var err error
	switch {
	case call.command == "create" || call.command == "run":
		err = editJSON(filepath.Join(call.bundle, "config.json"), dropFromSpec)
	case call.command == "exec" && call.process != "":
		err = editJSON(call.process, dropFromProcess)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kinformer-runc: %v\n", err)
		os.Exit(1)
	}
	argv := append([]string{runc}, args...)
	if err := syscall.Exec(runc, argv, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "kinformer-runc: exec %s: %v\n", runc, err)
		os.Exit(1)
	}
}

// call is what the wrapper needs of runc's arguments.
type call struct {
	// command is runc's subcommand: create, run, exec, start, ...
	command string
	// bundle is the value of --bundle or -b, or the current folder, runc's default.
	bundle string
	// process is the value of exec's --process or -p, if any.
	process string
}

func parse(args []string) call {
	c := call{bundle: "."}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		value := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case c.command == "" && takesValue(arg):
			// A global flag's value is not the command.
			value()
		case c.command == "" && !strings.HasPrefix(arg, "-"):
			c.command = arg
		case arg == "--bundle" || arg == "-b":
			c.bundle = value()
		case strings.HasPrefix(arg, "--bundle="):
			c.bundle = strings.TrimPrefix(arg, "--bundle=")
		case c.command == "exec" && (arg == "--process" || arg == "-p"):
			c.process = value()
		case c.command == "exec" && strings.HasPrefix(arg, "--process="):
			c.process = strings.TrimPrefix(arg, "--process=")
		}
	}
	return c
}

// takesValue reports whether a global runc flag is followed by a separate value.
func takesValue(flag string) bool {
	switch flag {
	case "--root", "--log", "--log-format", "--criu", "--rootless":
		return true
	}
	return false
}

// editJSON rewrites the JSON object in path with edit, keeping every field edit leaves alone;
// edit reports whether it changed anything.
func editJSON(path string, edit func(map[string]json.RawMessage) (bool, error)) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var object map[string]json.RawMessage
	if err := json.Unmarshal(raw, &object); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	changed, err := edit(object)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(object)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, info.Mode().Perm())
}

// dropFromSpec edits an OCI runtime spec (a bundle's config.json): its process's capabilities.
func dropFromSpec(spec map[string]json.RawMessage) (bool, error) {
	if spec["process"] == nil {
		return false, nil
	}
	var process map[string]json.RawMessage
	if err := json.Unmarshal(spec["process"], &process); err != nil {
		return false, fmt.Errorf("parsing process: %w", err)
	}
	changed, err := dropFromProcess(process)
	if err != nil || !changed {
		return changed, err
	}
	spec["process"], err = json.Marshal(process)
	return true, err
}

// dropFromProcess edits an OCI process (the spec's process, or exec's process file): every set
// of its capabilities.
func dropFromProcess(process map[string]json.RawMessage) (bool, error) {
	if process["capabilities"] == nil {
		return false, nil
	}
	var sets map[string][]string
	if err := json.Unmarshal(process["capabilities"], &sets); err != nil {
		return false, fmt.Errorf("parsing capabilities: %w", err)
	}
	changed := false
	for name, set := range sets {
		kept := set[:0]
		for _, capability := range set {
			if dropped[capability] {
				changed = true
				continue
			}
			kept = append(kept, capability)
		}
		sets[name] = kept
	}
	if !changed {
		return false, nil
	}
	var err error
	process["capabilities"], err = json.Marshal(sets)
	return true, err
}
