// Package fifopeer runs operation scripts against client-go's DeltaFIFO and RealFIFO and
// reports every observable result, so that kinformer-fifo can be checked against the same
// scripts (see ../../README.md for the format).
package fifopeer

import "kinformer.dev/peers/client-go/internal/scriptobj"

// Object is the part of a Pod a script controls.
type Object = scriptobj.Object

// Op is one line of a script. Which fields matter depends on Op.Op.
type Op struct {
	Op string `json:"op"`

	// begin
	ID           string `json:"id,omitempty"`
	Queue        string `json:"queue,omitempty"`
	KnownObjects bool   `json:"known_objects,omitempty"`
	EmitReplaced bool   `json:"emit_replaced,omitempty"`
	AtomicEvents bool   `json:"atomic_events,omitempty"`

	// add, update, delete
	Object *Object `json:"object,omitempty"`

	// replace, bookmark
	Objects         []Object `json:"objects,omitempty"`
	ResourceVersion string   `json:"rv,omitempty"`

	// pop
	Requeue bool `json:"requeue,omitempty"`
}

// ObjectView is what a result reports about an object.
type ObjectView struct {
	Key             string            `json:"key"`
	ResourceVersion string            `json:"rv"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// DeltaView is what a result reports about one popped delta.
type DeltaView struct {
	Type string `json:"type"`
	// Key is the key the delta is queued under: the tombstone's key for a tombstone.
	Key       string `json:"key"`
	Tombstone bool   `json:"tombstone"`
	// Object is the delta's object, or the tombstone's last known state (nil when unknown, and
	// for ReplacedAll and SyncAll).
	Object *ObjectView `json:"object"`
	// ResourceVersion and Objects are a ReplacedAll's list; ResourceVersion is also a
	// Bookmark's.
	ResourceVersion string       `json:"rv,omitempty"`
	Objects         []ObjectView `json:"objects,omitempty"`
}

// Popped is the result of a pop that found something.
type Popped struct {
	IsInInitialList bool        `json:"is_in_initial_list"`
	Deltas          []DeltaView `json:"deltas"`
	Requeued        bool        `json:"requeued"`
}

// Result is one output line: one per input line.
type Result struct {
	Step int    `json:"step"`
	Op   string `json:"op"`
	ID   string `json:"id,omitempty"`
	// Error is the queue's error, when the operation returned one.
	Error     string  `json:"error,omitempty"`
	HasSynced bool    `json:"has_synced"`
	Popped    *Popped `json:"popped,omitempty"`
	// Empty is true when a pop found the queue empty.
	Empty bool `json:"empty,omitempty"`
	// Drained is every pop a drain made, in order.
	Drained   []Popped `json:"drained,omitempty"`
	QueueKeys []string `json:"queue_keys,omitempty"`
	// KnownKeys is nil when the script has no known-objects indexer.
	KnownKeys []string `json:"known_keys,omitempty"`
}

// OpName names the line's operation.
func (op Op) OpName() string { return op.Op }
