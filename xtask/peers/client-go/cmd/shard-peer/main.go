// Command shard-peer parses shard selectors and matches objects against them as
// kube-apiserver v0.37.2 does with its ShardedListAndWatch feature gate on, so that
// kinformer's Shard can be compared with it on any input.
//
// Each input line is one of
//
//	{"op": "parse", "selector": S}
//	{"op": "match", "selector": S, "uid": U, "namespace": N}
//	{"op": "end"}
//
// and gets one answer: for parse, {"selector": the parsed selector's String()} or
// {"error": "..."}; for match, {"matches": true|false} or {"error": "..."}. "end" flushes the
// answers so far. See ../../README.md.
package main

import (
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/sharding"

	"kinformer.dev/peers/client-go/internal/lines"
)

type line struct {
	Op        string `json:"op"`
	Selector  string `json:"selector"`
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
}

func (l line) OpName() string { return l.Op }

type answer struct {
	Selector *string `json:"selector,omitempty"`
	Matches  *bool   `json:"matches,omitempty"`
	Error    string  `json:"error,omitempty"`
}

func main() {
	lines.Serve(os.Stdin, os.Stdout, func(l line) answer {
		if l.Op != "parse" && l.Op != "match" {
			return answer{}
		}
		// What the registry does with a request's shardSelector.
		selector, err := sharding.Parse(l.Selector)
		if err != nil {
			return answer{Error: err.Error()}
		}
		if l.Op == "parse" {
			text := selector.String()
			return answer{Selector: &text}
		}
		object := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			UID:       types.UID(l.UID),
			Namespace: l.Namespace,
		}}
		matches, err := selector.Matches(object)
		if err != nil {
			return answer{Error: err.Error()}
		}
		return answer{Matches: &matches}
	})
}
