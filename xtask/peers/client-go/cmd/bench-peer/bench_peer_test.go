package main

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// The expected sums were computed apart from this code, by a few lines of Python following the
// protocol's text (FNV-1a 64 over key, 0x00, rv, '\n' in key order).
func TestChecksumFollowsTheProtocol(t *testing.T) {
	for _, tc := range []struct {
		view map[string]string
		want string
	}{
		{map[string]string{}, "cbf29ce484222325"},
		{map[string]string{"ns-0/a": "7"}, "a96c763b83eb6ddc"},
		{map[string]string{"ns-0/b": "22", "ns-0/a": "7"}, "1c936452ce301625"},
	} {
		if got := checksum(tc.view); got != tc.want {
			t.Errorf("checksum(%v) = %s, want %s", tc.view, got, tc.want)
		}
	}
}

func pod(namespace, name, rv string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, ResourceVersion: rv, Annotations: annotations,
	}}
}

func TestHandlerViewFollowsAddsUpdatesAndTombstones(t *testing.T) {
	h := newHandler(0)
	funcs := h.funcs()
	a, b := pod("ns-0", "a", "1", map[string]string{emitAnnotation: "1"}), pod("ns-0", "b", "2", nil)
	funcs.OnAdd(a, true)
	h.sampling.Store(true)
	funcs.OnAdd(b, true)
	funcs.OnUpdate(a, pod("ns-0", "a", "3", map[string]string{emitAnnotation: "1"}))
	funcs.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns-0/b", Obj: b})
	funcs.OnAdd(pod("ns-0", sentinelPrefix+"1", "4", map[string]string{emitAnnotation: "2"}), false)

	want := map[string]string{"ns-0/a": "3", "ns-0/" + sentinelPrefix + "1": "4"}
	if got := h.viewCopy(); !maps.Equal(got, want) {
		t.Errorf("view = %v, want %v", got, want)
	}
	if got := h.counts(); got != (counts{adds: 3, updates: 1, deletes: 1}) {
		t.Errorf("counts = %+v", got)
	}
	if samples := h.latencySamples(); len(samples) != 2 {
		t.Errorf("%d latency samples, want one per annotated call once sampling is on (2)", len(samples))
	}
	if !h.hasSentinel("ns-0/"+sentinelPrefix+"1") || h.hasSentinel("ns-0/"+sentinelPrefix+"2") {
		t.Error("the handler should know sentinel 1 and only it")
	}
}

func TestSummarizeTakesNearestRanks(t *testing.T) {
	samples := make([]int64, 0, 1000)
	// 1000 samples of 1..1000 µs, shuffled by a stride coprime to 1000.
	for i := range 1000 {
		samples = append(samples, int64((i*7%1000)+1)*1000)
	}
	got := *summarize(samples)
	want := latency{P50: 500, P99: 990, P999: 999, Max: 1000, Samples: 1000}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if got := *summarize([]int64{5000}); got != (latency{P50: 5, P99: 5, P999: 5, Max: 5, Samples: 1}) {
		t.Errorf("one sample: %+v", got)
	}
	if got := *summarize(nil); got != (latency{}) {
		t.Errorf("no samples: %+v", got)
	}
}

func TestUsageSkipsAnAwkwardCommandName(t *testing.T) {
	stat := []byte("4242 (a) b (c) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 31 0 0 20 0 8 0 1 0 0\n")
	used, err := parseUsage(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := (usage{cpuMs: 2810, sysMs: 310, faults: 100}); used != want {
		t.Errorf("usage = %+v, want %+v (utime 250, stime 31, minflt 100)", used, want)
	}
	if _, err := parseUsage([]byte("1 (cat) R 1 1 1 0 -1 0 98 0 0 0 250")); err == nil {
		t.Error("a line cut off before stime parsed")
	}
	later := usage{cpuMs: 3000, sysMs: 400, faults: 150}
	if got, want := later.since(used), (usage{cpuMs: 190, sysMs: 90, faults: 50}); got != want {
		t.Errorf("since = %+v, want %+v", got, want)
	}
}
